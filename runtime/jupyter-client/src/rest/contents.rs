//! Contents routes (files, directories, hashes) and the collaboration room's session.

use std::convert::Infallible;
use std::sync::Arc;

use bytes::Bytes;
use reqwest::Method;
use serde_json::Value;
use url::Url;

use super::models::IndexedFile;
use super::{
    CollaborationSession, ContentsModel, JupyterRest, Payload, RestError, RoomEngine, Subject,
};

impl JupyterRest {
    /// A file's text and the sha256 of its bytes, read as a plain file (no notebook rewriting).
    pub async fn get_text_file(&self, path: &str) -> Result<(String, String), RestError> {
        let mut url = self.endpoint(&["api", "contents", path])?;
        url.query_pairs_mut()
            .append_pair("type", "file")
            .append_pair("format", "text")
            .append_pair("content", "1")
            .append_pair("hash", "1");
        let subject = Subject::Path(path.to_owned());
        let model: ContentsModel = self.json(Method::GET, url, None, subject.clone()).await?;
        let text = match model.content {
            Some(Value::String(text)) => text,
            _ => {
                return Err(RestError::Decode {
                    subject,
                    reason: "the file has no text content".into(),
                });
            }
        };
        Ok((text, model.hash.unwrap_or_default()))
    }

    /// A notebook as Jupyter reads it (older nbformat versions converted to 4), with the sha256
    /// of the file's bytes.
    pub async fn get_notebook(&self, path: &str) -> Result<(Value, String), RestError> {
        let mut url = self.endpoint(&["api", "contents", path])?;
        url.query_pairs_mut()
            .append_pair("type", "notebook")
            .append_pair("content", "1")
            .append_pair("hash", "1");
        let model: ContentsModel = self
            .json(Method::GET, url, None, Subject::Path(path.to_owned()))
            .await?;
        Ok((
            model.content.unwrap_or_default(),
            model.hash.unwrap_or_default(),
        ))
    }

    /// The sha256 of a file's bytes, without its content.
    pub async fn get_file_hash(&self, path: &str) -> Result<String, RestError> {
        let mut url = self.endpoint(&["api", "contents", path])?;
        url.query_pairs_mut()
            .append_pair("type", "file")
            .append_pair("content", "0")
            .append_pair("hash", "1");
        let subject = Subject::Path(path.to_owned());
        let model: ContentsModel = self.json(Method::GET, url, None, subject).await?;
        Ok(model.hash.unwrap_or_default())
    }

    /// Whether a file or directory exists, asked of its parent's listing: a `GET` of a missing
    /// path is a 404 that Jupyter logs as a warning, a listing is not. A missing parent is
    /// `NotFound`, as the path itself would be. A path the listing may not show as written
    /// (`.` or `..` segments, hidden names, which listings leave out) is asked directly, so a
    /// file is never taken for missing (a create would overwrite it).
    pub async fn exists(&self, path: &str) -> Result<bool, RestError> {
        let path = path.trim_matches('/');
        let plain = !path.is_empty()
            && path
                .split('/')
                .all(|segment| !segment.is_empty() && !segment.starts_with('.'));
        if !plain {
            return match self.get_contents(path, false).await {
                Ok(_) => Ok(true),
                Err(RestError::NotFound { .. }) => Ok(false),
                Err(e) => Err(e),
            };
        }
        let (parent, name) = path.rsplit_once('/').unwrap_or(("", path));
        let listing = self.get_contents(parent, true).await?;
        let entries = listing.content.as_ref().and_then(Value::as_array);
        Ok(entries.is_some_and(|entries| {
            entries.iter().any(|entry| {
                entry.get("path").and_then(Value::as_str) == Some(path)
                    || entry.get("name").and_then(Value::as_str) == Some(name)
            })
        }))
    }

    /// The ids that name the notebook's collaboration room: `PUT /api/collaboration/session/{path}`
    /// where jupyter-collaboration runs the rooms, `POST /api/fileid/index` where
    /// jupyter-server-documents does (the one that answered last time is asked first).
    /// `NotFound` means the server has no real-time collaboration.
    pub async fn collaboration_session(
        &self,
        path: &str,
    ) -> Result<CollaborationSession, RestError> {
        let known = *self.room_engine.lock().expect("room engine lock");
        let order = match known {
            Some(RoomEngine::ServerDocuments) => {
                [RoomEngine::ServerDocuments, RoomEngine::Collaboration]
            }
            _ => [RoomEngine::Collaboration, RoomEngine::ServerDocuments],
        };
        let mut refused = None;
        for engine in order {
            match self.room_of(engine, path).await {
                Err(e @ RestError::NotFound { .. }) => {
                    refused.get_or_insert(e);
                }
                Ok(session) => {
                    *self.room_engine.lock().expect("room engine lock") = Some(engine);
                    return Ok(session);
                }
                Err(other) => return Err(other),
            }
        }
        Err(refused.expect("both engines were asked"))
    }

    async fn room_of(
        &self,
        engine: RoomEngine,
        path: &str,
    ) -> Result<CollaborationSession, RestError> {
        match engine {
            RoomEngine::Collaboration => {
                let url = self.endpoint(&["api", "collaboration", "session", path])?;
                let body = serde_json::json!({ "format": "json", "type": "notebook" });
                self.json(Method::PUT, url, Some(body), Subject::Collaboration)
                    .await
            }
            RoomEngine::ServerDocuments => {
                let mut url = self.endpoint(&["api", "fileid", "index"])?;
                url.query_pairs_mut().append_pair("path", path);
                let indexed: IndexedFile = self
                    .json(Method::POST, url, None, Subject::Collaboration)
                    .await?;
                Ok(CollaborationSession {
                    file_id: indexed.id,
                    session_id: None,
                    engine,
                })
            }
        }
    }

    /// The websocket URL of a notebook's collaboration room.
    pub fn collaboration_room_url(&self, session: &CollaborationSession) -> Result<Url, RestError> {
        let room = format!("json:notebook:{}", session.file_id);
        let mut url = self.websocket_endpoint(&["api", "collaboration", "room", &room])?;
        if let Some(session_id) = &session.session_id {
            url.query_pairs_mut().append_pair("sessionId", session_id);
        }
        Ok(url)
    }

    /// Saves text verbatim as the file's content.
    pub async fn put_text_file(&self, path: &str, text: Arc<String>) -> Result<(), RestError> {
        let url = self.endpoint(&["api", "contents", path])?;
        let subject = Subject::Path(path.to_owned());
        self.send_payload(
            Method::PUT,
            url,
            Some(Payload::TextFile(&text)),
            subject,
            None,
        )
        .await
        .map(drop)
    }

    /// A JSON document the server keeps at this path (segments below the base URL), such as an
    /// output jupyter-server-documents' outputs service holds.
    pub async fn get_json_at(&self, segments: &[&str]) -> Result<Value, RestError> {
        let url = self.endpoint(segments)?;
        let subject = Subject::Path(segments.join("/"));
        self.json(Method::GET, url, None, subject).await
    }

    /// A file with its content, as text when it is UTF-8 and base64 otherwise (Jupyter decides);
    /// a notebook comes back as a plain file too.
    pub async fn get_file(&self, path: &str) -> Result<ContentsModel, RestError> {
        let mut url = self.endpoint(&["api", "contents", path])?;
        url.query_pairs_mut()
            .append_pair("type", "file")
            .append_pair("content", "1");
        self.json(Method::GET, url, None, Subject::Path(path.to_owned()))
            .await
    }

    /// Saves a file's content, given as `text` or `base64` (`format`).
    pub async fn put_file(&self, path: &str, content: &str, format: &str) -> Result<(), RestError> {
        let url = self.endpoint(&["api", "contents", path])?;
        let body = serde_json::json!({ "type": "file", "format": format, "content": content });
        self.send(Method::PUT, url, Some(body), Subject::Path(path.to_owned()))
            .await
            .map(drop)
    }

    /// Creates a directory (an existing one is left as it is).
    pub async fn create_directory(&self, path: &str) -> Result<(), RestError> {
        let url = self.endpoint(&["api", "contents", path])?;
        let body = serde_json::json!({ "type": "directory" });
        self.send(Method::PUT, url, Some(body), Subject::Path(path.to_owned()))
            .await
            .map(drop)
    }

    /// A file or directory model; `content` asks for the directory listing or file body.
    pub async fn get_contents(
        &self,
        path: &str,
        content: bool,
    ) -> Result<ContentsModel, RestError> {
        let mut url = self.endpoint(&["api", "contents", path])?;
        url.query_pairs_mut()
            .append_pair("content", if content { "1" } else { "0" });
        self.json(Method::GET, url, None, Subject::Path(path.to_owned()))
            .await
    }
}

/// How much of a file's text is escaped at a time as its upload is sent.
const UPLOAD_PIECE: usize = 1 << 20;

/// The contents API's body for a text file, escaped piece by piece as it is sent: a big
/// notebook's upload holds a piece of escaped text at a time, not a second copy of it all.
pub(super) fn text_file_body(text: Arc<String>) -> reqwest::Body {
    let pieces = text_file_pieces(text, UPLOAD_PIECE).map(Ok::<_, Infallible>);
    reqwest::Body::wrap_stream(futures_util::stream::iter(pieces))
}

/// The body's bytes: the JSON object's head, the text escaped `piece` bytes at a time (cut at
/// character boundaries), its tail.
fn text_file_pieces(text: Arc<String>, piece: usize) -> impl Iterator<Item = Bytes> + Send {
    const HEAD: &str = r#"{"type": "file", "format": "text", "content": ""#;
    const TAIL: &str = r#""}"#;
    let mut at = 0;
    let escaped = std::iter::from_fn(move || {
        if at >= text.len() {
            return None;
        }
        let mut end = (at + piece).min(text.len());
        while !text.is_char_boundary(end) {
            end += 1;
        }
        let quoted = Bytes::from(serde_json::to_string(&text[at..end]).expect("strings serialize"));
        at = end;
        // Without the quotes serde_json put around the piece.
        Some(quoted.slice(1..quoted.len() - 1))
    });
    std::iter::once(Bytes::from_static(HEAD.as_bytes()))
        .chain(escaped)
        .chain(std::iter::once(Bytes::from_static(TAIL.as_bytes())))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_text_file_body_sent_in_pieces_is_the_whole_json() {
        let text = "line \"one\"\n\tété ✓ \\ \u{1}".repeat(40);
        for piece in [1, 3, 7, 64, 1 << 20] {
            let body: Vec<u8> = text_file_pieces(Arc::new(text.clone()), piece)
                .flat_map(|bytes| bytes.to_vec())
                .collect();
            let sent: Value = serde_json::from_slice(&body).expect("the body is JSON");
            assert_eq!(
                sent,
                serde_json::json!({"type": "file", "format": "text", "content": text}),
                "pieces of {piece} bytes"
            );
        }
        let empty: Vec<u8> = text_file_pieces(Arc::new(String::new()), 8)
            .flat_map(|bytes| bytes.to_vec())
            .collect();
        assert_eq!(
            serde_json::from_slice::<Value>(&empty).unwrap()["content"],
            ""
        );
    }
}

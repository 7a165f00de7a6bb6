//! Contents routes (files, directories, hashes) and the collaboration room's session.

use reqwest::Method;
use serde_json::Value;
use url::Url;

use super::{CollaborationSession, ContentsModel, JupyterRest, RestError, Subject};

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

    /// `PUT /api/collaboration/session/{path}`: the ids that name the notebook's collaboration
    /// room. `NotFound` means the server has no real-time collaboration.
    pub async fn collaboration_session(
        &self,
        path: &str,
    ) -> Result<CollaborationSession, RestError> {
        let url = self.endpoint(&["api", "collaboration", "session", path])?;
        let body = serde_json::json!({ "format": "json", "type": "notebook" });
        self.json(Method::PUT, url, Some(body), Subject::Collaboration)
            .await
    }

    /// The websocket URL of a notebook's collaboration room.
    pub fn collaboration_room_url(&self, session: &CollaborationSession) -> Result<Url, RestError> {
        let room = format!("json:notebook:{}", session.file_id);
        let mut url = self.websocket_endpoint(&["api", "collaboration", "room", &room])?;
        url.query_pairs_mut()
            .append_pair("sessionId", &session.session_id);
        Ok(url)
    }

    /// Saves text verbatim as the file's content.
    pub async fn put_text_file(&self, path: &str, text: &str) -> Result<(), RestError> {
        let url = self.endpoint(&["api", "contents", path])?;
        let body = serde_json::json!({ "type": "file", "format": "text", "content": text });
        self.send(Method::PUT, url, Some(body), Subject::Path(path.to_owned()))
            .await
            .map(drop)
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

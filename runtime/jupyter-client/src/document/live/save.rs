//! Asking a collaboration room to save its document now, and reading the room's answer.
//!
//! jupyter-collaboration autosaves a room a second after its last change, so a server that stops
//! right after an edit would lose it. Its websocket also takes a "save" request (what JupyterLab
//! sends on Ctrl-S): a RAW message holding the string `save` and a request number, answered with
//! a RAW message holding JSON `{"type": "save", "responseTo": N, "status": "success" | "skipped"
//! | "failed"}`. yrs reads message tag 2 as an auth message, so these frames are built and read
//! here by hand.

use serde::Deserialize;
use yrs::encoding::read::Read;
use yrs::encoding::write::Write;
use yrs::updates::decoder::DecoderV1;
use yrs::updates::encoder::{Encoder, EncoderV1};

use super::{Link, LiveDocument, SAVE_ANSWER_TIMEOUT, SAVE_POLL, SAVE_TIMEOUT};
use crate::rest::RoomEngine;
use notebook_format::notebook::Notebook;

/// When the room saves, learned by watching it, since no REST call publishes the room's
/// `document_save_delay`: after each save the room writes the file's new hash into the document's
/// `state` map, so a new hash is a save, and the time from the last change to it bounds the delay
/// (others' edits restart the room's wait, a save that crossed a change is timed from the change
/// before). The latest seen is the figure.
#[derive(Debug, Default)]
pub(super) struct SaveClock {
    /// The current connection's first sync has been seen (it holds the file as loaded).
    synced: bool,
    /// Our recent changes, oldest first (bounded).
    changes: std::collections::VecDeque<std::time::Instant>,
    last_hash: Option<String>,
    delay: Option<std::time::Duration>,
    /// Which extension runs the room, as of the latest join.
    engine: RoomEngine,
}

/// Changes this close before a save's news are taken to have crossed it.
const CROSSING: std::time::Duration = std::time::Duration::from_millis(250);

pub(super) type SharedSaveClock = std::sync::Arc<std::sync::Mutex<SaveClock>>;

impl SaveClock {
    /// We changed the document: the room saves its delay after this.
    pub(super) fn changed(&mut self) {
        if self.changes.len() == 16 {
            self.changes.pop_front();
        }
        self.changes.push_back(std::time::Instant::now());
    }

    /// A new connection to the room: its first sync is no save.
    pub(super) fn joining(&mut self, engine: RoomEngine) {
        self.synced = false;
        self.engine = engine;
    }

    /// The extension that runs the room.
    pub(super) fn engine(&self) -> RoomEngine {
        self.engine
    }

    /// The room's document after an update from it: its saved hash, maybe a new one.
    pub(super) fn saw_hash(&mut self, hash: Option<String>) {
        let first_sync = !std::mem::replace(&mut self.synced, true);
        if hash.is_none() || hash == self.last_hash {
            return;
        }
        // A change made just before the room's answer reached us was not in that save (the
        // save and our change crossed): the save is timed from the last change before it.
        let now = std::time::Instant::now();
        let before = self
            .changes
            .iter()
            .rev()
            .find(|at| now.duration_since(**at) >= CROSSING)
            .copied();
        if !first_sync && let Some(changed) = before {
            let took = now.duration_since(changed);
            tracing::debug!(
                "the room saved {:.2} s after our last change",
                took.as_secs_f64()
            );
            self.delay = Some(took);
            self.changes.retain(|at| *at > changed);
        }
        self.last_hash = hash;
    }

    /// The room's save delay as seen, once it has saved a change of ours.
    pub(super) fn delay(&self) -> Option<std::time::Duration> {
        self.delay
    }
}

/// jupyter_server_ydoc's `MessageType.RAW`.
pub(super) const RAW: u8 = 2;

/// The room's answer to a save request.
#[derive(Debug, Clone, PartialEq, Eq, Deserialize)]
pub(super) struct SaveReply {
    #[serde(rename = "responseTo")]
    pub response_to: u64,
    pub status: String,
}

/// The frame that asks the room to save now; `id` comes back in the answer.
pub(super) fn request(id: u64) -> Vec<u8> {
    let mut encoder = EncoderV1::new();
    encoder.write_var(RAW);
    encoder.write_string("save");
    encoder.write_var(id);
    encoder.to_vec()
}

/// The save answer a RAW frame carries, if it is one.
pub(super) fn reply(frame: &[u8]) -> Option<SaveReply> {
    let mut decoder = DecoderV1::from(frame);
    if decoder.read_var::<u8>().ok()? != RAW {
        return None;
    }
    let text = decoder.read_string().ok()?;
    #[derive(Deserialize)]
    struct Tagged {
        #[serde(rename = "type")]
        kind: String,
        #[serde(flatten)]
        reply: SaveReply,
    }
    let tagged: Tagged = serde_json::from_str(text).ok()?;
    (tagged.kind == "save").then_some(tagged.reply)
}

impl LiveDocument {
    /// Makes sure the file on disk holds every edit we made before we leave (the room may be
    /// about to stop with the Jupyter Server): waits until the room holds them and asks it to
    /// save; unless the room answers that it saved, reads the file through the contents API until
    /// it shows them, and writes a file that is gone again from the room. Bounded; `Err` says why
    /// it could not confirm.
    pub(super) async fn save_before_leaving(&self, link: &mut Link) -> Result<(), String> {
        let deadline = tokio::time::Instant::now() + SAVE_TIMEOUT;
        let asked = link.asked;
        let proven = tokio::time::timeout_at(deadline, link.answers.wait_for(|n| *n >= asked))
            .await
            .is_ok_and(|answered| answered.is_ok());
        if !proven {
            tracing::warn!(
                "the collaboration room of '{}' did not confirm our last edits before we left; \
                 they may be missing from the notebook",
                self.path
            );
            return Err("the collaboration room did not confirm them".into());
        }
        let nothing_recent = {
            let mut journal = self.journal();
            journal.settle(link.answered());
            journal.entries.is_empty()
        };
        if nothing_recent {
            return Ok(());
        }
        // When the file was last written, to tell a save that wrote it from one that said so.
        let modified = |model: Result<crate::rest::ContentsModel, _>| {
            model.ok().and_then(|model| model.last_modified)
        };
        let modified_before = modified(self.rest.get_contents(&self.path, false).await);
        let status = match link.engine {
            RoomEngine::Collaboration => {
                link.saves_asked += 1;
                let id = link.saves_asked;
                let _ = link.outgoing.send(request(id));
                tokio::time::timeout_at(
                    deadline.min(tokio::time::Instant::now() + SAVE_ANSWER_TIMEOUT),
                    link.saves
                        .wait_for(|r| r.as_ref().is_some_and(|r| r.response_to == id)),
                )
                .await
                .ok()
                .and_then(|answer| answer.ok()?.as_ref().map(|r| r.status.clone()))
                .unwrap_or_else(|| "no answer".to_owned())
            }
            // Its rooms take no save request (they save on their own within a second or so).
            RoomEngine::ServerDocuments => "none asked: the room saves on its own".to_owned(),
        };
        // The room answers "success" once it has saved the document, which holds our edits (the
        // answers above prove it): the file need not be read back whole, only seen written
        // since (a room answers "success" for a file deleted or made read-only under it too).
        // Anything else (skipped, failed, no answer, an unchanged file) is checked against the
        // file itself.
        if status == "success"
            && modified_before.is_some()
            && modified(self.rest.get_contents(&self.path, false).await)
                .is_some_and(|after| Some(&after) != modified_before.as_ref())
        {
            tracing::debug!("'{}' is saved (the room saved it on request)", self.path);
            return Ok(());
        }
        let mut recreated = false;
        let last = loop {
            let last = match self.rest.get_text_file(&self.path).await {
                Ok((text, _)) => match Notebook::parse(&text) {
                    Ok(saved) if self.journal().held_by(&saved) => {
                        tracing::debug!("'{}' is saved (save request: {status})", self.path);
                        return Ok(());
                    }
                    Ok(_) => "the file does not show them yet".to_owned(),
                    Err(e) => format!("the file does not parse: {e}"),
                },
                // Deleted (or moved) while in use: the room cannot save to it, so it is
                // written again, whole, from the room.
                Err(crate::rest::RestError::NotFound { .. }) if !recreated => {
                    recreated = true;
                    let whole = self.read_link(link).map_err(|e| e.to_string())?;
                    match crate::document::file::FileDocument::create(
                        &self.rest, &self.path, &whole,
                    )
                    .await
                    {
                        Ok(()) => {
                            tracing::warn!(
                                "'{}' was gone from disk; written again from its collaboration room",
                                self.path
                            );
                            continue;
                        }
                        Err(e) => format!("the file is gone and could not be written again: {e}"),
                    }
                }
                Err(e) => e.to_string(),
            };
            if tokio::time::Instant::now() + SAVE_POLL >= deadline {
                break last;
            }
            tokio::time::sleep(SAVE_POLL).await;
        };
        tracing::warn!(
            "could not confirm within {}s that '{}' on disk holds our last edits ({last}; save \
             request: {status}); they are in the collaboration room, which saves them if the \
             Jupyter Server keeps running",
            SAVE_TIMEOUT.as_secs(),
            self.path
        );
        Err(format!(
            "within {}s the file did not show them ({last}; the room's answer to a save \
             request: {status})",
            SAVE_TIMEOUT.as_secs()
        ))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_new_hash_after_our_change_times_the_save() {
        let mut clock = SaveClock::default();
        clock.joining(RoomEngine::Collaboration);
        clock.saw_hash(None);
        clock.changed();
        std::thread::sleep(CROSSING);
        clock.saw_hash(Some("first-save".into()));
        assert!(
            clock.delay().is_some(),
            "a room that loaded without a hash is timed at its first save"
        );
        clock = SaveClock::default();
        clock.saw_hash(Some("loaded".into()));
        assert_eq!(clock.delay(), None, "the first sync is no save");
        clock.saw_hash(Some("someone-else".into()));
        assert_eq!(
            clock.delay(),
            None,
            "a save of nothing of ours times nothing"
        );
        clock.changed();
        std::thread::sleep(CROSSING * 3);
        clock.changed();
        clock.saw_hash(Some("ours".into()));
        let first = clock.delay().expect("timed");
        assert!(
            first >= CROSSING * 3,
            "timed from the change before, not the crossing one: {first:?}"
        );
        std::thread::sleep(CROSSING);
        clock.saw_hash(Some("ours-again".into()));
        assert!(
            clock.delay().unwrap() < first,
            "the latest seen is the figure"
        );
        clock.saw_hash(Some("ours-again".into()));
    }

    fn raw(text: &str) -> Vec<u8> {
        let mut encoder = EncoderV1::new();
        encoder.write_var(RAW);
        encoder.write_string(text);
        encoder.to_vec()
    }

    #[test]
    fn the_request_is_raw_save_and_the_number() {
        let frame = request(300);
        let mut decoder = DecoderV1::from(frame.as_slice());
        assert_eq!(decoder.read_var::<u8>().unwrap(), RAW);
        assert_eq!(decoder.read_string().unwrap(), "save");
        assert_eq!(decoder.read_var::<u64>().unwrap(), 300);
    }

    #[test]
    fn a_save_answer_is_read_and_other_raw_messages_are_not() {
        let answer = raw(r#"{"type": "save", "responseTo": 7, "status": "success"}"#);
        assert_eq!(
            reply(&answer),
            Some(SaveReply {
                response_to: 7,
                status: "success".into()
            })
        );
        assert_eq!(reply(&raw(r#"{"type": "reload"}"#)), None);
        assert_eq!(reply(&raw("not json")), None);
        assert_eq!(reply(&[0, 0, 1, 0]), None);
        assert_eq!(reply(&[]), None);
    }
}

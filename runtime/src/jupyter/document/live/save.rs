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

#[cfg(test)]
mod tests {
    use super::*;

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

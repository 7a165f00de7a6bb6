//! Frames of the kernel websocket, in both of the protocols Jupyter Server speaks.
//!
//! * `v1.kernel.websocket.jupyter.org`: every message is one binary frame, a table of little-endian
//!   `u64` offsets followed by the parts (channel, header, parent header, metadata, content, buffers).
//! * The legacy JSON protocol: a text frame holding the whole message with a `channel` key, except
//!   that a message carrying buffers arrives as a binary frame with big-endian `u32` offsets.
//!
//! Messages are kept as JSON values: the content goes straight into notebook outputs, so typing it
//! field by field would only be converted back.

use serde_json::{Map, Value};

/// The subprotocol we offer; when the server does not select it, it speaks legacy JSON.
pub const V1_SUBPROTOCOL: &str = "v1.kernel.websocket.jupyter.org";

#[derive(Debug, Clone, PartialEq)]
pub struct WireMessage {
    pub channel: String,
    pub header: Value,
    pub parent_header: Value,
    pub metadata: Value,
    pub content: Value,
    pub buffers: Vec<Vec<u8>>,
}

impl WireMessage {
    pub fn msg_type(&self) -> &str {
        self.header
            .get("msg_type")
            .and_then(Value::as_str)
            .unwrap_or("")
    }

    pub fn msg_id(&self) -> &str {
        self.header
            .get("msg_id")
            .and_then(Value::as_str)
            .unwrap_or("")
    }

    /// The `msg_id` of the request this message answers, if any.
    pub fn parent_msg_id(&self) -> Option<&str> {
        self.parent_header
            .get("msg_id")
            .and_then(Value::as_str)
            .filter(|id| !id.is_empty())
    }
}

#[derive(Debug, thiserror::Error, PartialEq, Eq)]
pub enum CodecError {
    #[error("kernel frame too short or its offsets are inconsistent")]
    BadOffsets,
    #[error("kernel frame has {0} parts; at least 5 are needed")]
    TooFewParts(usize),
    #[error("kernel frame part {part} is not valid JSON: {reason}")]
    BadJson { part: &'static str, reason: String },
    #[error("kernel frame channel is not UTF-8")]
    BadChannel,
}

const PART_NAMES: [&str; 4] = ["header", "parent_header", "metadata", "content"];

/// Encodes a message for the v1 protocol.
pub fn encode_v1(message: &WireMessage) -> Vec<u8> {
    let json_parts = [
        &message.header,
        &message.parent_header,
        &message.metadata,
        &message.content,
    ]
    .map(|v| serde_json::to_vec(v).expect("JSON values always serialize"));
    let mut parts: Vec<&[u8]> = Vec::with_capacity(5 + message.buffers.len());
    parts.push(message.channel.as_bytes());
    parts.extend(json_parts.iter().map(Vec::as_slice));
    parts.extend(message.buffers.iter().map(Vec::as_slice));

    let offset_count = parts.len() + 1;
    let table_len = 8 * (offset_count + 1);
    let total: usize = table_len + parts.iter().map(|p| p.len()).sum::<usize>();
    let mut frame = Vec::with_capacity(total);
    frame.extend_from_slice(&(offset_count as u64).to_le_bytes());
    let mut offset = table_len;
    for part in &parts {
        frame.extend_from_slice(&(offset as u64).to_le_bytes());
        offset += part.len();
    }
    frame.extend_from_slice(&(offset as u64).to_le_bytes());
    for part in &parts {
        frame.extend_from_slice(part);
    }
    frame
}

/// Decodes a v1 binary frame.
pub fn decode_v1(frame: &[u8]) -> Result<WireMessage, CodecError> {
    let read_u64 = |at: usize| -> Result<usize, CodecError> {
        let bytes = frame.get(at..at + 8).ok_or(CodecError::BadOffsets)?;
        let value = u64::from_le_bytes(bytes.try_into().expect("slice of 8"));
        usize::try_from(value).map_err(|_| CodecError::BadOffsets)
    };
    let offset_count = read_u64(0)?;
    if offset_count < 2 || offset_count > frame.len() / 8 {
        return Err(CodecError::BadOffsets);
    }
    let offsets = (0..offset_count)
        .map(|i| read_u64(8 * (i + 1)))
        .collect::<Result<Vec<_>, _>>()?;
    let slices = parts_between(frame, &offsets)?;
    if slices.len() < 5 {
        return Err(CodecError::TooFewParts(slices.len()));
    }
    let channel = std::str::from_utf8(slices[0])
        .map_err(|_| CodecError::BadChannel)?
        .to_owned();
    let mut json = slices[1..5].iter().zip(PART_NAMES).map(|(bytes, part)| {
        serde_json::from_slice::<Value>(bytes).map_err(|e| CodecError::BadJson {
            part,
            reason: e.to_string(),
        })
    });
    Ok(WireMessage {
        channel,
        header: json.next().expect("4 parts")?,
        parent_header: json.next().expect("4 parts")?,
        metadata: json.next().expect("4 parts")?,
        content: json.next().expect("4 parts")?,
        buffers: slices[5..].iter().map(|b| b.to_vec()).collect(),
    })
}

/// Encodes a message for the legacy JSON protocol (buffers are never sent by us).
pub fn encode_json(message: &WireMessage) -> String {
    serde_json::json!({
        "header": message.header,
        "parent_header": message.parent_header,
        "metadata": message.metadata,
        "content": message.content,
        "channel": message.channel,
        "buffers": [],
    })
    .to_string()
}

/// Decodes a legacy JSON text frame.
pub fn decode_json_text(text: &str) -> Result<WireMessage, CodecError> {
    let value: Value = serde_json::from_str(text).map_err(|e| CodecError::BadJson {
        part: "message",
        reason: e.to_string(),
    })?;
    Ok(from_json_object(value, Vec::new()))
}

/// Decodes the legacy protocol's binary frame: `u32 BE nbufs`, offsets, the JSON message, buffers.
pub fn decode_json_binary(frame: &[u8]) -> Result<WireMessage, CodecError> {
    let read_u32 = |at: usize| -> Result<usize, CodecError> {
        let bytes = frame.get(at..at + 4).ok_or(CodecError::BadOffsets)?;
        Ok(u32::from_be_bytes(bytes.try_into().expect("slice of 4")) as usize)
    };
    let nbufs = read_u32(0)?;
    if nbufs == 0 || nbufs > frame.len() / 4 {
        return Err(CodecError::BadOffsets);
    }
    let mut offsets = (0..nbufs)
        .map(|i| read_u32(4 * (i + 1)))
        .collect::<Result<Vec<_>, _>>()?;
    offsets.push(frame.len());
    let slices = parts_between(frame, &offsets)?;
    let value: Value = serde_json::from_slice(slices[0]).map_err(|e| CodecError::BadJson {
        part: "message",
        reason: e.to_string(),
    })?;
    Ok(from_json_object(
        value,
        slices[1..].iter().map(|b| b.to_vec()).collect(),
    ))
}

fn from_json_object(value: Value, buffers: Vec<Vec<u8>>) -> WireMessage {
    let mut object = match value {
        Value::Object(map) => map,
        _ => Map::new(),
    };
    let mut take = |key: &str| {
        object
            .remove(key)
            .unwrap_or_else(|| Value::Object(Map::new()))
    };
    let header = take("header");
    let parent_header = take("parent_header");
    let metadata = take("metadata");
    let content = take("content");
    // A message without a channel belongs to shell.
    let channel = object
        .remove("channel")
        .and_then(|c| c.as_str().map(str::to_owned))
        .unwrap_or_else(|| "shell".to_owned());
    WireMessage {
        channel,
        header,
        parent_header,
        metadata,
        content,
        buffers,
    }
}

/// The parts of a frame between consecutive offsets, each checked to lie within it.
fn parts_between<'a>(frame: &'a [u8], offsets: &[usize]) -> Result<Vec<&'a [u8]>, CodecError> {
    offsets
        .windows(2)
        .map(|w| {
            if w[0] <= w[1] && w[1] <= frame.len() {
                Ok(&frame[w[0]..w[1]])
            } else {
                Err(CodecError::BadOffsets)
            }
        })
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    fn sample() -> WireMessage {
        WireMessage {
            channel: "iopub".into(),
            header: json!({"msg_id": "m2", "msg_type": "status"}),
            parent_header: json!({"msg_id": "m1"}),
            metadata: json!({}),
            content: json!({"execution_state": "idle"}),
            buffers: vec![],
        }
    }

    #[test]
    fn v1_round_trip_with_buffers() {
        let mut message = sample();
        message.buffers = vec![vec![1, 2, 3], vec![]];
        let frame = encode_v1(&message);
        assert_eq!(decode_v1(&frame).unwrap(), message);
    }

    #[test]
    fn v1_layout_matches_the_server() {
        let frame = encode_v1(&sample());
        let offset_count = u64::from_le_bytes(frame[0..8].try_into().unwrap());
        assert_eq!(offset_count, 6);
        let first = u64::from_le_bytes(frame[8..16].try_into().unwrap());
        assert_eq!(first, 8 * 7);
        let last = u64::from_le_bytes(frame[48..56].try_into().unwrap());
        assert_eq!(last as usize, frame.len());
        assert_eq!(&frame[56..61], b"iopub");
    }

    #[test]
    fn v1_rejects_garbage_without_panicking() {
        assert_eq!(decode_v1(&[]), Err(CodecError::BadOffsets));
        assert_eq!(decode_v1(&[255; 16]), Err(CodecError::BadOffsets));
        let mut frame = encode_v1(&sample());
        frame[16] = 0xff; // second offset beyond the frame
        assert!(decode_v1(&frame).is_err());
        let mut two = Vec::new();
        two.extend_from_slice(&3u64.to_le_bytes());
        for o in [32u64, 32, 32] {
            two.extend_from_slice(&o.to_le_bytes());
        }
        assert_eq!(decode_v1(&two), Err(CodecError::TooFewParts(2)));
    }

    #[test]
    fn json_text_frames_and_default_channel() {
        let message = sample();
        let decoded = decode_json_text(&encode_json(&message)).unwrap();
        assert_eq!(decoded, message);
        let no_channel = decode_json_text(r#"{"header":{"msg_type":"x"},"content":{}}"#).unwrap();
        assert_eq!(no_channel.channel, "shell");
        assert_eq!(no_channel.parent_msg_id(), None);
        assert!(decode_json_text("not json").is_err());
    }

    #[test]
    fn json_binary_frames_carry_buffers() {
        let body = serde_json::to_vec(&json!({
            "header": {"msg_id": "a", "msg_type": "comm_msg"},
            "parent_header": {}, "metadata": {}, "content": {}, "channel": "iopub"
        }))
        .unwrap();
        let mut frame = Vec::new();
        frame.extend_from_slice(&2u32.to_be_bytes());
        frame.extend_from_slice(&12u32.to_be_bytes());
        frame.extend_from_slice(&((12 + body.len()) as u32).to_be_bytes());
        frame.extend_from_slice(&body);
        frame.extend_from_slice(b"\x00\x01");
        let decoded = decode_json_binary(&frame).unwrap();
        assert_eq!(decoded.channel, "iopub");
        assert_eq!(decoded.msg_type(), "comm_msg");
        assert_eq!(decoded.buffers, vec![vec![0, 1]]);
        assert!(decode_json_binary(&[0, 0, 0, 9]).is_err());
    }
}

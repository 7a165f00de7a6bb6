//! Frames from a kernel websocket, in both protocols: decoding fails cleanly or yields a message
//! that encodes and decodes back to itself.
#![no_main]

use jupyter_client::kernel::codec;
use libfuzzer_sys::fuzz_target;

fuzz_target!(|data: &[u8]| {
    if let Ok(message) = codec::decode_v1(data) {
        let again =
            codec::decode_v1(&codec::encode_v1(&message)).expect("our own v1 frame decodes");
        assert_eq!(again.msg_id(), message.msg_id());
        assert_eq!(again.msg_type(), message.msg_type());
    }
    if let Ok(message) = codec::decode_json_binary(data) {
        let _ = message.parent_msg_id();
    }
    if let Ok(text) = std::str::from_utf8(data)
        && let Ok(message) = codec::decode_json_text(text)
    {
        let again = codec::decode_json_text(&codec::encode_json(&message))
            .expect("our own JSON frame decodes");
        assert_eq!(again.msg_id(), message.msg_id());
    }
});

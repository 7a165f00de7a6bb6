//! Requests the Python server answers that rmcp would refuse, made acceptable before rmcp sees
//! them, so clients written against it work here unchanged.
//!
//! An `initialize` whose params are empty or malformed (`"params": {}`) is not recognised as an
//! initialize by rmcp: on HTTP it became `400 Session ID is required`, on stdio the handshake
//! failed. We read it as an initialize with defaults for what is missing.
//!
//! A 2025-11-25 client asks for a task by a `task` field in a `tools/call`'s params (a
//! task-augmented request), which rmcp's types drop; it is noted in `_meta` under
//! [`TASK_AUGMENTED`] so the handler can tell such a request from a plain one.

use serde_json::{Value, json};

/// The version assumed for a client that names none: what the transport spec assumes for a
/// request without `MCP-Protocol-Version`.
pub const DEFAULT_PROTOCOL_VERSION: &str = "2025-03-26";

/// The last revision with an `initialize` handshake; later ones removed the method.
const LAST_HANDSHAKE_VERSION: &str = "2025-11-25";

/// The first revision whose clients expect an SSE priming event (an event with an id and empty
/// data, sent so a dropped stream can be resumed).
const FIRST_PRIMING_VERSION: &str = "2025-11-25";

/// Whether the answer to this request may open with a priming event. SDKs of earlier
/// revisions parse every event's data as JSON and fail on the empty one (Gemini CLI then sees no
/// tools), so a session on an earlier revision gets none, as the reference SDKs' servers do.
/// The revision is the request's `MCP-Protocol-Version`, else the one an `initialize` asks
/// for, else the one the transport assumes for a request that names none.
pub fn expects_priming(message: Option<&Value>, header_version: Option<&str>) -> bool {
    let asked = message
        .filter(|m| m.get("method").and_then(Value::as_str) == Some("initialize"))
        .and_then(|m| m.get("params")?.get("protocolVersion")?.as_str());
    let version = header_version.or(asked).unwrap_or(DEFAULT_PROTOCOL_VERSION);
    version >= FIRST_PRIMING_VERSION
}

/// The `_meta` key noting that a `tools/call` came with a `task` field (see the module doc).
pub const TASK_AUGMENTED: &str = "io.jupyter-mcp/taskAugmented";

/// What rmcp should read instead of `message`, when it needs a repair (a malformed
/// `initialize`) or a note (a task-augmented call); `None` when it can be read as it came.
pub fn repair(message: &Value, header_version: Option<&str>) -> Option<Value> {
    repair_initialize(message, header_version).or_else(|| note_task_augmented(message))
}

/// A `tools/call` whose params carry a `task` object, with that noted in its `_meta`.
fn note_task_augmented(message: &Value) -> Option<Value> {
    let object = message.as_object()?;
    if object.get("method").and_then(Value::as_str) != Some("tools/call") {
        return None;
    }
    let params = object.get("params")?.as_object()?;
    if !params.get("task").is_some_and(Value::is_object) {
        return None;
    }
    let mut params = params.clone();
    match params
        .entry("_meta")
        .or_insert_with(|| Value::Object(Default::default()))
    {
        Value::Object(meta) => {
            meta.insert(TASK_AUGMENTED.into(), Value::Bool(true));
        }
        // A malformed `_meta` is rmcp's to refuse, as it came.
        _ => return None,
    }
    let mut noted = object.clone();
    noted.insert("params".into(), Value::Object(params));
    Some(Value::Object(noted))
}

/// The initialize request with defaults filled in where its params are missing or malformed;
/// `None` when the message is something else or needs nothing. `header_version` is the
/// `MCP-Protocol-Version` the request came with, if any (used before the default, so the two
/// agree).
pub fn repair_initialize(message: &Value, header_version: Option<&str>) -> Option<Value> {
    let object = message.as_object()?;
    if object.get("method").and_then(Value::as_str) != Some("initialize")
        || !object.contains_key("id")
    {
        return None;
    }
    // A modern request (2026-07-28 and later) names its revision; there `initialize` no longer
    // exists, and rmcp answers that, as the specification asks.
    let modern_meta = object
        .get("params")
        .and_then(|p| p.get("_meta"))
        .and_then(|m| m.get("io.modelcontextprotocol/protocolVersion"))
        .is_some();
    if modern_meta || header_version.is_some_and(|v| v > LAST_HANDSHAKE_VERSION) {
        return None;
    }
    let mut params = match object.get("params") {
        Some(Value::Object(params)) => params.clone(),
        _ => serde_json::Map::new(),
    };
    let mut changed = !matches!(object.get("params"), Some(Value::Object(_)));
    if !params.get("protocolVersion").is_some_and(Value::is_string) {
        let version = header_version.unwrap_or(DEFAULT_PROTOCOL_VERSION);
        params.insert("protocolVersion".into(), json!(version));
        changed = true;
    }
    if !params.get("capabilities").is_some_and(Value::is_object) {
        params.insert("capabilities".into(), json!({}));
        changed = true;
    }
    let info_ok = params.get("clientInfo").is_some_and(|info| {
        info.get("name").is_some_and(Value::is_string)
            && info.get("version").is_some_and(Value::is_string)
    });
    if !info_ok {
        params.insert(
            "clientInfo".into(),
            json!({ "name": "unnamed-client", "version": "0" }),
        );
        changed = true;
    }
    if !changed {
        return None;
    }
    tracing::debug!("an initialize request lacked params; answering it with defaults");
    let mut repaired = object.clone();
    repaired.insert("params".into(), Value::Object(params));
    Some(Value::Object(repaired))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn empty_initialize_params_get_defaults() {
        let fixed = repair_initialize(
            &json!({"jsonrpc": "2.0", "id": 1, "method": "initialize", "params": {}}),
            None,
        )
        .unwrap();
        assert_eq!(fixed["params"]["protocolVersion"], DEFAULT_PROTOCOL_VERSION);
        assert_eq!(fixed["params"]["capabilities"], json!({}));
        assert_eq!(fixed["params"]["clientInfo"]["name"], "unnamed-client");
        let missing = repair_initialize(
            &json!({"jsonrpc": "2.0", "id": 1, "method": "initialize"}),
            Some("2025-11-25"),
        )
        .unwrap();
        assert_eq!(missing["params"]["protocolVersion"], "2025-11-25");
    }

    #[test]
    fn only_sessions_of_2025_11_25_and_later_are_primed() {
        let init = |v: &str| {
            json!({"jsonrpc": "2.0", "id": 1, "method": "initialize", "params": {
                "protocolVersion": v, "capabilities": {}, "clientInfo": {"name": "c", "version": "1"}}})
        };
        assert!(!expects_priming(Some(&init("2025-06-18")), None));
        assert!(!expects_priming(Some(&init("2024-11-05")), None));
        assert!(expects_priming(Some(&init("2025-11-25")), None));
        let list = json!({"jsonrpc": "2.0", "id": 2, "method": "tools/list"});
        assert!(!expects_priming(Some(&list), Some("2025-06-18")));
        assert!(expects_priming(Some(&list), Some("2026-07-28")));
        // No header and no handshake: the transport's assumed revision, which predates priming.
        assert!(!expects_priming(Some(&list), None));
        assert!(!expects_priming(None, None));
    }

    #[test]
    fn a_task_augmented_call_is_noted_and_a_plain_one_passes() {
        let asked = json!({"jsonrpc": "2.0", "id": 5, "method": "tools/call", "params": {
            "name": "execute_code", "arguments": {"code": "1"}, "task": {"ttl": 60000},
            "_meta": {"progressToken": 1}}});
        let noted = repair(&asked, None).unwrap();
        assert_eq!(noted["params"]["_meta"][TASK_AUGMENTED], true);
        assert_eq!(noted["params"]["_meta"]["progressToken"], 1);
        let plain = json!({"jsonrpc": "2.0", "id": 6, "method": "tools/call", "params": {
            "name": "execute_code", "arguments": {"code": "1"}}});
        assert!(repair(&plain, None).is_none());
    }

    #[test]
    fn good_initialize_and_other_messages_pass_unchanged() {
        let good = json!({"jsonrpc": "2.0", "id": 1, "method": "initialize", "params": {
            "protocolVersion": "2025-11-25", "capabilities": {},
            "clientInfo": {"name": "c", "version": "1"}}});
        assert!(repair_initialize(&good, None).is_none());
        assert!(
            repair_initialize(
                &json!({"jsonrpc": "2.0", "id": 2, "method": "tools/list"}),
                None
            )
            .is_none()
        );
        assert!(repair_initialize(&json!([1, 2]), None).is_none());
        // A modern request's initialize is the removed method, not a malformed handshake.
        let modern = json!({"jsonrpc": "2.0", "id": 3, "method": "initialize", "params": {
            "_meta": {"io.modelcontextprotocol/protocolVersion": "2026-07-28"}}});
        assert!(repair_initialize(&modern, None).is_none());
        let bare = json!({"jsonrpc": "2.0", "id": 4, "method": "initialize", "params": {}});
        assert!(repair_initialize(&bare, Some("2026-07-28")).is_none());
    }
}

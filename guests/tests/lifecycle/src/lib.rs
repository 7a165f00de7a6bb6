//! An extension built in two versions (`LIFECYCLE_GUEST_VERSION` at build time, see `build`
//! beside this file), so the tests can replace one with the other in a running server: `version`
//! says which one answers, `slow` sleeps and then says which one it ran on (a call in flight
//! during a reload), and version 2 adds `lifecycle_v2_only` so the tool list changes.

use jupyter_mcp_extension::serde_json::{Value, json};
use jupyter_mcp_extension::{self as ext, Extension, Tool, ToolResult, register_extension};

const VERSION: &str = match option_env!("LIFECYCLE_GUEST_VERSION") {
    Some(version) => version,
    None => "1",
};

struct Lifecycle;

impl Extension for Lifecycle {
    fn new() -> Self {
        Lifecycle
    }
    fn identity(&self) -> ext::Identity {
        ext::Identity::new("lifecycle", VERSION)
    }
    fn capabilities(&self) -> Vec<ext::Capability> {
        vec![ext::capability(
            "lifecycle.feature",
            &format!("A capability of version {VERSION} of the lifecycle test extension."),
            true,
        )]
    }
    fn tools(&self) -> Vec<Tool> {
        let mut tools = vec![
            Tool::new(
                "lifecycle_version",
                "Says which version of the extension answers.",
            )
            .read_only(),
            Tool::new(
                "lifecycle_slow",
                "Sleeps `ms` milliseconds, then says its version.",
            )
            .schema(json!({"type": "object", "properties": {"ms": {"type": "integer"}}}))
            .read_only(),
        ];
        if VERSION != "1" {
            tools.push(Tool::new("lifecycle_v2_only", "Only in version 2.").read_only());
        }
        tools
    }
    fn call_tool(&self, name: &str, arguments: Value) -> Result<ToolResult, String> {
        match name {
            "lifecycle_version" | "lifecycle_v2_only" => {
                Ok(ToolResult::text(format!("lifecycle version {VERSION}")))
            }
            "lifecycle_slow" => {
                let ms = arguments["ms"].as_u64().unwrap_or(1000);
                // The tests wait for this line to know the call is in flight.
                ext::log::info(&format!("lifecycle version {VERSION} sleeping {ms} ms"));
                std::thread::sleep(std::time::Duration::from_millis(ms));
                Ok(ToolResult::text(format!(
                    "lifecycle version {VERSION} slept {ms} ms"
                )))
            }
            other => Err(format!("no tool {other}")),
        }
    }
}

register_extension!(Lifecycle);

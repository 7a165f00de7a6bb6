//! Arbitrary JSON as the arguments of every built-in tool: decoding answers a clear error or
//! accepts, never panics.
#![no_main]

use std::sync::Arc;

use jupyter_mcp_server::dispatch::ToolRegistry;
use jupyter_mcp_server::tools::Tool;
use libfuzzer_sys::fuzz_target;

fuzz_target!(|data: &[u8]| {
    let Ok(serde_json::Value::Object(arguments)) = serde_json::from_slice(data) else {
        return;
    };
    thread_local! {
        static TOOLS: Vec<Arc<dyn Tool>> = ToolRegistry::builtin().all();
    }
    TOOLS.with(|tools| {
        for tool in tools.iter() {
            if let Err(e) = tool.check_arguments(arguments.clone()) {
                assert!(!e.to_string().is_empty());
            }
        }
    });
});

//! The single path every tool call takes: lookup, argument decoding, failure containment, timing.
//!
//! A failure the agent can act on becomes a tool result with `isError: true`; only an unknown
//! tool is a protocol error (JSON-RPC -32602), because then there is no tool to answer.

use std::panic::AssertUnwindSafe;
use std::sync::Arc;
use std::time::Instant;

use futures_util::FutureExt;
use rmcp::ErrorData as McpError;
use rmcp::model::{CallToolResult, ContentBlock as Content, JsonObject};

use crate::state::ServerState;
use crate::tools::{ToolContext, ToolError};

pub async fn call_tool(
    state: &Arc<ServerState>,
    name: &str,
    arguments: Option<JsonObject>,
    context: ToolContext,
) -> Result<CallToolResult, McpError> {
    let Some(tool) = state.tools.get(name) else {
        return Err(McpError::invalid_params(
            format!(
                "Unknown tool '{name}'. This server's tools are: {}.",
                state.tools.names().join(", ")
            ),
            Some(serde_json::json!({ "tool": name })),
        ));
    };
    if let Some(reason) = crate::tools::refusal(tool.spec(), &state.capabilities) {
        return Ok(CallToolResult::error(vec![Content::text(format!(
            "Error executing tool {name}: {reason}"
        ))]));
    }
    let started = Instant::now();
    // A panicking tool must cost only its own call.
    let outcome = AssertUnwindSafe(tool.call(context, arguments.unwrap_or_default()))
        .catch_unwind()
        .await
        .unwrap_or_else(|panic| {
            let what = panic
                .downcast_ref::<&str>()
                .map(|s| s.to_string())
                .or_else(|| panic.downcast_ref::<String>().cloned())
                .unwrap_or_else(|| "unknown panic".into());
            tracing::error!(tool = name, "tool panicked: {what}");
            Err(ToolError::Failed(format!(
                "internal error ({what}); the server is still running, please report this"
            )))
        });
    tracing::debug!(tool = name, elapsed = ?started.elapsed(), ok = outcome.is_ok(), "tool call");
    Ok(match outcome {
        Ok(output) => {
            let mut result = CallToolResult::success(output.content);
            result.structured_content = output.structured;
            result
        }
        Err(error) => CallToolResult::error(vec![Content::text(format!(
            "Error executing tool {name}: {error}"
        ))]),
    })
}

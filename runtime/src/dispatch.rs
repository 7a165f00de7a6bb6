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

use crate::hooks::{CALL_SCOPE, CallScope, HookEvent};
use crate::state::ServerState;
use crate::tools::{ToolContext, ToolError};
use serde_json::Value;

pub async fn call_tool(
    state: &Arc<ServerState>,
    name: &str,
    arguments: Option<JsonObject>,
    context: ToolContext,
    traceparent: Option<String>,
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
    let arguments = arguments.unwrap_or_default();
    let hooks = state.hooks.clone();
    let scope = Arc::new(CallScope {
        traceparent,
        ..Default::default()
    });
    let outcome = CALL_SCOPE
        .scope(scope, async {
            if hooks.is_empty() {
                return run_contained(tool.as_ref(), name, context, arguments).await;
            }
            let arguments_value = Value::Object(arguments.clone());
            let (pair, refused) = hooks
                .before(&HookEvent::before_tool_call(name, &arguments_value))
                .await;
            let outcome = match refused {
                Err(refusal) => Err(ToolError::Failed(refusal.to_string())),
                Ok(()) => run_contained(tool.as_ref(), name, context, arguments).await,
            };
            // after_tool_call fires on every path, refusals and failures included.
            let (result, error) = match &outcome {
                Ok(output) => (Some(crate::tools::wire::text_of(&output.content)), None),
                Err(e) => (None, Some(e.to_string())),
            };
            let after = HookEvent::after_tool_call(name, &arguments_value, result, error);
            match hooks.after(pair, &after).await {
                Err(refusal) if outcome.is_ok() => Err(ToolError::Failed(refusal.to_string())),
                _ => outcome,
            }
        })
        .await;
    tracing::debug!(tool = name, elapsed = ?started.elapsed(), ok = outcome.is_ok(), "tool call");
    Ok(match outcome {
        Ok(output) => {
            let mut result = CallToolResult::success(output.content);
            result.structured_content = output.structured;
            if !output.meta.is_empty() {
                result.meta = Some(rmcp::model::MetaObject(output.meta));
            }
            result
        }
        Err(error) => CallToolResult::error(vec![Content::text(format!(
            "Error executing tool {name}: {error}"
        ))]),
    })
}

/// Runs a tool so that a panic costs only its own call.
async fn run_contained(
    tool: &dyn crate::tools::Tool,
    name: &str,
    context: ToolContext,
    arguments: JsonObject,
) -> Result<crate::tools::ToolOutput, ToolError> {
    AssertUnwindSafe(tool.call(context, arguments))
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
        })
}

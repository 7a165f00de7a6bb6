//! The single path every tool call takes: lookup, capability gate, the tool-call hooks, failure
//! containment, timing. The table of tools (`registry`) and which of them are served
//! (`selection`) live beside it; tools themselves never see them.
//!
//! A failure the agent can act on becomes a tool result with `isError: true`; only an unknown
//! tool is a protocol error (JSON-RPC -32602), because then there is no tool to answer.

mod extension_tools;
mod registry;
mod selection;
#[cfg(test)]
mod tests;

use std::panic::AssertUnwindSafe;
use std::sync::Arc;
use std::time::Instant;

use futures_util::FutureExt;
use rmcp::ErrorData as McpError;
use rmcp::model::{CallToolResult, ContentBlock as Content, JsonObject};
use serde_json::Value;

pub use registry::{NameTaken, ToolRegistry};
pub use selection::{CORE_TOOLSET, ToolView, UnknownToolNames};

use crate::tools::{Tool, ToolContext, ToolError, ToolResult, ToolSpec};
use server_core::capabilities::Capabilities;
use server_core::hooks::{CALL_SCOPE, CallScope, HookEvent};

/// Why a tool may not run now: the capability it needs is off.
pub fn refusal(spec: &ToolSpec, capabilities: &Capabilities) -> Option<String> {
    let needed = spec.capability.as_deref()?;
    (!capabilities.enabled(needed)).then(|| {
        format!(
            "it needs the '{needed}' capability, which is off. An operator can turn it on with \
             --capability {needed}."
        )
    })
}

/// A call to a tool this server does not have.
#[derive(Debug, thiserror::Error)]
#[error("Unknown tool '{name}'. This server's tools are: {known}.")]
pub struct UnknownTool {
    pub name: String,
    pub known: String,
}

/// Runs a tool call as every caller (MCP, the management routes) gets it: refused while its
/// capability is off, observed by the tool-call hooks, a panic contained.
pub async fn run(
    tools: &ToolRegistry,
    name: &str,
    arguments: Option<JsonObject>,
    context: ToolContext,
    traceparent: Option<String>,
) -> Result<ToolResult, UnknownTool> {
    let Some(tool) = tools.get(name) else {
        return Err(UnknownTool {
            name: name.to_owned(),
            known: tools.names().join(", "),
        });
    };
    if let Some(reason) = refusal(tool.spec(), &context.domain.capabilities) {
        return Ok(Err(ToolError::Failed(reason.into())));
    }
    // The embedded Jupyter may still be starting: the call waits for it (hearing so), except
    // connect_to_jupyter, which is how to go elsewhere when it never comes up.
    if name != crate::tools::connect::NAME
        && let Err(e) = jupyter_started(&context).await
    {
        return Ok(Err(e));
    }
    let started = Instant::now();
    let arguments = arguments.unwrap_or_default();
    let hooks = context.domain.hooks.clone();
    let scope = Arc::new(CallScope {
        traceparent,
        tool: Some(name.to_owned()),
        ..Default::default()
    });
    let outcome = CALL_SCOPE
        .scope(scope, async {
            if hooks.is_empty() {
                return run_contained(tool.as_ref(), name, context, arguments).await;
            }
            let arguments_value = observed_arguments(tool.spec(), &arguments);
            let before = HookEvent::before_tool_call(name, &arguments_value);
            let work = run_contained(tool.as_ref(), name, context, arguments);
            // after_tool_call fires on every path, refusals and failures included.
            hooks
                .around(&before, work, |outcome| {
                    let (result, error) = match outcome {
                        Ok(output) => (Some(output.joined_text()), None),
                        Err(e) => (None, Some(crate::tools::steps::worded(e))),
                    };
                    HookEvent::after_tool_call(name, &arguments_value, result, error)
                })
                .await
        })
        .await;
    tracing::debug!(tool = name, elapsed = ?started.elapsed(), ok = outcome.is_ok(), "tool call");
    Ok(outcome)
}

/// Waits until the domain's Jupyter Server is up, reporting progress each second to a client
/// that asked for it.
async fn jupyter_started(context: &ToolContext) -> Result<(), ToolError> {
    let limit = jupyter_client::launcher::READY_TIMEOUT.as_secs_f64();
    context
        .domain
        .wait_for_jupyter(|waited| {
            if let Some(report) = &context.progress {
                let waited = waited.as_secs_f64();
                report(
                    waited.min(limit),
                    Some(limit),
                    format!(
                        "Waiting for the embedded Jupyter Server to start: {waited:.0}s (it is given {limit:.0}s)"
                    ),
                );
            }
        })
        .await
}

/// The arguments as hook handlers see them: those the tool declares secret get a placeholder
/// instead of the value (hook handlers, guests among them, may log what they see).
fn observed_arguments(spec: &ToolSpec, arguments: &JsonObject) -> Value {
    let mut observed = arguments.clone();
    for &key in spec.secret_arguments {
        if let Some(value) = observed.get_mut(key)
            && !value.is_null()
        {
            *value = Value::from("[redacted]");
        }
    }
    Value::Object(observed)
}

/// A tool call from MCP, answered as MCP wants it.
pub async fn call_tool(
    tools: &ToolRegistry,
    view: Option<&ToolView>,
    name: &str,
    arguments: Option<JsonObject>,
    context: ToolContext,
    traceparent: Option<String>,
) -> Result<CallToolResult, McpError> {
    // A token without the tool's scope: refused, naming the scope (HTTP answers 403 before
    // this; here for a call that reaches us otherwise).
    if let (Some(view), Some(tool)) = (view, tools.get(name))
        && view.allows(name)
        && let Some(scope) = view.missing_scope(tool.spec())
    {
        return Err(McpError::invalid_request(
            format!(
                "insufficient_scope: calling '{name}' needs the scope '{scope}', which this \
                 access token does not carry; ask the authorization server for a token with it"
            ),
            Some(
                serde_json::json!({ "tool": name, "error": "insufficient_scope", "scope": scope.as_str() }),
            ),
        ));
    }
    let outcome = match view {
        // Outside this client's view a tool does not exist for it.
        Some(view) if !view.allows(name) => Err(UnknownTool {
            name: name.to_owned(),
            known: tools
                .names()
                .into_iter()
                .filter(|n| tools.get(n).is_some_and(|t| view.admits(t.spec())))
                .collect::<Vec<_>>()
                .join(", "),
        }),
        _ => run(tools, name, arguments, context, traceparent).await,
    };
    let outcome = outcome.map_err(|unknown| {
        McpError::invalid_params(
            unknown.to_string(),
            Some(serde_json::json!({ "tool": name })),
        )
    })?;
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
            "Error executing tool {name}: {}",
            crate::tools::steps::worded(&error)
        ))]),
    })
}

/// Runs a tool so that a panic costs only its own call.
async fn run_contained(
    tool: &dyn Tool,
    name: &str,
    context: ToolContext,
    arguments: JsonObject,
) -> ToolResult {
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
            Err(ToolError::Failed(
                format!("internal error ({what}); the server is still running, please report this")
                    .into(),
            ))
        })
}

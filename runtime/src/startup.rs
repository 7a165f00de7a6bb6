//! What the server does before it serves, when the operator asks (flags of the Python server):
//! open `--document-id` as the notebook `default`, or start the default kernel
//! (`--start-new-code-sandbox`), so the first call finds them ready and health says `alive`.

use std::sync::Arc;

use serde_json::json;
use tokio_util::sync::CancellationToken;

use crate::config::Config;
use crate::mcp::ServerState;
use crate::tools::ToolContext;

/// The name the Python server gives the notebook of `--document-id`.
pub const DEFAULT_NOTEBOOK: &str = "default";

/// Opens the configured notebook or starts the default kernel. A failure is logged, not fatal:
/// the server still serves, and the tools report the same failure when called.
pub async fn prepare(state: &Arc<ServerState>, config: &Config) {
    let domain = &state.domain;
    if let Some(path) = config.default_notebook.clone() {
        // Through dispatch, so hooks see it as the use_notebook call it is; connect mode never
        // creates anything.
        let arguments = json!({
            "notebook_name": DEFAULT_NOTEBOOK, "notebook_path": path, "mode": "connect",
        });
        let context = ToolContext {
            domain: domain.clone(),
            cancel: CancellationToken::new(),
            progress: None,
        };
        let arguments = arguments.as_object().cloned();
        let called = crate::dispatch::call_tool(
            &state.tools,
            None,
            "use_notebook",
            arguments,
            context,
            None,
        );
        match called.await {
            Ok(result) if result.is_error != Some(true) => {
                tracing::info!("opened '{path}' as notebook '{DEFAULT_NOTEBOOK}' (--document-id)");
            }
            Ok(result) => tracing::warn!(
                "could not open --document-id '{path}': {}",
                crate::tools::wire::text_of(&result.content)
            ),
            Err(e) => tracing::warn!("could not open --document-id '{path}': {}", e.message),
        }
    } else if config.start_default_kernel {
        match domain.jupyter().default_kernel().await {
            Ok(kernel) => tracing::info!(kernel = %kernel.id(), "started the default kernel"),
            Err(e) => tracing::warn!("could not start the default kernel: {e}"),
        }
    }
}

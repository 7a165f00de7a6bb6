//! What the server does before it serves, when the operator asks (flags of the Python server):
//! open `--document-id` as the notebook `default`, or start the default kernel
//! (`--start-new-code-sandbox`), so the first call finds them ready and health says `alive`.
//! Given as false, the document opens and its kernel waits for the first call that needs it.

use std::sync::Arc;

use crate::config::{Config, KernelAtStart};
use crate::mcp::ServerState;
use server_core::domain::notebooks::{UseMode, UseRequest};

/// The name the Python server gives the notebook of `--document-id`.
pub const DEFAULT_NOTEBOOK: &str = "default";

/// Opens the configured notebook or starts the default kernel. A failure is logged, not fatal:
/// the server still serves, and the tools report the same failure when called.
pub async fn prepare(state: &Arc<ServerState>, config: &Config) {
    let domain = &state.domain;
    if let Some(path) = config.default_notebook.clone() {
        // Connect mode never creates anything.
        let request = UseRequest {
            name: DEFAULT_NOTEBOOK.to_owned(),
            path: path.clone(),
            mode: UseMode::Connect,
            kernel_id: None,
            kernel_name: None,
            start_progress: None,
            defer_kernel: config.kernel_at_start == KernelAtStart::None,
        };
        match domain.use_notebook(request).await {
            Ok(_) => {
                tracing::info!("opened '{path}' as notebook '{DEFAULT_NOTEBOOK}' (--document-id)");
            }
            Err(e) => tracing::warn!(
                "could not open --document-id '{path}': {}",
                crate::tools::steps::worded(&e)
            ),
        }
    } else if config.kernel_at_start == KernelAtStart::Default {
        match domain.jupyter().default_kernel().await {
            Ok(kernel) => tracing::info!(kernel = %kernel.id(), "started the default kernel"),
            Err(e) => tracing::warn!("could not start the default kernel: {e}"),
        }
    }
}

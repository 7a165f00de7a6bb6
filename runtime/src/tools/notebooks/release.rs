//! restart_notebook and unuse_notebook: a notebook's kernel replaced or let go.

use std::sync::Arc;

use schemars::JsonSchema;
use serde::Deserialize;

use super::open::{attach_session, start_kernel};
use crate::domain::notebooks::{NotebookInUse, Released};
use crate::jupyter::document::Edit;
use crate::tools::{ToolContext, ToolError, ToolOutput, ToolResult};

#[derive(Debug, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct NotebookNameArgs {
    /// The notebook's use_notebook name.
    pub notebook_name: String,
}

#[derive(Debug, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct RestartArgs {
    /// The notebook's use_notebook name.
    pub notebook_name: String,
    /// Move the notebook to a new kernel of this kernelspec (see list_kernelspecs) instead of
    /// restarting the one it has.
    pub kernel_name: Option<String>,
}

pub(super) async fn restart_notebook(context: ToolContext, args: RestartArgs) -> ToolResult {
    let in_use = context
        .domain
        .notebooks
        .resolve(Some(&args.notebook_name))
        .map_err(ToolError::failed)?;
    if let Some(kernel_name) = &args.kernel_name {
        return switch_kernelspec(&context, &in_use, kernel_name).await;
    }
    let jupyter = context.domain.jupyter();
    let kernel = jupyter
        .restart_kernel(&in_use.kernel())
        .await
        .map_err(|e| {
            ToolError::Failed(format!(
                "Failed to restart notebook '{}': {e}",
                args.notebook_name
            ))
        })?;
    in_use.replace_kernel(kernel);
    Ok(ToolOutput::text(format!(
        "Notebook '{}' kernel restarted successfully. Memory state and imported packages have been cleared.",
        args.notebook_name
    )))
}

/// Moves a notebook to a new kernel of another kernelspec: the new kernel is started first,
/// then the old one released as unuse_notebook would, and the notebook's metadata updated.
async fn switch_kernelspec(
    context: &ToolContext,
    in_use: &Arc<NotebookInUse>,
    kernel_name: &str,
) -> ToolResult {
    let domain = &context.domain;
    let spec = domain.kernelspec(kernel_name).await?;
    let jupyter = domain.jupyter();
    let name = &in_use.name;
    let kernel = start_kernel(&jupyter, Some(&spec), name)
        .await
        .map_err(|e| ToolError::Failed(format!("Failed to restart notebook '{name}': {e}")))?;
    let released = release_kernel(context, in_use).await;
    let existing = jupyter
        .rest()
        .list_sessions()
        .await
        .unwrap_or_default()
        .into_iter()
        .find(|s| s.path == in_use.path);
    let (origin, session_line) = attach_session(&jupyter, &in_use.path, &kernel, existing).await?;
    let moved = Arc::new(NotebookInUse::new(
        name.clone(),
        in_use.path.clone(),
        in_use.document.clone(),
        kernel.clone(),
        origin,
        domain.notebooks.change_sender(),
    ));
    let current = domain.notebooks.current_name();
    domain.notebooks.insert(moved.clone());
    if let Some(current) = current {
        domain.notebooks.make_current(&current);
    }
    moved
        .apply(vec![Edit::SetNotebookMetadata {
            key: "kernelspec".into(),
            value: spec.metadata(),
        }])
        .await
        .map_err(ToolError::failed)?;
    Ok(ToolOutput::text(format!(
        "Notebook '{name}' now runs on a new kernel '{}' of kernelspec '{}' ({}); memory state \
         and imported packages have been cleared.{released}\n{session_line}",
        kernel.id(),
        spec.name,
        spec.display_name
    )))
}

pub(super) async fn unuse_notebook(context: ToolContext, args: NotebookNameArgs) -> ToolResult {
    let domain = &context.domain;
    let Some((in_use, switched)) = domain.notebooks.remove(&args.notebook_name) else {
        return Err(ToolError::failed(
            domain
                .notebooks
                .resolve(Some(&args.notebook_name))
                .err()
                .expect("not registered"),
        ));
    };
    if let Err(e) = in_use.document.close().await {
        tracing::warn!("closing '{}' failed: {e}", in_use.path);
    }
    let released = release_kernel(&context, &in_use).await;
    let mut text = format!(
        "Notebook '{}' unused successfully.{released}",
        args.notebook_name
    );
    match switched {
        Some(Some(new)) => text.push_str(&format!(" Current notebook switched to '{new}'.")),
        Some(None) => text.push_str(" No notebooks remaining."),
        None => {}
    }
    Ok(ToolOutput::text(text))
}

/// Stops the kernel we started for a notebook unless someone else uses it; says what happened.
async fn release_kernel(context: &ToolContext, in_use: &NotebookInUse) -> String {
    match in_use.release(&context.domain.jupyter()).await {
        Released::NotOurs(id) => format!(" Kernel '{id}' was not started here and keeps running."),
        Released::Shared(id) => {
            format!(" Kernel '{id}' is shared with someone else and keeps running.")
        }
        Released::ShutDown(id) => format!(" Its kernel '{id}' was shut down."),
    }
}

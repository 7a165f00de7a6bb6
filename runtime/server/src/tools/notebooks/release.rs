//! restart_notebook and unuse_notebook: what `domain::notebooks` did to a notebook's kernel, in
//! the Python server's words.

use schemars::JsonSchema;
use serde::Deserialize;
use serde_json::json;

use super::open::attached_line;
use crate::tools::{ToolContext, ToolOutput, ToolResult};
use server_core::domain::notebooks::{Released, Unused};

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
    let domain = &context.domain;
    let in_use = domain.notebooks.resolve(Some(&args.notebook_name))?;
    let Some(kernel_name) = &args.kernel_name else {
        domain.restart_notebook(&in_use).await?;
        return Ok(ToolOutput::text(format!(
            "Notebook '{}' kernel restarted successfully. Memory state and imported packages have been cleared.",
            args.notebook_name
        )));
    };
    let switched = domain.switch_kernelspec(&in_use, kernel_name).await?;
    Ok(ToolOutput::text(format!(
        "Notebook '{}' now runs on a new kernel '{}' of kernelspec '{}' ({}); memory state \
         and imported packages have been cleared.{}\n{}",
        switched.notebook.name,
        switched.kernel_id,
        switched.spec.name,
        switched.spec.display_name,
        released_text(&switched.released),
        attached_line(&switched.notebook, &switched.attached)
    )))
}

pub(super) async fn unuse_notebook(context: ToolContext, args: NotebookNameArgs) -> ToolResult {
    let Unused {
        released,
        switched,
        not_saved,
    } = context.domain.unuse_notebook(&args.notebook_name).await?;
    let mut text = match &not_saved {
        None => format!(
            "Notebook '{}' unused successfully.{}",
            args.notebook_name,
            released_text(&released)
        ),
        // Never "successfully" when the edits may not be in the file.
        Some(reason) => format!(
            "Notebook '{}' unused, but NOT saved: {reason}.{}",
            args.notebook_name,
            released_text(&released)
        ),
    };
    match switched {
        Some(Some(new)) => text.push_str(&format!(" Current notebook switched to '{new}'.")),
        Some(None) => text.push_str(" No notebooks remaining."),
        None => {}
    }
    Ok(ToolOutput::text(text)
        .with_meta("persisted", json!(not_saved.is_none()))
        .with_meta("not_saved", json!(not_saved)))
}

/// What became of a released notebook's kernel.
fn released_text(released: &Released) -> String {
    match released {
        Released::NotOurs(id) => format!(" Kernel '{id}' was not started here and keeps running."),
        Released::Shared(id) => {
            format!(" Kernel '{id}' is shared with someone else and keeps running.")
        }
        Released::ShutDown(id) => format!(" Its kernel '{id}' was shut down."),
        Released::NeverStarted => " It had no kernel (none was started for it).".to_owned(),
    }
}

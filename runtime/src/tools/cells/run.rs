//! execute_cell and insert_execute_code_cell: a cell run through the domain, presented with the
//! Python server's texts.

use std::sync::Arc;

use schemars::JsonSchema;
use serde::Deserialize;
use serde_json::json;

use super::{default_true, notebook_in_use, with_cell_id};
use crate::capabilities::COMPACT_OUTPUT;
use crate::domain::cells::{Cell, CellType};
use crate::domain::cells::{Expected, insert, read, resolve_cell, unknown_id};
use crate::domain::execution::{Completion, ExecutionRequest};
use crate::domain::notebooks::NotebookInUse;
use crate::domain::outputs::Output;
use crate::domain::versions::cell_version;
use crate::tools::execute::{progress_sink, render_execution};
use crate::tools::format::{cell_uri, format_secs, full_output_hint};
use crate::tools::outputs::{self, Compact, Rendered};
use crate::tools::{ToolContext, ToolOutput, ToolResult, seconds};

fn default_progress_interval() -> f64 {
    5.0
}

#[derive(Debug, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct ExecuteCellArgs {
    /// Index of the cell to execute (0-based). Omit when passing cell_id.
    pub cell_index: Option<i64>,
    /// Address the cell by its id instead of its index; given both, the id wins.
    pub cell_id: Option<String>,
    /// Maximum seconds to wait for execution (0 = the server's --execution-timeout).
    #[serde(default)]
    pub timeout: f64,
    /// Add a timeline (completion time, timeout) after the outputs.
    #[serde(default = "default_true")]
    pub stream: bool,
    /// Seconds between MCP progress notifications while the cell runs (0 = none).
    #[serde(default = "default_progress_interval")]
    pub progress_interval: f64,
    /// Target this notebook instead of the current one.
    pub notebook_name: Option<String>,
    /// The cell's version as you last read it; if someone changed the cell since, nothing is
    /// run and the error shows its current source and version.
    pub expected_version: Option<String>,
}

#[derive(Debug, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct InsertExecuteArgs {
    /// Index at which to insert the code cell (0-based); -1 appends at the end.
    pub cell_index: i64,
    /// Code source for the cell.
    pub cell_source: String,
    /// Maximum seconds to wait for execution (0 = the server's --execution-timeout).
    #[serde(default)]
    pub timeout: f64,
    /// Add a timeline (completion time, timeout) after the outputs.
    #[serde(default = "default_true")]
    pub stream: bool,
    /// Seconds between MCP progress notifications while the cell runs (0 = none).
    #[serde(default = "default_progress_interval")]
    pub progress_interval: f64,
    /// The notebook_version you last read; if cells were inserted, deleted or moved since,
    /// nothing is inserted or run and the error lists the cells as they are now.
    pub expected_notebook_version: Option<String>,
}

pub(super) async fn execute_cell(context: ToolContext, args: ExecuteCellArgs) -> ToolResult {
    let in_use = notebook_in_use(&context, args.notebook_name.as_deref())?;
    let notebook = read(&in_use).await?;
    let index = resolve_cell(&notebook, args.cell_index, args.cell_id.as_deref())?;
    // What runs is the source just checked: a cell changed since it was read runs nothing.
    let expected = Expected {
        cell: args.expected_version,
        notebook: None,
    };
    expected.check(&in_use, &notebook, index)?;
    let cell = notebook.cells[index].clone();
    let how = (args.timeout, args.stream, args.progress_interval);
    run_cell(&context, &in_use, index, &cell, how).await
}

pub(super) async fn insert_execute_code_cell(
    context: ToolContext,
    args: InsertExecuteArgs,
) -> ToolResult {
    let in_use = notebook_in_use(&context, None)?;
    let expected = Expected {
        cell: None,
        notebook: args.expected_notebook_version,
    };
    let (index, id, saved) = insert(
        &in_use,
        args.cell_index,
        Cell::new(CellType::Code, args.cell_source),
        &expected,
    )
    .await?;
    let cell = saved
        .cells
        .iter()
        .find(|c| c.id == id)
        .cloned()
        .ok_or_else(|| unknown_id(&id))?;
    let how = (args.timeout, args.stream, args.progress_interval);
    run_cell(&context, &in_use, index, &cell, how).await
}

/// Runs a code cell through the domain and shows the result as the Python server does.
async fn run_cell(
    context: &ToolContext,
    in_use: &Arc<NotebookInUse>,
    index: usize,
    cell: &Cell,
    (timeout, stream, progress_interval): (f64, bool, f64),
) -> ToolResult {
    let domain = &context.domain;
    let timeout = domain.settings.execution.resolve(timeout);
    let mut request = ExecutionRequest::new(cell.source.clone(), timeout);
    request.cancel = context.cancel.clone();
    if let Some(reporter) = context.progress.clone()
        && progress_interval > 0.0
    {
        request.progress = Some((seconds(progress_interval), progress_sink(reporter)));
    }
    let executed = domain.run_cell(in_use, index, cell, request).await?;
    let outcome = executed.outcome;
    let outputs = Output::all_from_json(&outcome.outputs);
    let base = cell_uri(&in_use.name, &cell.id);
    let compact = domain
        .capabilities
        .enabled(COMPACT_OUTPUT)
        .then_some(Compact { base: &base });
    let mut rendered = render_execution(
        &outputs,
        outcome.completion,
        timeout,
        domain.settings.output,
        compact,
        &full_output_hint(&in_use.name, &cell.id),
    );
    if let Some(note) = executed.replaced {
        rendered.insert(
            crate::tools::execute::notes_at(&outcome),
            Rendered::Text(note),
        );
    }
    if stream {
        match outcome.completion {
            Completion::Finished => rendered.push(Rendered::Text(format!(
                "[COMPLETED in {:.1}s]",
                outcome.elapsed.as_secs_f64()
            ))),
            Completion::TimedOut => rendered.push(Rendered::Text(format!(
                "[TIMEOUT at {}s: the kernel was interrupted]",
                format_secs(timeout)
            ))),
            Completion::Cancelled => {}
        }
    }
    let mut output = ToolOutput::content(outputs::to_content(rendered));
    // For clients with an output viewer (MCP Apps); the MCP layer drops it for the others.
    output.structured = Some(outputs::bundles(
        &outputs,
        outcome.widgets.clone(),
        domain.settings.output,
        &full_output_hint(&in_use.name, &cell.id),
    ));
    let output = output.with_meta("cell_version", json!(cell_version(cell)));
    Ok(with_cell_id(output, &cell.id))
}

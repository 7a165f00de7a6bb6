//! execute_cell and insert_execute_code_cell: a cell run through the domain, presented with the
//! Python server's texts.

use std::sync::Arc;

use schemars::JsonSchema;
use serde::Deserialize;
use serde_json::json;

use super::{default_true, notebook_in_use, with_cell_id};
use crate::tools::execute::{progress_sink, render_execution};
use crate::tools::executions::{recorded, repeated};
use crate::tools::format::{cell_uri, format_secs, full_output_hint};
use crate::tools::outputs::{self, Compact, Rendered};
use crate::tools::{ToolContext, ToolError, ToolOutput, ToolResult, seconds};
use server_core::capabilities::COMPACT_OUTPUT;
use server_core::domain::Domain;
use server_core::domain::cells::{Cell, CellType};
use server_core::domain::cells::{Expected, insert, read, resolve_cell, unknown_id};
use server_core::domain::execution::{Completion, Executed, ExecutionRequest};
use server_core::domain::executions::{Execution, NewExecution, Place};
use server_core::domain::notebooks::NotebookInUse;
use server_core::domain::outputs::Output;

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
    /// Answer at once with an execution_id while the cell runs (its outputs still go into the
    /// notebook as they come); read it with get_execution.
    #[serde(default)]
    pub background: bool,
    /// A key of your choosing: a call repeating it gets the first call's execution instead of
    /// running the cell again (for retries after a dropped connection).
    pub idempotency_key: Option<String>,
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
    /// Answer at once with an execution_id while the cell runs (its outputs still go into the
    /// notebook as they come); read it with get_execution.
    #[serde(default)]
    pub background: bool,
    /// A key of your choosing: a call repeating it gets the first call's execution instead of
    /// running the cell again (for retries after a dropped connection).
    pub idempotency_key: Option<String>,
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
    let how = How {
        timeout: args.timeout,
        stream: args.stream,
        progress_interval: args.progress_interval,
        background: args.background,
        idempotency_key: args.idempotency_key,
    };
    run_cell(&context, &in_use, index, &cell, how).await
}

pub(super) async fn insert_execute_code_cell(
    context: ToolContext,
    args: InsertExecuteArgs,
) -> ToolResult {
    let in_use = notebook_in_use(&context, None)?;
    // A retry must not insert the cell a second time.
    if let Some(earlier) = args
        .idempotency_key
        .as_deref()
        .and_then(|key| context.domain.executions.earlier(key))
    {
        let domain = context.domain.clone();
        let present = |execution: &Execution, executed: &Executed| {
            present_cell(&domain, execution, executed, args.stream)
        };
        return repeated(&earlier, present).await;
    }
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
    let how = How {
        timeout: args.timeout,
        stream: args.stream,
        progress_interval: args.progress_interval,
        background: args.background,
        idempotency_key: args.idempotency_key,
    };
    let ran = run_cell(&context, &in_use, index, &cell, how).await;
    // The person's yes went back to the client (a stateless request): its retry inserts the
    // cell again, so this one goes, and nothing is left of the round.
    if server_core::confirm::deferred() {
        let inserted = |nb: &server_core::domain::cells::Notebook| {
            nb.cells
                .iter()
                .position(|c| c.id == id)
                .map(|i| vec![i])
                .ok_or_else(|| unknown_id(&id))
        };
        if let Err(e) = server_core::domain::cells::delete(&in_use, inserted).await {
            tracing::warn!("could not take back the cell inserted before the question: {e}");
        }
    }
    ran
}

/// How a cell is to be run, as the call asked.
struct How {
    timeout: f64,
    stream: bool,
    progress_interval: f64,
    background: bool,
    idempotency_key: Option<String>,
}

/// Runs a code cell through the domain and shows the result as the Python server does.
async fn run_cell(
    context: &ToolContext,
    in_use: &Arc<NotebookInUse>,
    index: usize,
    cell: &Cell,
    how: How,
) -> ToolResult {
    let domain = context.domain.clone();
    let timeout = domain.settings.execution.resolve(how.timeout);
    let mut request = ExecutionRequest::new(cell.source.clone(), timeout);
    request.cancel = context.cancel.clone();
    if let Some(reporter) = context.progress.clone()
        && how.progress_interval > 0.0
    {
        request.progress = Some((seconds(how.progress_interval), progress_sink(reporter)));
    }
    let new = NewExecution {
        place: Place::Cell {
            notebook: in_use.name.clone(),
            path: in_use.path.clone(),
            cell_id: cell.id.clone(),
            index,
        },
        code: cell.source.clone(),
        timeout,
        background: how.background,
        idempotency_key: how.idempotency_key,
        task_id: None,
    };
    let (runner, in_use, cell) = (domain.clone(), in_use.clone(), cell.clone());
    let run = move |request| async move { runner.run_cell(&in_use, index, &cell, request).await };
    let present = |execution: &Execution, executed: &Executed| {
        present_cell(&domain, execution, executed, how.stream)
    };
    recorded(context, new, request, run, present).await
}

/// A cell run's result as the Python server shows it, for a run that ended.
pub fn present_cell(
    domain: &Domain,
    execution: &Execution,
    executed: &Executed,
    stream: bool,
) -> ToolResult {
    let Place::Cell {
        notebook, cell_id, ..
    } = &execution.place
    else {
        return Err(ToolError::Failed(format!(
            "Execution {} ran no cell.",
            execution.id
        )));
    };
    let timeout = execution.timeout;
    let outcome = &executed.outcome;
    let outputs = Output::all_from_json(&outcome.outputs);
    let base = cell_uri(notebook, cell_id);
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
        &full_output_hint(notebook, cell_id),
    );
    if let Some(note) = &executed.replaced {
        rendered.insert(
            crate::tools::execute::notes_at(outcome),
            Rendered::Text(note.clone()),
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
        &full_output_hint(notebook, cell_id),
    ));
    // The version of the source that ran (a cell run is always of a code cell).
    let output = match &execution.cell_version {
        Some(version) => output.with_meta("cell_version", json!(version)),
        None => output,
    };
    Ok(with_cell_id(output, cell_id))
}

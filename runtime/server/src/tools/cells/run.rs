//! execute_cell and insert_execute_code_cell: a cell run through the domain, presented with the
//! Python server's texts.

use schemars::JsonSchema;
use serde::Deserialize;
use serde_json::json;

use super::{default_true, with_cell_id};
use crate::tools::execute::render_execution;
use crate::tools::executions::{How, answered, run_request};
use crate::tools::format::{cell_uri, format_secs, full_output_hint};
use crate::tools::outputs::{self, Compact, Rendered};
use crate::tools::{ToolContext, ToolError, ToolOutput, ToolResult};
use server_core::capabilities::COMPACT_OUTPUT;
use server_core::domain::Domain;
use server_core::domain::execution::{Completion, Executed};
use server_core::domain::executions::{Execution, Place};
use server_core::domain::runs::Subject;

fn default_progress_interval() -> f64 {
    5.0
}

/// Declares a cell-running tool's arguments: its own fields, then the run options both such
/// tools take, written once so they read alike in both schemas (serde's `flatten` cannot be
/// used with `deny_unknown_fields`).
macro_rules! cell_run_arguments {
    ($(#[$meta:meta])* pub struct $name:ident { $($own:tt)* }) => {
        $(#[$meta])*
        #[derive(Debug, Deserialize, JsonSchema)]
        #[serde(deny_unknown_fields)]
        pub struct $name {
            $($own)*
            /// Maximum seconds to wait for execution (0 = the server's --execution-timeout).
            #[serde(default)]
            pub timeout: f64,
            /// Add a timeline (completion time, timeout) after the outputs.
            #[serde(default = "default_true")]
            pub stream: bool,
            /// Seconds between MCP progress notifications while the cell runs (0 = none).
            #[serde(default = "default_progress_interval")]
            pub progress_interval: f64,
            // The lines of these two doc comments are the schema's descriptions, line breaks
            // included: they break where the published schema (tests/tool-schemas.json) does.
            /// Answer at once with an execution_id while the cell runs (its outputs still go into the
            /// notebook as they come); read it with get_execution.
            #[serde(default)]
            pub background: bool,
            /// A key of your choosing: a call repeating it gets the first call's execution instead of
            /// running the cell again (for retries after a dropped connection).
            pub idempotency_key: Option<String>,
        }

        impl $name {
            /// How the run is to go, and whether to add its timeline.
            fn how(&mut self) -> (How, bool) {
                let how = How {
                    timeout: self.timeout,
                    progress_interval: self.progress_interval,
                    background: self.background,
                    idempotency_key: self.idempotency_key.take(),
                };
                (how, self.stream)
            }
        }
    };
}

cell_run_arguments! {
    pub struct ExecuteCellArgs {
        /// Index of the cell to execute (0-based). Omit when passing cell_id.
        pub cell_index: Option<i64>,
        /// Address the cell by its id instead of its index; given both, the id wins.
        pub cell_id: Option<String>,
        /// Target this notebook instead of the current one.
        pub notebook_name: Option<String>,
        /// The cell's version as you last read it; if someone changed the cell since, nothing is
        /// run and the error shows its current source and version.
        pub expected_version: Option<String>,
    }
}

cell_run_arguments! {
    pub struct InsertExecuteArgs {
        /// Index at which to insert the code cell (0-based); -1 appends at the end.
        pub cell_index: i64,
        /// Code source for the cell.
        pub cell_source: String,
        /// The notebook_version you last read; if cells were inserted, deleted or moved since,
        /// nothing is inserted or run and the error lists the cells as they are now.
        pub expected_notebook_version: Option<String>,
    }
}

pub(super) async fn execute_cell(context: ToolContext, mut args: ExecuteCellArgs) -> ToolResult {
    let (how, stream) = args.how();
    let subject = Subject::Cell {
        notebook: args.notebook_name,
        index: args.cell_index,
        id: args.cell_id,
        expected_version: args.expected_version,
    };
    run_cell(&context, subject, how, stream).await
}

pub(super) async fn insert_execute_code_cell(
    context: ToolContext,
    mut args: InsertExecuteArgs,
) -> ToolResult {
    let (how, stream) = args.how();
    let subject = Subject::NewCell {
        index: args.cell_index,
        source: args.cell_source,
        expected_notebook_version: args.expected_notebook_version,
    };
    run_cell(&context, subject, how, stream).await
}

/// Runs a code cell through the domain and shows the result as the Python server does.
async fn run_cell(context: &ToolContext, subject: Subject, how: How, stream: bool) -> ToolResult {
    let notebook = match &subject {
        Subject::Cell { notebook, .. } => notebook.clone(),
        _ => None,
    };
    let ran = context
        .domain
        .run(run_request(context, subject, how))
        .await?;
    let output = answered(ran, |execution, executed| {
        present_cell(&context.domain, execution, executed, stream)
    })?;
    // The notebook's revision, in `_meta` (the text is the Python server's outputs): the newest
    // known, so a run costs no read of the notebook.
    let Ok(in_use) = context.domain.notebook(notebook.as_deref()) else {
        return Ok(output);
    };
    match in_use.revision_without_read().await {
        Ok(revision) => Ok(super::with_revision_named(output, &revision)),
        Err(_) => Ok(output),
    }
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
        return Err(ToolError::Failed(
            format!("Execution {} ran no cell.", execution.id).into(),
        ));
    };
    let timeout = execution.timeout;
    let outcome = &executed.outcome;
    let outputs = &outcome.outputs;
    let base = cell_uri(notebook, cell_id);
    let compact = Some(Compact {
        base: &base,
        shorten: domain.capabilities.enabled(COMPACT_OUTPUT),
    });
    let mut rendered = render_execution(
        outputs,
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
        outputs,
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

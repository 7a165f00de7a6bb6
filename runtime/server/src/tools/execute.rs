//! `execute_code`: run code in a kernel without touching any notebook.

use std::sync::Arc;
use std::time::Duration;

use schemars::JsonSchema;
use serde::Deserialize;

use super::executions::{How, answered, run_request};
use super::format::format_secs;
use super::outputs::{self, Compact, NO_OUTPUT, Rendered};
use super::{ProgressReporter, TaskSupport, Tool, ToolContext, ToolOutput, ToolResult, declare};
use crate::config::OutputLimits;
use crate::tools::wire::Shape;
use server_core::capabilities::COMPACT_OUTPUT;
use server_core::domain::Domain;
use server_core::domain::execution::{
    Completion, Executed, ExecutionOutcome, Progress, ProgressSink,
};
use server_core::domain::executions::Execution;
use server_core::domain::outputs::{EXECUTION_SCHEME, Output};
use server_core::domain::runs::Subject;

fn default_timeout() -> f64 {
    30.0
}

fn default_progress_interval() -> f64 {
    5.0
}

/// Arguments of `execute_code`.
#[derive(Debug, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct ExecuteCodeArgs {
    /// Code to execute (supports magic commands with %, shell commands with !).
    pub code: String,
    /// Maximum seconds to wait for execution (0 = the server's --execution-timeout); clamped to
    /// --max-execution-timeout. On timeout the kernel is interrupted and the outputs so far returned.
    #[serde(default = "default_timeout")]
    pub timeout: f64,
    /// Target an existing kernel by ID (see list_kernels). If omitted, a default kernel that this
    /// server starts on first use is used.
    pub kernel_id: Option<String>,
    /// Seconds between MCP progress notifications while the code runs (0 = none).
    #[serde(default = "default_progress_interval")]
    pub progress_interval: f64,
    /// Answer at once with an execution_id while the code runs; read it with get_execution.
    #[serde(default)]
    pub background: bool,
    /// A key of your choosing: a call repeating it gets the first call's execution instead of
    /// running the code again (for retries after a dropped connection).
    pub idempotency_key: Option<String>,
}

pub fn execute_code() -> Arc<dyn Tool> {
    declare("execute_code", "Execute code directly in a kernel; nothing is saved to any notebook. Uses the kernel named \
         by kernel_id, or a default kernel started on first use. Good for magics (%pip, %timeit), \
         shell commands (!ls), inspecting variables and quick calculations. Do not use it for \
         imports or definitions that later notebook cells depend on: put those in the notebook.").runs_code().shape(Shape::Outputs("code.execute")).shows_outputs().tasks(TaskSupport::Optional).run(run)
}

/// A progress sink that reports as the Python server does ("Execution in progress: 12s / 120s").
pub fn progress_sink(reporter: ProgressReporter) -> ProgressSink {
    Arc::new(move |p: Progress| {
        let elapsed = p.elapsed.min(p.timeout).as_secs_f64();
        if p.starting {
            let message = format!(
                "Waiting for the kernel to start and answer: {:.0}s / {}s (--kernel-start-timeout)",
                p.elapsed.as_secs_f64(),
                format_secs(p.timeout)
            );
            return reporter(elapsed, Some(p.timeout.as_secs_f64()), message);
        }
        let mut message = format!(
            "Execution in progress: {:.0}s / {}s",
            p.elapsed.as_secs_f64(),
            format_secs(p.timeout)
        );
        if p.output_count > 0 {
            message.push_str(&format!(", {} outputs", p.output_count));
        }
        reporter(elapsed, Some(p.timeout.as_secs_f64()), message);
    })
}

async fn run(context: ToolContext, args: ExecuteCodeArgs) -> ToolResult {
    let subject = Subject::Code {
        code: args.code,
        kernel_id: args.kernel_id,
    };
    let how = How {
        timeout: args.timeout,
        progress_interval: args.progress_interval,
        background: args.background,
        idempotency_key: args.idempotency_key,
    };
    let ran = context
        .domain
        .run(run_request(&context, subject, how))
        .await?;
    answered(ran, |execution, executed| {
        present(&context.domain, execution, executed)
    })
}

/// execute_code's result for an execution of it that ended.
pub fn present(domain: &Domain, execution: &Execution, executed: &Executed) -> ToolResult {
    let Executed { outcome, replaced } = executed;
    let timeout = execution.timeout;
    let limits = domain.settings.output;
    let outputs = &outcome.outputs;
    // Shortened outputs point to their whole, which only the server keeps for execute_code:
    // the execution's own record (`execution://ID`), no second copy.
    let kept = execution
        .kept
        .get_or_init(|| {
            domain
                .capabilities
                .enabled(COMPACT_OUTPUT)
                .then(|| execution.id.clone())
        })
        .as_ref()
        .map(|id| format!("{EXECUTION_SCHEME}{id}"));
    let hint = match &kept {
        Some(base) => {
            format!("The whole output is kept by the server: read {base}/outputs/<index>.")
        }
        None => "execute_code keeps no copy: print less (a slice, a summary, df.head()), or run \
                 the code in a notebook cell so the whole output is saved there."
            .to_owned(),
    };
    let hint = hint.as_str();
    // The record serves the outputs either way; `kept` says whether they are shortened.
    let base = format!("{EXECUTION_SCHEME}{}", execution.id);
    let compact = Some(Compact {
        base: kept.as_deref().unwrap_or(&base),
        shorten: kept.is_some(),
    });
    let mut rendered =
        render_execution(outputs, outcome.completion, timeout, limits, compact, hint);
    if let Some(note) = replaced {
        rendered.insert(notes_at(outcome), Rendered::Text(note.clone()));
    }
    let mut output = ToolOutput::content(outputs::to_content(rendered));
    // For clients with an output viewer (MCP Apps); the MCP layer drops it for the others.
    output.structured = Some(outputs::bundles(
        outputs,
        outcome.widgets.clone(),
        limits,
        hint,
    ));
    Ok(output)
}

/// Where a note about the kernel goes: first, after a timeout notice if there is one.
pub fn notes_at(outcome: &ExecutionOutcome) -> usize {
    usize::from(outcome.completion == Completion::TimedOut)
}

/// Outputs plus a note when the execution did not finish by itself.
pub fn render_execution(
    outputs: &[Output],
    completion: Completion,
    timeout: Duration,
    limits: OutputLimits,
    compact: Option<Compact<'_>>,
    full_output_hint: &str,
) -> Vec<Rendered> {
    let mut rendered = outputs::render_outputs(outputs, limits, compact, full_output_hint);
    match completion {
        Completion::Finished if rendered.is_empty() => {
            rendered.push(Rendered::Text(NO_OUTPUT.into()))
        }
        Completion::Finished => {}
        // First, as the Python server answers it (there, as the only item): agents read the
        // first item.
        Completion::TimedOut => rendered.insert(
            0,
            Rendered::Text(format!(
                "[TIMEOUT ERROR: Execution exceeded {} seconds and the kernel was interrupted; \
                 the outputs below are what it produced before that. The kernel keeps its state.]",
                format_secs(timeout)
            )),
        ),
        Completion::Cancelled => rendered.push(Rendered::Text(
            "[CANCELLED: the request was cancelled and the kernel was interrupted.]".into(),
        )),
    }
    rendered
}

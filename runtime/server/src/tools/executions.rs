//! Executions as the agent sees them: the execution tools' runs recorded (in the foreground or
//! the background, or answered from an earlier call with the same idempotency key), and
//! `get_execution` / `list_executions` reading the records `domain::executions` keeps.

use std::sync::Arc;
use std::time::{Duration, Instant};

use schemars::JsonSchema;
use serde::Deserialize;
use serde_json::json;

use super::cells::run::present_cell;
use super::execute::{present as present_code, progress_sink};
use super::format::format_secs;
use super::outputs::{self, Rendered};
use super::{Tool, ToolContext, ToolError, ToolOutput, ToolResult, declare};
use server_core::domain::Domain;
use server_core::domain::execution::Executed;
use server_core::domain::executions::{Execution, Place, State};
use server_core::domain::runs::{Ran, RunRequest, Subject};

/// An execution tool's answer: the run's result shown by `present` once it ended, or its id
/// while it runs in the background.
pub(crate) fn answered(
    ran: Ran,
    present: impl Fn(&Execution, &Executed) -> ToolResult,
) -> ToolResult {
    match ran {
        Ran::Ended(ended) => present(&ended.execution, ended.executed()),
        Ran::Started {
            execution,
            repeated,
        } => Ok(started(&execution, repeated.as_ref())),
    }
}

/// The request part every execution tool shares: its cancellation, task and progress.
pub(crate) fn run_request(context: &ToolContext, subject: Subject, how: How) -> RunRequest {
    let progress = context
        .progress
        .clone()
        .filter(|_| how.progress_interval > 0.0)
        .map(|reporter| {
            (
                super::seconds(how.progress_interval),
                progress_sink(reporter),
            )
        });
    RunRequest {
        subject,
        timeout_secs: how.timeout,
        background: how.background,
        idempotency_key: how.idempotency_key,
        task_id: context.task_id.clone(),
        cancel: context.cancel.clone(),
        progress,
    }
}

/// How a run is to go, as an execution tool's arguments ask.
pub(crate) struct How {
    pub timeout: f64,
    pub progress_interval: f64,
    pub background: bool,
    pub idempotency_key: Option<String>,
}

fn started(execution: &Execution, repeated: Option<&State>) -> ToolOutput {
    let id = &execution.id;
    let place = execution.place.describe();
    let mut text = match repeated {
        None => format!(
            "Execution {id} runs in the background in {place} (timeout {}s).",
            format_secs(execution.timeout)
        ),
        Some(state) => format!(
            "An earlier call with this idempotency_key started execution {id} in {place}; the \
             code was not run again. It is {}.",
            state.name()
        ),
    };
    if matches!(execution.place, Place::Cell { .. }) {
        text.push_str(" Its outputs go into the notebook cell as they come.");
    }
    text.push_str(&format!(
        " Call get_execution with execution_id \"{id}\" (wait_seconds to wait for its end) for \
         its state and outputs; interrupt_kernel stops it."
    ));
    ToolOutput::text(text).with_meta("execution_id", json!(id))
}

#[derive(Debug, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct GetExecutionArgs {
    /// The id an execution tool answered (with background: true, or in its _meta).
    pub execution_id: String,
    /// Seconds to wait for the execution to end before answering (0 = answer at once); at most
    /// the server's --max-execution-timeout.
    #[serde(default)]
    pub wait_seconds: f64,
}

#[derive(Debug, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct ListExecutionsArgs {}

pub fn tools() -> Vec<Arc<dyn Tool>> {
    vec![
        declare(
            "get_execution",
            "The state of an execution an execution tool started (running, finished, failed, \
             interrupted, lost, with the reason), its outputs so far, the cell or kernel it ran \
             in, and its timings. wait_seconds waits for it to end first.",
        )
        .read_only()
        .run(get_execution),
        declare(
            "list_executions",
            "The executions this server remembers (newest last): id, state, where, when it \
             started, how long it ran.",
        )
        .read_only()
        .run(list_executions),
    ]
}

async fn get_execution(context: ToolContext, args: GetExecutionArgs) -> ToolResult {
    let domain = &context.domain;
    let execution = domain.executions.get(&args.execution_id).ok_or_else(|| {
        ToolError::NotFound(
            format!(
                "No execution '{}' is known to this server: ids come from execute_code, \
             execute_cell or insert_execute_code_cell, and they are kept {}. Call \
             list_executions to see them.",
                args.execution_id,
                domain.executions.kept_for()
            )
            .into(),
        )
    })?;
    let wait = super::seconds(args.wait_seconds).min(domain.settings.execution.max_timeout);
    if !wait.is_zero() {
        tokio::select! {
            () = waited(&context, &execution, wait) => {}
            () = context.cancel.cancelled() => {}
        }
    }
    let snapshot = execution.snapshot();
    let mut header = format!("Execution {}: {}", execution.id, snapshot.state.name());
    if let Some(reason) = snapshot.state.reason() {
        header.push_str(&format!(" ({})", super::steps::said(reason)));
    }
    header.push_str(&format!(
        "\nWhere: {}\nStarted: {}; {} {:.1}s",
        execution.place.describe(),
        started_at(&execution),
        if snapshot.result.is_some() {
            "ran for"
        } else {
            "running for"
        },
        snapshot.elapsed.as_secs_f64()
    ));
    let mut output = match snapshot.result.as_deref() {
        Some(Ok(executed)) => present(domain, &execution, executed)?,
        Some(Err(_)) => ToolOutput::default(),
        None => {
            let mut rendered = outputs::render_outputs(
                &snapshot.outputs,
                domain.settings.output,
                None,
                "The run has not ended: the whole output is shown once it has.",
            );
            rendered.push(Rendered::Text(format!(
                "[RUNNING: call get_execution again (wait_seconds up to {}s) for the rest.]",
                format_secs(domain.settings.execution.max_timeout)
            )));
            ToolOutput::content(outputs::to_content(rendered))
        }
    };
    if let Some(conflict) = domain.executions.conflict(&execution.id) {
        header.push_str(&format!("\n[KEY CONFLICT: {conflict}.]"));
    }
    if let Some((place, since, why)) = domain.executions.store_failing() {
        header.push_str(&format!(
            "\n[STORE FAILING: the execution store ({place}) cannot write ({why}) since {} s ago; \
             this record is kept in memory and written once the store works again, so it is \
             lost only if the server stops first. Free space on its disk, or bring it back.]",
            since.elapsed().map(|d| d.as_secs()).unwrap_or(0)
        ));
    }
    output
        .content
        .insert(0, rmcp::model::ContentBlock::text(header));
    output.structured = None;
    Ok(output
        .with_meta("execution_id", json!(execution.id))
        .with_meta("execution_state", json!(snapshot.state.name())))
}

/// How often a waiting get_execution tells a client that asked for progress that it still waits.
const WAIT_PROGRESS: Duration = Duration::from_secs(5);

/// Waits up to `wait` for the end, with a progress notification every [`WAIT_PROGRESS`], so a
/// client that gives up on silent calls keeps waiting.
async fn waited(context: &ToolContext, execution: &Execution, wait: Duration) {
    let Some(report) = &context.progress else {
        execution.wait(wait).await;
        return;
    };
    let began = Instant::now();
    while began.elapsed() < wait {
        let step = WAIT_PROGRESS.min(wait - began.elapsed());
        if execution.wait(step).await {
            return;
        }
        let waited = began.elapsed().min(wait);
        report(
            waited.as_secs_f64(),
            Some(wait.as_secs_f64()),
            format!(
                "Waiting for execution {}: {:.0}s / {}s; it has run for {:.0}s",
                execution.id,
                waited.as_secs_f64(),
                format_secs(wait),
                execution.status().1.as_secs_f64()
            ),
        );
    }
}

fn present(domain: &Domain, execution: &Execution, executed: &Executed) -> ToolResult {
    match execution.place {
        Place::Code { .. } => present_code(domain, execution, executed),
        Place::Cell { .. } => present_cell(domain, execution, executed, true),
    }
}

fn started_at(execution: &Execution) -> String {
    chrono::DateTime::<chrono::Utc>::from(execution.started)
        .format("%Y-%m-%dT%H:%M:%SZ")
        .to_string()
}

async fn list_executions(context: ToolContext, _args: ListExecutionsArgs) -> ToolResult {
    let executions = context.domain.executions.list();
    if executions.is_empty() {
        return Ok(ToolOutput::text(
            "No executions yet: execute_code, execute_cell and insert_execute_code_cell record \
             theirs (background: true answers at once with an execution_id).",
        ));
    }
    let lines: Vec<String> = executions
        .iter()
        .map(|execution| {
            let (state, elapsed) = execution.status();
            format!(
                "{}\t{}\t{}\t{}\t{:.1}s",
                execution.id,
                state.name(),
                execution.place.describe(),
                started_at(execution),
                elapsed.as_secs_f64()
            )
        })
        .collect();
    Ok(ToolOutput::text(format!(
        "ID\tState\tWhere\tStarted\tElapsed\n{}",
        lines.join("\n")
    )))
}

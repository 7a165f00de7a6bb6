//! `run_all_cells`: every code cell in order, outputs written into the notebook, a summary back.

use std::sync::Arc;
use std::sync::atomic::{AtomicUsize, Ordering};

use schemars::JsonSchema;
use serde::Deserialize;
use serde_json::{Value, json};

use super::format::format_secs;
use super::outputs::{Rendered, render_output};
use super::{Tool, ToolContext, ToolOutput, ToolResult, declare, seconds};
use server_core::domain::cells::Cell;
use server_core::domain::execution::{ExecutionRequest, Progress, ProgressSink};
use server_core::domain::outputs::Output;
use server_core::domain::run_all::{CellRun, CellStatus};

fn default_true() -> bool {
    true
}

#[derive(Debug, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct RunAllArgs {
    /// Target this notebook instead of the current one.
    pub notebook_name: Option<String>,
    /// Stop at the first cell that raises (or times out); false runs every cell regardless.
    #[serde(default = "default_true")]
    pub stop_on_error: bool,
    /// Seconds each cell may run (0 or absent = the server's --execution-timeout); a cell that
    /// runs longer is interrupted.
    #[serde(default)]
    pub timeout: f64,
}

pub fn run_all_cells() -> Arc<dyn Tool> {
    declare(
        "run_all_cells",
        "Run every code cell of a notebook in order in its kernel, writing outputs and execution \
         counts into the notebook as execute_cell does, with progress after each cell. Stops at \
         the first error unless stop_on_error is false. Answers a summary per cell (index, id, \
         status, count, first line of output); read_cell shows a cell's whole output.",
    )
    .runs_code()
    .run(run)
}

/// The first line of a cell's outputs: the error for a failed cell, else the first text.
fn short_output(outputs: &[Output]) -> String {
    if let Some((ename, evalue)) = outputs.iter().find_map(|o| match o {
        Output::Error { ename, evalue, .. } => Some((ename, evalue)),
        _ => None,
    }) {
        let name = if ename.is_empty() { "Error" } else { ename };
        return shorten(&format!("{name}: {evalue}"));
    }
    for output in outputs {
        match render_output(output, false) {
            Some(Rendered::Text(text)) if !text.trim().is_empty() => {
                let lines = text.trim_end().lines().count();
                let first = text.trim_start().lines().next().unwrap_or("");
                let mut short = shorten(first);
                if lines > 1 {
                    short.push_str(&format!(" (+{} lines)", lines - 1));
                }
                return short;
            }
            Some(Rendered::Image { mime_type, .. }) => return format!("[{mime_type}]"),
            _ => {}
        }
    }
    String::new()
}

fn shorten(line: &str) -> String {
    const MAX: usize = 100;
    if line.chars().count() > MAX {
        format!("{}…", line.chars().take(MAX).collect::<String>())
    } else {
        line.to_owned()
    }
}

fn row(turn: &CellRun) -> (String, Value) {
    let count = turn.outcome.as_ref().and_then(|o| o.execution_count);
    let output = match (&turn.status, &turn.outcome) {
        (CellStatus::Failed(reason), _) => shorten(&super::steps::said(reason)),
        (_, Some(outcome)) => short_output(&outcome.outputs),
        _ => String::new(),
    };
    let line = format!(
        "{}\t{}\t{}\t{}\t{output}",
        turn.index,
        turn.cell_id,
        turn.status.as_str(),
        count.map_or_else(|| "-".to_owned(), |n| n.to_string())
    );
    let value = json!({
        "index": turn.index,
        "cell_id": turn.cell_id,
        "status": turn.status.as_str(),
        "execution_count": count,
        "output": output,
    });
    (line, value)
}

async fn run(context: ToolContext, args: RunAllArgs) -> ToolResult {
    let domain = &context.domain;
    let in_use = domain.notebook(args.notebook_name.as_deref())?;
    let timeout = domain.settings.execution.resolve(args.timeout);
    let cancel = context.cancel.clone();
    let reporter = context.progress.clone();
    // Progress counts cells; within a cell it creeps toward the next whole number, so clients
    // with idle timeouts hear from us while a long cell runs.
    let finished = Arc::new(AtomicUsize::new(0));
    let within: Option<ProgressSink> = reporter.clone().map(|report| {
        let finished = finished.clone();
        let sink: ProgressSink = Arc::new(move |p: Progress| {
            let part = (p.elapsed.as_secs_f64() / p.timeout.as_secs_f64().max(1e-9)).min(0.99);
            report(
                finished.load(Ordering::Relaxed) as f64 + part,
                None,
                format!(
                    "Cell running: {:.0}s / {}s",
                    p.elapsed.as_secs_f64(),
                    format_secs(p.timeout)
                ),
            );
        });
        sink
    });
    let request = |cell: &Cell| {
        let mut request = ExecutionRequest::new(cell.source.clone(), timeout);
        request.cancel = cancel.clone();
        if let Some(sink) = &within {
            request.progress = Some((seconds(5.0), sink.clone()));
        }
        request
    };
    let progress = |done: usize, total: usize, turn: &CellRun| {
        finished.store(done, Ordering::Relaxed);
        if let Some(report) = &reporter {
            report(
                done as f64,
                Some(total as f64),
                format!(
                    "Cell {} ({}): {} — {done}/{total} code cells",
                    turn.index,
                    turn.cell_id,
                    turn.status.as_str()
                ),
            );
        }
    };
    let run = domain
        .run_all_cells(&in_use, args.stop_on_error, request, progress)
        .await?;
    let ran = run
        .cells
        .iter()
        .filter(|c| !matches!(c.status, CellStatus::NotRun | CellStatus::Empty))
        .count();
    let not_run = run
        .cells
        .iter()
        .filter(|c| matches!(c.status, CellStatus::NotRun))
        .count();
    let problem = run.cells.iter().find(|c| {
        !matches!(
            c.status,
            CellStatus::Ok | CellStatus::Empty | CellStatus::NotRun
        )
    });
    let mut lines = run.replaced.clone();
    let total = run.cells.len();
    lines.push(match (problem, not_run) {
        (None, _) if total == 0 => format!("Notebook '{}' has no code cells.", in_use.name),
        (None, _) => format!(
            "Ran {ran} of {total} code cells of '{}'; all succeeded.",
            in_use.name
        ),
        (Some(first), 0) => format!(
            "Ran {ran} of {total} code cells of '{}'; cell {} ({}) ended with status '{}'.",
            in_use.name,
            first.index,
            first.cell_id,
            first.status.as_str()
        ),
        (Some(first), _) => format!(
            "Ran {ran} of {total} code cells of '{}'; stopped at cell {} ({}, status '{}'), so \
             {not_run} cells were not run. Fix it and call run_all_cells again, or pass \
             stop_on_error=false to run past errors.",
            in_use.name,
            first.index,
            first.cell_id,
            first.status.as_str()
        ),
    });
    let mut cells = Vec::new();
    if total > 0 {
        lines.push("Index\tCell_ID\tStatus\tCount\tOutput".to_owned());
        for turn in &run.cells {
            let (line, value) = row(turn);
            lines.push(line);
            cells.push(value);
        }
    }
    Ok(ToolOutput {
        structured: Some(json!({ "cells": cells })),
        ..ToolOutput::text(lines.join("\n"))
    })
}

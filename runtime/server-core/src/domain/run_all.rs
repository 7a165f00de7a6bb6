//! Running every code cell of a notebook in order, each through `run_cell` (outputs written into
//! the notebook as they arrive), stopping at the first failure unless told otherwise.

use std::sync::Arc;

use super::notebooks::NotebookInUse;
use super::{Domain, Error, Message, cells};
use jupyter_client::kernel::{Completion, ExecutionOutcome, ExecutionRequest};
use notebook_format::notebook::{Cell, CellType};
use notebook_format::outputs::Output;

/// How one cell's turn ended.
#[derive(Debug)]
pub enum CellStatus {
    Ok,
    /// The code raised; the outcome holds the error output.
    Error,
    TimedOut,
    Cancelled,
    /// The run could not happen (kernel gone, notebook changed); the message says why.
    Failed(Message),
    /// An empty cell: nothing to run.
    Empty,
    /// Not reached: an earlier cell stopped the run.
    NotRun,
}

impl CellStatus {
    pub fn as_str(&self) -> &'static str {
        match self {
            CellStatus::Ok => "ok",
            CellStatus::Error => "error",
            CellStatus::TimedOut => "timeout",
            CellStatus::Cancelled => "cancelled",
            CellStatus::Failed(_) => "failed",
            CellStatus::Empty => "empty",
            CellStatus::NotRun => "not run",
        }
    }

    /// Whether this status ends a run that stops on errors.
    fn stops(&self) -> bool {
        !matches!(
            self,
            CellStatus::Ok | CellStatus::Empty | CellStatus::NotRun
        )
    }
}

/// One code cell's turn in a run.
#[derive(Debug)]
pub struct CellRun {
    pub index: usize,
    pub cell_id: String,
    pub status: CellStatus,
    pub outcome: Option<ExecutionOutcome>,
}

/// A finished run: each code cell in order, and the notes of kernels replaced on the way.
#[derive(Debug, Default)]
pub struct RunAll {
    pub cells: Vec<CellRun>,
    pub replaced: Vec<String>,
}

impl Domain {
    /// Runs the notebook's code cells in order. `request` builds each cell's execution request;
    /// `progress` is told after each cell (cells done, code cells in all, that cell's run).
    /// Cancelling stops the run after the cell in progress (which is interrupted).
    pub async fn run_all_cells(
        &self,
        in_use: &Arc<NotebookInUse>,
        stop_on_error: bool,
        request: impl Fn(&Cell) -> ExecutionRequest,
        progress: impl Fn(usize, usize, &CellRun),
    ) -> Result<RunAll, Error> {
        let notebook = cells::read(in_use).await?;
        let code: Vec<(usize, &Cell)> = notebook
            .cells
            .iter()
            .enumerate()
            .filter(|(_, c)| c.cell_type == CellType::Code)
            .collect();
        let total = code.len();
        // One question for the whole run, showing every cell that will run.
        let to_run: Vec<&(usize, &Cell)> = code
            .iter()
            .filter(|(_, c)| !c.source.trim().is_empty())
            .collect();
        if let Some((_, first)) = to_run.first() {
            let shown: String = to_run
                .iter()
                .map(|(i, c)| format!("# ── cell {i} ──\n{}\n", c.source.trim_end()))
                .collect();
            let indices: Vec<String> = to_run.iter().map(|(i, _)| i.to_string()).collect();
            let kernel = match in_use.kernel() {
                Some(kernel) => format!("kernel {}", kernel.id()),
                None => "a kernel started for this run".to_owned(),
            };
            let place = format!(
                "notebook '{}' ({}), code cells {} in order, {kernel}",
                in_use.name,
                in_use.path,
                indices.join(", "),
            );
            self.confirmed(&shown, &place, &request(first).cancel)
                .await?;
        }
        let mut run = RunAll::default();
        let mut stopped = false;
        for (done, (index, cell)) in code.into_iter().enumerate() {
            let mut turn = CellRun {
                index,
                cell_id: cell.id.clone(),
                status: CellStatus::NotRun,
                outcome: None,
            };
            if stopped {
                run.cells.push(turn);
                continue;
            }
            if cell.source.trim().is_empty() {
                turn.status = CellStatus::Empty;
            } else {
                let req = request(cell);
                let cancel = req.cancel.clone();
                match self.run_cell_asking(in_use, index, cell, req, false).await {
                    Ok(executed) => {
                        run.replaced.extend(executed.replaced);
                        turn.status = status_of(&executed.outcome);
                        turn.outcome = Some(executed.outcome);
                    }
                    Err(e) => turn.status = CellStatus::Failed(e.message().clone()),
                }
                stopped = (stop_on_error && turn.status.stops())
                    || matches!(turn.status, CellStatus::Failed(_))
                    || cancel.is_cancelled();
            }
            progress(done + 1, total, &turn);
            run.cells.push(turn);
        }
        Ok(run)
    }
}

fn status_of(outcome: &ExecutionOutcome) -> CellStatus {
    match outcome.completion {
        Completion::TimedOut => CellStatus::TimedOut,
        Completion::Cancelled => CellStatus::Cancelled,
        Completion::Finished => {
            let raised = outcome.reply_status.as_deref() == Some("error")
                || outcome
                    .outputs
                    .iter()
                    .any(|o| matches!(o, Output::Error { .. }));
            if raised {
                CellStatus::Error
            } else {
                CellStatus::Ok
            }
        }
    }
}

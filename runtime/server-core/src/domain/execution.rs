//! Executions in a notebook's kernel: the kernel made ready first (auto-restart policy), the
//! person's yes while `execution.confirm` is on ([`Domain::confirmed`], the one gate every caller
//! passes, guests included), the execute hooks fired by the kernel layer, and a kernel lost
//! mid-run reported the same way to every caller. A cell run also writes its outputs into the
//! notebook as they arrive.

use std::sync::Arc;
use std::time::Duration;

use tokio::sync::watch;
use tokio_util::sync::CancellationToken;

use super::kernels::{ReadyKernel, kernel_gone_message, reporting_start};
use super::notebooks::NotebookInUse;
use super::{Domain, Error, Step};
use crate::capabilities::{AUTO_RESTART, EXECUTION_CONFIRM};
use crate::confirm;
use crate::say;
/// An execution as callers of the domain ask for and read it.
pub use jupyter_client::kernel::{
    Completion, ExecutionOutcome, ExecutionRequest, Progress, ProgressSink,
};
use jupyter_client::kernel::{ConnectError, KernelError, OutputEpoch, OutputsCopy};
use notebook_format::edit::Edit;
/// The text of nbformat outputs (multiline strings joined, tracebacks).
pub use notebook_format::notebook::multiline_text;
use notebook_format::notebook::{Cell, CellType};
use notebook_format::outputs::Output;

/// What an execution produced, and the note to show first when a lost kernel was replaced.
#[derive(Debug, Clone, serde::Serialize, serde::Deserialize)]
pub struct Executed {
    pub outcome: ExecutionOutcome,
    pub replaced: Option<String>,
}

impl Domain {
    /// Runs code without touching a notebook (execute_code): in the kernel `kernel_id` names,
    /// else in the current notebook's kernel (as the Python server does), else in the default
    /// kernel, started on first use.
    pub async fn execute_code(
        &self,
        kernel_id: Option<&str>,
        request: ExecutionRequest,
    ) -> Result<Executed, Error> {
        let jupyter = self.jupyter();
        match kernel_id {
            Some(id) => {
                let kernel = jupyter.kernel(id).await.map_err(|e| match e {
                    KernelError::Connect(ConnectError::NotFound(_)) => Error::Failed(say![
                        format!("Kernel '{id}' not found on the Jupyter Server. Call "),
                        Step::ListKernels,
                        " to see the running kernels, or omit kernel_id to use the default kernel."
                    ]),
                    other => Error::failed(other),
                })?;
                self.confirmed(&request.code, &format!("kernel {id}"), &request.cancel)
                    .await?;
                let running = self
                    .egress_asks
                    .running(id, &request.code, request.timeout, None);
                let outcome = kernel.execute(request).await;
                drop(running);
                let outcome = outcome.map_err(|e| match e.gone_reason() {
                    Some(reason) => Error::Failed(say![
                        format!(
                            "Kernel '{id}' {}; every variable, import and definition it held \
                             is lost. Call ",
                            self.kernel_endings.or(id, reason)
                        ),
                        Step::ListKernels,
                        " to find a running kernel, or omit kernel_id to use the default kernel."
                    ]),
                    None => Error::failed(e),
                })?;
                Ok(Executed {
                    outcome,
                    replaced: None,
                })
            }
            None if let Ok(notebook) = self.notebooks.resolve(None) => {
                self.execute_in(&notebook, request).await
            }
            None => {
                let start_timeout = self.settings.kernel_start.timeout;
                let starting = jupyter.default_kernel();
                let kernel = reporting_start(request.progress.as_ref(), start_timeout, starting)
                    .await
                    .map_err(|e| match e.gone_reason() {
                        Some(reason) => Error::Failed(say![
                            format!(
                                "The default kernel {reason}; every variable, import and \
                                 definition it held is lost. Call "
                            ),
                            Step::ExecuteCode,
                            " again to start a fresh default kernel."
                        ]),
                        None => {
                            Error::Failed(format!("Could not start the default kernel: {e}").into())
                        }
                    })?;
                let place = format!("the default kernel ({})", kernel.id());
                self.confirmed(&request.code, &place, &request.cancel)
                    .await?;
                let running =
                    self.egress_asks
                        .running(kernel.id(), &request.code, request.timeout, None);
                let outcome = kernel.execute(request).await;
                drop(running);
                match outcome {
                    Ok(outcome) => Ok(Executed {
                        outcome,
                        replaced: None,
                    }),
                    Err(e) => {
                        let Some(reason) = e.gone_reason() else {
                            return Err(Error::failed(e));
                        };
                        jupyter.default_kernel_loss_reported(kernel.id()).await;
                        let reason = self
                            .ended_while_running(kernel.id())
                            .await
                            .unwrap_or_else(|| reason.to_string());
                        Err(Error::Failed(say![
                            format!(
                                "The default kernel {reason} while this code ran; every \
                                 variable, import and definition it held is lost. Call "
                            ),
                            Step::ExecuteCode,
                            " again to start a fresh default kernel."
                        ]))
                    }
                }
            }
        }
    }

    /// Runs code in the notebook's kernel; nothing is written to the notebook.
    pub async fn execute_in(
        &self,
        in_use: &NotebookInUse,
        request: ExecutionRequest,
    ) -> Result<Executed, Error> {
        let ready = self.ready_kernel(in_use, request.progress.as_ref()).await?;
        let place = place_in(in_use, ready.kernel.id(), None);
        self.confirmed(&request.code, &place, &request.cancel)
            .await?;
        let (replaced, outcome) = self.execute_on(in_use, ready, request).await;
        Ok(Executed {
            outcome: outcome?,
            replaced,
        })
    }

    /// Runs a code cell, writing its outputs into the notebook while it runs (at most once a
    /// second on a file, as they come in a collaboration room) and once more at the end.
    pub async fn run_cell(
        &self,
        in_use: &Arc<NotebookInUse>,
        index: usize,
        cell: &Cell,
        request: ExecutionRequest,
    ) -> Result<Executed, Error> {
        self.run_cell_asking(in_use, index, cell, request, true)
            .await
    }

    /// `run_cell`; `ask: false` when the person already said yes to this run (run_all_cells
    /// asks once for every cell).
    pub(super) async fn run_cell_asking(
        &self,
        in_use: &Arc<NotebookInUse>,
        index: usize,
        cell: &Cell,
        mut request: ExecutionRequest,
        ask: bool,
    ) -> Result<Executed, Error> {
        if cell.cell_type != CellType::Code {
            return Err(Error::Failed(
                format!(
                    "Cell {index} is a {} cell; only code cells can be executed.",
                    cell.cell_type.as_str()
                )
                .into(),
            ));
        }
        let ready = self.ready_kernel(in_use, request.progress.as_ref()).await?;
        if ask {
            let place = place_in(in_use, ready.kernel.id(), Some(index));
            self.confirmed(&request.code, &place, &request.cancel)
                .await?;
        }
        let (live_tx, live_rx) = watch::channel(LiveOutputs::default());
        // The caller's own sink (an execution's record) hears them too.
        let also = request.on_output.take();
        request.on_output = Some(Arc::new(move |outputs: &[Output], count, epoch| {
            if let Some(also) = &also {
                also(outputs, count, epoch);
            }
            // Copies what is new since the last report, not the whole output again.
            live_tx.send_modify(|live| live.catch_up(outputs, epoch, count));
        }));
        let streams = in_use.document.streams_outputs();
        if streams {
            // Collaborators see the run start: old outputs cleared and the cell marked running.
            in_use
                .apply(vec![
                    Edit::SetOutputs {
                        cell_id: cell.id.clone(),
                        outputs: Vec::new(),
                        execution_count: None,
                    },
                    Edit::SetRunning {
                        cell_id: cell.id.clone(),
                        running: true,
                    },
                ])
                .await?;
        }
        let writer = tokio::spawn(write_while_running(
            in_use.clone(),
            cell.id.clone(),
            live_rx,
            streams,
        ));

        let (replaced, outcome) = self.execute_on(in_use, ready, request).await;
        writer.abort();
        let _ = writer.await;
        // The whole outputs, written as the running writes were (a room gets what is new).
        let saved = match &outcome {
            Ok(outcome) => {
                in_use
                    .write_outputs(&cell.id, &outcome.outputs, outcome.execution_count, true)
                    .await
            }
            Err(_) if streams => in_use
                .apply(vec![Edit::SetRunning {
                    cell_id: cell.id.clone(),
                    running: false,
                }])
                .await
                .map(|_| ()),
            Err(_) => Ok(()),
        };
        let outcome = outcome?;
        saved?;
        Ok(Executed { outcome, replaced })
    }

    /// Runs `request` on the ready kernel; returns the replacement note, if any, beside the
    /// outcome. A request the kernel was lost on is never sent again: nothing says it did not
    /// run (a kernel can die before its messages about the request reach us).
    async fn execute_on(
        &self,
        in_use: &NotebookInUse,
        ready: ReadyKernel,
        request: ExecutionRequest,
    ) -> (Option<String>, Result<ExecutionOutcome, Error>) {
        let auto_restart = self.capabilities.enabled(AUTO_RESTART);
        let running = self.egress_asks.running(
            ready.kernel.id(),
            &request.code,
            request.timeout,
            Some(&in_use.path),
        );
        let outcome = ready.kernel.execute(request).await;
        drop(running);
        let ended = match &outcome {
            Err(e) if e.gone_reason().is_some() => {
                self.ended_while_running(ready.kernel.id()).await
            }
            _ => None,
        };
        (
            ready.replaced,
            outcome.map_err(|e| gone_or_failed(e, in_use, auto_restart, ended)),
        )
    }
}

impl Domain {
    /// The gate before code reaches a kernel: while `execution.confirm` is on and the operator's
    /// rules ask for `code`, the person behind the call must say yes to running it in `place`.
    /// Anything else (declined, cancelled, no answer, nobody to ask) runs nothing and says why.
    pub(super) async fn confirmed(
        &self,
        code: &str,
        place: &str,
        cancel: &CancellationToken,
    ) -> Result<(), Error> {
        let passed = self.confirm_gate(code, place, cancel).await;
        if passed.is_ok() {
            // A background run's call answers once its code is past the gate.
            let _ = PAST_GATE.try_with(|gate| gate.notify_one());
        }
        passed
    }

    async fn confirm_gate(
        &self,
        code: &str,
        place: &str,
        cancel: &CancellationToken,
    ) -> Result<(), Error> {
        if !self.capabilities.enabled(EXECUTION_CONFIRM) {
            return Ok(());
        }
        let Some(reason) = self.settings.confirm.reason(code) else {
            return Ok(());
        };
        let message = format!(
            "Run this code in {place}?\n(Asked because the server's {EXECUTION_CONFIRM} \
             capability is on: {reason}.)\n\n{}",
            confirm::shown(code)
        );
        let answer = tokio::select! {
            answer = confirm::ask(&message) => answer,
            () = cancel.cancelled() => {
                return Err(Error::Failed(format!(
                    "Nothing ran in {place}: the call was cancelled while waiting for the \
                     person's answer."
                ).into()));
            }
        };
        match confirm::refusal(
            &answer,
            &format!("Nothing ran in {place}"),
            &format!("the server's '{EXECUTION_CONFIRM}' capability"),
            &format!(
                "have the operator switch the capability off (--capability \
                 {EXECUTION_CONFIRM}=off)"
            ),
        ) {
            None => Ok(()),
            Some(refusal) => Err(Error::Failed(refusal.into())),
        }
    }
}

/// Where code runs in a notebook, as the person asked to confirm it reads it.
fn place_in(in_use: &NotebookInUse, kernel_id: &str, cell: Option<usize>) -> String {
    let cell = cell
        .map(|index| format!("cell {index} of "))
        .unwrap_or_default();
    format!(
        "{cell}notebook '{}' ({}), kernel {kernel_id}",
        in_use.name, in_use.path
    )
}

tokio::task_local! {
    /// Told when an execution's code has passed [`Domain::confirmed`] (set by
    /// `executions::Execution::run_in_background`).
    pub(super) static PAST_GATE: Arc<tokio::sync::Notify>;
}

impl Domain {
    /// How a kernel lost while it ran code ended, when something beyond its connection said:
    /// a sandboxed kernel's launcher tells of a kill at its memory cap a moment after the death,
    /// so that word is waited for briefly.
    pub(super) async fn ended_while_running(&self, kernel_id: &str) -> Option<String> {
        if self
            .capabilities
            .enabled(crate::capabilities::KERNEL_SANDBOX)
        {
            for _ in 0..10 {
                if let Some(ended) = self.kernel_endings.of(kernel_id) {
                    return Some(ended);
                }
                tokio::time::sleep(std::time::Duration::from_millis(50)).await;
            }
        }
        self.kernel_endings.of(kernel_id)
    }
}

pub(super) fn gone_or_failed(
    error: KernelError,
    in_use: &NotebookInUse,
    auto_restart: bool,
    ended: Option<String>,
) -> Error {
    if error.gone_reason().is_some() {
        Error::Kernel(kernel_gone_message(&in_use.name, auto_restart, ended))
    } else {
        Error::Kernel(error.to_string().into())
    }
}

/// A running cell's outputs as last reported, and its execution count.
#[derive(Default)]
struct LiveOutputs {
    outputs: OutputsCopy,
    execution_count: Option<i64>,
}

impl LiveOutputs {
    fn catch_up(&mut self, now: &[Output], epoch: OutputEpoch, execution_count: Option<i64>) {
        self.outputs.catch_up(now, epoch);
        self.execution_count = execution_count;
    }
}

async fn write_while_running(
    in_use: Arc<NotebookInUse>,
    cell_id: String,
    mut live: watch::Receiver<LiveOutputs>,
    streams: bool,
) {
    // A room shows each write at once, so outputs go out as they come (a short pause bounds the
    // work for chatty cells). A file is rewritten at most once a second, and not at all in the
    // first second: quick cells get a single write at the end.
    let pause = if streams {
        Duration::from_millis(20)
    } else {
        Duration::from_secs(1)
    };
    if !streams {
        tokio::time::sleep(pause).await;
    }
    // Our copy of the outputs so far, brought up to date with what is new at each write.
    let mut ours = LiveOutputs::default();
    while live.changed().await.is_ok() {
        {
            let now = live.borrow_and_update();
            let Some(epoch) = now.outputs.epoch() else {
                continue;
            };
            ours.catch_up(now.outputs.outputs(), epoch, now.execution_count);
        }
        if let Err(e) = in_use
            .write_outputs(
                &cell_id,
                ours.outputs.outputs(),
                ours.execution_count,
                false,
            )
            .await
        {
            tracing::debug!("could not save outputs while running: {e}");
        }
        tokio::time::sleep(pause).await;
    }
}

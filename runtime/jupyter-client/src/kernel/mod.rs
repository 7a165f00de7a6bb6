//! A kernel as this server uses it: one connection, one execution queue, one liveness state.

pub mod codec;
mod collector;
pub mod connection;
pub mod execute;
pub mod observer;
pub mod resume;
mod socket;
pub mod widgets;

use std::sync::Arc;

pub use connection::{ConnectError, GoneReason, KernelConnection, Liveness};
pub use execute::{
    Completion, ExecuteError, ExecutionOutcome, ExecutionRequest, OutputEpoch, OutputSink,
    OutputsCopy, Progress, ProgressSink, Sent, SentSink,
};

pub use observer::{KernelObserver, Refusal};

use crate::rest::{JupyterRest, RestError};

#[derive(Debug, thiserror::Error)]
pub enum KernelError {
    #[error(transparent)]
    Connect(#[from] ConnectError),
    #[error(transparent)]
    Execute(#[from] ExecuteError),
    #[error(transparent)]
    Rest(#[from] RestError),
    #[error(transparent)]
    Refused(#[from] observer::Refusal),
    /// Only sandboxed kernels may start, and none fits.
    #[error("{0}")]
    NotSandboxed(String),
}

impl KernelError {
    /// The reason the kernel's state was lost, when that is what went wrong.
    pub fn gone_reason(&self) -> Option<GoneReason> {
        match self {
            KernelError::Execute(ExecuteError::Gone { reason, .. }) => Some(*reason),
            _ => None,
        }
    }
}

/// The outcome of an execution cancelled before it reached the kernel.
fn cancelled_before_running() -> ExecutionOutcome {
    ExecutionOutcome {
        outputs: Vec::new(),
        execution_count: None,
        reply_status: None,
        completion: Completion::Cancelled,
        elapsed: Default::default(),
        user_expressions: None,
        widgets: None,
    }
}

pub struct Kernel {
    id: String,
    rest: JupyterRest,
    connection: KernelConnection,
    observer: Arc<dyn KernelObserver>,
    /// How long an execution waits for a kernel that has not answered yet (`--kernel-start-timeout`).
    start_timeout: std::time::Duration,
    /// Executions run one at a time, first come first served (tokio's mutex is fair).
    queue: tokio::sync::Mutex<()>,
    /// The code of the execution holding the queue, and since when (for `interrupt_kernel`).
    running: std::sync::Mutex<Option<(String, std::time::Instant)>>,
}

/// Clears the running execution however it ends.
struct RunningGuard<'a>(&'a Kernel);

impl Drop for RunningGuard<'_> {
    fn drop(&mut self) {
        *self.0.running.lock().expect("running lock") = None;
    }
}

impl std::fmt::Debug for Kernel {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Kernel").field("id", &self.id).finish()
    }
}

impl Kernel {
    /// Opens our connection to a running kernel.
    /// Connects to kernel `id`; `restarting` when Jupyter is restarting it (see
    /// `KernelConnection::open`).
    pub async fn connect(
        rest: JupyterRest,
        id: &str,
        observer: Arc<dyn KernelObserver>,
        start_timeout: std::time::Duration,
        restarting: bool,
    ) -> Result<Arc<Kernel>, KernelError> {
        let connection = KernelConnection::open(
            rest.clone(),
            id,
            observer.clone(),
            start_timeout,
            restarting,
        )
        .await?;
        Ok(Arc::new(Kernel {
            id: id.to_owned(),
            rest,
            connection,
            observer,
            start_timeout,
            queue: tokio::sync::Mutex::new(()),
            running: std::sync::Mutex::new(None),
        }))
    }

    pub fn id(&self) -> &str {
        &self.id
    }

    pub fn connection(&self) -> &KernelConnection {
        &self.connection
    }

    pub fn liveness(&self) -> Liveness {
        self.connection.liveness()
    }

    /// The name this kernel serves under (a notebook's name, or "default").
    pub fn label(&self) -> String {
        self.connection.label()
    }

    pub fn set_label(&self, label: &str) {
        self.connection.set_label(label);
    }

    /// Runs code after the executions queued before it, telling the observer before and after it
    /// whatever its end. The timeout clock starts when this request reaches the kernel; a
    /// cancellation while still queued just leaves the queue.
    pub async fn execute(
        &self,
        request: ExecutionRequest,
    ) -> Result<ExecutionOutcome, KernelError> {
        if self.observer.is_idle() {
            return self.execute_queued(request).await;
        }
        let timeout = request.timeout;
        let (pair, refused) = self.observer.before_execute(&self.id, &request.code).await;
        let outcome = match refused {
            Err(refusal) => Err(KernelError::Refused(refusal)),
            Ok(()) => self.execute_queued(request).await,
        };
        let error = match &outcome {
            Ok(o) => match o.completion {
                Completion::Finished => None,
                Completion::TimedOut => Some(format!(
                    "timed out after {:.1}s; the kernel was interrupted",
                    timeout.as_secs_f64()
                )),
                Completion::Cancelled => Some("cancelled; the kernel was interrupted".to_owned()),
            },
            Err(e) => Some(e.to_string()),
        };
        let executed = observer::Executed {
            kernel_id: &self.id,
            outputs: outcome.as_ref().map_or(&[][..], |o| o.outputs.as_slice()),
            error: error.as_deref(),
        };
        let after = self.observer.after_execute(pair, executed).await;
        match after {
            Err(refusal) if outcome.is_ok() => Err(KernelError::Refused(refusal)),
            _ => outcome,
        }
    }

    async fn execute_queued(
        &self,
        request: ExecutionRequest,
    ) -> Result<ExecutionOutcome, KernelError> {
        if let Liveness::Gone(reason) = self.liveness() {
            return Err(self.gone(reason));
        }
        let _turn = if request.only_if_idle {
            self.queue.try_lock().map_err(|_| {
                KernelError::Execute(ExecuteError::Busy {
                    kernel_id: self.id.clone(),
                })
            })?
        } else {
            tokio::select! {
            turn = self.queue.lock() => turn,
            _ = request.cancel.cancelled() => return Ok(cancelled_before_running()),
            }
        };
        // The execution's clock starts once the kernel answers (a new kernel on a cluster may
        // take a while): until then the kernel start timeout bounds the wait.
        if !self.connection.is_answering() && !self.await_answering(&request).await? {
            return Ok(cancelled_before_running());
        }
        *self.running.lock().expect("running lock") =
            Some((request.code.clone(), std::time::Instant::now()));
        let _running = RunningGuard(self);
        Ok(execute::run(self, request).await?)
    }

    /// Waits for the kernel's first answer on our socket, reporting progress as an execution
    /// does; `false` when the caller cancelled meanwhile.
    async fn await_answering(&self, request: &ExecutionRequest) -> Result<bool, KernelError> {
        let started = tokio::time::Instant::now();
        let mut ticker = request.progress.as_ref().map(|(every, _)| {
            let every = (*every).max(std::time::Duration::from_millis(100));
            tokio::time::interval_at(started + every, every)
        });
        let answering = self.connection.answering();
        tokio::pin!(answering);
        let deadline = tokio::time::sleep_until(started + self.start_timeout);
        tokio::pin!(deadline);
        loop {
            tokio::select! {
                answers = &mut answering => {
                    if answers {
                        return Ok(true);
                    }
                    let reason = match self.liveness() {
                        Liveness::Gone(reason) => reason,
                        Liveness::Alive => GoneReason::Deleted,
                    };
                    return Err(self.gone(reason));
                }
                _ = &mut deadline => {
                    return Err(KernelError::Execute(ExecuteError::NotAnswering {
                        kernel_id: self.id.clone(),
                        seconds: self.start_timeout.as_secs(),
                    }));
                }
                _ = request.cancel.cancelled() => return Ok(false),
                _ = async { ticker.as_mut().expect("guarded").tick().await }, if ticker.is_some() => {
                    if let Some((_, sink)) = &request.progress {
                        tracing::debug!(kernel = %self.id, "waiting for the kernel to answer");
                        sink(execute::Progress {
                            elapsed: started.elapsed(),
                            timeout: self.start_timeout,
                            output_count: 0,
                            starting: true,
                        });
                    }
                }
            }
        }
    }

    /// The code this server is running in the kernel now, and for how long.
    pub fn running(&self) -> Option<(String, std::time::Duration)> {
        self.running
            .lock()
            .expect("running lock")
            .as_ref()
            .map(|(code, since)| (code.clone(), since.elapsed()))
    }

    /// Interrupts whatever the kernel runs (ours or anyone's), as Jupyter's interrupt does.
    pub async fn interrupt(&self) -> Result<(), KernelError> {
        match self.rest.interrupt_kernel(&self.id).await {
            Ok(()) => Ok(()),
            Err(RestError::NotFound { .. }) => Err(self.gone(GoneReason::Deleted)),
            Err(e) => Err(e.into()),
        }
    }

    /// Waits until the kernel answers `kernel_info` on shell *and* its iopub messages reach us
    /// (after a restart Jupyter reconnects its channels a moment after the REST call returns,
    /// and iopub subscriptions miss what is published before they join).
    pub async fn wait_ready(&self, within: std::time::Duration) -> bool {
        let deadline = tokio::time::Instant::now() + within;
        while tokio::time::Instant::now() < deadline {
            let (msg_id, mut replies) =
                self.connection
                    .request("shell", "kernel_info_request", serde_json::json!({}));
            let attempt = tokio::time::sleep(std::time::Duration::from_millis(500));
            tokio::pin!(attempt);
            let (mut replied, mut published) = (false, false);
            let ready = loop {
                tokio::select! {
                    routed = replies.recv() => match routed {
                        Some(connection::Routed::Message(m)) => {
                            replied |= m.msg_type() == "kernel_info_reply";
                            published |= m.channel == "iopub";
                            if replied && published {
                                break Some(true);
                            }
                        }
                        _ => break Some(false),
                    },
                    _ = &mut attempt => break None,
                }
            };
            self.connection.forget(&msg_id);
            if let Some(ready) = ready {
                return ready;
            }
        }
        false
    }

    /// Interrupts the kernel; returns why it is gone if the interrupt shows it is.
    pub(crate) async fn interrupt_or_gone(&self) -> Option<GoneReason> {
        match self.rest.interrupt_kernel(&self.id).await {
            Ok(()) => None,
            Err(RestError::NotFound { .. }) => Some(GoneReason::Deleted),
            Err(e) => {
                tracing::warn!(kernel = %self.id, "interrupt failed: {e}");
                None
            }
        }
    }

    fn gone(&self, reason: GoneReason) -> KernelError {
        KernelError::Execute(ExecuteError::Gone {
            kernel_id: self.id.clone(),
            reason,
        })
    }
}

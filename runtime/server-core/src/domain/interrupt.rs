//! Interrupting a kernel: the notebook's, or the default kernel of `execute_code` when no
//! notebook is in use. An idle kernel is left alone, so an interrupt that arrives just after the
//! code ended cannot hit the next execution.

use std::sync::Arc;
use std::time::Duration;

use super::kernels::kernel_gone_message;
use super::{Domain, Error, Step};
use crate::capabilities::AUTO_RESTART;
use crate::say;
use jupyter_client::kernel::{Kernel, Liveness};

/// How long we wait to see an interrupted execution of ours end before answering.
const SETTLE: Duration = Duration::from_secs(5);

/// What the kernel was doing when the interrupt came.
#[derive(Debug)]
pub enum Activity {
    /// Running code this server sent (its text, for how long); `stopped` says whether it ended
    /// within a few seconds of the interrupt.
    Ours {
        code: String,
        elapsed: Duration,
        stopped: bool,
    },
    /// Busy with code someone else sent (JupyterLab, another client).
    Theirs,
    /// Nothing running: the interrupt was not sent.
    Idle,
    /// No notebook in use and no default kernel started yet: there is nothing to interrupt.
    NoKernel,
}

/// The answer of an interrupt: whose kernel, which one, and what it was doing.
#[derive(Debug)]
pub struct Interrupted {
    /// "notebook 'x'" or "the default kernel".
    pub owner: String,
    pub kernel_id: Option<String>,
    pub activity: Activity,
}

impl Domain {
    /// Interrupts the named notebook's kernel, the current notebook's, or the default kernel.
    pub async fn interrupt(&self, notebook_name: Option<&str>) -> Result<Interrupted, Error> {
        let named = notebook_name.filter(|n| !n.is_empty());
        let (owner, kernel): (String, Option<Arc<Kernel>>) =
            match (named, self.notebooks.current_name()) {
                (Some(_), _) | (None, Some(_)) => {
                    let in_use = self.notebook(named)?;
                    let kernel = in_use.kernel();
                    if let Some(kernel) = &kernel
                        && let Liveness::Gone(_) = kernel.liveness()
                    {
                        let auto_restart = self.capabilities.enabled(AUTO_RESTART);
                        return Err(Error::Kernel(kernel_gone_message(
                            &in_use.name,
                            auto_restart,
                            self.kernel_endings.of(kernel.id()),
                        )));
                    }
                    (format!("notebook '{}'", in_use.name), kernel)
                }
                (None, None) => (
                    "the default kernel".to_owned(),
                    self.jupyter().current_default_kernel().await,
                ),
            };
        let Some(kernel) = kernel else {
            return Ok(Interrupted {
                owner,
                kernel_id: None,
                activity: Activity::NoKernel,
            });
        };
        let running = kernel.running();
        let mut busy = kernel.connection().execution_state() == "busy";
        if running.is_some() && !busy {
            // Sent but not begun: an interrupt now would reach a kernel still idle between
            // requests and be lost, and the code would then run in full.
            busy = wait_until_busy(&kernel).await;
        }
        let running = if busy { running } else { kernel.running() };
        if running.is_none() && !busy {
            return Ok(Interrupted {
                owner,
                kernel_id: Some(kernel.id().to_owned()),
                activity: Activity::Idle,
            });
        }
        kernel
            .interrupt()
            .await
            .map_err(|e| match e.gone_reason() {
                Some(reason) => Error::Failed(say![
                    format!(
                        "The kernel of {owner} {reason}, so there was nothing left to interrupt; \
                         its state is lost. Call "
                    ),
                    Step::RestartNotebook,
                    " (or ",
                    Step::ExecuteCode,
                    " for the default kernel) to get a fresh one."
                ]),
                None => {
                    Error::Failed(format!("Could not interrupt the kernel of {owner}: {e}").into())
                }
            })?;
        let activity = match running {
            Some((code, elapsed)) => {
                let stopped = wait_until_not_running(&kernel, &code).await;
                Activity::Ours {
                    code,
                    elapsed,
                    stopped,
                }
            }
            None => Activity::Theirs,
        };
        Ok(Interrupted {
            owner,
            kernel_id: Some(kernel.id().to_owned()),
            activity,
        })
    }
}

/// How long an execution we sent may take to begin before the interrupt goes anyway.
const BEGIN: Duration = Duration::from_secs(3);

/// Waits (briefly) until the kernel reports itself busy; `false` if it did not (the execution
/// may have ended meanwhile, or never began).
async fn wait_until_busy(kernel: &Kernel) -> bool {
    let deadline = tokio::time::Instant::now() + BEGIN;
    while tokio::time::Instant::now() < deadline {
        if kernel.connection().execution_state() == "busy" {
            return true;
        }
        if kernel.running().is_none() {
            return false;
        }
        tokio::time::sleep(Duration::from_millis(10)).await;
    }
    kernel.connection().execution_state() == "busy"
}

/// Waits (briefly) until the interrupted execution has left the kernel.
async fn wait_until_not_running(kernel: &Kernel, code: &str) -> bool {
    let deadline = tokio::time::Instant::now() + SETTLE;
    while tokio::time::Instant::now() < deadline {
        match kernel.running() {
            Some((now, _)) if now == code => {}
            _ => return true,
        }
        tokio::time::sleep(Duration::from_millis(25)).await;
    }
    false
}

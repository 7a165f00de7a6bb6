//! Following an execution another process of ours sent, after that process ended: the Jupyter
//! Server keeps what the kernel sends to a closed socket (iopub and the shell reply) for the next
//! socket opened on the same kernel and session, and replays it; the run's later messages follow
//! on that socket. The socket is read only, nothing is sent on it (a request would start another
//! execution).

use std::time::Duration;

use futures_util::StreamExt;

use super::execute::{Completion, ExecutionOutcome, Heard, OutputEpoch, ReplyState, Sent};
use super::socket::Socket;
use crate::rest::{JupyterRest, RestError};
use notebook_format::outputs::Output;

/// Why a resumed run's end could not be learnt.
#[derive(Debug, thiserror::Error)]
pub enum ResumeError {
    #[error("the kernel {0} is gone")]
    KernelGone(String),
    #[error(
        "the Jupyter Server kept no messages of the run for its session (another client \
         connected to the kernel {0} since, or the server does not keep them) and the kernel is \
         idle"
    )]
    NothingKept(String),
    #[error("the kernel {kernel_id} could not be reached: {reason}")]
    Unreachable { kernel_id: String, reason: String },
}

/// How long the replay may take to show a first message of the run before the kernel's own
/// state decides (idle: nothing was kept; busy: the run goes on, silently).
const FIRST_MESSAGE: Duration = Duration::from_secs(5);
/// How often the kernel is looked at while the run is silent.
const LOOK_EVERY: Duration = Duration::from_secs(5);
/// After the kernel said idle, how long the reply may still take (it is answered on shell).
const REPLY_AFTER_IDLE: Duration = Duration::from_secs(1);
/// After an interrupt at the deadline, how long outputs may still trickle in.
const SETTLE_AFTER_INTERRUPT: Duration = Duration::from_secs(1);

/// Opens the socket on the run's session, so the server replays what it kept (before anyone
/// else connects to the kernel, which would make it drop them).
pub async fn reopen(rest: &JupyterRest, sent: &Sent) -> Result<Resuming, ResumeError> {
    let socket = Socket::connect(
        rest,
        &sent.kernel_id,
        &sent.session_id,
        sent.v1,
        FIRST_MESSAGE,
    )
    .await
    .map_err(|e| match e {
        super::ConnectError::NotFound(_) => ResumeError::KernelGone(sent.kernel_id.clone()),
        other => ResumeError::Unreachable {
            kernel_id: sent.kernel_id.clone(),
            reason: other.to_string(),
        },
    })?;
    Ok(Resuming {
        socket,
        rest: rest.clone(),
        sent: sent.clone(),
    })
}

/// A socket reopened on a run's session, to be followed to the run's end.
pub struct Resuming {
    socket: Socket,
    rest: JupyterRest,
    sent: Sent,
}

impl Resuming {
    /// Reads the run's messages until the kernel is idle after it, starting from the outputs the
    /// previous process had kept; at `deadline` (the run's own timeout) the kernel is
    /// interrupted, as the previous process would have. `on_output` hears the outputs so far.
    pub async fn follow(
        mut self,
        outputs: Vec<Output>,
        deadline: tokio::time::Instant,
        on_output: impl Fn(&[Output], OutputEpoch),
    ) -> Result<ExecutionOutcome, ResumeError> {
        let began = tokio::time::Instant::now();
        let kernel_id = self.sent.kernel_id.clone();
        let mut state = ReplyState::resumed(outputs);
        let mut heard = false;
        let mut completion = Completion::Finished;
        let mut settle: Option<tokio::time::Instant> = None;
        let mut look = tokio::time::interval_at(began + FIRST_MESSAGE, LOOK_EVERY);
        while !state.done() {
            let wake = settle.unwrap_or(deadline);
            tokio::select! {
                frame = self.socket.ws.next() => {
                    let frame = match frame {
                        Some(Ok(frame)) => frame,
                        Some(Err(e)) => return Err(self.unreachable(e.to_string())),
                        None => return Err(self.unreachable("the server closed the socket".into())),
                    };
                    let Ok(Some(message)) = self.socket.decode(frame) else { continue };
                    if message.parent_msg_id() != Some(self.sent.msg_id.as_str()) {
                        continue;
                    }
                    heard = true;
                    match state.hear(&message.channel, message.msg_type(), &message.content) {
                        Heard::Status { idle: true } if settle.is_none() => {
                            settle = Some(tokio::time::Instant::now() + REPLY_AFTER_IDLE);
                        }
                        Heard::Output { changed: true } => {
                            on_output(state.collector.outputs(), state.collector.epoch())
                        }
                        _ => {}
                    }
                }
                _ = look.tick(), if settle.is_none() => {
                    match self.rest.get_kernel(&kernel_id).await {
                        Err(RestError::NotFound { .. }) => return Err(ResumeError::KernelGone(kernel_id)),
                        Err(e) => return Err(self.unreachable(e.to_string())),
                        Ok(model) if !heard && model.execution_state.as_deref() == Some("idle") => {
                            return Err(ResumeError::NothingKept(kernel_id));
                        }
                        Ok(_) => {}
                    }
                }
                _ = tokio::time::sleep_until(wake) => {
                    if settle.is_some() {
                        break;
                    }
                    completion = Completion::TimedOut;
                    if let Err(e) = self.rest.interrupt_kernel(&kernel_id).await {
                        tracing::warn!(kernel = %kernel_id, "could not interrupt a resumed run at its timeout: {e}");
                    }
                    settle = Some(tokio::time::Instant::now() + SETTLE_AFTER_INTERRUPT);
                }
            }
        }
        Ok(state.finish(completion, began.elapsed(), |_| None))
    }

    fn unreachable(&self, reason: String) -> ResumeError {
        ResumeError::Unreachable {
            kernel_id: self.sent.kernel_id.clone(),
            reason,
        }
    }
}

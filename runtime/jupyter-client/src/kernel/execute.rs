//! Running code: one queue per kernel, and the execute-reply state machine; outputs are
//! collected by [`super::collector`].

use std::sync::Arc;
use std::time::{Duration, Instant};

use serde_json::{Value, json};
use tokio_util::sync::CancellationToken;

use super::collector::OutputCollector;
pub use super::collector::{OutputEpoch, OutputsCopy};
use super::connection::{GoneReason, Routed};
use notebook_format::outputs::Output;

/// How often a running execution reports its outputs (see `ExecutionRequest::on_output`).
const OUTPUT_REPORT: Duration = Duration::from_millis(25);

/// What the kernel has said about one request so far: its outputs, its `execute_reply` and
/// whether it went idle after it. Live runs and resumed runs read their messages into it alike;
/// only how long each waits differs.
#[derive(Debug, Default)]
pub(super) struct ReplyState {
    pub collector: OutputCollector,
    pub reply_status: Option<String>,
    pub user_expressions: Option<Value>,
    pub idle: bool,
}

/// What one message told a [`ReplyState`].
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(super) enum Heard {
    /// The `execute_reply`.
    Reply,
    /// A status: `idle` says whether the kernel is now idle.
    Status { idle: bool },
    /// An output message, and whether the outputs changed.
    Output { changed: bool },
    /// Anything else, for the run or not.
    Other,
}

impl ReplyState {
    pub fn resumed(outputs: Vec<Output>) -> Self {
        ReplyState {
            collector: OutputCollector::resumed(outputs),
            ..ReplyState::default()
        }
    }

    /// Reads one message the kernel sent in answer to the request.
    pub fn hear(&mut self, channel: &str, msg_type: &str, content: &Value) -> Heard {
        match (channel, msg_type) {
            ("shell", "execute_reply") => {
                self.reply_status = content
                    .get("status")
                    .and_then(Value::as_str)
                    .map(str::to_owned);
                self.user_expressions = content.get("user_expressions").cloned();
                if let Some(n) = content.get("execution_count").and_then(Value::as_i64) {
                    self.collector.execution_count = Some(n);
                }
                Heard::Reply
            }
            ("iopub", "status") => {
                self.idle = content.get("execution_state").and_then(Value::as_str) == Some("idle");
                Heard::Status { idle: self.idle }
            }
            // `execute_input` is one too: the collector takes its execution count.
            ("iopub", msg_type) => Heard::Output {
                changed: self.collector.apply(msg_type, content),
            },
            _ => Heard::Other,
        }
    }

    /// The kernel replied and went idle: nothing more will come.
    pub fn done(&self) -> bool {
        self.idle && self.reply_status.is_some()
    }

    /// The outcome, once the run ended as `completion` after `elapsed`.
    pub fn finish(
        self,
        completion: Completion,
        elapsed: Duration,
        widgets: impl FnOnce(&[Output]) -> Option<Value>,
    ) -> ExecutionOutcome {
        let execution_count = self.collector.execution_count;
        let outputs = self.collector.into_outputs();
        ExecutionOutcome {
            execution_count,
            widgets: widgets(&outputs),
            outputs,
            reply_status: self.reply_status,
            completion,
            elapsed,
            user_expressions: self.user_expressions,
        }
    }
}

/// How an execution ended.
#[derive(Debug, Clone, Copy, PartialEq, Eq, serde::Serialize, serde::Deserialize)]
pub enum Completion {
    /// The kernel replied and went idle.
    Finished,
    /// The timeout passed; the kernel was interrupted.
    TimedOut,
    /// The caller cancelled; the kernel was interrupted.
    Cancelled,
}

#[derive(Debug, Clone, serde::Serialize, serde::Deserialize)]
pub struct ExecutionOutcome {
    pub outputs: Vec<Output>,
    pub execution_count: Option<i64>,
    /// `ok`, `error` or `aborted` from `execute_reply`, when it came.
    pub reply_status: Option<String>,
    pub completion: Completion,
    /// Time from the request leaving our queue to its end.
    pub elapsed: Duration,
    /// The `user_expressions` of `execute_reply`: each name's evaluated result.
    pub user_expressions: Option<Value>,
    /// The widget state (nbformat's) of the widgets the outputs show, when they show any.
    pub widgets: Option<Value>,
}

/// Progress of a running execution, reported every interval.
#[derive(Debug, Clone, Copy)]
pub struct Progress {
    pub elapsed: Duration,
    pub timeout: Duration,
    pub output_count: usize,
    /// Still waiting for a kernel being started to answer (`timeout` is then the kernel start
    /// timeout), not yet running the code.
    pub starting: bool,
}

pub type ProgressSink = Arc<dyn Fn(Progress) + Send + Sync>;

/// Updates while an execution runs (for writing outputs into a notebook as they arrive): the
/// outputs so far, the execution count, and which clear they follow.
pub type OutputSink = Arc<dyn Fn(&[Output], Option<i64>, OutputEpoch) + Send + Sync>;

/// Where an execute request went: enough for another process to find its messages again (the
/// Jupyter Server keeps a closed socket's messages for the next socket on the same session).
#[derive(Debug, Clone, PartialEq, Eq, serde::Serialize, serde::Deserialize)]
pub struct Sent {
    pub kernel_id: String,
    pub session_id: String,
    pub msg_id: String,
    /// Whether the socket speaks the v1 protocol (a replay must be asked for on the same one).
    pub v1: bool,
}

/// Told once the request is on its way to the kernel.
pub type SentSink = Arc<dyn Fn(&Sent) + Send + Sync>;

pub struct ExecutionRequest {
    pub code: String,
    pub timeout: Duration,
    pub cancel: CancellationToken,
    pub progress: Option<(Duration, ProgressSink)>,
    pub on_output: Option<OutputSink>,
    pub on_sent: Option<SentSink>,
    /// A silent request: no execution count, no history, nothing broadcast as a result
    /// (used to look at the kernel without changing what the user sees).
    pub silent: bool,
    /// Expressions the kernel evaluates after the code, answered in the reply, by name.
    pub user_expressions: serde_json::Map<String, Value>,
    /// Refuse (`ExecuteError::Busy`) instead of queueing behind another execution.
    pub only_if_idle: bool,
}

impl ExecutionRequest {
    pub fn new(code: impl Into<String>, timeout: Duration) -> Self {
        ExecutionRequest {
            code: code.into(),
            timeout,
            cancel: CancellationToken::new(),
            progress: None,
            on_output: None,
            on_sent: None,
            silent: false,
            user_expressions: serde_json::Map::new(),
            only_if_idle: false,
        }
    }
}

/// Why an execution could not give a result.
#[derive(Debug, thiserror::Error)]
pub enum ExecuteError {
    #[error(
        "kernel '{kernel_id}' {reason}; its state (every variable, import and definition) is lost"
    )]
    Gone {
        kernel_id: String,
        reason: GoneReason,
    },
    #[error("kernel '{kernel_id}' is busy running another execution")]
    Busy { kernel_id: String },
    #[error(
        "kernel '{kernel_id}' did not answer within {seconds} s (--kernel-start-timeout) of being \
         started or connected to; on a cluster its pod may still be being scheduled or its image \
         pulled: try again later, or raise --kernel-start-timeout"
    )]
    NotAnswering { kernel_id: String, seconds: u64 },
}

/// After the reply, how long we wait for the kernel's idle status before answering anyway.
const IDLE_AFTER_REPLY: Duration = Duration::from_secs(3);

/// After an interrupt, how long outputs may still trickle in before we answer.
const SETTLE_AFTER_INTERRUPT: Duration = Duration::from_secs(1);

/// Runs one request to its end on a connection the caller has exclusive use of (the queue).
pub(super) async fn run(
    kernel: &super::Kernel,
    request: ExecutionRequest,
) -> Result<ExecutionOutcome, ExecuteError> {
    let connection = kernel.connection();
    let gone = |reason| ExecuteError::Gone {
        kernel_id: kernel.id().to_owned(),
        reason,
    };
    let started = Instant::now();
    let (msg_id, mut replies) = connection.request(
        "shell",
        "execute_request",
        json!({
            "code": request.code,
            "silent": request.silent,
            "store_history": !request.silent,
            "user_expressions": request.user_expressions,
            "allow_stdin": false,
            "stop_on_error": true,
        }),
    );
    let _route = RouteGuard {
        kernel,
        msg_id: &msg_id,
    };
    if let Some(sink) = &request.on_sent {
        sink(&Sent {
            kernel_id: kernel.id().to_owned(),
            session_id: connection.session_id().to_owned(),
            msg_id: msg_id.clone(),
            v1: connection.v1(),
        });
    }

    let mut state = ReplyState::default();
    let mut completion = Completion::Finished;
    // Once interrupted, wait only a short while for the tail of the outputs.
    let mut settle_deadline: Option<tokio::time::Instant> = None;
    let deadline = tokio::time::Instant::now() + request.timeout;
    let mut ticker = request.progress.as_ref().map(|(every, _)| {
        let every = (*every).max(Duration::from_millis(100));
        tokio::time::interval_at(tokio::time::Instant::now() + every, every)
    });

    let mut output_due: Option<tokio::time::Instant> = None;

    while !state.done() {
        let wake = settle_deadline.unwrap_or(deadline);
        tokio::select! {
            _ = tokio::time::sleep_until(output_due.unwrap_or(wake)), if output_due.is_some() => {
                output_due = None;
                if let Some(sink) = &request.on_output {
                    let collector = &state.collector;
                    sink(collector.outputs(), collector.execution_count, collector.epoch());
                }
            }
            routed = replies.recv() => match routed {
                Some(Routed::Message(message)) => {
                    match state.hear(&message.channel, message.msg_type(), &message.content) {
                        // The idle status normally follows within milliseconds; if iopub lost
                        // it (a channel reconnecting), do not wait for the full timeout.
                        Heard::Reply if settle_deadline.is_none() => {
                            settle_deadline = Some(tokio::time::Instant::now() + IDLE_AFTER_REPLY);
                        }
                        // A chatty kernel sends thousands of messages a second; copying every
                        // state out would be quadratic. Report at most every OUTPUT_REPORT.
                        Heard::Output { changed: true } if request.on_output.is_some() => {
                            output_due.get_or_insert(tokio::time::Instant::now() + OUTPUT_REPORT);
                        }
                        _ => {}
                    }
                }
                Some(Routed::Gone(reason)) => return Err(gone(reason)),
                None => return Err(gone(GoneReason::Deleted)),
            },
            _ = tokio::time::sleep_until(wake) => {
                if settle_deadline.is_some() {
                    break;
                }
                completion = Completion::TimedOut;
                if let Some(reason) = kernel.interrupt_or_gone().await {
                    return Err(gone(reason));
                }
                settle_deadline = Some(tokio::time::Instant::now() + SETTLE_AFTER_INTERRUPT);
            }
            _ = request.cancel.cancelled(), if settle_deadline.is_none() => {
                completion = Completion::Cancelled;
                if let Some(reason) = kernel.interrupt_or_gone().await {
                    return Err(gone(reason));
                }
                settle_deadline = Some(tokio::time::Instant::now() + SETTLE_AFTER_INTERRUPT);
            }
            _ = async { ticker.as_mut().expect("guarded").tick().await }, if ticker.is_some() => {
                if let Some((_, sink)) = &request.progress {
                    sink(Progress {
                        elapsed: started.elapsed(),
                        timeout: request.timeout,
                        output_count: state.collector.outputs().len(),
                        starting: false,
                    });
                }
            }
        }
    }
    Ok(state.finish(completion, started.elapsed(), |outputs| {
        connection.widget_state(outputs, None)
    }))
}

/// Stops routing a request's messages however its execution ends.
struct RouteGuard<'a> {
    kernel: &'a super::Kernel,
    msg_id: &'a str,
}

impl Drop for RouteGuard<'_> {
    fn drop(&mut self) {
        self.kernel.connection().forget(self.msg_id);
    }
}

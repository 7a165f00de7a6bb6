//! Where an execution runs and how it stands: the two facts every answer about it names.

use std::time::Duration;

use serde::{Deserialize, Serialize};

use super::super::execution::{Completion, Executed};
use super::super::{Error, Message};
use notebook_format::outputs::Output;

/// Where an execution runs.
#[derive(Debug, Clone, Serialize, Deserialize)]
#[serde(tag = "kind", rename_all = "snake_case")]
pub enum Place {
    /// execute_code: a kernel, described as the caller named it.
    Code { kernel: String },
    /// A notebook cell, whose outputs are written into the notebook as they come.
    Cell {
        notebook: String,
        path: String,
        cell_id: String,
        index: usize,
    },
}

impl Place {
    pub fn describe(&self) -> String {
        match self {
            Place::Code { kernel } => kernel.clone(),
            Place::Cell {
                notebook,
                path,
                cell_id,
                index,
            } => format!("cell {index} (id {cell_id}) of notebook '{notebook}' ({path})"),
        }
    }
}

/// How an execution stands.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(tag = "state", content = "reason", rename_all = "snake_case")]
pub enum State {
    Running,
    Finished,
    /// The code raised, or the run could not happen; the reason says which.
    Failed(Message),
    /// Stopped by an interrupt, a timeout or a cancellation.
    Interrupted(Message),
    /// Its end will never be known: the server restarted while it ran, and it could not be
    /// followed again (the reason says why).
    Lost(Message),
}

impl State {
    pub fn name(&self) -> &'static str {
        match self {
            State::Running => "running",
            State::Finished => "finished",
            State::Failed(_) => "failed",
            State::Interrupted(_) => "interrupted",
            State::Lost(_) => "lost",
        }
    }

    pub fn reason(&self) -> Option<&Message> {
        match self {
            State::Failed(r) | State::Interrupted(r) | State::Lost(r) => Some(r),
            State::Running | State::Finished => None,
        }
    }

    pub(super) fn of(result: &Result<Executed, Error>, timeout: Duration) -> State {
        let executed = match result {
            Ok(executed) => executed,
            Err(e) => return State::Failed(e.message().clone()),
        };
        match executed.outcome.completion {
            Completion::TimedOut => {
                return State::Interrupted(
                    format!(
                        "it ran past its timeout of {:.0}s and the kernel was interrupted",
                        timeout.as_secs_f64()
                    )
                    .into(),
                );
            }
            Completion::Cancelled => {
                return State::Interrupted("the call was cancelled".into());
            }
            Completion::Finished => {}
        }
        let raised = executed.outcome.outputs.iter().find_map(|o| match o {
            Output::Error { ename, evalue, .. } => Some((ename, evalue)),
            _ => None,
        });
        match raised {
            None => State::Finished,
            Some((ename, evalue)) => {
                if ename == "KeyboardInterrupt" {
                    State::Interrupted("the kernel was interrupted (KeyboardInterrupt)".into())
                } else {
                    State::Failed(format!("the code raised {ename}: {evalue}").into())
                }
            }
        }
    }
}

//! At start, the runs a previous process of ours recorded as running: followed again when their
//! kernel still runs (the Jupyter Server replays what the kernel sent to the closed socket of
//! the run's session, and the rest comes live), else ended as `lost` with the reason. Either way
//! get_execution answers for them: nothing this server handed out is ever unknown.

use std::sync::Arc;
use std::time::{Duration, SystemTime};

use super::store::{Record, outcome_of};
use super::{Execution, State};
use crate::domain::Domain;
use crate::domain::execution::Executed;
use crate::jupyter::kernel::resume::{self, ResumeError};

/// The note a followed-again run's answer starts with.
pub const RESUMED_NOTE: &str = "[This run was followed again after the MCP server restarted: \
     output that reached the previous process in its last second may be missing.]";

/// How long the reopening of every run's socket may hold the start.
const REOPEN_WITHIN: Duration = Duration::from_secs(15);

impl Domain {
    /// Follows again, or reports lost, every run the store shows running that this process did
    /// not start. Returns once each run's socket is reopened (so the Jupyter Server's kept
    /// messages are ours before anyone else connects to the kernel); following happens in the
    /// background.
    pub async fn resume_executions(self: &Arc<Self>) {
        let Some(scope) = self.executions.scope().cloned() else {
            return;
        };
        let left: Vec<Record> = scope
            .list()
            .into_iter()
            .filter(|record| record.end.is_none())
            .filter(|record| !self.executions.in_memory(&record.id))
            .collect();
        if left.is_empty() {
            return;
        }
        tracing::info!(
            "{} execution(s) were running when the server last stopped; following them again",
            left.len()
        );
        let resumed = left.into_iter().map(|record| self.resume_one(record));
        if tokio::time::timeout(REOPEN_WITHIN, futures_util::future::join_all(resumed))
            .await
            .is_err()
        {
            tracing::warn!("reopening the runs left by the previous process took too long");
        }
    }

    async fn resume_one(self: &Arc<Self>, record: Record) {
        let Some(sent) = record.sent.clone() else {
            let execution = self.executions.adopt(record);
            lose(
                &execution,
                "the server restarted before the run reached a kernel, so whether it ran is not \
                 known"
                    .to_owned(),
            );
            return;
        };
        let rest = self.jupyter().rest().clone();
        let outputs = record.outputs.clone();
        let started = super::record_started(&record);
        let timeout = record.timeout;
        let execution = self.executions.adopt(record);
        let resuming = match resume::reopen(&rest, &sent).await {
            Ok(resuming) => resuming,
            Err(e) => {
                lose(&execution, lost_reason(&e));
                return;
            }
        };
        tracing::info!(execution = %execution.id, kernel = %sent.kernel_id, "following a run again");
        let left = (started + timeout)
            .duration_since(SystemTime::now())
            .unwrap_or_default();
        let deadline = tokio::time::Instant::now() + left;
        tokio::spawn(async move {
            let sink = execution.output_sink();
            let followed = resuming
                .follow(outputs, deadline, |outputs| sink(outputs, None))
                .await;
            match followed {
                Ok(outcome) => {
                    execution.finish(Ok(Executed {
                        outcome,
                        replaced: Some(RESUMED_NOTE.to_owned()),
                    }));
                }
                Err(e) => lose(&execution, lost_reason(&e)),
            }
        });
    }
}

fn lost_reason(error: &ResumeError) -> String {
    match error {
        ResumeError::KernelGone(_) => format!("the server restarted and {error}"),
        _ => format!("the server restarted and the run's outputs could not be recovered: {error}"),
    }
}

/// Ends a run as lost, with the outputs the previous process had written.
fn lose(execution: &Execution, reason: String) {
    tracing::info!(execution = %execution.id, "execution lost: {reason}");
    let outputs = execution.snapshot().outputs;
    execution.finish_as(
        Ok(Executed {
            outcome: outcome_of(outputs, execution.clock.elapsed()),
            replaced: None,
        }),
        State::Lost(reason),
    );
}

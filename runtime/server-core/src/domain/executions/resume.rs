//! At start, the runs a previous process of ours recorded as running: followed again when their
//! kernel still runs (the Jupyter Server replays what the kernel sent to the closed socket of
//! the run's session, and the rest comes live), else ended as `lost` with the reason. Either way
//! get_execution answers for them: nothing this server handed out is ever unknown. With a store
//! replicas share, the same happens while serving to the runs of a replica that stopped (its
//! liveness mark expired), in whichever replica claims each first.

use std::sync::Arc;
use std::time::{Duration, SystemTime};

use super::store::{Record, outcome_of};
use super::{Execution, Place, State};
use crate::domain::Domain;
use crate::domain::execution::Executed;
use jupyter_client::kernel::resume::{self, ResumeError};

/// The note a followed-again run's answer starts with.
fn resumed_note(shared: bool) -> String {
    let after = if shared {
        "the replica of the MCP server running it stopped"
    } else {
        "the MCP server restarted"
    };
    format!(
        "[This run was followed again after {after}: output that reached the previous process \
         in its last second may be missing.]"
    )
}

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
            .running()
            .into_iter()
            .filter(|record| !self.executions.in_memory(&record.id))
            .filter(|record| !scope.store.followed_elsewhere(record))
            .filter(|record| scope.store.claim_follow(&scope.owner, &record.id))
            .collect();
        if left.is_empty() {
            return;
        }
        let shared = scope.store.shared();
        tracing::info!(
            "{} execution(s) were running when {} stopped; following them again",
            left.len(),
            if shared {
                "the replica running them"
            } else {
                "the server last"
            }
        );
        let resumed = left
            .into_iter()
            .map(|record| self.resume_one(record, shared));
        if tokio::time::timeout(REOPEN_WITHIN, futures_util::future::join_all(resumed))
            .await
            .is_err()
        {
            tracing::warn!("reopening the runs left by the previous process took too long");
        }
    }

    async fn resume_one(self: &Arc<Self>, record: Record, shared: bool) {
        let stopped = if shared {
            "the replica running it stopped"
        } else {
            "the server restarted"
        };
        let Some(sent) = record.sent.clone() else {
            let execution = self.executions.adopt(record);
            lose(
                &execution,
                format!(
                    "{stopped} before the run reached a kernel, so whether it ran is not known"
                ),
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
                lose(&execution, lost_reason(stopped, &e));
                return;
            }
        };
        tracing::info!(execution = %execution.id, kernel = %sent.kernel_id, "following a run again");
        let left = (started + timeout)
            .duration_since(SystemTime::now())
            .unwrap_or_default();
        let deadline = tokio::time::Instant::now() + left;
        let domain = self.clone();
        tokio::spawn(async move {
            let sink = execution.output_sink();
            let followed = resuming
                .follow(outputs, deadline, |outputs, epoch| {
                    sink(outputs, None, epoch)
                })
                .await;
            match followed {
                Ok(outcome) => {
                    // A cell's outputs go into the notebook, as they would have in the process
                    // that started the run.
                    if let Place::Cell { path, cell_id, .. } = &execution.place {
                        let written = domain
                            .write_cell_outputs(
                                path,
                                cell_id,
                                outcome.outputs.clone(),
                                outcome.execution_count,
                            )
                            .await;
                        if let Err(e) = written {
                            tracing::warn!(
                                execution = %execution.id,
                                "the outputs of a run followed again could not be written into \
                                 cell {cell_id} of '{path}': {}", e.message()
                            );
                        }
                    }
                    execution.finish(Ok(Executed {
                        outcome,
                        replaced: Some(resumed_note(shared)),
                    }));
                }
                Err(e) => lose(&execution, lost_reason(stopped, &e)),
            }
        });
    }
}

fn lost_reason(stopped: &str, error: &ResumeError) -> String {
    match error {
        ResumeError::KernelGone(_) => format!("{stopped} and {error}"),
        _ => format!("{stopped} and the run's outputs could not be recovered: {error}"),
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
        State::Lost(reason.into()),
    );
}

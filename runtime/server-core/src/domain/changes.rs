//! What changed in a notebook since a revision this server handed out, optionally waiting for
//! someone else to change it: the person–agent loop without polling.
//!
//! A wait ends as soon as anyone but this agent changed the notebook (heard from the room at
//! once, from the file within a second), at its deadline, or when the call is cancelled; changes
//! the agent makes meanwhile are reported but do not end it.

use std::time::Duration;

use tokio::time::Instant;
use tokio_util::sync::CancellationToken;

use super::Error;
use super::notebooks::NotebookInUse;
use super::notebooks::revisions::{Author, Authored, Since};
use notebook_format::notebook::Notebook;

/// How often a wait looks at the document when the backend cannot say when others change it.
const LOOK_WITHOUT_SIGNAL: Duration = Duration::from_secs(1);

/// The answer to "what changed since": the changes (or why they cannot be told), the notebook as
/// it is now, and the revision to pass next time.
pub struct Looked {
    pub changes: Result<Authored, Since>,
    pub notebook: Notebook,
    pub revision: String,
    pub waited: Duration,
    /// The wait ended because the call was cancelled.
    pub cancelled: bool,
}

impl Looked {
    /// Whether anyone but this agent changed the notebook.
    pub fn by_others(&self) -> bool {
        self.changes
            .as_ref()
            .is_ok_and(|changes| changes.iter().any(|(_, by)| *by != Author::ThisAgent))
    }
}

/// The changes to `in_use` since revision `since`; with `wait`, waits up to that long for
/// someone else to make one, calling `progress` with the time waited every `heartbeat`.
pub async fn since(
    in_use: &NotebookInUse,
    since: &str,
    wait: Duration,
    cancel: &CancellationToken,
    heartbeat: Duration,
    progress: &(dyn Fn(Duration) + Send + Sync),
) -> Result<Looked, Error> {
    let began = Instant::now();
    let deadline = began + wait;
    let mut others = in_use.document.changes_by_others();
    let mut cancelled = false;
    loop {
        if let Some(others) = others.as_mut() {
            others.borrow_and_update();
        }
        in_use.revisions.looking();
        let notebook = in_use.document.read().await?;
        let (changes, snapshot) = in_use
            .revisions
            .since(since, &notebook, &|id| in_use.others_author(id));
        let done = match &changes {
            Err(_) => true,
            Ok(changes) => {
                cancelled
                    || Instant::now() >= deadline
                    || changes.iter().any(|(_, by)| *by != Author::ThisAgent)
            }
        };
        if done {
            let revision = in_use.revisions.told(snapshot);
            return Ok(Looked {
                changes,
                notebook,
                revision,
                waited: began.elapsed(),
                cancelled,
            });
        }
        let next_beat = Instant::now() + heartbeat.max(Duration::from_millis(100));
        let heard = async {
            match others.as_mut() {
                Some(others) => {
                    if others.changed().await.is_err() {
                        // The document no longer hears others: look now and then instead.
                        tokio::time::sleep(LOOK_WITHOUT_SIGNAL).await;
                    }
                }
                None => tokio::time::sleep(LOOK_WITHOUT_SIGNAL).await,
            }
        };
        tokio::select! {
            () = heard => {}
            () = tokio::time::sleep_until(deadline) => {}
            () = tokio::time::sleep_until(next_beat) => progress(began.elapsed()),
            () = cancel.cancelled() => cancelled = true,
        }
    }
}

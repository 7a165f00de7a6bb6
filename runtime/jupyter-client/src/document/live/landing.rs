//! Whether our changes land on disk. The room saves its file a moment after the last change, but
//! tells nobody when a save fails (the file deleted, moved or made read-only): every later edit
//! would read as fine while it is in no file. So after each burst of our changes, once the room
//! should have saved, the file is looked at once through the contents API; a file gone, or not
//! written since, is a problem every edit then reports, until a later look finds it saved.

use std::sync::{Arc, Mutex};
use std::time::Duration;

use tokio::sync::watch;
use tokio::time::Instant;

use crate::rest::{JupyterRest, RestError};

/// How long past the room's save delay a change may wait for its save before the file is looked
/// at (the room saves `document_save_delay` after the last change, 1 s by default).
const LOOK_AFTER: Duration = Duration::from_secs(6);
/// A pause between two of our changes long enough for the room to have saved the first.
const SAVE_PAUSE: Duration = Duration::from_millis(900);

pub(super) struct Landing {
    changed: watch::Sender<Option<Instant>>,
    problem: Arc<Mutex<Option<String>>>,
    watcher: tokio::task::JoinHandle<()>,
}

impl Drop for Landing {
    fn drop(&mut self) {
        self.watcher.abort();
    }
}

impl Landing {
    pub(super) fn watch(rest: JupyterRest, path: String) -> Self {
        let (changed, changes) = watch::channel(None);
        let problem = Arc::new(Mutex::new(None));
        let watcher = tokio::spawn(look_after_changes(rest, path, changes, problem.clone()));
        Landing {
            changed,
            problem,
            watcher,
        }
    }

    /// We changed the document just now.
    pub(super) fn changed(&self) {
        self.changed.send_replace(Some(Instant::now()));
    }

    /// Why our changes are not reaching the file, as last seen.
    pub(super) fn problem(&self) -> Option<String> {
        self.problem.lock().expect("landing lock").clone()
    }
}

async fn look_after_changes(
    rest: JupyterRest,
    path: String,
    mut changes: watch::Receiver<Option<Instant>>,
    problem: Arc<Mutex<Option<String>>>,
) {
    loop {
        if changes.changed().await.is_err() {
            return;
        }
        // The file as it was when the burst began: a save changes its modification time.
        let mut before = modified(&rest, &path).await;
        let mut previous: Option<Instant> = None;
        // Until no change of ours has come for LOOK_AFTER.
        loop {
            let last = changes.borrow_and_update().unwrap_or_else(Instant::now);
            // A change after a pause the room may have saved in: judged from the file as it is
            // now, so a save that landed for the earlier changes does not vouch for this one.
            if previous.is_some_and(|previous| last.duration_since(previous) >= SAVE_PAUSE) {
                let now = modified(&rest, &path).await;
                if matches!((&before, &now), (Ok(then), Ok(now)) if then != now) {
                    before = now;
                }
            }
            previous = Some(last);
            tokio::select! {
                _ = tokio::time::sleep_until(last + LOOK_AFTER) => {
                    if !changes.has_changed().unwrap_or(false) {
                        break;
                    }
                }
                changed = changes.changed() => if changed.is_err() { return },
            }
        }
        let seen = match (before, modified(&rest, &path).await) {
            (_, Err(RestError::NotFound { .. })) => Some(
                "the notebook file is gone from disk (deleted or moved), so the collaboration \
                 room cannot save to it"
                    .to_owned(),
            ),
            (Ok(Some(then)), Ok(Some(now))) if then == now => Some(format!(
                "the collaboration room has not written the file in the {} s since this \
                 notebook's last change (read-only, or its disk full?)",
                LOOK_AFTER.as_secs()
            )),
            // Could not look: nothing is known either way.
            (_, Err(_)) => continue,
            _ => None,
        };
        if let Some(reason) = &seen {
            tracing::warn!("'{path}': our changes are not reaching the file: {reason}");
        }
        *problem.lock().expect("landing lock") = seen;
    }
}

/// The file's modification time as the contents API gives it.
async fn modified(rest: &JupyterRest, path: &str) -> Result<Option<String>, RestError> {
    Ok(rest.get_contents(path, false).await?.last_modified)
}

//! Hearing of other programs' saves of a notebook the file backend edits: no event tells, so
//! the file's timestamp is looked at every [`LOOK_EVERY`] (a cheap request), and its hash only
//! when the timestamp moved. A hash that is not the one of our own last read or write is someone
//! else's save. Looks stop once nobody listens or the document is gone.

use std::sync::{Arc, Weak};
use std::time::Duration;

use tokio::sync::watch;

use super::Inner;

/// How often the file's timestamp is looked at while someone listens.
const LOOK_EVERY: Duration = Duration::from_secs(1);

/// Counts other programs' saves; starts looking on the first listener.
#[derive(Default)]
pub(super) struct OthersSaves {
    counter: Arc<watch::Sender<u64>>,
    looking: std::sync::atomic::AtomicBool,
}

impl OthersSaves {
    pub(super) fn listen(&self, inner: &Arc<Inner>) -> watch::Receiver<u64> {
        let heard = self.counter.subscribe();
        if !self.looking.swap(true, std::sync::atomic::Ordering::SeqCst) {
            tokio::spawn(look(Arc::downgrade(inner), self.counter.clone()));
        }
        heard
    }
}

async fn look(inner: Weak<Inner>, counter: Arc<watch::Sender<u64>>) {
    let mut stamp: Option<String> = None;
    loop {
        tokio::time::sleep(LOOK_EVERY).await;
        let Some(inner) = inner.upgrade() else { return };
        if counter.receiver_count() == 0 {
            inner
                .others
                .looking
                .store(false, std::sync::atomic::Ordering::SeqCst);
            return;
        }
        let Ok(model) = inner.rest.get_contents(&inner.path, false).await else {
            continue;
        };
        if model.last_modified.is_none() || model.last_modified == stamp {
            continue;
        }
        // An edit of ours in progress (it holds the state): look again next time.
        let Ok(state) = inner.state.try_lock() else {
            continue;
        };
        let ours = state.known.as_ref().map(|(_, hash)| hash.clone());
        drop(state);
        let Ok(hash) = inner.rest.get_file_hash(&inner.path).await else {
            continue;
        };
        let first_look = stamp.is_none();
        stamp = model.last_modified;
        if !first_look && ours.as_deref() != Some(hash.as_str()) {
            counter.send_modify(|saves| *saves += 1);
        }
    }
}

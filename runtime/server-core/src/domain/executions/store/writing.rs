//! The file store's writer when writing fails: redb refuses every operation after an I/O error
//! (a full disk, a failing device) until the file is opened again, so the writer reopens it and
//! tries again, keeping what it could not write.

use std::path::Path;
use std::sync::{Arc, Mutex, PoisonError, RwLock};
use std::time::{Duration, SystemTime};

use redb::Database;

use super::super::records::latest_only;
use super::{Record, StoreError, open_database, put_all};

/// The open database, which the writer replaces when a write failed (redb refuses every
/// operation after an I/O error, such as a full disk, until the file is opened again), and why
/// the store is failing meanwhile.
#[derive(Default)]
pub(super) struct Slot {
    db: RwLock<Option<Arc<Database>>>,
    failing: Mutex<Option<(SystemTime, String)>>,
}

impl Slot {
    pub(super) fn new(db: Database) -> Slot {
        Slot {
            db: RwLock::new(Some(Arc::new(db))),
            failing: Mutex::default(),
        }
    }

    pub(super) fn current(&self) -> Result<Arc<Database>, StoreError> {
        self.db
            .read()
            .unwrap_or_else(PoisonError::into_inner)
            .clone()
            .ok_or_else(|| {
                StoreError::Database(
                    self.failing()
                        .map(|(_, why)| format!("it is being reopened after: {why}"))
                        .unwrap_or_else(|| "it is being reopened".into()),
                )
            })
    }

    pub(super) fn failing(&self) -> Option<(SystemTime, String)> {
        self.failing
            .lock()
            .unwrap_or_else(PoisonError::into_inner)
            .clone()
    }

    /// Closes the database (once no reader holds it) and opens the file again.
    fn reopen(&self, path: &Path) -> Result<(), StoreError> {
        let old = self
            .db
            .write()
            .unwrap_or_else(PoisonError::into_inner)
            .take();
        if let Some(mut old) = old {
            for _ in 0..500 {
                match Arc::try_unwrap(old) {
                    Ok(db) => {
                        drop(db);
                        break;
                    }
                    Err(held) => {
                        old = held;
                        std::thread::sleep(Duration::from_millis(10));
                    }
                }
            }
        }
        let db = open_database(path)?;
        *self.db.write().unwrap_or_else(PoisonError::into_inner) = Some(Arc::new(db));
        Ok(())
    }
}

/// The longest wait between two tries of a failing write.
const MOST_BACKOFF: Duration = Duration::from_secs(30);

/// Writes `batch`, and while that fails (a full disk, a failing device) reopens the file and
/// tries again with a growing wait, taking what is queued meanwhile into the batch: nothing is
/// dropped while the process runs. Returns how many records were taken. Gives up only when the
/// queue closes (the store is dropped) and one more try failed.
pub(super) fn write_until_written(
    slot: &Slot,
    path: &Path,
    receiver: &std::sync::mpsc::Receiver<(String, Record)>,
    batch: &mut Vec<(String, Record)>,
) -> u64 {
    let mut taken = batch.len() as u64;
    let mut backoff = Duration::from_millis(250);
    let mut closed = false;
    loop {
        let written = slot.current().and_then(|db| put_all(&db, batch));
        match written {
            Ok(()) => {
                let was = slot
                    .failing
                    .lock()
                    .unwrap_or_else(PoisonError::into_inner)
                    .take();
                if let Some((since, why)) = was {
                    let for_s = since.elapsed().map(|d| d.as_secs()).unwrap_or(0);
                    tracing::info!(
                        "the execution store {} writes again after {for_s} s ({why}); the {} \
                         records kept in memory meanwhile are written",
                        path.display(),
                        batch.len()
                    );
                }
                return taken;
            }
            Err(e) if closed => {
                tracing::warn!(
                    "the execution store {} still fails ({e}) as the server stops: {} \
                     execution records were not written",
                    path.display(),
                    batch.len()
                );
                return taken;
            }
            Err(e) => {
                let why = e.to_string();
                {
                    let mut failing = slot.failing.lock().unwrap_or_else(PoisonError::into_inner);
                    if failing.is_none() {
                        tracing::warn!(
                            "the execution store {} cannot write ({why}); records are kept in \
                             memory and written when it can (trying again with a growing wait, \
                             up to {} s)",
                            path.display(),
                            MOST_BACKOFF.as_secs()
                        );
                        *failing = Some((SystemTime::now(), why));
                    }
                }
                match receiver.recv_timeout(backoff) {
                    Ok(record) => {
                        batch.push(record);
                        let more: Vec<_> = receiver.try_iter().collect();
                        taken += 1 + more.len() as u64;
                        batch.extend(more);
                        latest_only(batch);
                    }
                    Err(std::sync::mpsc::RecvTimeoutError::Timeout) => {}
                    Err(std::sync::mpsc::RecvTimeoutError::Disconnected) => closed = true,
                }
                backoff = (backoff * 2).min(MOST_BACKOFF);
                if let Err(e) = slot.reopen(path) {
                    tracing::debug!("the execution store did not reopen yet: {e}");
                }
            }
        }
    }
}

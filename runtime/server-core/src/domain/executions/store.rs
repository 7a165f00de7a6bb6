//! The durable side of the execution records (`--state-dir`): one redb database file,
//! `executions.redb`, in a private (0700) directory, the file itself 0600. A record is written
//! when an execution starts, when it reaches a kernel, while its outputs grow (at most once a
//! second) and when it ends; records older than the retention, and the oldest ended ones beyond
//! the size cap, are pruned at start and every few minutes.
//!
//! What is kept: where the run was (tool's place: kernel description or notebook, path, cell),
//! a hash of its code (not the code), its timeout, the idempotency key, the kernel, session and
//! message ids of its request, its outputs and how it ended. Never a token, a password or an
//! environment.
//!
//! Why redb: an embedded, pure-Rust, ACID key-value store (copy-on-write B-trees, crash-safe
//! commits, a file lock against a second writer) with no dependencies of its own, well kept and
//! widely used; SQLite would bring a C library and a SQL layer for two tables of JSON values.

use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::{Arc, Condvar, Mutex, PoisonError};
use std::time::{Duration, SystemTime, UNIX_EPOCH};

use redb::{Database, Durability, ReadableTable, TableDefinition};
use serde::{Deserialize, Serialize};

use super::records::WriterThread;
use super::{Place, State};
use crate::domain::Error;
use crate::domain::execution::Executed;
use crate::settings::StateSettings;
use jupyter_client::kernel::{ExecutionOutcome, Sent};
use notebook_format::outputs::Output;
use writing::{Slot, write_until_written};

/// owner \0 execution id → the record as JSON.
const RECORDS: TableDefinition<&str, &[u8]> = TableDefinition::new("executions");
/// owner \0 idempotency key → execution id.
const KEYS: TableDefinition<&str, &str> = TableDefinition::new("idempotency_keys");

/// The database's file name in the state directory.
pub const FILE: &str = "executions.redb";

#[derive(Debug, thiserror::Error)]
pub enum StoreError {
    #[error("the state directory {dir} cannot be used: {reason}")]
    Dir { dir: String, reason: String },
    #[error(
        "the execution store {path} is in use by another jupyter-mcp-server; give this one its \
         own --state-dir (or --state-dir none)"
    )]
    InUse { path: String },
    /// The file could not be opened at all (permissions, a symlink): left as it is.
    #[error("the execution store {path} cannot be opened: {reason}")]
    File { path: String, reason: String },
    /// The file is not a store we can read: moved aside by `Store::open`.
    #[error("the execution store {path} could not be read: {reason}")]
    Open { path: String, reason: String },
    #[error("the execution store failed: {0}")]
    Database(String),
    /// The shared store (Redis) did not answer, or refused us.
    #[error(
        "could not use the state store (Redis at {target}): {reason}. Check that it runs and \
         that --state-store names it"
    )]
    Shared { target: String, reason: String },
}

macro_rules! from_redb {
    ($($error:ty),*) => {$(
        impl From<$error> for StoreError {
            fn from(error: $error) -> Self {
                StoreError::Database(error.to_string())
            }
        }
    )*};
}

from_redb!(
    redb::StorageError,
    redb::TableError,
    redb::TransactionError,
    redb::CommitError
);

/// An execution as the store keeps it.
#[derive(Debug, Clone, Serialize, Deserialize)]
pub struct Record {
    pub id: String,
    pub place: Place,
    /// sha256 of the code, hex: enough to tell two runs apart without keeping the code.
    pub code_sha256: String,
    /// The version (hash) of the code a cell ran, for a cell run's answer.
    #[serde(default)]
    pub cell_version: Option<String>,
    pub timeout: Duration,
    pub background: bool,
    /// Milliseconds since the Unix epoch.
    pub started_ms: u64,
    pub idempotency_key: Option<String>,
    /// Where the request went, once it reached a kernel.
    pub sent: Option<Sent>,
    /// The outputs so far while it runs (once ended, the result holds them).
    pub outputs: Vec<Output>,
    pub end: Option<EndRecord>,
    /// The process that runs (or last followed) it, when records are shared by several
    /// ([`Records::runner`]); a running record whose runner stopped is another's to follow.
    #[serde(default)]
    pub runner: Option<String>,
    /// The MCP task the run's call became, so `tasks/get` is answered from the record.
    #[serde(default)]
    pub task_id: Option<String>,
}

#[derive(Debug, Clone, Serialize, Deserialize)]
pub struct EndRecord {
    pub elapsed: Duration,
    pub state: State,
    /// Shared with the record in memory: writing an ended run does not copy its outputs.
    pub result: std::sync::Arc<Result<Executed, Error>>,
}

impl Record {
    /// When it last changed as far as pruning goes: its end, else its start.
    fn settled_ms(&self) -> u64 {
        let elapsed = self.end.as_ref().map_or(0, |end| millis(end.elapsed));
        self.started_ms.saturating_add(elapsed)
    }
}

fn millis(duration: Duration) -> u64 {
    u64::try_from(duration.as_millis()).unwrap_or(u64::MAX)
}

pub fn unix_ms(time: SystemTime) -> u64 {
    time.duration_since(UNIX_EPOCH).map_or(0, millis)
}

fn row(owner: &str, id: &str) -> String {
    format!("{owner}\0{id}")
}

/// How many records a prune removed, and why.
#[derive(Debug, Default, PartialEq, Eq)]
pub struct Pruned {
    pub expired: usize,
    pub over_size: usize,
}

/// The page cache the store keeps in memory.
const STORE_CACHE_BYTES: usize = 8 << 20;

/// The database file at `path`, created when there is none. `Open` when it is not a store we
/// can read (damaged, or not redb's).
pub(super) fn open_database(path: &Path) -> Result<Database, StoreError> {
    let file = jupyter_client::private_file::open_rw(path).map_err(|e| StoreError::File {
        path: path.display().to_string(),
        reason: e.to_string(),
    })?;
    // redb caches up to 1 GiB of pages by default; records are written far more than read back,
    // so a small cache keeps the server's memory from growing with the store.
    match Database::builder()
        .set_cache_size(STORE_CACHE_BYTES)
        .create_file(file)
    {
        Ok(db) => Ok(db),
        Err(redb::DatabaseError::DatabaseAlreadyOpen) => Err(StoreError::InUse {
            path: path.display().to_string(),
        }),
        // The disk, not the file: a full disk or a failing device is no reason to move a good
        // store aside (bytes that are not a store come as invalid data).
        Err(redb::DatabaseError::Storage(redb::StorageError::Io(e)))
            if !matches!(
                e.kind(),
                std::io::ErrorKind::InvalidData | std::io::ErrorKind::UnexpectedEof
            ) =>
        {
            Err(StoreError::File {
                path: path.display().to_string(),
                reason: e.to_string(),
            })
        }
        Err(e) => Err(StoreError::Open {
            path: path.display().to_string(),
            reason: e.to_string(),
        }),
    }
}

/// The database, shared by every domain of the server (Hub mode: each user's records apart).
pub struct Store {
    db: Arc<Slot>,
    path: PathBuf,
    settings: StateSettings,
    /// Records were written since the last commit that reached the disk ([`Store::sync`]).
    unsynced: Arc<AtomicBool>,
    /// How many records were queued, and how many of those the writer has committed.
    queued: AtomicU64,
    written: Arc<(Mutex<u64>, Condvar)>,
    /// The writer thread ([`Store::enqueue`]), joined at drop: what is queued is written, and
    /// the database closed, before the store is gone.
    writer: Option<WriterThread>,
}

impl std::fmt::Debug for Store {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Store").field("path", &self.path).finish()
    }
}

impl Store {
    /// Opens (or creates) the store in `settings.dir`, made private first, and prunes it.
    pub fn open(settings: StateSettings) -> Result<Store, StoreError> {
        let dir_error = |reason: String| StoreError::Dir {
            dir: settings.dir.display().to_string(),
            reason,
        };
        jupyter_client::private_file::dir(&settings.dir, true).map_err(dir_error)?;
        let path = settings.dir.join(FILE);
        let mut db = match open_database(&path) {
            Err(StoreError::Open { reason, .. }) => {
                // An unreadable store is never emptied in place: it is kept beside, for the
                // operator to inspect, and a new one is started.
                let aside = settings
                    .dir
                    .join(format!("{FILE}.unreadable-{}", unix_ms(SystemTime::now())));
                std::fs::rename(&path, &aside).map_err(|e| StoreError::Open {
                    path: path.display().to_string(),
                    reason: format!("{reason}; moving it aside failed too: {e}"),
                })?;
                tracing::warn!(
                    "the execution store {} could not be read ({reason}); it was moved aside to \
                     {} (kept, nothing deleted) and a new store was started, so executions \
                     recorded before are not answered",
                    path.display(),
                    aside.display()
                );
                open_database(&path)?
            }
            other => other?,
        };
        let txn = db.begin_write()?;
        txn.open_table(RECORDS)?;
        txn.open_table(KEYS)?;
        txn.commit()?;
        let pruned = prune_database(&db, &settings, SystemTime::now())?;
        if pruned != Pruned::default() {
            // What a prune freed is given back to the file system only by a compaction.
            if let Err(e) = db.compact() {
                tracing::debug!("the execution store was not compacted: {e}");
            }
        }
        tracing::debug!(path = %path.display(), ?pruned, "execution store open");
        Ok(Store::over(db, path, settings).writing())
    }

    /// A store over an open database, without its writer thread yet.
    fn over(db: Database, path: PathBuf, settings: StateSettings) -> Store {
        Store {
            db: Arc::new(Slot::new(db)),
            path,
            settings,
            unsynced: Arc::default(),
            queued: AtomicU64::new(0),
            written: Arc::default(),
            writer: None,
        }
    }

    /// Starts the writer thread: queued records are committed in batches, off the callers'
    /// path (a commit is a fraction of a millisecond to a few milliseconds).
    fn writing(mut self) -> Store {
        let (slot, unsynced, written, path) = (
            self.db.clone(),
            self.unsynced.clone(),
            self.written.clone(),
            self.path.clone(),
        );
        let started = WriterThread::start("execution-store", move |receiver| {
            while let Ok(first) = receiver.recv() {
                let mut batch = vec![first];
                batch.extend(receiver.try_iter());
                let count = write_until_written(&slot, &path, &receiver, &mut batch);
                unsynced.store(true, Ordering::Release);
                let (done, changed) = &*written;
                *done.lock().unwrap_or_else(PoisonError::into_inner) += count;
                changed.notify_all();
            }
        });
        match started {
            Ok(writer) => self.writer = Some(writer),
            // Without the thread every record is written in place.
            Err(e) => tracing::warn!("the execution store writes in place (no thread: {e})"),
        }
        self
    }

    /// Why the store is failing, and since when: `None` while it writes.
    pub fn failing(&self) -> Option<(SystemTime, String)> {
        self.db.failing()
    }

    /// Queues a record for the writer thread and returns at once; written in place when there
    /// is no thread. A killed process loses what is still queued: the microseconds before the
    /// writer takes it.
    pub fn enqueue(&self, owner: &str, record: Record) -> Result<(), StoreError> {
        match &self.writer {
            Some(writer) => {
                self.queued.fetch_add(1, Ordering::AcqRel);
                if !writer.send(owner, record) {
                    self.queued.fetch_sub(1, Ordering::AcqRel);
                }
                Ok(())
            }
            None => self.put(owner, &record),
        }
    }

    /// Waits until the writer has committed every record queued before this call.
    pub fn drain(&self) {
        let target = self.queued.load(Ordering::Acquire);
        let (count, changed) = &*self.written;
        let mut written = count.lock().unwrap_or_else(PoisonError::into_inner);
        while *written < target {
            let (next, timeout) = changed
                .wait_timeout(written, Duration::from_secs(5))
                .unwrap_or_else(PoisonError::into_inner);
            written = next;
            if timeout.timed_out() {
                tracing::warn!("the execution store's writer is behind; not waiting longer");
                return;
            }
        }
    }

    pub fn path(&self) -> &Path {
        &self.path
    }

    pub fn settings(&self) -> &StateSettings {
        &self.settings
    }

    /// Writes a record (replacing the one with its id), with its idempotency key. Committed
    /// into the file before it returns, so a killed or crashed process loses nothing; the
    /// flush to the disk itself (an fsync, milliseconds) is left to [`Store::sync`], off the
    /// execution's path, so a power cut may lose the last second's records.
    pub fn put(&self, owner: &str, record: &Record) -> Result<(), StoreError> {
        put_all(&*self.db.current()?, &[(owner.to_owned(), record.clone())])?;
        self.unsynced.store(true, Ordering::Release);
        Ok(())
    }

    /// Flushes what [`Store::put`] committed to the disk, when it wrote anything since the last
    /// flush (an empty commit with immediate durability persists the eventual ones before it).
    pub fn sync(&self) -> Result<(), StoreError> {
        self.drain();
        if !self.unsynced.swap(false, Ordering::AcqRel) {
            return Ok(());
        }
        let mut txn = self.db.current()?.begin_write()?;
        txn.set_durability(Durability::Immediate);
        txn.commit()?;
        Ok(())
    }

    pub fn get(&self, owner: &str, id: &str) -> Result<Option<Record>, StoreError> {
        let txn = self.db.current()?.begin_read()?;
        let records = txn.open_table(RECORDS)?;
        let Some(bytes) = records.get(row(owner, id).as_str())? else {
            return Ok(None);
        };
        Ok(decode(bytes.value()))
    }

    /// The record an earlier call with this idempotency key began.
    pub fn by_key(&self, owner: &str, key: &str) -> Result<Option<Record>, StoreError> {
        let id = {
            let txn = self.db.current()?.begin_read()?;
            let keys = txn.open_table(KEYS)?;
            let Some(id) = keys.get(row(owner, key).as_str())? else {
                return Ok(None);
            };
            id.value().to_owned()
        };
        self.get(owner, &id)
    }

    /// Every record of `owner`, oldest first.
    pub fn list(&self, owner: &str) -> Result<Vec<Record>, StoreError> {
        let txn = self.db.current()?.begin_read()?;
        let records = txn.open_table(RECORDS)?;
        let prefix = format!("{owner}\0");
        let mut listed = Vec::new();
        for entry in records.range(prefix.as_str()..)? {
            let (key, value) = entry?;
            if !key.value().starts_with(&prefix) {
                break;
            }
            listed.extend(decode(value.value()));
        }
        // Runs of one millisecond in a fixed order (by id).
        listed.sort_by(|a, b| (a.started_ms, &a.id).cmp(&(b.started_ms, &b.id)));
        Ok(listed)
    }

    /// Prunes by retention and size ([`prune_database`]).
    pub fn prune(&self, now: SystemTime) -> Result<Pruned, StoreError> {
        prune_database(&*self.db.current()?, &self.settings, now)
    }
}

/// Removes the records settled longer ago than the retention, then the oldest ended ones
/// while the records hold more than the size cap. A running one is kept for its timeout
/// beyond the retention (no run outlives its timeout by much).
fn prune_database(
    db: &Database,
    settings: &StateSettings,
    now: SystemTime,
) -> Result<Pruned, StoreError> {
    let now_ms = unix_ms(now);
    let retention_ms = millis(settings.retention);
    let mut pruned = Pruned::default();
    let mut txn = db.begin_write()?;
    txn.set_durability(Durability::Immediate);
    {
        let mut records = txn.open_table(RECORDS)?;
        let mut keys = txn.open_table(KEYS)?;
        // (row, settled, size, ended, idempotency key)
        let mut rows: Vec<(String, u64, u64, bool, Option<String>)> = Vec::new();
        for entry in records.iter()? {
            let (key, value) = entry?;
            let size = value.value().len() as u64 + key.value().len() as u64;
            let row_key = key.value().to_owned();
            match decode(value.value()) {
                Some(record) => {
                    let settled = match record.end {
                        Some(_) => record.settled_ms(),
                        None => record.started_ms.saturating_add(millis(record.timeout)),
                    };
                    let ended = record.end.is_some();
                    let key = record.idempotency_key.clone();
                    rows.push((row_key, settled, size, ended, key));
                }
                // Unreadable (a later version's layout): pruned as if very old.
                None => rows.push((row_key, 0, size, true, None)),
            }
        }
        let mut remove = |row_key: &str, key: &Option<String>| -> Result<(), StoreError> {
            records.remove(row_key)?;
            if let (Some(key), Some((owner, _))) = (key, row_key.split_once('\0')) {
                keys.remove(row(owner, key).as_str())?;
            }
            Ok(())
        };
        rows.sort_by_key(|r| r.1);
        let mut kept = Vec::new();
        for entry in rows {
            if now_ms.saturating_sub(entry.1) > retention_ms {
                remove(&entry.0, &entry.4)?;
                pruned.expired += 1;
            } else {
                kept.push(entry);
            }
        }
        let mut total: u64 = kept.iter().map(|r| r.2).sum();
        for entry in &kept {
            if total <= settings.max_bytes {
                break;
            }
            if entry.3 {
                remove(&entry.0, &entry.4)?;
                total -= entry.2;
                pruned.over_size += 1;
            }
        }
    }
    txn.commit()?;
    Ok(pruned)
}

/// Commits records (later ones replacing earlier ones of the same id) in one transaction, into
/// the file but not yet flushed to the disk (`Store::sync` does that).
pub(super) fn put_all(db: &Database, records: &[(String, Record)]) -> Result<(), StoreError> {
    let mut txn = db.begin_write()?;
    txn.set_durability(Durability::Eventual);
    {
        let mut rows = txn.open_table(RECORDS)?;
        let mut keys = txn.open_table(KEYS)?;
        for (owner, record) in records {
            let bytes =
                serde_json::to_vec(record).map_err(|e| StoreError::Database(e.to_string()))?;
            rows.insert(row(owner, &record.id).as_str(), bytes.as_slice())?;
            if let Some(key) = &record.idempotency_key {
                keys.insert(row(owner, key).as_str(), record.id.as_str())?;
            }
        }
    }
    txn.commit()?;
    Ok(())
}

fn decode(bytes: &[u8]) -> Option<Record> {
    match serde_json::from_slice(bytes) {
        Ok(record) => Some(record),
        Err(e) => {
            tracing::warn!("ignoring an unreadable execution record: {e}");
            None
        }
    }
}

/// An outcome as a resumed run reports it (no widget state: that lived in the old process).
pub fn outcome_of(outputs: Vec<Output>, elapsed: Duration) -> ExecutionOutcome {
    ExecutionOutcome {
        outputs,
        execution_count: None,
        reply_status: None,
        completion: jupyter_client::kernel::Completion::Finished,
        elapsed,
        user_expressions: None,
        widgets: None,
    }
}

mod writing;

#[cfg(test)]
mod tests;

//! Where execution records are kept beyond this process, as the domain sees it: the
//! [`Records`] trait over the two backends (the state directory's redb file, `store::Store`;
//! the Redis replicas share, `shared::SharedStore`), one domain's [`Scope`] of them, and the
//! [`WriterThread`] both backends commit through, off the callers' path.

use std::sync::{Arc, Mutex, PoisonError, mpsc};
use std::time::{Duration, SystemTime};

use super::store::{Pruned, Record, Store, StoreError};

/// A backend's writer thread: records are sent to it and it commits them; dropping it closes
/// the queue and joins the thread, so what was queued is written first.
pub struct WriterThread {
    queue: Mutex<Option<mpsc::Sender<(String, Record)>>>,
    thread: Option<std::thread::JoinHandle<()>>,
}

impl WriterThread {
    /// Starts `name`, which runs `write` until the queue closes.
    pub fn start(
        name: &str,
        write: impl FnOnce(mpsc::Receiver<(String, Record)>) + Send + 'static,
    ) -> std::io::Result<WriterThread> {
        let (sender, receiver) = mpsc::channel();
        let thread = std::thread::Builder::new()
            .name(name.to_owned())
            .spawn(move || write(receiver))?;
        Ok(WriterThread {
            queue: Mutex::new(Some(sender)),
            thread: Some(thread),
        })
    }

    /// Queues `owner`'s record; false when the thread has stopped.
    pub fn send(&self, owner: &str, record: Record) -> bool {
        let queue = self.queue.lock().unwrap_or_else(PoisonError::into_inner);
        queue
            .as_ref()
            .is_some_and(|sender| sender.send((owner.to_owned(), record)).is_ok())
    }
}

/// Keeps the latest of each record in `batch`, in order: a running execution's record is queued
/// anew at each change, so a writer holding records through an outage keeps one of each.
pub(super) fn latest_only(batch: &mut Vec<(String, Record)>) {
    let mut seen = std::collections::HashSet::new();
    let mut kept: Vec<(String, Record)> = batch
        .drain(..)
        .rev()
        .filter(|(owner, record)| seen.insert((owner.clone(), record.id.clone())))
        .collect();
    kept.reverse();
    *batch = kept;
}

impl Drop for WriterThread {
    fn drop(&mut self) {
        self.queue
            .lock()
            .unwrap_or_else(PoisonError::into_inner)
            .take();
        if let Some(thread) = self.thread.take() {
            let _ = thread.join();
        }
    }
}

/// Where execution records are kept beyond this process: the state directory's file
/// ([`Store`]), or a Redis that several replicas share (`shared::SharedStore`). Reads and
/// writes are short and synchronous; a write is queued to the backend's writer, off the
/// caller's path.
/// A record looked for by id, key or task: `None` when no record answers.
pub type Found = Result<Option<Record>, StoreError>;

pub trait Records: Send + Sync + std::fmt::Debug {
    /// Where the records are, for logs and messages.
    fn place(&self) -> String;
    /// How long an ended record stays answerable.
    fn retention(&self) -> Duration;
    /// Queues a record (replacing the one with its id) with its idempotency key.
    fn enqueue(&self, owner: &str, record: Record) -> Result<(), StoreError>;
    fn get(&self, owner: &str, id: &str) -> Found;
    /// The record an earlier call with this idempotency key began.
    fn by_key(&self, owner: &str, key: &str) -> Found;
    /// Every record of `owner`, oldest first.
    fn list(&self, owner: &str) -> Result<Vec<Record>, StoreError>;
    /// The record of the execution the MCP task `task_id` ran, if one did.
    fn by_task(&self, owner: &str, task_id: &str) -> Found {
        Ok(self
            .list(owner)?
            .into_iter()
            .rev()
            .find(|record| record.task_id.as_deref() == Some(task_id)))
    }
    /// The records of `owner` that have not ended (what a process looks through for runs left
    /// by another, so a store that keeps them apart answers without reading every record).
    fn running(&self, owner: &str) -> Result<Vec<Record>, StoreError> {
        let mut listed = self.list(owner)?;
        listed.retain(|record| record.end.is_none());
        Ok(listed)
    }
    /// Writes a new keyed record unless another execution holds its key already, whose record
    /// is returned instead: one run per key, whichever process is asked first.
    fn claim_key(&self, owner: &str, key: &str, record: &Record) -> Found;
    /// This process as the runner records name, when records are shared.
    fn runner(&self) -> Option<&str> {
        None
    }
    /// Whether a running record is followed by a process that still runs (another replica):
    /// then it is not this one's to follow again or end.
    fn followed_elsewhere(&self, _record: &Record) -> bool {
        false
    }
    /// Claims the following of a run whose runner stopped: true for one process only.
    fn claim_follow(&self, _owner: &str, _id: &str) -> bool {
        true
    }
    /// Whether other processes write here too (so runs they leave are watched for).
    fn shared(&self) -> bool {
        false
    }
    /// Makes what was written durable (the file store's flush to the disk; nothing for a shared
    /// store, whose durability is its server's).
    fn sync(&self) -> Result<(), StoreError>;
    /// Removes what is past the retention (and the size cap).
    fn prune(&self, now: SystemTime) -> Result<Pruned, StoreError>;
    /// Why writes are failing now, and since when (records are kept in memory meanwhile).
    fn failing(&self) -> Option<(SystemTime, String)> {
        None
    }
    /// What to say of an execution whose idempotency key another process also ran while the
    /// store was away.
    fn conflict(&self, _owner: &str, _id: &str) -> Option<String> {
        None
    }
}

impl Records for Store {
    fn place(&self) -> String {
        self.path().display().to_string()
    }

    fn failing(&self) -> Option<(SystemTime, String)> {
        Store::failing(self)
    }

    fn retention(&self) -> Duration {
        self.settings().retention
    }

    fn enqueue(&self, owner: &str, record: Record) -> Result<(), StoreError> {
        Store::enqueue(self, owner, record)
    }

    fn get(&self, owner: &str, id: &str) -> Found {
        Store::get(self, owner, id)
    }

    fn by_key(&self, owner: &str, key: &str) -> Found {
        Store::by_key(self, owner, key)
    }

    fn list(&self, owner: &str) -> Result<Vec<Record>, StoreError> {
        Store::list(self, owner)
    }

    /// One process holds the file (redb's lock), and the domain checks its memory first: a key
    /// seen nowhere is free.
    fn claim_key(&self, owner: &str, key: &str, record: &Record) -> Found {
        if let Some(earlier) = Store::by_key(self, owner, key)? {
            return Ok(Some(earlier));
        }
        Store::enqueue(self, owner, record.clone())?;
        Ok(None)
    }

    fn sync(&self) -> Result<(), StoreError> {
        Store::sync(self)
    }

    fn prune(&self, now: SystemTime) -> Result<Pruned, StoreError> {
        Store::prune(self, now)
    }
}

/// One domain's view of the store: the server's (owner ""), or in Hub mode one user's.
#[derive(Debug, Clone)]
pub struct Scope {
    pub store: Arc<dyn Records>,
    pub owner: String,
}

impl Scope {
    pub fn server(store: Arc<dyn Records>) -> Scope {
        Scope {
            store,
            owner: String::new(),
        }
    }

    /// The same store, for one Hub user.
    pub fn for_user(&self, user: &str) -> Scope {
        Scope {
            store: self.store.clone(),
            owner: format!("user:{user}"),
        }
    }

    /// Queues the record for the store's writer, logging a failure: a store that cannot write
    /// costs durability, never the call (nor its time).
    pub fn put(&self, record: Record) {
        let id = record.id.clone();
        if let Err(e) = self.store.enqueue(&self.owner, record) {
            tracing::warn!(execution = %id, "could not record the execution: {e}");
        }
    }

    pub fn get(&self, id: &str) -> Option<Record> {
        or_logged(
            self.store.get(&self.owner, id),
            format_args!("read execution {id}"),
        )
    }

    pub fn by_key(&self, key: &str) -> Option<Record> {
        or_logged(
            self.store.by_key(&self.owner, key),
            format_args!("read the executions by key"),
        )
    }

    pub fn list(&self) -> Vec<Record> {
        or_logged(
            self.store.list(&self.owner),
            format_args!("list the recorded executions"),
        )
    }

    pub fn by_task(&self, task_id: &str) -> Option<Record> {
        or_logged(
            self.store.by_task(&self.owner, task_id),
            format_args!("read the execution of task {task_id}"),
        )
    }

    pub fn running(&self) -> Vec<Record> {
        or_logged(
            self.store.running(&self.owner),
            format_args!("list the running executions"),
        )
    }

    /// [`Records::claim_key`]; a store that cannot answer lets the run go ahead (durability
    /// lost, never the call).
    pub fn claim_key(&self, key: &str, record: &Record) -> Option<Record> {
        or_logged(
            self.store.claim_key(&self.owner, key, record),
            format_args!("claim the idempotency key"),
        )
    }
}

/// A store's answer, or, when it failed, nothing (the failure logged as "could not `what`"): a
/// store that cannot answer costs durability, never the call.
fn or_logged<T: Default>(answer: Result<T, StoreError>, what: std::fmt::Arguments<'_>) -> T {
    answer.unwrap_or_else(|e| {
        tracing::warn!("could not {what}: {e}");
        T::default()
    })
}

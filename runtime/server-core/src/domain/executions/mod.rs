//! Executions as records: every run of the execution tools (`execute_code`, `execute_cell`,
//! `insert_execute_code_cell`) gets an id, its outputs so far, its end and how it ended, and may
//! carry the caller's idempotency key. A background run (`background: true`) is spawned and
//! answered at once; `get_execution` and `list_executions` read the records.
//!
//! [`Executions`] is the one owner of the records of a domain (the server's, or in Hub mode one
//! user's): the newest [`KEPT`] in memory, and with `--state-dir` every one within the retention
//! in the store (`store.rs`), which its reads fall back to, so an id this server handed out is
//! answered after a restart too. An ended record holds its outputs once (its result); the ended
//! records' outputs together stay within a byte budget (`--execution-memory-mb`): past it the
//! oldest are shed from memory, read back from the store when there is one, else replaced by a
//! note saying where the whole output is. A run a previous process left running is followed again or
//! reported lost at start (`resume.rs`). The code itself runs through `execution.rs`'s paths
//! (kernel readiness, the `execution.confirm` gate, hooks), which this module only wraps.

pub mod records;
pub mod resume;
pub mod shared;
mod state;
pub mod store;
mod table;
pub mod upkeep;

pub use state::{Place, State};
pub use table::{Begun, DEFAULT_MEMORY_BUDGET, Executions};

use std::future::Future;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::{Arc, Mutex, OnceLock, Weak};
use std::time::{Duration, Instant, SystemTime};

use tokio::sync::{Notify, watch};
use tokio_util::sync::CancellationToken;

use super::Error;
use super::execution::{Executed, PAST_GATE};
use crate::confirm;
use crate::hooks::{CALL_SCOPE, CallScope};
use jupyter_client::kernel::{OutputSink, OutputsCopy, Sent, SentSink};
use notebook_format::outputs::Output;
use records::Scope;
use store::{EndRecord, Record};
use table::Table;

/// How many executions a domain remembers; the oldest finished ones go first.
pub const KEPT: usize = 256;

/// What a new execution is.
pub struct NewExecution {
    pub place: Place,
    pub code: String,
    pub timeout: Duration,
    pub background: bool,
    pub idempotency_key: Option<String>,
    /// The MCP task the call became, if it did.
    pub task_id: Option<String>,
}

/// One execution's record.
pub struct Execution {
    pub id: String,
    pub place: Place,
    /// sha256 of the code (hex); the code itself is not kept.
    pub code_sha256: String,
    /// The version of the source a cell run ran (`versions::cell_version`).
    pub cell_version: Option<String>,
    pub timeout: Duration,
    pub background: bool,
    pub started: SystemTime,
    idempotency_key: Option<String>,
    task_id: Option<String>,
    /// Read from the store while another process (a replica, or the one before this) ran it:
    /// its progress is read again from the store, never written from here.
    foreign: bool,
    clock: Instant,
    live: Mutex<Live>,
    ended: watch::Sender<bool>,
    /// The id under which execute_code's whole outputs are kept (`execution://ID`), once shown.
    pub kept: OnceLock<Option<String>>,
    /// Where the record is kept beyond this process, if anywhere.
    scope: Option<Scope>,
    /// When the outputs were last written to the store.
    flushed: Mutex<Option<Instant>>,
    /// Bytes of output the ended record holds in memory (0 while running, and once shed).
    held: AtomicUsize,
    /// Set once its outputs were shed from memory: what was said in their place.
    shed: OnceLock<String>,
    /// The table that remembers it, told when it ends (so the budget is kept).
    table: Weak<Mutex<Table>>,
}

/// How often a running execution's outputs are written to the store, at most.
const FLUSH_EVERY: Duration = Duration::from_secs(1);

/// How many bytes of a running execution's output the store is rewritten with per second, on
/// average: past 1 MiB of output, flushes come every second per MiB.
const FLUSH_BYTES_PER_SEC: usize = 1 << 20;

/// How often a wait on an execution another process runs reads its record again.
const POLL_EVERY: Duration = Duration::from_millis(250);

#[derive(Default)]
struct Live {
    outputs: OutputsCopy,
    sent: Option<Sent>,
    end: Option<Ended>,
}

#[derive(Clone)]
struct Ended {
    elapsed: Duration,
    state: State,
    result: Arc<Result<Executed, Error>>,
}

/// An execution as it stands when read.
pub struct Snapshot {
    pub state: State,
    /// The outputs so far (nbformat JSON); once ended, `result` holds the whole.
    pub outputs: Vec<Output>,
    pub elapsed: Duration,
    pub result: Option<Arc<Result<Executed, Error>>>,
}

impl Execution {
    fn new(
        id: String,
        new: NewExecution,
        scope: Option<Scope>,
        table: Weak<Mutex<Table>>,
    ) -> Execution {
        let cell_version = matches!(new.place, Place::Cell { .. }).then(|| {
            super::versions::cell_version(&notebook_format::notebook::Cell::new(
                notebook_format::notebook::CellType::Code,
                new.code.clone(),
            ))
        });
        Execution {
            id,
            place: new.place,
            code_sha256: notebook_format::hex::sha256(new.code.as_bytes()),
            cell_version,
            timeout: new.timeout,
            background: new.background,
            started: SystemTime::now(),
            idempotency_key: new.idempotency_key,
            task_id: new.task_id,
            foreign: false,
            clock: Instant::now(),
            live: Mutex::default(),
            ended: watch::channel(false).0,
            kept: OnceLock::new(),
            scope,
            flushed: Mutex::new(None),
            held: AtomicUsize::new(0),
            shed: OnceLock::new(),
            table,
        }
    }

    /// An execution another process recorded (one before this, or a replica): ended as it
    /// ended, or running, its outputs so far as that process last wrote them. `foreign`: read
    /// only (its progress read again from the store); else adopted, to be followed here.
    fn restored(record: Record, scope: Option<Scope>, foreign: bool) -> Execution {
        let since = SystemTime::now()
            .duration_since(record_started(&record))
            .unwrap_or_default();
        let clock = Instant::now()
            .checked_sub(since)
            .unwrap_or_else(Instant::now);
        let end = record.end.map(|end| Ended {
            elapsed: end.elapsed,
            state: end.state,
            result: end.result,
        });
        let done = end.is_some();
        Execution {
            id: record.id,
            place: record.place,
            code_sha256: record.code_sha256,
            cell_version: record.cell_version,
            timeout: record.timeout,
            background: record.background,
            started: record_started_ms(record.started_ms),
            idempotency_key: record.idempotency_key,
            task_id: record.task_id,
            foreign: foreign && !done,
            clock,
            live: Mutex::new(Live {
                outputs: OutputsCopy::from(record.outputs),
                sent: record.sent,
                end,
            }),
            ended: watch::channel(done).0,
            kept: OnceLock::new(),
            scope,
            flushed: Mutex::new(None),
            held: AtomicUsize::new(0),
            shed: OnceLock::new(),
            table: Weak::new(),
        }
    }

    /// The record as the store keeps it.
    fn record(&self) -> Record {
        let live = self.live.lock().expect("execution lock");
        Record {
            id: self.id.clone(),
            place: self.place.clone(),
            code_sha256: self.code_sha256.clone(),
            cell_version: self.cell_version.clone(),
            timeout: self.timeout,
            background: self.background,
            started_ms: store::unix_ms(self.started),
            idempotency_key: self.idempotency_key.clone(),
            sent: live.sent.clone(),
            // Once ended, the result holds them.
            outputs: match live.end {
                Some(_) => Vec::new(),
                None => live.outputs.outputs().to_vec(),
            },
            end: live.end.as_ref().map(|end| EndRecord {
                elapsed: end.elapsed,
                state: end.state.clone(),
                result: end.result.clone(),
            }),
            runner: self
                .scope
                .as_ref()
                .and_then(|scope| scope.store.runner().map(str::to_owned)),
            task_id: self.task_id.clone(),
        }
    }

    fn write(&self) {
        if self.foreign {
            return;
        }
        if let Some(scope) = &self.scope {
            scope.put(self.record());
        }
    }

    /// A foreign execution's progress read again from the store; true once it has ended.
    fn refresh(&self) -> bool {
        let Some(record) = self.scope.as_ref().and_then(|scope| scope.get(&self.id)) else {
            return false;
        };
        let mut live = self.live.lock().expect("execution lock");
        live.sent = record.sent;
        match record.end {
            Some(end) => {
                live.end = Some(Ended {
                    elapsed: end.elapsed,
                    state: end.state,
                    result: end.result,
                });
                drop(live);
                self.ended.send_replace(true);
                true
            }
            None => {
                live.outputs.set(record.outputs);
                false
            }
        }
    }

    /// Whether it has ended, as far as this process knows.
    fn done(&self) -> bool {
        *self.ended.borrow()
    }

    /// Where the kernel layer reports outputs as they come (written to the store at most every
    /// [`FLUSH_EVERY`], and for big outputs every second per MiB, so a restart loses at most
    /// that much of a run's output).
    pub fn output_sink(self: &Arc<Self>) -> OutputSink {
        let execution = Arc::downgrade(self);
        Arc::new(move |outputs: &[Output], _count, epoch| {
            if let Some(execution) = execution.upgrade() {
                let mut live = execution.live.lock().expect("execution lock");
                live.outputs.catch_up(outputs, epoch);
                drop(live);
                execution.flush();
            }
        })
    }

    fn flush(&self) {
        if self.scope.is_none() {
            return;
        }
        {
            // Each flush rewrites the whole output so far: a big one is written less often, so
            // the store is rewritten at most FLUSH_BYTES_PER_SEC on average, not quadratically.
            let bytes: usize = {
                let live = self.live.lock().expect("execution lock");
                live.outputs
                    .outputs()
                    .iter()
                    .map(Output::approx_bytes)
                    .sum()
            };
            let every = FLUSH_EVERY.max(Duration::from_secs_f64(
                bytes as f64 / FLUSH_BYTES_PER_SEC as f64,
            ));
            let mut flushed = self.flushed.lock().expect("execution lock");
            if flushed.is_some_and(|at| at.elapsed() < every) {
                return;
            }
            *flushed = Some(Instant::now());
        }
        self.write();
    }

    /// Where the kernel layer says the request went, so a later process can follow it.
    pub fn sent_sink(self: &Arc<Self>) -> SentSink {
        let execution = Arc::downgrade(self);
        Arc::new(move |sent: &Sent| {
            if let Some(execution) = execution.upgrade() {
                execution.live.lock().expect("execution lock").sent = Some(sent.clone());
                execution.write();
            }
        })
    }

    fn finish(&self, result: Result<Executed, Error>) -> Arc<Result<Executed, Error>> {
        let state = State::of(&result, self.timeout);
        self.finish_as(result, state)
    }

    fn finish_as(
        &self,
        result: Result<Executed, Error>,
        state: State,
    ) -> Arc<Result<Executed, Error>> {
        let result = Arc::new(result);
        let held = output_bytes(&result);
        let ended = Ended {
            elapsed: self.clock.elapsed(),
            state,
            result: result.clone(),
        };
        {
            let mut live = self.live.lock().expect("execution lock");
            live.end = Some(ended);
            // The result holds them whole now: one copy per record.
            live.outputs.set(Vec::new());
        }
        self.held.store(held, Ordering::Relaxed);
        self.write();
        self.ended.send_replace(true);
        if let Some(table) = self.table.upgrade() {
            table.lock().expect("executions lock").keep_budget();
        }
        result
    }

    /// Its state and how long it ran or has run, without copying its outputs.
    pub fn status(&self) -> (State, Duration) {
        let live = self.live.lock().expect("execution lock");
        match &live.end {
            Some(end) => (end.state.clone(), end.elapsed),
            None => (State::Running, self.clock.elapsed()),
        }
    }

    /// What was said in place of its outputs once they were shed from memory, if they were.
    pub fn shed_note(&self) -> Option<&str> {
        self.shed.get().map(String::as_str)
    }

    /// Drops the ended record's outputs from memory, leaving `note` in their place; returns
    /// the bytes freed. The caller (the table) decides when.
    fn shed_outputs(&self, note: String) -> usize {
        let mut live = self.live.lock().expect("execution lock");
        let Some(end) = live.end.as_mut() else {
            return 0;
        };
        let Ok(executed) = end.result.as_ref() else {
            return 0;
        };
        let outcome = &executed.outcome;
        let stub = Executed {
            outcome: jupyter_client::kernel::ExecutionOutcome {
                outputs: vec![Output::stream(
                    notebook_format::outputs::StreamName::Stdout,
                    format!("{note}\n"),
                )],
                execution_count: outcome.execution_count,
                reply_status: outcome.reply_status.clone(),
                completion: outcome.completion,
                elapsed: outcome.elapsed,
                user_expressions: None,
                widgets: None,
            },
            replaced: executed.replaced.clone(),
        };
        end.result = Arc::new(Ok(stub));
        drop(live);
        let _ = self.shed.set(note);
        self.held.swap(0, Ordering::Relaxed)
    }

    pub fn snapshot(&self) -> Snapshot {
        let live = self.live.lock().expect("execution lock");
        match &live.end {
            Some(end) => Snapshot {
                state: end.state.clone(),
                outputs: live.outputs.outputs().to_vec(),
                elapsed: end.elapsed,
                result: Some(end.result.clone()),
            },
            None => Snapshot {
                state: State::Running,
                outputs: live.outputs.outputs().to_vec(),
                elapsed: self.clock.elapsed(),
                result: None,
            },
        }
    }

    /// Waits up to `up_to` for the execution to end; true when it has.
    pub async fn wait(&self, up_to: Duration) -> bool {
        let ended = async {
            if self.foreign {
                self.polled().await;
            } else {
                let mut ended = self.ended.subscribe();
                let _ = ended.wait_for(|done| *done).await;
            }
        };
        tokio::time::timeout(up_to, ended).await.is_ok()
    }

    /// Until a foreign execution's record shows its end (read again every [`POLL_EVERY`]).
    async fn polled(&self) {
        while !self.done() && !self.refresh() {
            tokio::time::sleep(POLL_EVERY).await;
        }
    }

    /// Waits for the end, however long it takes.
    pub async fn result(&self) -> Arc<Result<Executed, Error>> {
        if self.foreign {
            self.polled().await;
        }
        let mut ended = self.ended.subscribe();
        let _ = ended.wait_for(|done| *done).await;
        self.snapshot().result.expect("ended")
    }

    /// Runs `run` here (a foreground call) as this execution.
    pub async fn run_here(
        &self,
        run: impl Future<Output = Result<Executed, Error>>,
    ) -> Arc<Result<Executed, Error>> {
        self.finish(run.await)
    }

    /// Spawns `run` as this execution and returns once it is under way: past the
    /// `execution.confirm` gate (asked with the caller's confirmer, while the call still waits)
    /// or already ended (refused, failed to start). `cancel` (the call's) stops it while it has
    /// not passed the gate yet; `stop` is the run's own token, cancelled then.
    pub async fn run_in_background(
        self: &Arc<Self>,
        run: impl Future<Output = Result<Executed, Error>> + Send + 'static,
        cancel: &CancellationToken,
        stop: CancellationToken,
    ) -> Option<Arc<Result<Executed, Error>>> {
        let gate = Arc::new(Notify::new());
        // Boxed: an execution's future is large, and a debug build's worker stack is not.
        let run = Box::pin(PAST_GATE.scope(gate.clone(), Box::pin(run)));
        // The run keeps the call's confirmer and hook scope, as if it still ran inside the call.
        let confirmer = confirm::current();
        let scope = CallScope::current();
        let execution = self.clone();
        tokio::spawn(Box::pin(async move {
            let run = async move {
                match confirmer {
                    Some(confirmer) => confirm::asking(confirmer, run).await,
                    None => run.await,
                }
            };
            let result = match scope {
                Some(scope) => CALL_SCOPE.scope(scope, run).await,
                None => run.await,
            };
            execution.finish(result);
        }));
        tokio::select! {
            () = gate.notified() => None,
            result = self.result() => Some(result),
            () = cancel.cancelled() => {
                stop.cancel();
                Some(self.result().await)
            }
        }
    }
}

fn record_started_ms(ms: u64) -> SystemTime {
    SystemTime::UNIX_EPOCH + Duration::from_millis(ms)
}

fn record_started(record: &Record) -> SystemTime {
    record_started_ms(record.started_ms)
}

/// The bytes of output an ended run's result holds.
fn output_bytes(result: &Result<Executed, Error>) -> usize {
    match result {
        Ok(executed) => executed
            .outcome
            .outputs
            .iter()
            .map(Output::approx_bytes)
            .sum(),
        Err(_) => 0,
    }
}

#[cfg(test)]
mod tests;

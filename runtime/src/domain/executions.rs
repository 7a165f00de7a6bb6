//! Executions as records: every run of the execution tools (`execute_code`, `execute_cell`,
//! `insert_execute_code_cell`) gets an id, its outputs so far, its end and how it ended, and may
//! carry the caller's idempotency key. A background run (`background: true`) is spawned and
//! answered at once; `get_execution` and `list_executions` read the records.
//!
//! The records are kept in memory for now (the newest [`KEPT`] of this domain: the server's, or
//! in Hub mode one user's); [`Executions`] is the one owner of them, so a store can be put behind
//! its few methods later. The code itself runs through `execution.rs`'s paths (kernel readiness,
//! the `execution.confirm` gate, hooks), which this module only wraps.

use std::collections::{HashMap, VecDeque};
use std::future::Future;
use std::sync::{Arc, Mutex, OnceLock};
use std::time::{Duration, Instant, SystemTime};

use serde_json::Value;
use tokio::sync::{Notify, watch};
use tokio_util::sync::CancellationToken;

use super::Error;
use super::execution::{Completion, Executed, PAST_GATE};
use crate::confirm;
use crate::hooks::{CALL_SCOPE, CallScope};
use crate::jupyter::kernel::OutputSink;

/// How many executions a domain remembers; the oldest finished ones go first.
pub const KEPT: usize = 256;

/// Where an execution runs.
#[derive(Debug, Clone)]
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
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum State {
    Running,
    Finished,
    /// The code raised, or the run could not happen; the reason says which.
    Failed(String),
    /// Stopped by an interrupt, a timeout or a cancellation.
    Interrupted(String),
    /// Its end will never be known (reserved for records that outlive the server's process).
    Lost(String),
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

    pub fn reason(&self) -> Option<&str> {
        match self {
            State::Failed(r) | State::Interrupted(r) | State::Lost(r) => Some(r),
            State::Running | State::Finished => None,
        }
    }

    fn of(result: &Result<Executed, Error>, timeout: Duration) -> State {
        let executed = match result {
            Ok(executed) => executed,
            Err(e) => return State::Failed(e.to_string()),
        };
        match executed.outcome.completion {
            Completion::TimedOut => {
                return State::Interrupted(format!(
                    "it ran past its timeout of {:.0}s and the kernel was interrupted",
                    timeout.as_secs_f64()
                ));
            }
            Completion::Cancelled => {
                return State::Interrupted("the call was cancelled".to_owned());
            }
            Completion::Finished => {}
        }
        let raised = executed
            .outcome
            .outputs
            .iter()
            .find(|o| o.get("output_type").and_then(Value::as_str) == Some("error"));
        match raised {
            None => State::Finished,
            Some(error) => {
                let field = |name| error.get(name).and_then(Value::as_str).unwrap_or("");
                let (ename, evalue) = (field("ename"), field("evalue"));
                if ename == "KeyboardInterrupt" {
                    State::Interrupted("the kernel was interrupted (KeyboardInterrupt)".to_owned())
                } else {
                    State::Failed(format!("the code raised {ename}: {evalue}"))
                }
            }
        }
    }
}

/// What a new execution is.
pub struct NewExecution {
    pub place: Place,
    pub code: String,
    pub timeout: Duration,
    pub background: bool,
    pub idempotency_key: Option<String>,
}

/// One execution's record.
pub struct Execution {
    pub id: String,
    pub place: Place,
    pub code: String,
    pub timeout: Duration,
    pub background: bool,
    pub started: SystemTime,
    clock: Instant,
    live: Mutex<Live>,
    ended: watch::Sender<bool>,
    /// The id under which execute_code's whole outputs are kept (`execution://ID`), once shown.
    pub kept: OnceLock<Option<String>>,
}

#[derive(Default)]
struct Live {
    outputs: Vec<Value>,
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
    pub outputs: Vec<Value>,
    pub elapsed: Duration,
    pub result: Option<Arc<Result<Executed, Error>>>,
}

impl Execution {
    /// Where the kernel layer reports outputs as they come.
    pub fn output_sink(self: &Arc<Self>) -> OutputSink {
        let execution = Arc::downgrade(self);
        Arc::new(move |outputs: &[Value], _count| {
            if let Some(execution) = execution.upgrade() {
                execution.live.lock().expect("execution lock").outputs = outputs.to_vec();
            }
        })
    }

    fn finish(&self, result: Result<Executed, Error>) -> Arc<Result<Executed, Error>> {
        let result = Arc::new(result);
        let ended = Ended {
            elapsed: self.clock.elapsed(),
            state: State::of(&result, self.timeout),
            result: result.clone(),
        };
        self.live.lock().expect("execution lock").end = Some(ended);
        self.ended.send_replace(true);
        result
    }

    pub fn snapshot(&self) -> Snapshot {
        let live = self.live.lock().expect("execution lock");
        match &live.end {
            Some(end) => Snapshot {
                state: end.state.clone(),
                outputs: live.outputs.clone(),
                elapsed: end.elapsed,
                result: Some(end.result.clone()),
            },
            None => Snapshot {
                state: State::Running,
                outputs: live.outputs.clone(),
                elapsed: self.clock.elapsed(),
                result: None,
            },
        }
    }

    /// Waits up to `up_to` for the execution to end; true when it has.
    pub async fn wait(&self, up_to: Duration) -> bool {
        let mut ended = self.ended.subscribe();
        tokio::time::timeout(up_to, ended.wait_for(|done| *done))
            .await
            .is_ok()
    }

    /// Waits for the end, however long it takes.
    pub async fn result(&self) -> Arc<Result<Executed, Error>> {
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

/// The executions of one domain (the server's, or in Hub mode one user's).
#[derive(Default)]
pub struct Executions {
    table: Mutex<Table>,
}

#[derive(Default)]
struct Table {
    by_id: HashMap<String, Arc<Execution>>,
    by_key: HashMap<String, String>,
    order: VecDeque<String>,
}

/// What [`Executions::begin`] found.
pub enum Begun {
    /// A new execution, to be run now.
    Fresh(Arc<Execution>),
    /// The execution an earlier call with the same idempotency key started.
    Repeated(Arc<Execution>),
}

impl Executions {
    /// A new execution's record, or the one an earlier call with the same key began.
    pub fn begin(&self, new: NewExecution) -> Begun {
        let mut table = self.table.lock().expect("executions lock");
        if let Some(key) = &new.idempotency_key
            && let Some(earlier) = table.by_key.get(key).and_then(|id| table.by_id.get(id))
        {
            return Begun::Repeated(earlier.clone());
        }
        let id = uuid::Uuid::new_v4().simple().to_string()[..12].to_owned();
        let execution = Arc::new(Execution {
            id: id.clone(),
            place: new.place,
            code: new.code,
            timeout: new.timeout,
            background: new.background,
            started: SystemTime::now(),
            clock: Instant::now(),
            live: Mutex::default(),
            ended: watch::channel(false).0,
            kept: OnceLock::new(),
        });
        if let Some(key) = new.idempotency_key {
            table.by_key.insert(key, id.clone());
        }
        table.by_id.insert(id.clone(), execution.clone());
        table.order.push_back(id);
        table.forget_beyond(KEPT);
        Begun::Fresh(execution)
    }

    /// The execution an earlier call with `key` began, if one did.
    pub fn earlier(&self, key: &str) -> Option<Arc<Execution>> {
        let table = self.table.lock().expect("executions lock");
        table
            .by_key
            .get(key)
            .and_then(|id| table.by_id.get(id))
            .cloned()
    }

    pub fn get(&self, id: &str) -> Option<Arc<Execution>> {
        let table = self.table.lock().expect("executions lock");
        table.by_id.get(id).cloned()
    }

    /// Every remembered execution, oldest first.
    pub fn list(&self) -> Vec<Arc<Execution>> {
        let table = self.table.lock().expect("executions lock");
        table
            .order
            .iter()
            .filter_map(|id| table.by_id.get(id).cloned())
            .collect()
    }
}

impl Table {
    /// Drops the oldest ended executions beyond `bound` (running ones stay: their ids are out).
    fn forget_beyond(&mut self, bound: usize) {
        while self.order.len() > bound {
            let Some(position) = self.order.iter().position(|id| {
                self.by_id
                    .get(id)
                    .is_none_or(|e| e.snapshot().state != State::Running)
            }) else {
                return;
            };
            let Some(id) = self.order.remove(position) else {
                return;
            };
            self.by_id.remove(&id);
            self.by_key.retain(|_, kept| *kept != id);
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::jupyter::kernel::ExecutionOutcome;

    fn new(key: Option<&str>) -> NewExecution {
        NewExecution {
            place: Place::Code {
                kernel: "the default kernel".into(),
            },
            code: "1".into(),
            timeout: Duration::from_secs(5),
            background: true,
            idempotency_key: key.map(str::to_owned),
        }
    }

    fn ended(outputs: Vec<Value>, completion: Completion) -> Result<Executed, Error> {
        Ok(Executed {
            outcome: ExecutionOutcome {
                outputs,
                execution_count: Some(1),
                reply_status: None,
                completion,
                elapsed: Duration::ZERO,
                user_expressions: None,
                widgets: None,
            },
            replaced: None,
        })
    }

    #[test]
    fn a_repeated_key_finds_the_first_execution() {
        let executions = Executions::default();
        let Begun::Fresh(first) = executions.begin(new(Some("k"))) else {
            panic!("first call is fresh");
        };
        let Begun::Repeated(again) = executions.begin(new(Some("k"))) else {
            panic!("the key was seen");
        };
        assert_eq!(first.id, again.id);
        assert!(matches!(executions.begin(new(None)), Begun::Fresh(_)));
        assert_eq!(executions.list().len(), 2);
    }

    #[test]
    fn states_say_how_it_ended() {
        let error = |ename: &str| serde_json::json!({"output_type": "error", "ename": ename, "evalue": "x", "traceback": []});
        let timeout = Duration::from_secs(5);
        let state = |r| State::of(&r, timeout).name();
        assert_eq!(state(ended(vec![], Completion::Finished)), "finished");
        assert_eq!(
            state(ended(
                vec![error("KeyboardInterrupt")],
                Completion::Finished
            )),
            "interrupted"
        );
        assert_eq!(
            state(ended(vec![error("ValueError")], Completion::Finished)),
            "failed"
        );
        assert_eq!(state(ended(vec![], Completion::TimedOut)), "interrupted");
        assert_eq!(state(Err(Error::Failed("no".into()))), "failed");
    }

    #[test]
    fn only_ended_executions_are_forgotten() {
        let executions = Executions::default();
        let Begun::Fresh(running) = executions.begin(new(None)) else {
            panic!()
        };
        for _ in 0..KEPT + 3 {
            if let Begun::Fresh(e) = executions.begin(new(None)) {
                e.finish(ended(vec![], Completion::Finished));
            }
        }
        assert_eq!(executions.list().len(), KEPT);
        assert!(executions.get(&running.id).is_some());
    }
}

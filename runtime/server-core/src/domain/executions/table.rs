//! The executions of one domain in memory: the table of records by id and idempotency key, the
//! newest [`KEPT`](super::KEPT) of them, and the byte budget their ended outputs share (the oldest
//! shed past it, with a note saying where the whole output is).

use std::collections::{HashMap, VecDeque};
use std::sync::{Arc, Mutex};

use super::*;

/// The executions of one domain (the server's, or in Hub mode one user's).
pub struct Executions {
    table: Arc<Mutex<Table>>,
    /// The store behind the memory (`--state-dir`), if any.
    scope: Option<Scope>,
}

pub(super) struct Table {
    by_id: HashMap<String, Arc<Execution>>,
    by_key: HashMap<String, String>,
    order: VecDeque<String>,
    /// The bytes of output ended records may hold in memory together.
    budget: usize,
    /// Where shed outputs can still be read (the store's place), if anywhere.
    store: Option<String>,
}

/// The default of `--execution-memory-mb`, in bytes.
pub const DEFAULT_MEMORY_BUDGET: usize = 64 << 20;

/// What [`Executions::begin`] found.
pub enum Begun {
    /// A new execution, to be run now.
    Fresh(Arc<Execution>),
    /// The execution an earlier call with the same idempotency key started.
    Repeated(Arc<Execution>),
}

impl Default for Executions {
    fn default() -> Self {
        Executions::new(None, DEFAULT_MEMORY_BUDGET)
    }
}

impl Executions {
    /// Records kept in memory, and in the store when there is one; the ended ones' outputs in
    /// memory within `budget` bytes together.
    pub fn new(scope: Option<Scope>, budget: usize) -> Self {
        let store = scope.as_ref().map(|scope| scope.store.place());
        Executions {
            table: Arc::new(Mutex::new(Table {
                by_id: HashMap::new(),
                by_key: HashMap::new(),
                order: VecDeque::new(),
                budget,
                store,
            })),
            scope,
        }
    }

    /// The bytes of output the ended records hold in memory now.
    pub fn held_bytes(&self) -> usize {
        let table = self.table.lock().expect("executions lock");
        table
            .by_id
            .values()
            .map(|e| e.held.load(Ordering::Relaxed))
            .sum()
    }

    pub fn scope(&self) -> Option<&Scope> {
        self.scope.as_ref()
    }

    /// How long an id stays answerable, for messages.
    /// When the store cannot write: where it is, since when, and why. Records are kept in
    /// memory meanwhile and written once it can.
    pub fn store_failing(&self) -> Option<(String, SystemTime, String)> {
        let scope = self.scope.as_ref()?;
        let (since, why) = scope.store.failing()?;
        Some((scope.store.place(), since, why))
    }

    /// What to say of execution `id` when its idempotency key also ran elsewhere.
    pub fn conflict(&self, id: &str) -> Option<String> {
        let scope = self.scope.as_ref()?;
        scope.store.conflict(&scope.owner, id)
    }

    pub fn kept_for(&self) -> String {
        match &self.scope {
            Some(scope) => format!(
                "for {} (--execution-retention), across restarts",
                crate::settings::humane_duration(scope.store.retention())
            ),
            None => format!("the newest {KEPT}, while the server runs"),
        }
    }

    /// A new execution's record, or the one an earlier call with the same key began.
    pub fn begin(&self, new: NewExecution) -> Begun {
        let mut table = self.table.lock().expect("executions lock");
        if let Some(key) = &new.idempotency_key
            && let Some(earlier) = table.by_key.get(key).and_then(|id| table.by_id.get(id))
        {
            return Begun::Repeated(earlier.clone());
        }
        let id = uuid::Uuid::new_v4().simple().to_string()[..12].to_owned();
        let key = new.idempotency_key.clone();
        let execution = Arc::new(Execution::new(
            id.clone(),
            new,
            self.scope.clone(),
            Arc::downgrade(&self.table),
        ));
        // A key is claimed in the store with the first record, so of two processes (replicas)
        // asked at once only one runs the code.
        let earlier = match (&key, &self.scope) {
            (Some(key), Some(scope)) => scope.claim_key(key, &execution.record()),
            _ => {
                execution.write();
                None
            }
        };
        if let Some(record) = earlier {
            return Begun::Repeated(self.read(record));
        }
        if let Some(key) = key {
            table.by_key.insert(key, id.clone());
        }
        table.remember(execution.clone());
        Begun::Fresh(execution)
    }

    /// A run a previous process recorded as running, followed again in this one: written back
    /// at once, so a shared store names this process as its runner (no third replica follows it
    /// too once the claim to follow it has expired).
    pub(super) fn adopt(&self, record: Record) -> Arc<Execution> {
        let execution = Arc::new(Execution::restored(record, self.scope.clone(), false));
        execution.write();
        let mut table = self.table.lock().expect("executions lock");
        if let Some(key) = &execution.idempotency_key {
            table.by_key.insert(key.clone(), execution.id.clone());
        }
        table.remember(execution.clone());
        execution
    }

    pub(super) fn in_memory(&self, id: &str) -> bool {
        let table = self.table.lock().expect("executions lock");
        table.by_id.contains_key(id)
    }

    /// The execution an earlier call with `key` began, if one did.
    pub fn earlier(&self, key: &str) -> Option<Arc<Execution>> {
        let found = {
            let table = self.table.lock().expect("executions lock");
            table
                .by_key
                .get(key)
                .and_then(|id| table.by_id.get(id))
                .cloned()
        };
        found.or_else(|| Some(self.read(self.scope.as_ref()?.by_key(key)?)))
    }

    /// A record read from the store, as an execution this process does not run (it follows
    /// what it runs from memory): a running one is foreign.
    fn read(&self, record: Record) -> Arc<Execution> {
        Arc::new(Execution::restored(record, self.scope.clone(), true))
    }

    /// The execution the MCP task `task_id` ran, if one did.
    pub fn by_task(&self, task_id: &str) -> Option<Arc<Execution>> {
        let found = {
            let table = self.table.lock().expect("executions lock");
            table
                .by_id
                .values()
                .find(|e| e.task_id.as_deref() == Some(task_id))
                .cloned()
        };
        found.or_else(|| Some(self.read(self.scope.as_ref()?.by_task(task_id)?)))
    }

    pub fn get(&self, id: &str) -> Option<Arc<Execution>> {
        let found = {
            let table = self.table.lock().expect("executions lock");
            table.by_id.get(id).cloned()
        };
        match found {
            // Its outputs left memory for the store: read it whole from there.
            Some(execution) if execution.shed_note().is_some() => Some(
                self.scope
                    .as_ref()
                    .and_then(|scope| scope.get(id))
                    .filter(|record| record.end.is_some())
                    .map(|record| self.read(record))
                    .unwrap_or(execution),
            ),
            Some(execution) => Some(execution),
            None => Some(self.read(self.scope.as_ref()?.get(id)?)),
        }
    }

    /// Every remembered execution, oldest first: the store's, and those in memory.
    pub fn list(&self) -> Vec<Arc<Execution>> {
        let table = self.table.lock().expect("executions lock");
        let mut listed: Vec<Arc<Execution>> = self
            .scope
            .iter()
            .flat_map(Scope::list)
            .filter(|record| !table.by_id.contains_key(&record.id))
            .map(|record| self.read(record))
            .collect();
        listed.extend(
            table
                .order
                .iter()
                .filter_map(|id| table.by_id.get(id).cloned()),
        );
        listed.sort_by_key(|e| e.started);
        listed
    }
}

impl Table {
    fn remember(&mut self, execution: Arc<Execution>) {
        let id = execution.id.clone();
        self.by_id.insert(id.clone(), execution);
        self.order.push_back(id);
        self.forget_beyond(KEPT);
    }

    /// Drops the oldest ended executions beyond `bound` (running ones stay: their ids are out).
    fn forget_beyond(&mut self, bound: usize) {
        while self.order.len() > bound {
            let Some(position) = self
                .order
                .iter()
                .position(|id| self.by_id.get(id).is_none_or(|e| e.done()))
            else {
                return;
            };
            let Some(id) = self.order.remove(position) else {
                return;
            };
            self.by_id.remove(&id);
            self.by_key.retain(|_, kept| *kept != id);
        }
    }

    /// Sheds the oldest ended records' outputs from memory until those left fit the budget.
    /// The newest ended record keeps its own, whatever their size: it is the one most likely
    /// read next, and shedding it would not make the next run any smaller.
    pub(super) fn keep_budget(&mut self) {
        let held = |e: &Execution| e.held.load(Ordering::Relaxed);
        let mut total: usize = self.by_id.values().map(|e| held(e)).sum();
        if total <= self.budget {
            return;
        }
        let newest = self
            .order
            .iter()
            .rev()
            .find(|id| self.by_id.get(*id).is_some_and(|e| e.done()))
            .cloned();
        for id in &self.order {
            if total <= self.budget {
                break;
            }
            let Some(execution) = self.by_id.get(id) else {
                continue;
            };
            let bytes = held(execution);
            if bytes == 0 || Some(id) == newest.as_ref() || !execution.done() {
                continue;
            }
            let note = shed_note(execution, bytes, self.budget, self.store.as_deref());
            total = total.saturating_sub(execution.shed_outputs(note));
        }
    }
}

/// What stands in memory for outputs shed to keep the budget: how big they were, why they
/// went and where the whole output is now.
fn shed_note(execution: &Execution, bytes: usize, budget: usize, store: Option<&str>) -> String {
    let size = megabytes(bytes);
    let budget = budget >> 20;
    let gone = format!(
        "[The {size} of output of execution {} left the server's memory, which keeps at most \
         {budget} MiB of ended runs' outputs (--execution-memory-mb)",
        execution.id
    );
    match (store, &execution.place) {
        (Some(store), _) => format!(
            "{gone}; the execution store ({store}) keeps them whole, and reading this execution \
             again reads them from there.]"
        ),
        (None, Place::Cell { .. }) => format!(
            "{gone}; the notebook keeps the cell's outputs ({}): read the cell for them.]",
            execution.place.describe()
        ),
        (None, Place::Code { .. }) => format!(
            "{gone}, and no store keeps them (no --state-dir): run the code again, printing \
             less, or in a notebook cell so the notebook keeps its output.]"
        ),
    }
}

fn megabytes(bytes: usize) -> String {
    format!("{:.1} MB", bytes as f64 / 1e6)
}

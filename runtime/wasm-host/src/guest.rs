//! One loaded guest: a few instances (each entered by one call at a time, never on an async
//! worker), the `InstancePre` they are built from, and its health.

use std::path::PathBuf;
use std::sync::atomic::{AtomicBool, AtomicU32, AtomicU64, Ordering};
use std::sync::{Arc, Condvar, Mutex};
use std::time::{Duration, Instant};

use wasmtime::component::InstancePre;
use wasmtime::{Store, Trap, UpdateDeadline};

use super::api::{Api, Exports, Indices};
use super::host::GuestState;
pub use super::limits::CallKind;
use super::limits::{Stopped, memory_limit_message};
use super::settings::GuestSettings;

/// A call into a guest that did not produce the guest's answer.
#[derive(Debug, Clone, thiserror::Error, PartialEq, Eq)]
pub enum GuestError {
    #[error(
        "wasm guest '{guest}' {what}; only this call failed (failure {failures} of {max} in a row \
         before the guest is switched off){}",
        stderr_note(stderr)
    )]
    Failed {
        guest: String,
        what: String,
        failures: u32,
        max: u32,
        /// The last lines the guest wrote to stderr in the failed call, where its runtime says
        /// why (a panic message, an exception and its stack).
        stderr: Option<String>,
    },
    #[error(
        "wasm guest '{guest}' is switched off: {reason}. Fix the guest or its limits in the config \
         file and restart the server"
    )]
    SwitchedOff { guest: String, reason: String },
    #[error(
        "wasm guest '{guest}' was called again from inside one of its own calls (its action fired \
         its own hook); refused, since it can run one call at a time"
    )]
    Reentrant { guest: String },
    #[error(
        "wasm guest '{guest}' is busy with {busy} other calls and none ended within this call's \
         {} ms (its wall-clock limit); try again, or raise limits.wall_ms_per_call",
        limit.as_millis()
    )]
    Busy {
        guest: String,
        busy: usize,
        limit: Duration,
    },
    #[error(
        "the host failed while calling wasm guest '{guest}' (a bug in the server: please report it)"
    )]
    HostPanic { guest: String },
    #[error("wasm guest '{guest}' {what}")]
    Revoked { guest: String, what: String },
    #[error("wasm guest '{guest}' answered with something the host cannot use: {reason}")]
    BadAnswer { guest: String, reason: String },
}

fn stderr_note(stderr: &Option<String>) -> String {
    match stderr {
        Some(lines) => format!(". The guest's last lines on stderr:\n{lines}"),
        None => String::new(),
    }
}

/// A live instance and the exports it has.
pub struct GuestInstance {
    pub store: Store<GuestState>,
    exports: Exports,
    /// The deadline of the next call, when the guest set it (counting the wait for this
    /// instance); else each call gets its kind's whole limit from when it begins.
    next_deadline: Option<Instant>,
}

impl GuestInstance {
    /// Starts the clocks of a call.
    fn begin(&mut self, kind: CallKind) {
        let limit = kind.wall_limit(&self.store.data().settings.limits);
        let deadline = self
            .next_deadline
            .take()
            .unwrap_or_else(|| Instant::now() + limit);
        self.store.data_mut().start_call(deadline, limit);
        self.store.set_epoch_deadline(1);
    }

    /// One call into the guest under the limits of its kind; `call` names the export, e.g.
    /// `|api, store| api.call_tool(store, name, arguments)` or `GuestApi::tools`.
    pub fn call<R>(
        &mut self,
        kind: CallKind,
        call: impl FnOnce(&Api, &mut Store<GuestState>) -> wasmtime::Result<R>,
    ) -> wasmtime::Result<R> {
        self.begin(kind);
        call(self.exports.as_ref(), &mut self.store)
    }
}

/// What a fresh instance is made from.
pub struct Template {
    pub pre: InstancePre<GuestState>,
    pub exports: Indices,
    pub settings: Arc<GuestSettings>,
}

impl Template {
    /// A new `Store` and instance; the instance's start-up runs under the limits of a call.
    pub fn instantiate(&self) -> wasmtime::Result<GuestInstance> {
        let mut store = Store::new(self.pre.engine(), GuestState::new(self.settings.clone()));
        store.limiter(|state| state.limiter());
        store.epoch_deadline_callback(|mut store| {
            Ok(if store.data_mut().must_stop() {
                UpdateDeadline::Interrupt
            } else {
                UpdateDeadline::Continue(1)
            })
        });
        let limit = CallKind::Load.wall_limit(&self.settings.limits);
        store.data_mut().start_call(Instant::now() + limit, limit);
        store.set_epoch_deadline(1);
        let instance = self.pre.instantiate(&mut store)?;
        let exports = self.exports.load(&mut store, &instance)?;
        Ok(GuestInstance {
            store,
            exports,
            next_deadline: None,
        })
    }
}

/// What went wrong in a call, in words an operator can act on.
fn describe(error: &wasmtime::Error, state: &GuestState) -> String {
    let limits = &state.settings.limits;
    match state.clock.stopped {
        Some(Stopped::Cpu) => {
            return format!(
                "used up its CPU time of {} ms for one call (limits.cpu_ms_per_call)",
                limits.cpu_ms_per_call
            );
        }
        Some(Stopped::Wall) => {
            return format!(
                "exceeded its wall-clock time of {} ms for one call (limits.wall_ms_per_call)",
                state.clock.wall_limit.as_millis()
            );
        }
        Some(Stopped::Revoked) => {
            return format!(
                "was stopped in the middle of a call: the operator revoked {}, which the call \
                 had in use; the next call runs under the new policy",
                state.revoked_storage().unwrap_or("a storage grant")
            );
        }
        Some(Stopped::Shutdown) => {
            return "was stopped in the middle of a call: the guest was switched off or the \
                    server is shutting down"
                .into();
        }
        None => {}
    }
    let root = error.root_cause().to_string();
    if root.contains(&memory_limit_message(limits.memory_mb)) {
        return root;
    }
    match error.downcast_ref::<Trap>() {
        Some(Trap::StackOverflow) => "overflowed its stack".into(),
        // Any language's panic, abort or uncaught exception ends this way; stderr says which.
        Some(Trap::UnreachableCodeReached) => "trapped: wasm `unreachable` executed".into(),
        Some(trap) => format!("trapped: {trap}"),
        None => format!("failed: {root}"),
    }
}

thread_local! {
    /// The guests whose calls are running on this thread, innermost last.
    static RUNNING: std::cell::RefCell<Vec<u64>> = const { std::cell::RefCell::new(Vec::new()) };
}

/// Marks a guest as running on this thread for as long as it lives.
struct Running(u64);

impl Running {
    fn enter(id: u64) -> Self {
        RUNNING.with(|r| r.borrow_mut().push(id));
        Running(id)
    }

    fn contains(id: u64) -> bool {
        RUNNING.with(|r| r.borrow().contains(&id))
    }
}

impl Drop for Running {
    fn drop(&mut self) {
        RUNNING.with(|r| {
            let mut running = r.borrow_mut();
            if let Some(at) = running.iter().rposition(|id| *id == self.0) {
                running.remove(at);
            }
        });
    }
}

/// Instances one guest may have at once: a call that finds them all busy makes another, so a
/// guest busy (or parked) in one call does not hold up the others, up to this many.
const MAX_INSTANCES: usize = 4;

/// The instances of a guest not in a call, and how many exist.
#[derive(Default)]
struct Pool {
    idle: Vec<GuestInstance>,
    total: usize,
    /// Calls waiting for an instance: only then is `freed` signalled (a futex wake per call
    /// would cost more than the call).
    waiting: usize,
}

/// A loaded guest: instances entered by one call at a time, rebuilt after a failure.
pub struct Guest {
    pub path: PathBuf,
    id: u64,
    template: Template,
    pool: Mutex<Pool>,
    /// Signalled when an instance is returned (or dropped) and when the guest is stopped.
    freed: Condvar,
    max_failures: u32,
    failures: AtomicU32,
    switched_off: Mutex<Option<String>>,
    /// Whether `switched_off` is set.
    off: AtomicBool,
    /// Set by [`Guest::stop`]: the server is going away (not the guest's fault).
    stopped: AtomicBool,
}

impl std::fmt::Debug for Guest {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Guest")
            .field("name", &self.name())
            .field("path", &self.path)
            .finish()
    }
}

impl Guest {
    pub fn new(path: PathBuf, template: Template, first: GuestInstance) -> Self {
        static NEXT_ID: AtomicU64 = AtomicU64::new(0);
        Guest {
            max_failures: template.settings.limits.max_consecutive_failures.max(1),
            path,
            id: NEXT_ID.fetch_add(1, Ordering::Relaxed),
            template,
            pool: Mutex::new(Pool {
                idle: vec![first],
                total: 1,
                waiting: 0,
            }),
            freed: Condvar::new(),
            failures: AtomicU32::new(0),
            switched_off: Mutex::new(None),
            off: AtomicBool::new(false),
            stopped: AtomicBool::new(false),
        }
    }

    /// Its declared name once known, else its file's.
    pub fn name(&self) -> &str {
        self.template.settings.name()
    }

    /// `text` with the secret values the guest obtained redacted.
    pub fn redact(&self, text: &str) -> String {
        self.template.settings.revealed.redact(text)
    }

    /// Its policy as it is now.
    pub fn policy(&self) -> Arc<super::policy::Policy> {
        self.template.settings.policy.get()
    }

    /// Names the guest by what it declared, from now on everywhere.
    pub fn declare(&self, name: &str) {
        self.template.settings.declare(name);
    }

    pub fn switched_off(&self) -> Option<String> {
        // Checked on every call: the lock only once it is off.
        if !self.off.load(Ordering::Acquire) {
            return None;
        }
        lock(&self.switched_off).clone()
    }

    /// Runs `call` without holding up the async runtime: on a multi-threaded runtime the calling
    /// thread gives its worker role away for the call (`block_in_place`, no thread hand-off,
    /// which costs ~45 µs on a small VM); elsewhere on the blocking pool.
    pub async fn call<R: Send + 'static>(
        self: &Arc<Self>,
        kind: CallKind,
        call: impl FnOnce(&Api, &mut Store<GuestState>) -> wasmtime::Result<R> + Send + 'static,
    ) -> Result<R, GuestError> {
        // Checked on the caller's thread, where a re-entrant call would come from.
        self.check_entry()?;
        match tokio::runtime::Handle::try_current().map(|h| h.runtime_flavor()) {
            Ok(tokio::runtime::RuntimeFlavor::MultiThread) => {
                tokio::task::block_in_place(|| self.run(kind, call))
            }
            Ok(_) => {
                let guest = self.clone();
                tokio::task::spawn_blocking(move || guest.run(kind, call))
                    .await
                    .unwrap_or_else(|_| {
                        Err(GuestError::HostPanic {
                            guest: self.name().to_owned(),
                        })
                    })
            }
            Err(_) => self.run(kind, call),
        }
    }

    /// Like [`Guest::call`], for threads outside the async runtime (loading, benchmarks).
    pub fn call_blocking<R>(
        &self,
        kind: CallKind,
        call: impl FnOnce(&Api, &mut Store<GuestState>) -> wasmtime::Result<R>,
    ) -> Result<R, GuestError> {
        self.run(kind, call)
    }

    fn check_entry(&self) -> Result<(), GuestError> {
        let guest = || self.name().to_owned();
        if Running::contains(self.id) {
            return Err(GuestError::Reentrant { guest: guest() });
        }
        if let Some(reason) = self.switched_off() {
            return Err(GuestError::SwitchedOff {
                guest: guest(),
                reason,
            });
        }
        Ok(())
    }

    fn run<R>(
        &self,
        kind: CallKind,
        call: impl FnOnce(&Api, &mut Store<GuestState>) -> wasmtime::Result<R>,
    ) -> Result<R, GuestError> {
        // Before waiting: a call from inside this guest's own call would wait for itself.
        self.check_entry()?;
        let limit = kind.wall_limit(&self.template.settings.limits);
        let deadline = Instant::now() + limit;
        let mut live = self.take(deadline, limit)?;
        let _running = Running::enter(self.id);
        live.next_deadline = Some(deadline);
        match live.call(kind, call) {
            Ok(value) => {
                self.failures.store(0, Ordering::Relaxed);
                self.give_back(live);
                Ok(value)
            }
            Err(e) => {
                // A failed instance may be left in any state: it is never entered again.
                let what = describe(&e, live.store.data());
                let stderr = live.store.data().output.stderr_tail();
                // Stopped by the operator's revoke: not the guest's failure, so not counted.
                let revoked = live.store.data().clock.stopped == Some(Stopped::Revoked);
                drop(live);
                self.forget_one();
                let error = if revoked {
                    tracing::info!(guest = self.name(), "call {what}");
                    GuestError::Revoked {
                        guest: self.name().to_owned(),
                        what,
                    }
                } else {
                    self.failed(what, stderr)
                };
                if self.switched_off().is_none() {
                    // Rebuilt now so the next call finds it ready.
                    if let Ok(fresh) = self.template.instantiate() {
                        lock(&self.pool).total += 1;
                        self.give_back(fresh);
                    }
                }
                Err(error)
            }
        }
    }

    /// An idle instance, or a new one while there are fewer than the cap; else waits for one
    /// to be returned, until `deadline`.
    fn take(&self, deadline: Instant, limit: Duration) -> Result<GuestInstance, GuestError> {
        let mut pool = lock(&self.pool);
        loop {
            if let Some(reason) = self.switched_off() {
                return Err(GuestError::SwitchedOff {
                    guest: self.name().to_owned(),
                    reason,
                });
            }
            if let Some(live) = pool.idle.pop() {
                if !live.store.data().is_stale() {
                    return Ok(live);
                }
                // Built under an older policy (its directories and variables are fixed when it
                // starts): replaced by one under the current policy.
                pool.total -= 1;
                drop(live);
                continue;
            }
            if pool.total < MAX_INSTANCES {
                pool.total += 1;
                drop(pool);
                return self.template.instantiate().map_err(|e| {
                    self.forget_one();
                    self.failed(
                        format!("could not be instantiated again: {}", e.root_cause()),
                        None,
                    )
                });
            }
            let now = Instant::now();
            if now >= deadline {
                return Err(GuestError::Busy {
                    guest: self.name().to_owned(),
                    busy: pool.total,
                    limit,
                });
            }
            pool.waiting += 1;
            pool = self
                .freed
                .wait_timeout(pool, deadline - now)
                .unwrap_or_else(std::sync::PoisonError::into_inner)
                .0;
            pool.waiting -= 1;
        }
    }

    /// Returns an instance after a call; a guest switched off meanwhile drops it.
    fn give_back(&self, live: GuestInstance) {
        let mut pool = lock(&self.pool);
        if self.switched_off().is_some() {
            pool.total = pool.total.saturating_sub(1);
        } else {
            pool.idle.push(live);
        }
        let waiting = pool.waiting > 0;
        drop(pool);
        if waiting {
            self.freed.notify_one();
        }
    }

    /// An instance that is gone for good.
    fn forget_one(&self) {
        let mut pool = lock(&self.pool);
        pool.total = pool.total.saturating_sub(1);
        let waiting = pool.waiting > 0;
        drop(pool);
        if waiting {
            self.freed.notify_one();
        }
    }

    /// Counts a failure, switching the guest off at the limit.
    fn failed(&self, what: String, stderr: Option<String>) -> GuestError {
        let guest = self.name().to_owned();
        let (failures, max) = (
            self.failures.fetch_add(1, Ordering::Relaxed) + 1,
            self.max_failures,
        );
        tracing::warn!(
            guest,
            "call failed ({failures} of {max} in a row): {what}{}",
            stderr_note(&stderr)
        );
        if failures < max {
            return GuestError::Failed {
                guest,
                what,
                failures,
                max,
                stderr,
            };
        }
        let reason = format!("{failures} calls failed in a row, the last one {what}");
        tracing::error!(guest, "switching the guest off: {reason}");
        self.switch_off(reason.clone());
        GuestError::SwitchedOff { guest, reason }
    }

    /// Later calls fail; calls in progress end at once (their waits and the epoch check see the
    /// stop); idle instances are dropped now, busy ones when their call returns. Never waits.
    fn switch_off(&self, reason: String) {
        lock(&self.switched_off).get_or_insert(reason);
        self.off.store(true, Ordering::Release);
        self.template.settings.stop.cancel();
        let idle = {
            let mut pool = lock(&self.pool);
            pool.total -= pool.idle.len();
            std::mem::take(&mut pool.idle)
        };
        drop(idle);
        self.freed.notify_all();
    }

    /// Stops the guest for good (at shutdown, or when it is refused after loading).
    pub fn stop(&self) {
        self.stopped.store(true, Ordering::Relaxed);
        self.switch_off("the server is shutting down".into());
    }

    /// Whether [`Guest::stop`] was called.
    pub fn is_stopped(&self) -> bool {
        self.stopped.load(Ordering::Relaxed)
    }
}

/// A lock whose holder panicked is still usable: the data it guards is replaced on failure.
fn lock<T>(mutex: &Mutex<T>) -> std::sync::MutexGuard<'_, T> {
    mutex
        .lock()
        .unwrap_or_else(std::sync::PoisonError::into_inner)
}

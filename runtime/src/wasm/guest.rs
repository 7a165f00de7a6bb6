//! One loaded guest: its live instance (entered by one call at a time, never on an async worker),
//! the `InstancePre` it is rebuilt from after a failure, and its health.

use std::path::PathBuf;
use std::sync::atomic::{AtomicU32, AtomicU64, Ordering};
use std::sync::{Arc, Mutex};

use wasmtime::component::InstancePre;
use wasmtime::{Store, Trap, UpdateDeadline};

use super::limits::memory_limit_message;
use super::sandbox::{GuestSettings, GuestState};
use super::v0_1_0::{extension_export, hooks_export, types};

/// A call into a guest that did not produce the guest's answer.
#[derive(Debug, Clone, thiserror::Error, PartialEq, Eq)]
pub enum GuestError {
    #[error(
        "wasm guest '{guest}' {what}; only this call failed (failure {failures} of {max} in a row \
         before the guest is switched off)"
    )]
    Failed {
        guest: String,
        what: String,
        failures: u32,
        max: u32,
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
        "the host failed while calling wasm guest '{guest}' (a bug in the server: please report it)"
    )]
    HostPanic { guest: String },
    #[error("wasm guest '{guest}' answered with something the host cannot use: {reason}")]
    BadAnswer { guest: String, reason: String },
}

/// A live instance and the exports it has.
pub struct GuestInstance {
    pub store: Store<GuestState>,
    hooks: Option<hooks_export::Guest>,
    extension: Option<extension_export::Guest>,
}

impl GuestInstance {
    /// Starts the CPU clock of a call.
    fn begin(&mut self) {
        self.store.data_mut().start_call();
        self.store.set_epoch_deadline(1);
    }

    fn hooks(&self) -> wasmtime::Result<&hooks_export::Guest> {
        self.hooks
            .as_ref()
            .ok_or_else(|| wasmtime::format_err!("the guest does not export hooks"))
    }

    fn extension(&self) -> wasmtime::Result<&extension_export::Guest> {
        self.extension
            .as_ref()
            .ok_or_else(|| wasmtime::format_err!("the guest does not export extension-api"))
    }

    pub fn propagate_errors(&mut self) -> wasmtime::Result<bool> {
        self.begin();
        self.hooks()?.clone().call_propagate_errors(&mut self.store)
    }

    pub fn on_event(
        &mut self,
        event: &types::HookEvent,
        context: &str,
    ) -> wasmtime::Result<Result<Option<String>, String>> {
        self.begin();
        let hooks = self.hooks()?.clone();
        hooks.call_on_event(&mut self.store, event, context)
    }

    pub fn identity(&mut self) -> wasmtime::Result<extension_export::ExtensionIdentity> {
        self.begin();
        let extension = self.extension()?.clone();
        extension.call_identity(&mut self.store)
    }

    pub fn capabilities(&mut self) -> wasmtime::Result<Vec<types::Capability>> {
        self.begin();
        let extension = self.extension()?.clone();
        extension.call_capabilities(&mut self.store)
    }

    pub fn tools(&mut self) -> wasmtime::Result<Vec<types::ToolSpec>> {
        self.begin();
        let extension = self.extension()?.clone();
        extension.call_tools(&mut self.store)
    }

    pub fn call_tool(
        &mut self,
        name: &str,
        arguments: &str,
    ) -> wasmtime::Result<Result<types::ToolResult, String>> {
        self.begin();
        let extension = self.extension()?.clone();
        extension.call_call_tool(&mut self.store, name, arguments)
    }
}

/// What a fresh instance is made from.
pub struct Template {
    pub pre: InstancePre<GuestState>,
    pub hooks: Option<hooks_export::GuestIndices>,
    pub extension: Option<extension_export::GuestIndices>,
    pub settings: Arc<GuestSettings>,
}

impl Template {
    /// A new `Store` and instance; the instance's start-up runs under the same CPU cap as a call.
    pub fn instantiate(&self) -> wasmtime::Result<GuestInstance> {
        let mut store = Store::new(self.pre.engine(), GuestState::new(self.settings.clone()));
        store.limiter(|state| state.limiter());
        store.epoch_deadline_callback(|mut store| {
            Ok(if store.data_mut().clock.expired() {
                UpdateDeadline::Interrupt
            } else {
                UpdateDeadline::Continue(1)
            })
        });
        store.data_mut().start_call();
        store.set_epoch_deadline(1);
        let instance = self.pre.instantiate(&mut store)?;
        let hooks = match &self.hooks {
            Some(indices) => Some(indices.load(&mut store, &instance)?),
            None => None,
        };
        let extension = match &self.extension {
            Some(indices) => Some(indices.load(&mut store, &instance)?),
            None => None,
        };
        Ok(GuestInstance {
            store,
            hooks,
            extension,
        })
    }
}

/// What went wrong in a call, in words an operator can act on.
fn describe(error: &wasmtime::Error, state: &GuestState) -> String {
    let limits = &state.settings.limits;
    if state.clock.exceeded {
        return format!(
            "used up its CPU time of {} ms for one call (limits.cpu_ms_per_call)",
            limits.cpu_ms_per_call
        );
    }
    let root = error.root_cause().to_string();
    if root.contains(&memory_limit_message(limits.memory_mb)) {
        return root;
    }
    match error.downcast_ref::<Trap>() {
        Some(Trap::StackOverflow) => "overflowed its stack".into(),
        Some(Trap::UnreachableCodeReached) => {
            "trapped: wasm `unreachable` executed (a Rust panic or abort ends this way)".into()
        }
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

/// A loaded guest: one instance, entered by one call at a time, rebuilt after a failure.
pub struct Guest {
    pub name: String,
    pub path: PathBuf,
    id: u64,
    template: Template,
    live: Mutex<Option<GuestInstance>>,
    max_failures: u32,
    failures: AtomicU32,
    switched_off: Mutex<Option<String>>,
}

impl std::fmt::Debug for Guest {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Guest")
            .field("name", &self.name)
            .field("path", &self.path)
            .finish()
    }
}

impl Guest {
    pub fn new(name: String, path: PathBuf, template: Template, first: GuestInstance) -> Self {
        static NEXT_ID: AtomicU64 = AtomicU64::new(0);
        Guest {
            max_failures: template.settings.limits.max_consecutive_failures.max(1),
            name,
            path,
            id: NEXT_ID.fetch_add(1, Ordering::Relaxed),
            template,
            live: Mutex::new(Some(first)),
            failures: AtomicU32::new(0),
            switched_off: Mutex::new(None),
        }
    }

    pub fn switched_off(&self) -> Option<String> {
        lock(&self.switched_off).clone()
    }

    /// Runs `call` without holding up the async runtime: on a multi-threaded runtime the calling
    /// thread gives its worker role away for the call (`block_in_place`, no thread hand-off,
    /// which costs ~45 µs on a small VM); elsewhere on the blocking pool.
    pub async fn call<R: Send + 'static>(
        self: &Arc<Self>,
        call: impl FnOnce(&mut GuestInstance) -> wasmtime::Result<R> + Send + 'static,
    ) -> Result<R, GuestError> {
        // Checked on the caller's thread, where a re-entrant call would come from.
        self.check_entry()?;
        match tokio::runtime::Handle::try_current().map(|h| h.runtime_flavor()) {
            Ok(tokio::runtime::RuntimeFlavor::MultiThread) => {
                tokio::task::block_in_place(|| self.run(call))
            }
            Ok(_) => {
                let guest = self.clone();
                tokio::task::spawn_blocking(move || guest.run(call))
                    .await
                    .unwrap_or_else(|_| {
                        Err(GuestError::HostPanic {
                            guest: self.name.clone(),
                        })
                    })
            }
            Err(_) => self.run(call),
        }
    }

    /// Like [`Guest::call`], for threads outside the async runtime (loading, benchmarks).
    pub fn call_blocking<R>(
        &self,
        call: impl FnOnce(&mut GuestInstance) -> wasmtime::Result<R>,
    ) -> Result<R, GuestError> {
        self.run(call)
    }

    fn check_entry(&self) -> Result<(), GuestError> {
        let guest = self.name.clone();
        if Running::contains(self.id) {
            return Err(GuestError::Reentrant { guest });
        }
        if let Some(reason) = self.switched_off() {
            return Err(GuestError::SwitchedOff { guest, reason });
        }
        Ok(())
    }

    fn run<R>(
        &self,
        call: impl FnOnce(&mut GuestInstance) -> wasmtime::Result<R>,
    ) -> Result<R, GuestError> {
        // Before the lock: a call from inside this guest's own call would wait for itself.
        self.check_entry()?;
        let mut slot = lock(&self.live);
        let _running = Running::enter(self.id);
        if slot.is_none() {
            match self.template.instantiate() {
                Ok(live) => *slot = Some(live),
                Err(e) => {
                    let what = format!("could not be instantiated again: {}", e.root_cause());
                    return Err(self.failed(what));
                }
            }
        }
        let live = slot.as_mut().expect("instance set above");
        match call(live) {
            Ok(value) => {
                self.failures.store(0, Ordering::Relaxed);
                Ok(value)
            }
            Err(e) => {
                // A failed instance may be left in any state: it is never entered again.
                let what = describe(&e, live.store.data());
                *slot = None;
                let error = self.failed(what);
                if self.switched_off().is_none() {
                    // Rebuilt now so the next call finds it ready.
                    *slot = self.template.instantiate().ok();
                }
                Err(error)
            }
        }
    }

    /// Counts a failure, switching the guest off at the limit.
    fn failed(&self, what: String) -> GuestError {
        let guest = self.name.clone();
        let (failures, max) = (
            self.failures.fetch_add(1, Ordering::Relaxed) + 1,
            self.max_failures,
        );
        tracing::warn!(guest, "call failed ({failures} of {max} in a row): {what}");
        if failures < max {
            return GuestError::Failed {
                guest,
                what,
                failures,
                max,
            };
        }
        let reason = format!("{failures} calls failed in a row, the last one {what}");
        tracing::error!(guest, "switching the guest off: {reason}");
        *lock(&self.switched_off) = Some(reason.clone());
        GuestError::SwitchedOff { guest, reason }
    }

    /// Drops the instance; later calls fail.
    pub fn stop(&self) {
        lock(&self.switched_off).get_or_insert_with(|| "the server is shutting down".into());
        lock(&self.live).take();
    }
}

/// A lock whose holder panicked is still usable: the data it guards is replaced on failure.
fn lock<T>(mutex: &Mutex<T>) -> std::sync::MutexGuard<'_, T> {
    mutex
        .lock()
        .unwrap_or_else(std::sync::PoisonError::into_inner)
}

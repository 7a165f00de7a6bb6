//! One loaded guest: a thread of its own that owns its `Store` (so a slow or looping guest never
//! holds an async worker), the `InstancePre` it is rebuilt from after a failure, and its health.

use std::path::PathBuf;
use std::sync::atomic::{AtomicU32, Ordering};
use std::sync::{Arc, Mutex, mpsc};
use std::thread::ThreadId;

use wasmtime::component::InstancePre;
use wasmtime::{Store, Trap, UpdateDeadline};

use super::sandbox::{GuestSettings, GuestState, memory_limit_message};
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
    #[error("wasm guest '{guest}' has stopped (the server is shutting down)")]
    Stopped { guest: String },
    #[error("wasm guest '{guest}' answered with something the host cannot use: {reason}")]
    BadAnswer { guest: String, reason: String },
}

/// A live instance and the exports it has.
pub struct Live {
    pub store: Store<GuestState>,
    hooks: Option<hooks_export::Guest>,
    extension: Option<extension_export::Guest>,
}

impl Live {
    /// Starts the CPU clock of a call.
    fn begin(&mut self) {
        self.store.data_mut().clock.start();
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
    pub fn instantiate(&self) -> wasmtime::Result<Live> {
        let mut store = Store::new(self.pre.engine(), GuestState::new(self.settings.clone()));
        store.limiter(|state| state.limiter());
        store.epoch_deadline_callback(|mut store| {
            Ok(if store.data_mut().clock.expired() {
                UpdateDeadline::Interrupt
            } else {
                UpdateDeadline::Continue(1)
            })
        });
        store.data_mut().clock.start();
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
        Ok(Live {
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

struct Health {
    failures: AtomicU32,
    switched_off: Mutex<Option<String>>,
}

type Job = Box<dyn FnOnce(&mut Option<Live>, &Template) + Send>;

/// A loaded guest. Calls queue to its thread and run one at a time.
pub struct Guest {
    pub name: String,
    pub path: PathBuf,
    max_failures: u32,
    jobs: Mutex<Option<mpsc::Sender<Job>>>,
    thread: ThreadId,
    health: Arc<Health>,
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
    /// Starts the guest's thread with its first instance.
    pub fn start(
        name: String,
        path: PathBuf,
        template: Template,
        first: Live,
    ) -> std::io::Result<Self> {
        let max_failures = template.settings.limits.max_consecutive_failures.max(1);
        let (jobs, queue) = mpsc::channel::<Job>();
        let thread = std::thread::Builder::new()
            .name(format!("wasm-{name}"))
            .spawn(move || {
                let mut live = Some(first);
                for job in queue {
                    job(&mut live, &template);
                }
            })?
            .thread()
            .id();
        Ok(Guest {
            max_failures,
            name,
            path,
            jobs: Mutex::new(Some(jobs)),
            thread,
            health: Arc::new(Health {
                failures: AtomicU32::new(0),
                switched_off: Mutex::new(None),
            }),
        })
    }

    pub fn switched_off(&self) -> Option<String> {
        self.health
            .switched_off
            .lock()
            .expect("health lock")
            .clone()
    }

    /// Runs `call` on the guest's thread and waits for it without blocking the async runtime.
    pub async fn call<R: Send + 'static>(
        &self,
        call: impl FnOnce(&mut Live) -> wasmtime::Result<R> + Send + 'static,
    ) -> Result<R, GuestError> {
        let answer = self.submit(call)?;
        answer.await.unwrap_or_else(|_| {
            Err(GuestError::Stopped {
                guest: self.name.clone(),
            })
        })
    }

    /// Like [`Guest::call`], for threads outside the async runtime (loading, benchmarks).
    pub fn call_blocking<R: Send + 'static>(
        &self,
        call: impl FnOnce(&mut Live) -> wasmtime::Result<R> + Send + 'static,
    ) -> Result<R, GuestError> {
        let answer = self.submit(call)?;
        answer.blocking_recv().unwrap_or_else(|_| {
            Err(GuestError::Stopped {
                guest: self.name.clone(),
            })
        })
    }

    fn submit<R: Send + 'static>(
        &self,
        call: impl FnOnce(&mut Live) -> wasmtime::Result<R> + Send + 'static,
    ) -> Result<tokio::sync::oneshot::Receiver<Result<R, GuestError>>, GuestError> {
        let guest = self.name.clone();
        if std::thread::current().id() == self.thread {
            return Err(GuestError::Reentrant { guest });
        }
        if let Some(reason) = self.switched_off() {
            return Err(GuestError::SwitchedOff { guest, reason });
        }
        let (reply, answer) = tokio::sync::oneshot::channel();
        let health = self.health.clone();
        let max = self.max_failures;
        let job: Job = Box::new(move |slot, template| {
            let fail = |what: String| {
                let failures = health.failures.fetch_add(1, Ordering::Relaxed) + 1;
                tracing::warn!(guest, "call failed ({failures} of {max} in a row): {what}");
                if failures >= max {
                    let reason = format!("{failures} calls failed in a row, the last one {what}");
                    tracing::error!(guest, "switching the guest off: {reason}");
                    *health.switched_off.lock().expect("health lock") = Some(reason.clone());
                    return GuestError::SwitchedOff {
                        guest: guest.clone(),
                        reason,
                    };
                }
                GuestError::Failed {
                    guest: guest.clone(),
                    what,
                    failures,
                    max,
                }
            };
            if slot.is_none() {
                match template.instantiate() {
                    Ok(live) => *slot = Some(live),
                    Err(e) => {
                        let what = format!("could not be instantiated again: {}", e.root_cause());
                        let _ = reply.send(Err(fail(what)));
                        return;
                    }
                }
            }
            let live = slot.as_mut().expect("instance set above");
            match call(live) {
                Ok(value) => {
                    health.failures.store(0, Ordering::Relaxed);
                    let _ = reply.send(Ok(value));
                }
                Err(e) => {
                    // A failed instance may be left in any state: it is never entered again.
                    let what = describe(&e, live.store.data());
                    *slot = None;
                    let _ = reply.send(Err(fail(what)));
                    if health.switched_off.lock().expect("health lock").is_none() {
                        // Rebuilt now, after the answer, so the next call finds it ready.
                        *slot = template.instantiate().ok();
                    }
                }
            }
        });
        let jobs = self.jobs.lock().expect("jobs lock");
        let sender = jobs.as_ref().ok_or_else(|| GuestError::Stopped {
            guest: self.name.clone(),
        })?;
        sender.send(job).map_err(|_| GuestError::Stopped {
            guest: self.name.clone(),
        })?;
        Ok(answer)
    }

    /// Ends the guest's thread once the calls already queued are answered.
    pub fn stop(&self) {
        self.jobs.lock().expect("jobs lock").take();
    }
}

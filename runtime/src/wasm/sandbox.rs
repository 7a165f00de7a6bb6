//! What one guest's `Store` holds: a WASI context with only what its policy grants (the granted
//! directories, the granted environment variables, outgoing HTTP checked per request; no
//! sockets, no stdin), its limits, its settings, and the way its host functions reach the
//! server. The host functions themselves are per WIT version (`v0_1_0/host.rs`); every
//! grantable one passes through [`GuestState::on_notebook`] here and then calls the domain, as
//! tools do.

use std::collections::HashMap;
use std::sync::Arc;
use std::time::{Duration, Instant, SystemTime};

use opentelemetry::KeyValue;

use tokio_util::sync::CancellationToken;
use wasmtime::ResourceLimiter;
use wasmtime::component::{HasSelf, Linker, Resource, ResourceTable};
use wasmtime_wasi::p2::DynPollable;
use wasmtime_wasi::p2::bindings::io::poll as async_poll;
use wasmtime_wasi::p2::bindings::sync::io::poll;
use wasmtime_wasi::{FsPerms, WasiCtx, WasiCtxBuilder, WasiCtxView, WasiView};
use wasmtime_wasi_http::{WasiHttpCtx, WasiHttpCtxView, WasiHttpView};

use super::limits::{CallClock, MemoryCap, Stopped};
use super::outgoing::OutgoingHttp;
use super::output::GuestOutput;
use super::policy::Policy;
use super::policy::grants::HostFunction;
use super::settings::GuestSettings;
use super::wait::{time_boxed, waited};
use crate::config::policy::Access;
use crate::domain::Domain;
use crate::domain::notebooks::NotebookInUse;
use crate::hooks::{CallScope, GuestUse};

pub struct GuestState {
    wasi: WasiCtx,
    pub(super) table: ResourceTable,
    pub output: GuestOutput,
    limiter: MemoryCap,
    pub settings: Arc<GuestSettings>,
    pub clock: CallClock,
    /// The cells this call has read, by notebook name: (id, source) in order. An overwrite of a
    /// cell read here expects the source the guest saw, so someone else's edit since is a
    /// conflict, as for a tool.
    pub seen: HashMap<String, Vec<(String, String)>>,
    http: WasiHttpCtx,
    pub(super) outgoing: OutgoingHttp,
    /// The policy this instance was built under: its directories and variables.
    pub policy: Arc<Policy>,
    generation: u64,
    /// Set once a change of policy took away a directory this instance holds.
    lost_storage: Option<String>,
}

impl GuestState {
    pub fn new(settings: Arc<GuestSettings>) -> Self {
        // Nothing inherited: stdin closed, no args or sockets (WASI's defaults; we never add to
        // them); only the granted variables and directories. Stdout and stderr go to the
        // server's log.
        let generation = settings.policy.generation();
        let policy = settings.policy.get();
        let output = GuestOutput::new(settings.clone());
        let mut wasi = WasiCtxBuilder::new();
        wasi.stdout(output.stdout()).stderr(output.stderr());
        for name in &policy.entry.env {
            // An absent (or non-UTF-8) variable is simply absent.
            if let Ok(value) = std::env::var(name) {
                wasi.env(name, value);
            }
        }
        for mount in &policy.mounts {
            let perms = match mount.access {
                Access::Read => FsPerms::ReadOnly,
                Access::ReadWrite => FsPerms::ReadWrite,
            };
            if let Err(e) = wasi.preopened_dir(&mount.host, &mount.guest, perms) {
                tracing::warn!(
                    guest = settings.name(),
                    "storage '{}' ({}) is not mounted: {e:#}; create the directory, or remove it                      from storage in the guest's [[extension]] entry",
                    mount.guest,
                    mount.host.display()
                );
            }
        }
        GuestState {
            wasi: wasi.build(),
            table: ResourceTable::new(),
            http: WasiHttpCtx::new(),
            outgoing: OutgoingHttp::new(settings.clone()),
            policy,
            generation,
            lost_storage: None,
            output,
            limiter: MemoryCap::new(settings.limits.memory_mb),
            clock: CallClock::new(Duration::from_millis(settings.limits.cpu_ms_per_call)),
            settings,
            seen: HashMap::new(),
        }
    }

    pub fn limiter(&mut self) -> &mut dyn ResourceLimiter {
        &mut self.limiter
    }

    /// Each call into the guest starts with fresh clocks, nothing seen and no stderr.
    pub fn start_call(&mut self, deadline: Instant, wall_limit: Duration) {
        self.clock.start(deadline, wall_limit);
        self.outgoing.deadline = deadline;
        self.seen.clear();
        self.output.start_call();
    }

    /// A line the guest logs through the WIT's `log`, tagged with its name.
    pub fn log(&self, level: tracing::Level, message: &str) {
        let guest = self.settings.name();
        match level {
            tracing::Level::TRACE => tracing::trace!(guest, "{message}"),
            tracing::Level::DEBUG => tracing::debug!(guest, "{message}"),
            tracing::Level::INFO => tracing::info!(guest, "{message}"),
            tracing::Level::WARN => tracing::warn!(guest, "{message}"),
            tracing::Level::ERROR => tracing::error!(guest, "{message}"),
        }
    }

    /// Checked at each epoch tick: whether the call must stop now.
    pub fn must_stop(&mut self) -> bool {
        if self.settings.stop.is_cancelled() {
            self.clock.stopped.get_or_insert(Stopped::Shutdown);
        }
        self.note_revocation();
        self.clock.expired().is_some()
    }

    /// Marks the call stopped when a directory it holds was revoked; checked at each epoch
    /// tick and before each WASI wait, so a guest that sleeps between reads is stopped too.
    pub fn note_revocation(&mut self) {
        if self.storage_revoked() {
            self.clock.stopped.get_or_insert(Stopped::Revoked);
        }
    }

    /// Whether this instance was built under an older policy (it is then replaced before its
    /// next call).
    pub fn is_stale(&self) -> bool {
        self.generation != self.settings.policy.generation()
    }

    /// Whether the operator took away (or narrowed) a directory this instance has mounted:
    /// its call in progress is stopped, since open files cannot be taken back from it.
    fn storage_revoked(&mut self) -> bool {
        if self.lost_storage.is_some() {
            return true;
        }
        if self.policy.mounts.is_empty() || !self.is_stale() {
            return false;
        }
        let now = self.settings.policy.get();
        let lost = self.policy.mounts.iter().find(|held| {
            !now.mounts.iter().any(|m| {
                m.host == held.host && (m.access == held.access || held.access == Access::Read)
            })
        });
        self.lost_storage = lost.map(|m| format!("storage:{}:{}", m.guest, m.access.as_str()));
        self.lost_storage.is_some()
    }

    /// The grant whose revocation stopped the call, for its error.
    pub fn revoked_storage(&self) -> Option<&str> {
        self.lost_storage.as_deref()
    }
}

impl WasiHttpView for GuestState {
    fn http(&mut self) -> WasiHttpCtxView<'_> {
        WasiHttpCtxView {
            ctx: &mut self.http,
            table: &mut self.table,
            hooks: &mut self.outgoing,
        }
    }
}

impl WasiView for GuestState {
    fn ctx(&mut self) -> WasiCtxView<'_> {
        WasiCtxView {
            ctx: &mut self.wasi,
            table: &mut self.table,
        }
    }
}

/// Replaces the `wasi:io/poll` that `add_to_linker_sync` linked (for every 0.2.x version a guest
/// may import: the linker matches them by semver) with the time-boxed one below.
pub fn link_poll(linker: &mut Linker<GuestState>) -> wasmtime::Result<()> {
    linker.allow_shadowing(true);
    let linked = poll::add_to_linker::<GuestState, HasSelf<GuestState>>(linker, |s| s);
    linker.allow_shadowing(false);
    linked
}

impl GuestState {
    /// What a wait needs, borrowed apart: the table its future reads, the clock it runs on.
    fn for_wait(&mut self) -> (&mut ResourceTable, &mut CallClock, &CancellationToken) {
        (&mut self.table, &mut self.clock, &self.settings.stop)
    }
}

impl poll::Host for GuestState {
    fn poll(&mut self, pollables: Vec<Resource<DynPollable>>) -> wasmtime::Result<Vec<u32>> {
        self.note_revocation();
        let (table, clock, stop) = self.for_wait();
        waited(clock, stop, async_poll::Host::poll(table, pollables))
    }
}

impl poll::HostPollable for GuestState {
    fn ready(&mut self, pollable: Resource<DynPollable>) -> wasmtime::Result<bool> {
        // Never waits: it polls once.
        wasmtime_wasi::runtime::in_tokio(async_poll::HostPollable::ready(&mut self.table, pollable))
    }

    fn block(&mut self, pollable: Resource<DynPollable>) -> wasmtime::Result<()> {
        self.note_revocation();
        let (table, clock, stop) = self.for_wait();
        waited(
            clock,
            stop,
            async_poll::HostPollable::block(table, pollable),
        )
    }

    fn drop(&mut self, pollable: Resource<DynPollable>) -> wasmtime::Result<()> {
        async_poll::HostPollable::drop(&mut self.table, pollable)
    }
}

/// Why a grantable host function did not do what was asked (each WIT version has its own type
/// for this; see its conversions).
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum HostCallError {
    NotGranted(String),
    NotAvailable(String),
    /// No such notebook in use, or no such cell.
    NotFound(String),
    /// The cell changed since the guest saw it.
    Conflict(String),
    /// The kernel is gone or failed.
    Kernel(String),
    /// The arguments make no sense (an index past the end, ...).
    Invalid(String),
    Failed(String),
    /// The call's deadline passed (or the server stopped) while the host function waited.
    Stopped(Stopped),
}

impl From<crate::domain::Error> for HostCallError {
    fn from(error: crate::domain::Error) -> Self {
        use crate::domain::Error;
        let message = error.to_string();
        match error {
            Error::InvalidArguments(_) => HostCallError::Invalid(message),
            Error::NotFound(_) => HostCallError::NotFound(message),
            Error::Conflict(_) => HostCallError::Conflict(message),
            Error::Kernel(_) => HostCallError::Kernel(message),
            Error::Failed(_) => HostCallError::Failed(message),
        }
    }
}

pub type HostResult<R> = Result<R, HostCallError>;

impl GuestSettings {
    /// The refusal, with a line in the operator's log saying how to grant it.
    fn refuse(&self, function: HostFunction, notebook: Option<&str>) -> HostCallError {
        let grant = match notebook {
            Some(name) => format!("\"{function}\" (or \"{function}:{name}\")"),
            None => format!("\"{function}\""),
        };
        let on = notebook
            .map(|n| format!(" on notebook '{n}'"))
            .unwrap_or_default();
        tracing::warn!(
            guest = self.name(),
            "refused a call to host function '{function}'{on}: not granted. To allow it, add \
             {grant} to grants of this guest's [[extension]] entry in the config file"
        );
        HostCallError::NotGranted(format!(
            "host function '{function}'{on} is not granted to '{}'; the operator can add {grant} \
             to this guest's grants",
            self.name()
        ))
    }
}

impl GuestState {
    /// Every grantable function passes here, off the guest's CPU clock: refused unless granted
    /// for the notebook it resolves to; otherwise `work` runs on the server's runtime while this
    /// (blocking-permitted) thread waits, no longer than the call's deadline.
    pub fn on_notebook<R, F, Fut>(
        &mut self,
        function: HostFunction,
        notebook: &str,
        work: F,
    ) -> HostResult<R>
    where
        F: FnOnce(Arc<NotebookInUse>, Arc<Domain>) -> Fut,
        Fut: std::future::Future<Output = HostResult<R>>,
    {
        let settings = self.settings.clone();
        let deadline = self.clock.deadline;
        let started = SystemTime::now();
        // The policy as it is now: a grant or revoke counts from the next use.
        let policy = settings.policy.get();
        let outcome = self.clock.off_the_clock(|| {
            if !policy.grants.allows(function, None) {
                return Err(settings.refuse(function, None));
            }
            let Some((domain, handle)) = settings.link.get() else {
                return Err(HostCallError::NotAvailable(format!(
                    "host function '{function}' is not available until the server has started"
                )));
            };
            let in_use = domain.notebook(Some(notebook))?;
            if !policy.grants.allows(function, Some(&in_use.name)) {
                return Err(settings.refuse(function, Some(&in_use.name)));
            }
            let _enter = handle.enter();
            time_boxed(deadline, &settings.stop, work(in_use, domain))
                .unwrap_or_else(|why| Err(HostCallError::Stopped(why)))
        });
        let refused = matches!(outcome, Err(HostCallError::NotGranted(_)));
        let mut attributes = vec![
            KeyValue::new("extension.name", settings.name().to_owned()),
            KeyValue::new("host_function.name", function.name()),
            KeyValue::new("allowed", !refused),
        ];
        if !notebook.is_empty() {
            attributes.push(KeyValue::new("notebook", notebook.to_owned()));
        }
        if let Err(e) = &outcome {
            attributes.push(KeyValue::new("error", true));
            attributes.push(KeyValue::new("error.message", format!("{e:?}")));
        }
        GuestUse::ended("extension.host_function", started, attributes)
            .record(CallScope::current().as_ref());
        if let Err(HostCallError::Stopped(why)) = &outcome {
            // The guest gets the error back, and the epoch check ends it as soon as it runs on.
            self.clock.stopped = Some(*why);
        }
        outcome
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn ungranted_functions_are_refused_and_granted_ones_wait_for_the_server() {
        let settings = |grants: &[&str]| Arc::new(GuestSettings::for_tests_with("g", grants));
        let never = |_: Arc<NotebookInUse>, _: Arc<Domain>| async { Ok(()) };
        let mut state = GuestState::new(settings(&[]));
        match state.on_notebook(HostFunction::ReadCells, "", never) {
            Err(HostCallError::NotGranted(message)) => {
                assert!(
                    message.contains("'read-cells' is not granted to 'g'"),
                    "{message}"
                )
            }
            other => panic!("{other:?}"),
        }
        let mut state = GuestState::new(settings(&["delete-cell"]));
        assert!(matches!(
            state.on_notebook(HostFunction::DeleteCell, "", never),
            Err(HostCallError::NotAvailable(_))
        ));
    }
}

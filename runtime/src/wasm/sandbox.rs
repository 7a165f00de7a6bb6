//! What one guest's `Store` holds: an empty WASI context (no files, network, environment or
//! stdio), its limits, its settings, and the way its host functions reach the server. The host
//! functions themselves are per WIT version (`v0_1_0/host.rs`); every grantable one passes
//! through [`GuestState::on_notebook`] here and then calls the domain, as tools do.

use std::collections::HashMap;
use std::sync::{Arc, OnceLock, Weak};
use std::time::{Duration, Instant};

use tokio::runtime::Handle;
use tokio_util::sync::CancellationToken;

use wasmtime::ResourceLimiter;
use wasmtime::component::ResourceTable;
use wasmtime_wasi::{WasiCtx, WasiCtxBuilder, WasiCtxView, WasiView};

use super::grants::{Grants, HostFunction};
use super::limits::{CallClock, MemoryCap, Stopped};
use super::output::{GuestOutput, LogBudget};
use super::wait::time_boxed;
use crate::config::GuestLimits;
use crate::domain::Domain;
use crate::domain::notebooks::NotebookInUse;

/// What does not change between instances of one guest.
#[derive(Debug)]
pub struct GuestSettings {
    /// The file's stem: the guest's name until it declares one.
    pub file_name: String,
    /// The name from its `identity`, once asked.
    declared: OnceLock<String>,
    /// The guest's `config` table as JSON.
    pub config_json: String,
    pub grants: Grants,
    pub limits: GuestLimits,
    /// Shared by every guest of the process.
    pub link: Arc<HostLink>,
    /// Cancelled when the guest is switched off or the server stops: every wait of its calls
    /// ends at once.
    pub stop: CancellationToken,
    pub log_budget: LogBudget,
}

impl GuestSettings {
    pub fn new(
        file_name: String,
        config_json: String,
        grants: Grants,
        limits: GuestLimits,
        link: Arc<HostLink>,
    ) -> Self {
        GuestSettings {
            file_name,
            declared: OnceLock::new(),
            config_json,
            grants,
            limits,
            link,
            stop: CancellationToken::new(),
            log_budget: LogBudget::default(),
        }
    }

    #[cfg(test)]
    pub fn for_tests(name: &str) -> Self {
        Self::new(
            name.into(),
            "{}".into(),
            Grants::default(),
            GuestLimits::default(),
            Arc::default(),
        )
    }

    /// One name everywhere: the declared one once known, the file's before.
    pub fn name(&self) -> &str {
        self.declared.get().unwrap_or(&self.file_name)
    }

    /// Records the name the guest declared (the first one counts).
    pub fn declare(&self, name: &str) {
        let _ = self.declared.set(name.to_owned());
    }
}

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
}

impl GuestState {
    pub fn new(settings: Arc<GuestSettings>) -> Self {
        // Nothing inherited: stdin closed, no env, args, preopens or sockets (WASI's defaults; we
        // never add to them). Stdout and stderr go to the server's log.
        let output = GuestOutput::new(settings.clone());
        let wasi = WasiCtxBuilder::new()
            .stdout(output.stdout())
            .stderr(output.stderr())
            .build();
        GuestState {
            wasi,
            table: ResourceTable::new(),
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
        self.clock.expired().is_some()
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

/// Where host functions reach the server. Guests load before the domain exists, so it is
/// connected afterwards; until then notebook functions answer `not-available`.
#[derive(Default)]
pub struct HostLink {
    server: OnceLock<(Weak<Domain>, Handle)>,
}

impl HostLink {
    /// Called once, on the async runtime, when the domain exists.
    pub fn connect(&self, domain: &Arc<Domain>) {
        let _ = self.server.set((Arc::downgrade(domain), Handle::current()));
    }

    fn get(&self) -> Option<(Arc<Domain>, Handle)> {
        let (domain, handle) = self.server.get()?;
        Some((domain.upgrade()?, handle.clone()))
    }
}

impl std::fmt::Debug for HostLink {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("HostLink")
            .field("connected", &self.server.get().is_some())
            .finish()
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
        let outcome = self.clock.off_the_clock(|| {
            if !settings.grants.allows(function, None) {
                return Err(settings.refuse(function, None));
            }
            let Some((domain, handle)) = settings.link.get() else {
                return Err(HostCallError::NotAvailable(format!(
                    "host function '{function}' is not available until the server has started"
                )));
            };
            let in_use = domain.notebook(Some(notebook))?;
            if !settings.grants.allows(function, Some(&in_use.name)) {
                return Err(settings.refuse(function, Some(&in_use.name)));
            }
            let _enter = handle.enter();
            time_boxed(deadline, &settings.stop, work(in_use, domain))
                .unwrap_or_else(|why| Err(HostCallError::Stopped(why)))
        });
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
        let settings = |grants: &[&str]| {
            let grants: Vec<String> = grants.iter().map(|g| g.to_string()).collect();
            Arc::new(GuestSettings {
                grants: Grants::parse(&grants).unwrap(),
                ..GuestSettings::for_tests("g")
            })
        };
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

//! What one guest's `Store` holds and what the host offers it: an empty WASI context (no files,
//! network, environment or stdio), a memory cap, the per-call CPU clock, and the host functions
//! of the WIT (logging, its own config, the grantable notebook functions).

use std::sync::Arc;
use std::time::{Duration, Instant};

use wasmtime::component::ResourceTable;
use wasmtime::{ResourceLimiter, StoreLimits, StoreLimitsBuilder};
use wasmtime_wasi::{WasiCtx, WasiCtxBuilder, WasiCtxView, WasiView};

use super::v0_1_0::{config, log, notebook, types};
use crate::config::GuestLimits;

/// The host functions a guest may be granted, by the names used in `grants`.
pub const GRANTABLE: [&str; 6] = [
    "execute-code",
    "read-cells",
    "insert-cell",
    "overwrite-cell",
    "move-cell",
    "delete-cell",
];

/// What does not change between instances of one guest.
#[derive(Debug)]
pub struct GuestSettings {
    pub name: String,
    /// The guest's `config` table as JSON.
    pub config_json: String,
    pub grants: Vec<String>,
    pub limits: GuestLimits,
}

pub struct GuestState {
    wasi: WasiCtx,
    table: ResourceTable,
    limiter: MemoryCap,
    pub settings: Arc<GuestSettings>,
    pub clock: CallClock,
}

impl GuestState {
    pub fn new(settings: Arc<GuestSettings>) -> Self {
        // Nothing inherited: stdin closed, stdout/stderr discarded, no env, args, preopens or
        // sockets (WASI's defaults; we never add to them).
        let wasi = WasiCtxBuilder::new().build();
        let bytes = usize::try_from(settings.limits.memory_mb.saturating_mul(1 << 20))
            .unwrap_or(usize::MAX);
        GuestState {
            wasi,
            table: ResourceTable::new(),
            limiter: MemoryCap {
                inner: StoreLimitsBuilder::new()
                    .memory_size(bytes)
                    .trap_on_grow_failure(true)
                    .build(),
                mb: settings.limits.memory_mb,
            },
            clock: CallClock::new(Duration::from_millis(settings.limits.cpu_ms_per_call)),
            settings,
        }
    }

    pub fn limiter(&mut self) -> &mut dyn ResourceLimiter {
        &mut self.limiter
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

/// `StoreLimits` with an error that says which limit was hit.
struct MemoryCap {
    inner: StoreLimits,
    mb: u64,
}

impl ResourceLimiter for MemoryCap {
    fn memory_growing(
        &mut self,
        current: usize,
        desired: usize,
        maximum: Option<usize>,
    ) -> wasmtime::Result<bool> {
        match self.inner.memory_growing(current, desired, maximum) {
            Ok(true) => Ok(true),
            _ => Err(wasmtime::format_err!(
                "{}: the guest asked for {} MiB",
                memory_limit_message(self.mb),
                desired >> 20
            )),
        }
    }

    fn table_growing(
        &mut self,
        current: usize,
        desired: usize,
        maximum: Option<usize>,
    ) -> wasmtime::Result<bool> {
        self.inner.table_growing(current, desired, maximum)
    }
}

pub fn memory_limit_message(mb: u64) -> String {
    format!("reached its memory limit of {mb} MiB (limits.memory_mb)")
}

/// CPU time of the call in progress. The epoch ticker only wakes the check; time spent in host
/// functions (waiting on a kernel, say) is not the guest's and is subtracted.
#[derive(Debug)]
pub struct CallClock {
    pub limit: Duration,
    started: Instant,
    in_host: Duration,
    pub exceeded: bool,
}

impl CallClock {
    fn new(limit: Duration) -> Self {
        CallClock {
            limit,
            started: Instant::now(),
            in_host: Duration::ZERO,
            exceeded: false,
        }
    }

    pub fn start(&mut self) {
        self.started = Instant::now();
        self.in_host = Duration::ZERO;
        self.exceeded = false;
    }

    /// Checked at each epoch tick: `true` when the guest has used up its time.
    pub fn expired(&mut self) -> bool {
        let used = self.started.elapsed().saturating_sub(self.in_host);
        self.exceeded = used >= self.limit;
        self.exceeded
    }

    /// Runs a host function off the guest's clock.
    fn off_the_clock<R>(&mut self, f: impl FnOnce() -> R) -> R {
        let started = Instant::now();
        let result = f();
        self.in_host += started.elapsed();
        result
    }
}

impl types::Host for GuestState {}

impl log::Host for GuestState {
    fn log(&mut self, level: log::Level, message: String) {
        let guest = self.settings.name.as_str();
        match level {
            log::Level::Trace => tracing::trace!(guest, "{message}"),
            log::Level::Debug => tracing::debug!(guest, "{message}"),
            log::Level::Info => tracing::info!(guest, "{message}"),
            log::Level::Warn => tracing::warn!(guest, "{message}"),
            log::Level::Error => tracing::error!(guest, "{message}"),
        }
    }
}

impl config::Host for GuestState {
    fn get_config(&mut self) -> String {
        self.settings.config_json.clone()
    }
}

impl GuestState {
    /// Every grantable function passes here first: refused unless granted (with a line in the
    /// operator's log saying how to grant it), and otherwise not yet provided by this host.
    fn grantable<R>(&mut self, function: &str) -> Result<R, types::HostError> {
        self.clock.off_the_clock(|| {
            let settings = &self.settings;
            if !settings.grants.iter().any(|g| g == function) {
                tracing::warn!(
                    guest = settings.name,
                    "refused a call to host function '{function}': not granted. To allow it, add \
                     \"{function}\" to grants of this guest's [[extension]] entry in the config file"
                );
                return Err(types::HostError::NotGranted(format!(
                    "host function '{function}' is not granted to '{}'; the operator can add it \
                     to this guest's grants",
                    settings.name
                )));
            }
            Err(types::HostError::NotAvailable(format!(
                "host function '{function}' is not available in this version of the server"
            )))
        })
    }
}

impl notebook::Host for GuestState {
    fn execute_code(
        &mut self,
        _notebook: String,
        _code: String,
        _timeout_seconds: Option<u32>,
    ) -> Result<String, types::HostError> {
        self.grantable("execute-code")
    }

    fn read_cells(&mut self, _notebook: String) -> Result<Vec<types::Cell>, types::HostError> {
        self.grantable("read-cells")
    }

    fn insert_cell(
        &mut self,
        _notebook: String,
        _index: u32,
        _kind: types::CellKind,
        _source: String,
    ) -> Result<String, types::HostError> {
        self.grantable("insert-cell")
    }

    fn overwrite_cell(
        &mut self,
        _notebook: String,
        _index: u32,
        _source: String,
    ) -> Result<(), types::HostError> {
        self.grantable("overwrite-cell")
    }

    fn move_cell(
        &mut self,
        _notebook: String,
        _from: u32,
        _to: u32,
    ) -> Result<(), types::HostError> {
        self.grantable("move-cell")
    }

    fn delete_cell(&mut self, _notebook: String, _index: u32) -> Result<(), types::HostError> {
        self.grantable("delete-cell")
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn time_in_host_functions_is_not_the_guests() {
        let mut clock = CallClock::new(Duration::from_millis(30));
        clock.start();
        // 60 ms waiting on the host (a kernel, say) leaves the guest's 30 ms untouched.
        clock.off_the_clock(|| std::thread::sleep(Duration::from_millis(60)));
        assert!(!clock.expired());
        std::thread::sleep(Duration::from_millis(40));
        assert!(clock.expired() && clock.exceeded);
        clock.start();
        assert!(
            !clock.expired() && !clock.exceeded,
            "each call starts afresh"
        );
    }

    #[test]
    fn ungranted_functions_are_refused_and_granted_ones_not_available_yet() {
        use notebook::Host as _;
        let settings = |grants: Vec<String>| {
            Arc::new(GuestSettings {
                name: "g".into(),
                config_json: "{}".into(),
                grants,
                limits: GuestLimits::default(),
            })
        };
        let mut state = GuestState::new(settings(Vec::new()));
        match state.read_cells(String::new()) {
            Err(types::HostError::NotGranted(message)) => {
                assert!(
                    message.contains("'read-cells' is not granted to 'g'"),
                    "{message}"
                )
            }
            other => panic!("{other:?}"),
        }
        let mut state = GuestState::new(settings(vec!["delete-cell".into()]));
        assert!(matches!(
            state.delete_cell(String::new(), 0),
            Err(types::HostError::NotAvailable(_))
        ));
    }
}

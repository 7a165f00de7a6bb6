//! What one guest's `Store` holds and what the host offers it: an empty WASI context (no files,
//! network, environment or stdio), a memory cap, the per-call CPU clock, and the host functions
//! of the WIT (logging, its own config, the grantable notebook functions).

use std::sync::{Arc, OnceLock, Weak};
use std::time::{Duration, Instant};

use serde_json::Value;
use tokio::runtime::Handle;

use wasmtime::component::ResourceTable;
use wasmtime::{ResourceLimiter, StoreLimits, StoreLimitsBuilder};
use wasmtime_wasi::{WasiCtx, WasiCtxBuilder, WasiCtxView, WasiView};

use super::v0_1_0::{config, log, notebook, types};
use crate::config::GuestLimits;
use crate::jupyter::document::Edit;
use crate::jupyter::kernel::ExecutionRequest;
use crate::jupyter::notebook::{Cell, CellType, Notebook};
use crate::notebooks::NotebookInUse;
use crate::state::ServerState;

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
    /// `function` or `function:notebook` (see [`parse_grant`]).
    pub grants: Vec<String>,
    pub limits: GuestLimits,
    /// Shared by every guest of the process.
    pub link: Arc<HostLink>,
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

/// One entry of `grants`: `read-cells` covers every notebook in use, `read-cells:nb1` only the
/// notebook in use under the name `nb1`.
pub fn parse_grant(grant: &str) -> Result<(&str, Option<&str>), String> {
    let (function, notebook) = match grant.split_once(':') {
        Some((function, notebook)) => (function, Some(notebook)),
        None => (grant, None),
    };
    if !GRANTABLE.contains(&function) {
        return Err(format!(
            "its grants name '{function}', which is no host function; grantable: {} (each \
             optionally followed by :NOTEBOOK to cover only that notebook)",
            GRANTABLE.join(", ")
        ));
    }
    if notebook.is_some_and(|n| n.trim().is_empty()) {
        return Err(format!(
            "its grant '{grant}' names no notebook after ':'; write '{function}' for every \
             notebook in use or '{function}:NAME' for one"
        ));
    }
    Ok((function, notebook))
}

/// Where host functions reach the server. Guests load before the server's state exists, so it is
/// connected afterwards; until then notebook functions answer `not-available`.
#[derive(Default)]
pub struct HostLink {
    server: OnceLock<(Weak<ServerState>, Handle)>,
}

impl HostLink {
    /// Called once, on the async runtime, when the server's state exists.
    pub fn connect(&self, state: &Arc<ServerState>) {
        let _ = self.server.set((Arc::downgrade(state), Handle::current()));
    }

    fn get(&self) -> Option<(Arc<ServerState>, Handle)> {
        let (state, handle) = self.server.get()?;
        Some((state.upgrade()?, handle.clone()))
    }
}

impl std::fmt::Debug for HostLink {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("HostLink")
            .field("connected", &self.server.get().is_some())
            .finish()
    }
}

type HostResult<R> = Result<R, types::HostError>;

impl GuestSettings {
    /// Whether `function` is granted for some notebook, and whether for `notebook` in particular.
    fn granted(&self, function: &str, notebook: Option<&str>) -> bool {
        self.grants.iter().any(|g| match parse_grant(g) {
            Ok((f, scope)) => {
                f == function && (scope.is_none() || notebook.is_none() || scope == notebook)
            }
            Err(_) => false,
        })
    }

    /// The refusal, with a line in the operator's log saying how to grant it.
    fn refuse(&self, function: &str, notebook: Option<&str>) -> types::HostError {
        let grant = match notebook {
            Some(name) => format!("\"{function}\" (or \"{function}:{name}\")"),
            None => format!("\"{function}\""),
        };
        let on = notebook
            .map(|n| format!(" on notebook '{n}'"))
            .unwrap_or_default();
        tracing::warn!(
            guest = self.name,
            "refused a call to host function '{function}'{on}: not granted. To allow it, add \
             {grant} to grants of this guest's [[extension]] entry in the config file"
        );
        types::HostError::NotGranted(format!(
            "host function '{function}'{on} is not granted to '{}'; the operator can add {grant} \
             to this guest's grants",
            self.name
        ))
    }
}

fn failed(error: impl std::fmt::Display) -> types::HostError {
    types::HostError::Failed(error.to_string())
}

impl GuestState {
    /// Every grantable function passes here, off the guest's CPU clock: refused unless granted
    /// for the notebook it resolves to; otherwise `work` runs on the server's runtime while this
    /// (blocking-permitted) thread waits.
    fn on_notebook<R, F, Fut>(&mut self, function: &str, notebook: &str, work: F) -> HostResult<R>
    where
        F: FnOnce(Arc<NotebookInUse>, Arc<ServerState>) -> Fut,
        Fut: std::future::Future<Output = HostResult<R>>,
    {
        let settings = self.settings.clone();
        self.clock.off_the_clock(|| {
            if !settings.granted(function, None) {
                return Err(settings.refuse(function, None));
            }
            let Some((state, handle)) = settings.link.get() else {
                return Err(types::HostError::NotAvailable(format!(
                    "host function '{function}' is not available until the server has started"
                )));
            };
            let in_use = state.notebooks.resolve(Some(notebook)).map_err(failed)?;
            if !settings.granted(function, Some(&in_use.name)) {
                return Err(settings.refuse(function, Some(&in_use.name)));
            }
            handle.block_on(work(in_use, state))
        })
    }
}

/// The id of the cell at `index`, or why there is none.
fn cell_at(notebook: &Notebook, index: u32) -> Result<String, String> {
    notebook
        .cells
        .get(index as usize)
        .map(|c| c.id.clone())
        .ok_or_else(|| {
            format!(
                "there is no cell at index {index}: the notebook has {} cells (indexes start at 0)",
                notebook.cells.len()
            )
        })
}

fn kind_of(kind: types::CellKind) -> CellType {
    match kind {
        types::CellKind::Code => CellType::Code,
        types::CellKind::Markdown => CellType::Markdown,
        types::CellKind::Raw => CellType::Raw,
    }
}

fn to_wit(cell: &Cell) -> types::Cell {
    types::Cell {
        id: cell.id.clone(),
        kind: match cell.cell_type {
            CellType::Code => types::CellKind::Code,
            CellType::Markdown => types::CellKind::Markdown,
            CellType::Raw => types::CellKind::Raw,
        },
        source: cell.source.clone(),
        metadata: Value::Object(cell.metadata.clone()).to_string(),
        outputs: Value::Array(cell.outputs.clone()).to_string(),
    }
}

/// Plans edits by index against the newest version of the notebook.
async fn edit_at(
    notebook: &NotebookInUse,
    plan: impl FnOnce(&Notebook) -> Result<Vec<Edit>, String> + Send,
) -> HostResult<()> {
    notebook
        .update(Box::new(plan))
        .await
        .map(drop)
        .map_err(failed)
}

impl notebook::Host for GuestState {
    fn execute_code(
        &mut self,
        notebook: String,
        code: String,
        timeout_seconds: Option<u32>,
    ) -> HostResult<String> {
        self.on_notebook("execute-code", &notebook, |in_use, state| async move {
            let timeout = state
                .config
                .execution
                .resolve(timeout_seconds.map_or(0.0, f64::from));
            // The kernel's own execute path: the execute hooks (and so every policy) fire.
            let outcome = in_use
                .kernel()
                .execute(ExecutionRequest::new(code, timeout))
                .await
                .map_err(failed)?;
            Ok(Value::Array(outcome.outputs).to_string())
        })
    }

    fn read_cells(&mut self, notebook: String) -> HostResult<Vec<types::Cell>> {
        self.on_notebook("read-cells", &notebook, |in_use, _| async move {
            let notebook = in_use.document.read().await.map_err(failed)?;
            Ok(notebook.cells.iter().map(to_wit).collect())
        })
    }

    fn insert_cell(
        &mut self,
        notebook: String,
        index: u32,
        kind: types::CellKind,
        source: String,
    ) -> HostResult<String> {
        self.on_notebook("insert-cell", &notebook, |in_use, _| async move {
            let cell = Cell::new(kind_of(kind), source);
            let id = cell.id.clone();
            edit_at(&in_use, move |nb| {
                if index as usize > nb.cells.len() {
                    return Err(format!(
                        "cannot insert at index {index}: the notebook has {} cells (use {} to \
                         append)",
                        nb.cells.len(),
                        nb.cells.len()
                    ));
                }
                Ok(vec![Edit::Insert {
                    index: index as usize,
                    cell,
                }])
            })
            .await?;
            Ok(id)
        })
    }

    fn overwrite_cell(&mut self, notebook: String, index: u32, source: String) -> HostResult<()> {
        self.on_notebook("overwrite-cell", &notebook, |in_use, _| async move {
            edit_at(&in_use, move |nb| {
                let cell_id = cell_at(nb, index)?;
                let mut edits = vec![Edit::SetSource {
                    cell_id: cell_id.clone(),
                    source,
                    expected: None,
                }];
                if nb.cells[index as usize].cell_type == CellType::Code {
                    // New source, so the old outputs no longer describe it.
                    edits.push(Edit::SetOutputs {
                        cell_id,
                        outputs: Vec::new(),
                        execution_count: None,
                    });
                }
                Ok(edits)
            })
            .await
        })
    }

    fn move_cell(&mut self, notebook: String, from: u32, to: u32) -> HostResult<()> {
        self.on_notebook("move-cell", &notebook, |in_use, _| async move {
            edit_at(&in_use, move |nb| {
                let cell_id = cell_at(nb, from)?;
                cell_at(nb, to)?;
                Ok(vec![Edit::Move {
                    cell_id,
                    to: to as usize,
                }])
            })
            .await
        })
    }

    fn delete_cell(&mut self, notebook: String, index: u32) -> HostResult<()> {
        self.on_notebook("delete-cell", &notebook, |in_use, _| async move {
            edit_at(&in_use, move |nb| {
                Ok(vec![Edit::Delete {
                    cell_ids: vec![cell_at(nb, index)?],
                }])
            })
            .await
        })
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
    fn ungranted_functions_are_refused_and_granted_ones_wait_for_the_server() {
        use notebook::Host as _;
        let settings = |grants: Vec<String>| {
            Arc::new(GuestSettings {
                name: "g".into(),
                config_json: "{}".into(),
                grants,
                limits: GuestLimits::default(),
                link: Arc::default(),
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
        // Scoped grants: the function is granted, but only for the notebook named.
        let scoped = settings(vec!["read-cells:nb1".into()]);
        assert!(scoped.granted("read-cells", None));
        assert!(scoped.granted("read-cells", Some("nb1")));
        assert!(!scoped.granted("read-cells", Some("nb2")));
        assert!(!scoped.granted("delete-cell", None));
        assert!(parse_grant("read-cells:").is_err());
        assert!(
            parse_grant("format-disk")
                .unwrap_err()
                .contains("no host function")
        );
    }
}

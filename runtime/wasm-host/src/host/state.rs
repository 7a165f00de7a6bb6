//! `GuestState`, a guest's store data: the sum of the host capabilities' slices, one field per
//! unit, plus what every unit shares — the WASI context built with only what the policy grants
//! (no sockets, no stdin, no args; stdout and stderr into the server's log), the resource table,
//! the memory cap, the call's clock, the output and the guest's settings. Here too the linking of
//! every unit, and the `wasi:io/poll` shadowed so a guest parked there is still bounded by its
//! call's deadline.

use std::sync::Arc;
use std::time::{Duration, Instant};

use tokio_util::sync::CancellationToken;
use wasmtime::ResourceLimiter;
use wasmtime::component::{HasSelf, Linker, Resource, ResourceTable};
use wasmtime_wasi::p2::DynPollable;
use wasmtime_wasi::p2::bindings::io::poll as async_poll;
use wasmtime_wasi::p2::bindings::sync::io::poll;
use wasmtime_wasi::{WasiCtx, WasiCtxBuilder, WasiCtxView, WasiView};
use wasmtime_wasi_http::{WasiHttpCtxView, WasiHttpView};

use super::client::{self, ClientHost, ClientState};
use super::env::EnvState;
use super::notebook::{self, NotebookHost, NotebookState};
use super::outgoing::{self, OutgoingState};
use super::secrets::{self, SecretsState};
use super::storage::{self, StorageState};
use super::unit::{Holds, HostUnit};
use crate::limits::{CallClock, MemoryCap, Stopped};
use crate::output::GuestOutput;
use crate::settings::GuestSettings;
use crate::wait::waited;
use crate::{v0_1_0, v0_2_0, v0_3_0};

pub struct GuestState {
    // What every unit shares.
    wasi: WasiCtx,
    table: ResourceTable,
    limiter: MemoryCap,
    pub clock: CallClock,
    pub output: GuestOutput,
    pub settings: Arc<GuestSettings>,
    /// The generation of the policy this instance was built under.
    generation: u64,
    // One slice per host capability.
    pub notebook: NotebookState,
    pub outgoing: OutgoingState,
    pub storage: StorageState,
    pub env: EnvState,
    pub client: ClientState,
    pub secrets: SecretsState,
}

impl GuestState {
    pub fn new(settings: Arc<GuestSettings>) -> Self {
        let policy = settings.policy.snapshot();
        let output = GuestOutput::new(settings.clone());
        let mut wasi = WasiCtxBuilder::new();
        wasi.stdout(output.stdout()).stderr(output.stderr());
        let notebook = NotebookState::new(&settings, &policy, &mut wasi);
        let outgoing = OutgoingState::new(&settings, &policy, &mut wasi);
        let storage = StorageState::new(&settings, &policy, &mut wasi);
        let env = EnvState::new(&settings, &policy, &mut wasi);
        let client = ClientState::new(&settings, &policy, &mut wasi);
        let secrets = SecretsState::new(&settings, &policy, &mut wasi);
        GuestState {
            wasi: wasi.build(),
            table: ResourceTable::new(),
            limiter: MemoryCap::new(settings.limits.memory_mb),
            clock: CallClock::new(Duration::from_millis(settings.limits.cpu_ms_per_call)),
            output,
            generation: policy.generation,
            settings,
            notebook,
            outgoing,
            storage,
            env,
            client,
            secrets,
        }
    }

    pub fn limiter(&mut self) -> &mut dyn ResourceLimiter {
        &mut self.limiter
    }

    /// Each call into the guest starts with fresh clocks, fresh slices and no stderr.
    pub fn start_call(&mut self, deadline: Instant, wall_limit: Duration) {
        self.clock.start(deadline, wall_limit);
        self.notebook.start_call(deadline);
        self.outgoing.start_call(deadline);
        self.storage.start_call(deadline);
        self.env.start_call(deadline);
        self.client.start_call(deadline);
        self.secrets.start_call(deadline);
        self.output.start_call();
    }

    /// The notebook functions, with the call's clock.
    pub fn notebook(&mut self) -> NotebookHost<'_> {
        NotebookHost {
            state: &mut self.notebook,
            clock: &mut self.clock,
        }
    }

    /// The client functions, with the call's clock.
    pub fn client(&mut self) -> ClientHost<'_> {
        ClientHost {
            state: &mut self.client,
            clock: &mut self.clock,
        }
    }

    /// A secret, read off the guest's CPU clock.
    pub fn secret(&mut self, name: &str) -> super::unit::HostResult<String> {
        let secrets = &mut self.secrets;
        let deadline = self.clock.deadline;
        self.clock.off_the_clock(|| secrets.get(name, deadline))
    }

    /// A line the guest logs through the WIT's `log`, tagged with its name (the secret values
    /// it obtained redacted).
    pub fn log(&self, level: tracing::Level, message: &str) {
        let guest = self.settings.name();
        let message = &self.settings.revealed.redact(message);
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
        if self.storage.revoked() {
            self.clock.stopped.get_or_insert(Stopped::Revoked);
        }
    }

    /// Whether this instance was built under an older policy (it is then replaced before its
    /// next call).
    pub fn is_stale(&self) -> bool {
        self.generation != self.settings.policy.generation()
    }

    /// The grant whose revocation stopped the call, for its error.
    pub fn revoked_storage(&self) -> Option<&str> {
        self.storage.lost()
    }
}

impl Holds<StorageState> for GuestState {
    fn unit(&mut self) -> &mut StorageState {
        &mut self.storage
    }
}

impl WasiHttpView for GuestState {
    fn http(&mut self) -> WasiHttpCtxView<'_> {
        self.outgoing.view(&mut self.table)
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

/// Every host function, for every guest: a guest may import any of them, and grants are checked
/// when one is called.
pub fn link(linker: &mut Linker<GuestState>) -> wasmtime::Result<()> {
    // Common: WASI (its filesystem, environment, clocks, random, ...) and the WIT's own
    // interfaces that grant nothing.
    wasmtime_wasi::p2::add_to_linker_sync(linker)?;
    link_poll(linker)?;
    v0_1_0::link_common(linker)?;
    v0_2_0::link_common(linker)?;
    v0_3_0::link_common(linker)?;
    // The units.
    notebook::link(linker)?;
    outgoing::link(linker)?;
    storage::link(linker)?;
    client::link(linker)?;
    secrets::link(linker)?;
    Ok(())
}

/// Replaces the `wasi:io/poll` that `add_to_linker_sync` linked (for every 0.2.x version a guest
/// may import: the linker matches them by semver) with the time-boxed one below.
fn link_poll(linker: &mut Linker<GuestState>) -> wasmtime::Result<()> {
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

//! Host waits under the call's deadline. A guest runs synchronously, and the epoch check that
//! stops a running guest cannot reach one parked in a host call; so every place the host waits
//! on a guest's behalf is time-boxed: WASI's `wasi:io/poll` (where `sleep`, clock subscriptions
//! and stream readiness all end up), shadowing wasmtime-wasi's own, and the grantable host
//! functions (see `GuestState::on_notebook`).

use std::future::Future;
use std::time::Instant;

use tokio_util::sync::CancellationToken;
use wasmtime::component::{HasSelf, Linker, Resource, ResourceTable};
use wasmtime_wasi::p2::DynPollable;
use wasmtime_wasi::p2::bindings::io::poll as async_poll;
use wasmtime_wasi::p2::bindings::sync::io::poll;

use super::limits::{CallClock, Stopped};
use super::sandbox::GuestState;

/// Runs `work` on the runtime of the calling thread (or wasmtime-wasi's own outside one) until
/// it ends, the deadline passes or `stop` is cancelled, whichever comes first.
pub fn time_boxed<F: Future>(
    deadline: Instant,
    stop: &CancellationToken,
    work: F,
) -> Result<F::Output, Stopped> {
    wasmtime_wasi::runtime::in_tokio(async {
        tokio::select! {
            biased;
            out = work => Ok(out),
            _ = stop.cancelled() => Err(Stopped::Shutdown),
            _ = tokio::time::sleep_until(deadline.into()) => Err(Stopped::Wall),
        }
    })
}

/// Replaces the `wasi:io/poll` that `add_to_linker_sync` linked (for every 0.2.x version a guest
/// may import: the linker matches them by semver) with the time-boxed one below.
pub fn link_poll(linker: &mut Linker<GuestState>) -> wasmtime::Result<()> {
    linker.allow_shadowing(true);
    let linked = poll::add_to_linker::<GuestState, HasSelf<GuestState>>(linker, |s| s);
    linker.allow_shadowing(false);
    linked
}

/// A WASI wait: off the CPU clock, on the wall clock; a wait cut short traps the call.
fn waited<R>(
    clock: &mut CallClock,
    stop: &CancellationToken,
    work: impl Future<Output = wasmtime::Result<R>>,
) -> wasmtime::Result<R> {
    if stop.is_cancelled() {
        clock.stopped = Some(Stopped::Shutdown);
    }
    if let Some(why) = clock.stopped {
        return Err(stopped_error(why));
    }
    let deadline = clock.deadline;
    let outcome = clock.off_the_clock(|| time_boxed(deadline, stop, work));
    outcome.unwrap_or_else(|why| {
        clock.stopped = Some(why);
        Err(stopped_error(why))
    })
}

fn stopped_error(why: Stopped) -> wasmtime::Error {
    wasmtime::format_err!("the host stopped the guest's wait ({why:?})")
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

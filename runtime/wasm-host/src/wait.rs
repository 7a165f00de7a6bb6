//! Host waits under the call's deadline. A guest runs synchronously, and the epoch check that
//! stops a running guest cannot reach one parked in a host call; so every place the host waits
//! on a guest's behalf is time-boxed: WASI's `wasi:io/poll` (where `sleep`, clock subscriptions
//! and stream readiness all end up), shadowing wasmtime-wasi's own, and the grantable host
//! functions (see `NotebookHost::on_notebook` in `host/notebook.rs`).

use std::future::Future;
use std::time::Instant;

use tokio_util::sync::CancellationToken;

use super::limits::{CallClock, Stopped};

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

/// A WASI wait: off the CPU clock, on the wall clock; a wait cut short traps the call.
pub(super) fn waited<R>(
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

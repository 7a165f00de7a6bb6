//! What every host capability's unit implements, so `GuestState` can be their sum.

use std::sync::Arc;
use std::time::Instant;

use wasmtime_wasi::WasiCtxBuilder;

use crate::wasm::policy::Snapshot;
use crate::wasm::settings::GuestSettings;

/// A capability's slice of a guest's store.
pub trait HostUnit: Send + Sized + 'static {
    /// Its slice for a new instance of the guest, under the policy the instance is built under;
    /// what it grants through WASI goes into `wasi`.
    fn new(settings: &Arc<GuestSettings>, policy: &Snapshot, wasi: &mut WasiCtxBuilder) -> Self;

    /// Called as each call into the guest starts, with the call's deadline.
    fn start_call(&mut self, _deadline: Instant) {}
}

/// Store data that holds the slice `U`: what a unit's `link` asks of the store, so the unit
/// never names the sum.
pub trait Holds<U: HostUnit> {
    fn unit(&mut self) -> &mut U;
}

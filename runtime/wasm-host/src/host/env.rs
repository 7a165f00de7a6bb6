//! Environment variables for guests: the smallest unit, the one to copy for a capability that
//! WASI already serves. Its slice is empty (the values live in the WASI context, fixed when the
//! instance is built; an instance built under an older policy is replaced before its next
//! call); its policy check is the typed `env` list of the policy (names checked once, at
//! parse); its linker registration is `wasi:cli/environment`, linked with the rest of WASI in
//! `state::link`, since it needs nothing of its own; it records no span (reading a variable is
//! not a use the operator traces).

use std::sync::Arc;

use wasmtime_wasi::WasiCtxBuilder;

use super::unit::HostUnit;
use crate::policy::Snapshot;
use crate::settings::GuestSettings;

/// Nothing beyond what it put into the WASI context.
pub struct EnvState;

impl HostUnit for EnvState {
    fn new(_: &Arc<GuestSettings>, policy: &Snapshot, wasi: &mut WasiCtxBuilder) -> Self {
        for name in policy.current.env() {
            // An absent (or non-UTF-8) variable is simply absent.
            if let Ok(value) = std::env::var(name) {
                wasi.env(name, value);
            }
        }
        EnvState
    }
}

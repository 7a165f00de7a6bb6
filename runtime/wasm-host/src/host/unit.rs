//! What every host capability's unit implements, so `GuestState` can be their sum, and the
//! error every grantable host function answers with.

use std::borrow::Cow;
use std::sync::Arc;
use std::time::Instant;

use server_core::agent_tools::tool_for;
use server_core::domain::Step;
use wasmtime_wasi::WasiCtxBuilder;

use crate::limits::Stopped;
use crate::policy::Snapshot;
use crate::settings::GuestSettings;

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
    /// The call's MCP client cannot do it (no elicitation, no sampling, no client at all).
    UnsupportedByClient(String),
    /// The person said no, or the request was cancelled.
    Refused(String),
    /// The call's deadline passed (or the server stopped) while the host function waited.
    Stopped(Stopped),
}

/// A step a domain error suggests, named for a guest: its own host function where it has one,
/// else the tool the agent would call (a guest cannot open a notebook or restart a kernel).
fn guest_step(step: Step) -> Cow<'static, str> {
    match step {
        Step::ReadNotebook => Cow::Borrowed("read-cells"),
        Step::ReadCell => Cow::Borrowed("read-cell"),
        Step::ExecuteCode => Cow::Borrowed("execute-code"),
        other => Cow::Owned(format!("the agent's {} tool", tool_for(other))),
    }
}

impl From<server_core::domain::Error> for HostCallError {
    fn from(error: server_core::domain::Error) -> Self {
        use server_core::domain::Error;
        let message = error.worded(guest_step);
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

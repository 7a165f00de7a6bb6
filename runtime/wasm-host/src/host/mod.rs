//! The host capabilities a guest may be granted, one unit each, and the store data that is
//! their sum.
//!
//! A unit is one file that owns, for one capability:
//! - **its slice** of a guest's store: a type implementing `HostUnit`, built for each instance
//!   under the policy as it is then (it may add to the WASI context) and reset as each call
//!   starts;
//! - **its policy check**: what it asks of the guest's typed grants (`super::policy`) at each
//!   use, with the refusal's words naming the setting to change;
//! - **its linker registration**: a `link` function generic over the store data, bound only by
//!   what the unit needs of it (`Holds` its slice, a WASI view, a WIT version's `Host`
//!   traits), for every WIT version it serves;
//! - **its spans**: one `GuestUse` per use, allowed or refused.
//!
//! No unit names another, nor the sum: `state.rs` (`GuestState`) holds one field per unit plus
//! what every unit shares (the WASI context and resource table, the memory cap, the call's
//! clock, the output, the settings), and links every unit. A new capability is a copy of the
//! smallest unit (`env.rs`, or `storage.rs` for one with a linked function), a field in
//! `GuestState` and a line in its `link`.
//!
//! - `unit`: the `HostUnit` and `Holds` traits;
//! - `notebook`: the grantable notebook host functions, each a thin call into the domain;
//! - `outgoing`: `wasi:http` requests checked against `allowed_hosts`, capped and recorded;
//! - `storage`: the granted directories, their revocation, and their opens recorded;
//! - `env`: the granted environment variables;
//! - `client`: talking back to the call's MCP client (questions, sampling, progress);
//! - `secrets`: the operator's secrets, by granted name;
//! - `state`: `GuestState`, the sum, and the linking of every unit.
//!
//! Grant prompts (`extensions.grant-prompts`) are `crate::asking`, beside: the units whose uses
//! are granted by name call it where they would refuse.

mod client;
mod env;
mod notebook;
mod outgoing;
mod secrets;
mod state;
mod storage;
mod unit;

pub use client::Elicited;
pub use notebook::CellAt;
pub use state::{GuestState, link};
pub use unit::HostCallError;

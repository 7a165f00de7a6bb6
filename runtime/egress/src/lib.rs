//! Egress: where a confined party may connect.
//!
//! - [`HostRule`]: one host entry (`api.example.org`, `*.example.org`, `127.0.0.1:8123`,
//!   optionally with a scheme), the grammar a guest's `allowed_hosts` and a sandboxed kernel's
//!   `[kernel_sandbox] hosts` share; [`is_internal`] says which addresses count as loopback or
//!   private (reached only when an entry names the address itself).
//! - [`proxy`]: the HTTP proxy a sandboxed kernel is given, which holds it to its host list;
//!   [`credentials`]: the headers it adds, from secrets the kernel never sees, for the hosts
//!   that have one (TLS terminated there).
//!
//! Names no Jupyter, MCP or wasm.

pub mod credentials;
mod hosts;
pub mod proxy;

pub use hosts::{HostRule, default_port, is_internal};

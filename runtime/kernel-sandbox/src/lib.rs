//! `kernel.sandbox`: the agent's code confined. A sandboxed kernel runs under this crate's
//! launcher ([`launch::run`], what a sandboxed kernelspec's `argv` starts), which gives it
//! - files: reads everywhere but a deny list (covered by empty mounts), writes only beneath the
//!   root directory, its private `TMPDIR` and the sandbox's own state (Landlock);
//! - network: a namespace of its own with loopback only; out only through the egress proxy
//!   ([`egress::proxy`]), which allows the operator's hosts and never the Jupyter Server;
//! - other processes: no signal, ptrace or `/proc/PID/environ` outside the sandbox (Landlock
//!   scopes), no capabilities, and no system call that would undo the rest (seccomp);
//! - the machine: a memory and a process cap per kernel, its subprocesses included
//!   ([`caps`]), and everything it started gone when it ends (its own PID namespace).
//!
//! [`check::check`] tries all of it on this machine, so a server refuses to start with the
//! capability on where it cannot hold. [`kernelspec`] writes the kernelspec that runs the
//! launcher. Linux only; names no MCP, domain or wasm.

use std::path::PathBuf;

pub mod caps;
mod channel;
pub mod check;
mod confine;
pub mod credentials;
mod egress_log;
pub mod events;
pub mod kernelspec;
pub mod launch;
mod layout;
pub mod policy;
mod proxied;
mod sys;

pub use caps::KernelCaps;
pub use confine::describe as mechanisms;
pub use policy::Policy;

#[derive(Debug, thiserror::Error)]
pub enum SandboxError {
    #[error("the kernel sandbox's policy {path}: {why}")]
    Policy { path: PathBuf, why: String },
    #[error("the kernel sandbox's directory {path}: {why}")]
    Place { path: PathBuf, why: String },
    #[error("{0}")]
    Hosts(String),
    #[error("the kernel's connection file: {0}")]
    Connection(String),
    #[error("this machine cannot confine kernels: {0}")]
    Unavailable(String),
    #[error(transparent)]
    Io(#[from] std::io::Error),
}

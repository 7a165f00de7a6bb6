//! The core: what the server does to notebooks and kernels, whoever asks. The domain (notebooks
//! in use, kernel readiness, cell edits and their conflicts, executions and their records), and
//! the shared services every face consults: capabilities, hooks with the OpenTelemetry writer,
//! the person's confirmation, the current client's link, the catalog of what extensions serve,
//! the operator's secrets.
//!
//! It names no MCP, HTTP server or wasm engine: the server and the wasm host are its faces. The
//! settings it reads are its own types (`settings`, `extensions`); the server fills them.

pub mod agent_tools;
pub mod capabilities;
pub mod catalog;
pub mod client_link;
pub mod confirm;
pub mod domain;
pub mod extensions;
pub mod hooks;
pub mod secrets;
pub mod settings;
pub mod user_dirs;

/// Files and folders only this user may read, shared with the Jupyter client's launcher.
pub use jupyter_client::private_file;

//! Bindings of WIT `jupyter-mcp:extension@0.2.0` (`wit/v0.2.0`): cells by id, typed hook events,
//! errors as variants, resources and prompts, the host's API version. Linked beside 0.1.0, so
//! guests of either version load into one server.

wasmtime::component::bindgen!({
    path: "../../wit/v0.2.0",
    // The world with every import and both exports; what a guest exports is looked up one
    // interface at a time, so a guest may export either or both.
    world: "extension-with-hooks",
});

pub use exports::jupyter_mcp::extension::extension_api as extension_export;
pub use exports::jupyter_mcp::extension::hooks as hooks_export;
pub use jupyter_mcp::extension::{config, host_info, log, notebook, types};

/// The version of the WIT this module implements, which `host-info.api-version` answers.
pub const API_VERSION: &str = "0.2.0";

/// Export names that decide a component's kind.
pub const HOOKS_EXPORT: &str = "jupyter-mcp:extension/hooks@0.2.0";
pub const EXTENSION_EXPORT: &str = "jupyter-mcp:extension/extension-api@0.2.0";

link_common!(host_info, log, config, types);

pub mod convert;
mod guest_exports;
mod host;

pub use guest_exports::Indices;

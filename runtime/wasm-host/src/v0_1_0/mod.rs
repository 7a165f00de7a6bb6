//! Bindings of WIT `jupyter-mcp:extension@0.1.0` (frozen in `wit/v0.1.0`). A later WIT version
//! gets a module of its own beside this one, so guests built against this one keep loading.

wasmtime::component::bindgen!({
    path: "../../wit/v0.1.0",
    // The world with every import and both exports; what a guest exports is looked up one
    // interface at a time, so a guest may export either or both.
    world: "extension-with-hooks",
});

pub use exports::jupyter_mcp::extension::extension_api as extension_export;
pub use exports::jupyter_mcp::extension::hooks as hooks_export;
pub use jupyter_mcp::extension::{config, log, notebook, types};

/// Export names that decide a component's kind.
pub const HOOKS_EXPORT: &str = "jupyter-mcp:extension/hooks@0.1.0";
pub const EXTENSION_EXPORT: &str = "jupyter-mcp:extension/extension-api@0.1.0";

link_common!(log, config, types);

pub mod convert;
mod guest_exports;
mod host;

pub use guest_exports::Indices;

//! Bindings of WIT `jupyter-mcp:extension@0.3.0` (`wit/v0.3.0`): talking back to the call's
//! client (`client`), the operator's secrets (`secrets`), cell and notebook versions on reads and
//! edits, and a hook reply that can ask for the person's confirmation. Linked beside 0.1.0 and
//! 0.2.0, so guests of any of them load into one server.

wasmtime::component::bindgen!({
    path: "../../wit/v0.3.0",
    // The world with every import and both exports; what a guest exports is looked up one
    // interface at a time, so a guest may export either or both.
    world: "extension-with-hooks",
});

pub use exports::jupyter_mcp::extension::extension_api as extension_export;
pub use exports::jupyter_mcp::extension::hooks as hooks_export;
pub use jupyter_mcp::extension::{client, config, host_info, log, notebook, secrets, types};

/// The version of the WIT this module implements, which `host-info.api-version` answers.
pub const API_VERSION: &str = "0.3.0";

/// Export names that decide a component's kind.
pub const HOOKS_EXPORT: &str = "jupyter-mcp:extension/hooks@0.3.0";
pub const EXTENSION_EXPORT: &str = "jupyter-mcp:extension/extension-api@0.3.0";

/// Links this version's interfaces that grant nothing (logging, the guest's config, the types
/// and the host's versions), for store data implementing their `Host` traits; the notebook,
/// client and secrets units link their own.
pub fn link_common<T>(linker: &mut wasmtime::component::Linker<T>) -> wasmtime::Result<()>
where
    T: log::Host + config::Host + types::Host + host_info::Host + 'static,
{
    use wasmtime::component::HasSelf;
    host_info::add_to_linker::<T, HasSelf<T>>(linker, |s| s)?;
    log::add_to_linker::<T, HasSelf<T>>(linker, |s| s)?;
    config::add_to_linker::<T, HasSelf<T>>(linker, |s| s)?;
    types::add_to_linker::<T, HasSelf<T>>(linker, |s| s)
}

pub mod convert;
mod guest_exports;
mod host;

pub use guest_exports::Indices;

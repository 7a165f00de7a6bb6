//! Write a jupyter-mcp-server extension or hook handler in Rust, against WIT
//! `jupyter-mcp:extension@0.3.0` (vendored in this crate's `wit/`): implement [`Extension`]
//! (every method has a default, so implement only what you offer), then
//! [`register_extension!`] (or [`register_hook_handler!`]), and build for `wasm32-wasip2` as a
//! `cdylib`.
//!
//! - A tool is declared once: [`Tool::new`] takes its name, description and handler; its input
//!   schema is derived from the handler's argument type (`serde::Deserialize` +
//!   `schemars::JsonSchema`), and the call is routed to it by name.
//! - A host function's error converts into [`Error`], so `?` passes it on to the caller.
//! - Resources, resource templates and prompts are listed and served like the core ones.
//! - Hook events arrive typed ([`HookEvent`]); a critical handler can ask the person before a
//!   call goes on ([`Extension::decide`] answering [`Reply::Confirm`]).
//! - A guest can talk back to the client of the call it runs in ([`client`]: ask the person, ask
//!   the client's model, report progress) and read the operator's secrets ([`secrets`]), each
//!   when granted.
//! - Cells carry their version, and edits can name the version they expect ([`notebook`]).
//! - The WIT version is stamped into the component, so a server older than this SDK refuses it
//!   at load with both versions named, instead of failing at the first call.
//!
//! ```ignore
//! use jupyter_mcp_extension::{self as ext, Extension, Tool, register_extension};
//!
//! #[derive(serde::Deserialize, schemars::JsonSchema)]
//! struct Greet {
//!     /// Whom to greet.
//!     who: String,
//! }
//!
//! struct Hello;
//!
//! impl Hello {
//!     fn greet(&self, args: Greet) -> ext::Result<String> {
//!         let cells = ext::notebook::read_cells("")?;
//!         Ok(format!("Hello, {}! ({} cells)", args.who, cells.len()))
//!     }
//! }
//!
//! impl Extension for Hello {
//!     fn new() -> Self {
//!         Hello
//!     }
//!     fn tools(&self) -> Vec<Tool<Self>> {
//!         vec![Tool::new("hello", "Greets someone.", Self::greet).read_only()]
//!     }
//! }
//!
//! register_extension!(Hello);
//! ```

#[doc(hidden)]
pub mod bindings {
    // The imports (world `host`) once; each export interface in a world of its own that reuses
    // them, so one set of types serves every guest. A guest exports one or both: a component
    // made of both exports is the world `extension-with-hooks`.
    wit_bindgen::generate!({
        path: "wit",
        world: "host",
    });

    pub mod extension {
        wit_bindgen::generate!({
            path: "wit",
            world: "extension",
            with: {
                "jupyter-mcp:extension/types@0.3.0": crate::bindings::jupyter_mcp::extension::types,
                "jupyter-mcp:extension/log@0.3.0": crate::bindings::jupyter_mcp::extension::log,
                "jupyter-mcp:extension/config@0.3.0": crate::bindings::jupyter_mcp::extension::config,
                "jupyter-mcp:extension/host-info@0.3.0": crate::bindings::jupyter_mcp::extension::host_info,
                "jupyter-mcp:extension/notebook@0.3.0": crate::bindings::jupyter_mcp::extension::notebook,
                "jupyter-mcp:extension/client@0.3.0": crate::bindings::jupyter_mcp::extension::client,
                "jupyter-mcp:extension/secrets@0.3.0": crate::bindings::jupyter_mcp::extension::secrets,
            },
            pub_export_macro: true,
            export_macro_name: "__export_extension",
            default_bindings_module: "jupyter_mcp_extension::bindings::extension",
        });
    }

    pub mod hook_handler {
        wit_bindgen::generate!({
            path: "wit",
            world: "hook-handler",
            with: {
                "jupyter-mcp:extension/types@0.3.0": crate::bindings::jupyter_mcp::extension::types,
                "jupyter-mcp:extension/log@0.3.0": crate::bindings::jupyter_mcp::extension::log,
                "jupyter-mcp:extension/config@0.3.0": crate::bindings::jupyter_mcp::extension::config,
                "jupyter-mcp:extension/host-info@0.3.0": crate::bindings::jupyter_mcp::extension::host_info,
                "jupyter-mcp:extension/notebook@0.3.0": crate::bindings::jupyter_mcp::extension::notebook,
                "jupyter-mcp:extension/client@0.3.0": crate::bindings::jupyter_mcp::extension::client,
                "jupyter-mcp:extension/secrets@0.3.0": crate::bindings::jupyter_mcp::extension::secrets,
            },
            pub_export_macro: true,
            export_macro_name: "__export_hook_handler",
            default_bindings_module: "jupyter_mcp_extension::bindings::hook_handler",
        });
    }
}

mod glue;
mod hooks;
mod items;
mod tools;

use bindings::jupyter_mcp::extension::types;

pub use hooks::{AfterExecute, AfterToolCall, BeforeExecute, BeforeToolCall, HookEvent, Reply};
pub use hooks::{KernelChange, KernelLifecycle};
pub use items::{Prompt, PromptArguments, PromptResult, Resource, ResourceContents};
pub use items::{ResourceTemplate, Role};
pub use schemars;
pub use serde_json;
pub use tools::{NoArguments, Tool, ToolResult};
pub use types::{Capability, CellKind, HostError};

#[doc(hidden)]
pub use glue::Registered;

/// The WIT version this SDK builds against (stamped into every component it builds).
pub const API_VERSION: &str = "0.3.0";

#[doc(hidden)]
pub const API_VERSION_BYTES: [u8; 5] = *b"0.3.0";

const _: () = assert!(API_VERSION.len() == API_VERSION_BYTES.len());

/// Why a guest did not do what was asked; the message reaches the MCP client.
#[derive(Debug, Clone)]
pub enum Error {
    /// The arguments did not make sense.
    InvalidArguments(String),
    /// No such tool, resource or prompt.
    NotFound(String),
    /// A host function failed; passed on as it came (what `?` on a host call gives).
    Host(HostError),
    /// Anything else.
    Failed(String),
}

/// A hook handler's own JSON object, shared by the before and after events of one call.
pub type Context = serde_json::Map<String, serde_json::Value>;

/// A result whose error reaches the caller.
pub type Result<T, E = Error> = std::result::Result<T, E>;

impl Error {
    pub fn failed(message: impl Into<String>) -> Self {
        Error::Failed(message.into())
    }

    pub fn invalid(message: impl Into<String>) -> Self {
        Error::InvalidArguments(message.into())
    }

    pub fn message(&self) -> &str {
        match self {
            Error::InvalidArguments(m) | Error::NotFound(m) | Error::Failed(m) => m,
            Error::Host(host) => host.message(),
        }
    }
}

impl std::fmt::Display for Error {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            Error::InvalidArguments(m) => write!(f, "invalid arguments: {m}"),
            other => f.write_str(other.message()),
        }
    }
}

impl std::error::Error for Error {}

impl From<HostError> for Error {
    fn from(error: HostError) -> Self {
        Error::Host(error)
    }
}

impl From<serde_json::Error> for Error {
    fn from(error: serde_json::Error) -> Self {
        Error::InvalidArguments(error.to_string())
    }
}

impl From<String> for Error {
    fn from(message: String) -> Self {
        Error::Failed(message)
    }
}

impl From<&str> for Error {
    fn from(message: &str) -> Self {
        Error::Failed(message.to_owned())
    }
}

impl From<Error> for types::GuestError {
    fn from(error: Error) -> Self {
        match error {
            Error::InvalidArguments(m) => types::GuestError::InvalidArguments(m),
            Error::NotFound(m) => types::GuestError::NotFound(m),
            Error::Host(host) => types::GuestError::Host(host),
            Error::Failed(m) => types::GuestError::Failed(m),
        }
    }
}

impl HostError {
    /// The host's explanation: what happened and what to do next.
    pub fn message(&self) -> &str {
        match self {
            HostError::NotGranted(m)
            | HostError::NotAvailable(m)
            | HostError::NotFound(m)
            | HostError::Conflict(m)
            | HostError::Kernel(m)
            | HostError::Invalid(m)
            | HostError::UnsupportedByClient(m)
            | HostError::Refused(m)
            | HostError::Failed(m) => m,
        }
    }
}

impl CellKind {
    pub fn as_str(self) -> &'static str {
        match self {
            CellKind::Code => "code",
            CellKind::Markdown => "markdown",
            CellKind::Raw => "raw",
        }
    }

    pub fn parse(kind: &str) -> Option<Self> {
        match kind {
            "code" => Some(CellKind::Code),
            "markdown" => Some(CellKind::Markdown),
            "raw" => Some(CellKind::Raw),
            _ => None,
        }
    }
}

/// Host functions on notebooks, under the rules the MCP tools obey. `notebook` is a name given
/// to `use_notebook`; `""` is the current one. A cell is named by a [`CellRef`]: by id (stable
/// while others edit) or by index. Each function is refused (`HostError::NotGranted`) unless
/// the operator lists it in this extension's `grants` (`read-cell` and `notebook-version` need
/// `read-cells`).
///
/// Versions: a [`Cell`](notebook::Cell) carries its `version`; pass it as an edit's
/// `expected_version` (and [`notebook_version`](notebook::notebook_version) as
/// `insert_cell`'s `expected_notebook_version`) to have the edit refused with
/// `HostError::Conflict` if someone changed it since; `overwrite_cell` returns the new version.
pub mod notebook {
    pub use crate::bindings::jupyter_mcp::extension::notebook::*;
    pub use crate::bindings::jupyter_mcp::extension::types::{Cell, CellId, CellKind, CellRef};

    impl CellRef {
        /// The cell with this id.
        pub fn id(id: impl Into<String>) -> Self {
            CellRef::Id(id.into())
        }

        /// The cell at this index now.
        pub fn index(index: u32) -> Self {
            CellRef::Index(index)
        }
    }

    impl From<&Cell> for CellRef {
        fn from(cell: &Cell) -> Self {
            CellRef::Id(cell.id.clone())
        }
    }
}

/// Talking back to the MCP client of the call this guest runs in (a tool call, or the call a
/// hook event belongs to). Each waits no longer than the guest's wall-clock limit for the call
/// (`limits.wall_ms_per_call`): give it room for a person to answer.
pub mod client {
    use crate::HostError;
    use crate::bindings::jupyter_mcp::extension::client as wit;

    /// The person's answer to [`elicit`].
    #[derive(Debug, Clone, PartialEq)]
    pub enum Answer {
        /// Their answer: an object matching the requested schema.
        Accept(serde_json::Value),
        Decline,
        Cancel,
    }

    /// Asks the person `message` with a form: `schema` is a JSON Schema object of flat primitive
    /// properties (MCP elicitation). Needs the grant `elicit`; a client without elicitation
    /// answers `HostError::UnsupportedByClient`.
    pub fn elicit(message: &str, schema: &serde_json::Value) -> Result<Answer, HostError> {
        Ok(match wit::elicit(message, &schema.to_string())? {
            wit::ElicitAnswer::Accept(content) => {
                Answer::Accept(serde_json::from_str(&content).unwrap_or_default())
            }
            wit::ElicitAnswer::Decline => Answer::Decline,
            wit::ElicitAnswer::Cancel => Answer::Cancel,
        })
    }

    /// Asks the client's model: `request` is MCP `sampling/createMessage`'s params
    /// (`messages`, `maxTokens`, ...), the answer its result (`role`, `content`, `model`,
    /// `stopReason`). Needs the grant `sample`; a client without sampling answers
    /// `HostError::UnsupportedByClient`.
    pub fn sample(request: &serde_json::Value) -> Result<serde_json::Value, HostError> {
        let answer = wit::sample(&request.to_string())?;
        Ok(serde_json::from_str(&answer).unwrap_or_default())
    }

    /// Asks the client's model one question (`prompt` as the user's message) and returns the
    /// text of its answer.
    pub fn ask_model(prompt: &str, max_tokens: u32) -> Result<String, HostError> {
        let answer = sample(&serde_json::json!({
            "messages": [{"role": "user", "content": {"type": "text", "text": prompt}}],
            "maxTokens": max_tokens,
        }))?;
        let content = &answer["content"];
        let text = match content {
            serde_json::Value::Array(items) => items
                .iter()
                .filter_map(|c| c["text"].as_str())
                .collect::<Vec<_>>()
                .join(""),
            other => other["text"].as_str().unwrap_or_default().to_owned(),
        };
        Ok(text)
    }

    /// Reports progress on the current call (sent when the client asked for progress; the host
    /// drops reports closer than 100 ms apart, except the last). No grant needed.
    pub fn progress(done: f64, total: Option<f64>, message: Option<&str>) {
        wit::progress(done, total, message)
    }
}

/// The operator's secrets (`jupyter-mcp-server secret set NAME`), by name: each needs the grant
/// `secret:NAME`. The host redacts a value read from this guest's own log lines and errors.
pub mod secrets {
    use crate::HostError;

    /// The secret's value: `HostError::NotGranted` without `secret:NAME`, `HostError::NotFound`
    /// when the operator stored none by that name.
    pub fn get(name: &str) -> Result<String, HostError> {
        crate::bindings::jupyter_mcp::extension::secrets::get(name)
    }
}

/// Lines in the server's log, tagged with this guest (at `info` and above also sent to MCP
/// clients that asked for logging).
pub mod log {
    pub use crate::bindings::jupyter_mcp::extension::log::Level;
    use crate::bindings::jupyter_mcp::extension::log::log;

    pub fn debug(message: &str) {
        log(Level::Debug, message)
    }
    pub fn info(message: &str) {
        log(Level::Info, message)
    }
    pub fn warn(message: &str) {
        log(Level::Warn, message)
    }
    pub fn error(message: &str) {
        log(Level::Error, message)
    }
}

/// What the guest may know of the server.
pub mod host {
    use crate::bindings::jupyter_mcp::extension::host_info;

    /// The WIT version the server implements, e.g. `0.3.0`.
    pub fn api_version() -> String {
        host_info::api_version()
    }

    /// The server's own version.
    pub fn server_version() -> String {
        host_info::server_version()
    }
}

/// This guest's `config` table from the operator's config file (`{}` when there is none).
pub fn config() -> serde_json::Value {
    let text = bindings::jupyter_mcp::extension::config::get_config();
    serde_json::from_str(&text).unwrap_or_default()
}

/// Who the extension is: its name is the `source` of its capabilities and names it in logs.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Identity {
    pub name: String,
    pub version: String,
}

impl Identity {
    pub fn new(name: &str, version: &str) -> Self {
        Identity {
            name: name.into(),
            version: version.into(),
        }
    }
}

/// A capability the extension declares, namespaced by it (`myext.feature`).
pub fn capability(name: &str, description: &str, enabled: bool) -> Capability {
    Capability {
        name: name.into(),
        description: description.into(),
        enabled,
    }
}

/// An extension, a hook handler, or both. Every method has a default: implement what you offer.
/// One value lives as long as the guest's instance (the host rebuilds an instance, and so calls
/// [`Extension::new`] again, after a failed call).
pub trait Extension: Sized + Send + Sync + 'static {
    fn new() -> Self;

    /// Its name and version; by default the crate's package name and version.
    fn identity(&self) -> Option<Identity> {
        None
    }

    /// The capabilities it adds (namespaced names).
    fn capabilities(&self) -> Vec<Capability> {
        Vec::new()
    }

    /// Its tools, each with its handler. Asked once per instance.
    fn tools(&self) -> Vec<Tool<Self>> {
        Vec::new()
    }

    /// The resources it serves at fixed URIs (a scheme of its own, e.g. `wordcount://`).
    fn resources(&self) -> Vec<Resource> {
        Vec::new()
    }

    /// The families of resources it serves (RFC 6570 templates).
    fn resource_templates(&self) -> Vec<ResourceTemplate> {
        Vec::new()
    }

    /// Reads one of its resources (listed, or matching one of its templates).
    fn read_resource(&self, uri: &str) -> Result<Vec<ResourceContents>> {
        Err(Error::NotFound(format!(
            "no resource at '{uri}'; call resources/list to see what there is"
        )))
    }

    /// The prompts it renders.
    fn prompts(&self) -> Vec<Prompt> {
        Vec::new()
    }

    /// Renders one of its prompts; `arguments` are the client's, by name.
    fn get_prompt(&self, name: &str, arguments: &PromptArguments) -> Result<PromptResult> {
        let _ = arguments;
        Err(Error::NotFound(format!(
            "no prompt '{name}'; call prompts/list to see what there is"
        )))
    }

    /// For a hook handler: `true` makes its refusals fail the calls it observes (a policy).
    fn propagate_errors(&self) -> bool {
        false
    }

    /// For a hook handler: one event. `context` is this handler's own JSON object, shared by the
    /// before and after events of one call (changes are kept). An `Err` refuses the call when
    /// the handler is critical, else it is logged.
    fn on_event(&self, event: &HookEvent, context: &mut Context) -> Result<()> {
        let _ = (event, context);
        Ok(())
    }

    /// For a hook handler: one event, and what to do about the call a `before_*` event
    /// announces. By default [`Extension::on_event`], then [`Reply::Proceed`]. A critical
    /// handler (`propagate_errors`) answering [`Reply::Confirm`] on a before event holds the
    /// call until the person says yes through the client; a no, or a client that cannot ask,
    /// refuses it. Ignored on after events and from optional handlers.
    fn decide(&self, event: &HookEvent, context: &mut Context) -> Result<Reply> {
        self.on_event(event, context).map(|()| Reply::Proceed)
    }
}

/// Exports `$ty` (an [`Extension`]) as this component's extension: its tools, capabilities,
/// resources and prompts. `register_extension!($ty, hooks)` exports its hook handler too.
#[macro_export]
macro_rules! register_extension {
    ($ty:ty) => {
        $crate::__register!($ty);
        $crate::__impl_extension_api!($ty, extension);
        $crate::bindings::extension::__export_extension!(__JupyterMcpGuest with_types_in $crate::bindings::extension);
    };
    ($ty:ty, hooks) => {
        $crate::__register!($ty);
        $crate::__impl_extension_api!($ty, extension);
        $crate::__impl_hooks!($ty, hook_handler);
        // Both worlds' exports: together, the world `extension-with-hooks`.
        $crate::bindings::extension::__export_extension!(__JupyterMcpGuest with_types_in $crate::bindings::extension);
        $crate::bindings::hook_handler::__export_hook_handler!(__JupyterMcpGuest with_types_in $crate::bindings::hook_handler);
    };
}

/// Exports `$ty` (an [`Extension`] implementing `on_event`, and `propagate_errors` when it is a
/// policy) as this component's hook handler.
#[macro_export]
macro_rules! register_hook_handler {
    ($ty:ty) => {
        $crate::__register!($ty);
        $crate::__impl_hooks!($ty, hook_handler);
        $crate::bindings::hook_handler::__export_hook_handler!(__JupyterMcpGuest with_types_in $crate::bindings::hook_handler);
    };
}

#[doc(hidden)]
#[macro_export]
macro_rules! __register {
    ($ty:ty) => {
        fn __jupyter_mcp_guest() -> &'static $crate::Registered<$ty> {
            static INSTANCE: ::std::sync::OnceLock<$crate::Registered<$ty>> =
                ::std::sync::OnceLock::new();
            INSTANCE.get_or_init($crate::Registered::new)
        }

        struct __JupyterMcpGuest;

        // The WIT version this guest speaks, read by the server before it compiles the guest.
        #[used]
        #[unsafe(link_section = "jupyter-mcp:api-version")]
        static __JUPYTER_MCP_API_VERSION: [u8; 5] = $crate::API_VERSION_BYTES;
    };
}

#[doc(hidden)]
#[macro_export]
macro_rules! __impl_extension_api {
    ($ty:ty, $world:ident) => {
        impl $crate::bindings::$world::exports::jupyter_mcp::extension::extension_api::Guest
            for __JupyterMcpGuest
        {
            fn identity() -> $crate::bindings::$world::exports::jupyter_mcp::extension::extension_api::ExtensionIdentity {
                let (name, version) = __jupyter_mcp_guest()
                    .identity(env!("CARGO_PKG_NAME"), env!("CARGO_PKG_VERSION"));
                $crate::bindings::$world::exports::jupyter_mcp::extension::extension_api::ExtensionIdentity {
                    name,
                    version,
                }
            }
            fn capabilities() -> ::std::vec::Vec<$crate::Capability> {
                __jupyter_mcp_guest().capabilities()
            }
            fn tools() -> ::std::vec::Vec<$crate::bindings::jupyter_mcp::extension::types::ToolSpec> {
                __jupyter_mcp_guest().tools()
            }
            fn call_tool(
                name: ::std::string::String,
                arguments: ::std::string::String,
            ) -> ::std::result::Result<
                $crate::bindings::jupyter_mcp::extension::types::ToolResult,
                $crate::bindings::jupyter_mcp::extension::types::GuestError,
            > {
                __jupyter_mcp_guest().call_tool(&name, &arguments)
            }
            fn resources() -> ::std::vec::Vec<$crate::bindings::jupyter_mcp::extension::types::ResourceSpec> {
                __jupyter_mcp_guest().resources()
            }
            fn resource_templates() -> ::std::vec::Vec<$crate::bindings::jupyter_mcp::extension::types::ResourceTemplate> {
                __jupyter_mcp_guest().resource_templates()
            }
            fn read_resource(
                uri: ::std::string::String,
            ) -> ::std::result::Result<
                ::std::vec::Vec<$crate::bindings::jupyter_mcp::extension::types::ResourceContents>,
                $crate::bindings::jupyter_mcp::extension::types::GuestError,
            > {
                __jupyter_mcp_guest().read_resource(&uri)
            }
            fn prompts() -> ::std::vec::Vec<$crate::bindings::jupyter_mcp::extension::types::Prompt> {
                __jupyter_mcp_guest().prompts()
            }
            fn get_prompt(
                name: ::std::string::String,
                arguments: ::std::string::String,
            ) -> ::std::result::Result<
                $crate::bindings::jupyter_mcp::extension::types::PromptResult,
                $crate::bindings::jupyter_mcp::extension::types::GuestError,
            > {
                __jupyter_mcp_guest().get_prompt(&name, &arguments)
            }
        }
    };
}

#[doc(hidden)]
#[macro_export]
macro_rules! __impl_hooks {
    ($ty:ty, $world:ident) => {
        impl $crate::bindings::$world::exports::jupyter_mcp::extension::hooks::Guest
            for __JupyterMcpGuest
        {
            fn propagate_errors() -> bool {
                __jupyter_mcp_guest().propagate_errors()
            }
            fn on_event(
                event: $crate::bindings::jupyter_mcp::extension::types::HookEvent,
                context: ::std::string::String,
            ) -> ::std::result::Result<
                $crate::bindings::jupyter_mcp::extension::types::HookReply,
                $crate::bindings::jupyter_mcp::extension::types::GuestError,
            > {
                __jupyter_mcp_guest().on_event(event, &context)
            }
        }
    };
}

//! Write a jupyter-mcp-server extension in Rust: implement [`Extension`], call
//! [`register_extension!`], build for `wasm32-wasip2` as a `cdylib`.
//!
//! The generated WIT bindings stay behind this crate: tools are described with [`Tool`], answer
//! with [`ToolResult`], take their arguments as `serde_json::Value`, and reach notebooks through
//! [`notebook`] (each function refused unless the operator granted it).
//!
//! ```ignore
//! use jupyter_mcp_extension::{self as ext, Extension, Tool, ToolResult, register_extension};
//! use serde_json::{Value, json};
//!
//! struct Hello;
//!
//! impl Extension for Hello {
//!     fn new() -> Self {
//!         Hello
//!     }
//!     fn identity(&self) -> ext::Identity {
//!         ext::Identity::new("hello", "0.1.0")
//!     }
//!     fn tools(&self) -> Vec<Tool> {
//!         let schema = json!({"type": "object", "properties": {"who": {"type": "string"}}});
//!         vec![Tool::new("hello", "Greets someone.").schema(schema).read_only()]
//!     }
//!     fn call_tool(&self, _name: &str, arguments: Value) -> Result<ToolResult, String> {
//!         let who = arguments["who"].as_str().unwrap_or("world");
//!         Ok(ToolResult::text(format!("Hello, {who}!")))
//!     }
//! }
//!
//! register_extension!(Hello);
//! ```

#[doc(hidden)]
pub mod bindings {
    wit_bindgen::generate!({
        path: "../../wit/v0.1.0",
        world: "extension",
        pub_export_macro: true,
        export_macro_name: "__export_extension",
        default_bindings_module: "jupyter_mcp_extension::bindings",
    });
}

use bindings::exports::jupyter_mcp::extension::extension_api as api;
use bindings::jupyter_mcp::extension::types;
pub use serde_json;
pub use types::{Capability, CellKind, HostError};

/// Host functions on notebooks. `notebook` is a name given to `use_notebook`; `""` is the
/// current one. Each is refused (`HostError::NotGranted`) unless the operator lists it in this
/// extension's `grants`.
pub mod notebook {
    pub use crate::bindings::jupyter_mcp::extension::notebook::*;
    pub use crate::bindings::jupyter_mcp::extension::types::Cell;
}

impl HostError {
    /// The host's explanation, in words to pass on to the caller.
    pub fn message(&self) -> &str {
        match self {
            HostError::NotGranted(m) | HostError::NotAvailable(m) | HostError::Failed(m) => m,
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

/// Lines in the server's log, tagged with this extension.
pub mod log {
    use crate::bindings::jupyter_mcp::extension::log::{Level, log};

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

/// This extension's `config` table from the operator's config file (`{}` when there is none).
pub fn config() -> serde_json::Value {
    let text = bindings::jupyter_mcp::extension::config::get_config();
    serde_json::from_str(&text).unwrap_or_default()
}

/// Who the extension is: its name is the `source` of its capabilities.
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

/// A tool the extension adds.
pub struct Tool {
    name: String,
    description: String,
    schema: serde_json::Value,
    read_only: bool,
    capability: Option<String>,
}

impl Tool {
    /// A tool without arguments until [`Tool::schema`] says otherwise.
    pub fn new(name: &str, description: &str) -> Self {
        Tool {
            name: name.into(),
            description: description.into(),
            schema: serde_json::json!({"type": "object", "properties": {}}),
            read_only: false,
            capability: None,
        }
    }

    /// The JSON Schema of the arguments (`"type": "object"`).
    pub fn schema(mut self, schema: serde_json::Value) -> Self {
        self.schema = schema;
        self
    }

    /// Tells clients the tool changes nothing.
    pub fn read_only(mut self) -> Self {
        self.read_only = true;
        self
    }

    /// Lists and runs the tool only while this capability is on.
    pub fn capability(mut self, name: &str) -> Self {
        self.capability = Some(name.into());
        self
    }
}

/// What a tool answers.
pub struct ToolResult(types::ToolResult);

impl ToolResult {
    pub fn text(text: impl Into<String>) -> Self {
        ToolResult(types::ToolResult {
            content: vec![types::Content::Text(text.into())],
            structured: None,
            is_error: false,
        })
    }

    /// Structured output (a JSON object), also given as text for clients that show only text.
    pub fn json(value: serde_json::Value) -> Self {
        let text = value.to_string();
        ToolResult(types::ToolResult {
            content: vec![types::Content::Text(text.clone())],
            structured: value.is_object().then_some(text),
            is_error: false,
        })
    }

    /// The tool ran and failed; `message` should say what to do next.
    pub fn error(message: impl Into<String>) -> Self {
        ToolResult(types::ToolResult {
            content: vec![types::Content::Text(message.into())],
            structured: None,
            is_error: true,
        })
    }
}

/// An extension. One instance lives as long as the guest's instance (the host rebuilds it, and
/// so calls [`Extension::new`] again, after a failed call).
pub trait Extension: Send + Sync + 'static {
    fn new() -> Self
    where
        Self: Sized;
    fn identity(&self) -> Identity;
    fn capabilities(&self) -> Vec<Capability> {
        Vec::new()
    }
    fn tools(&self) -> Vec<Tool>;
    /// `arguments` is the call's JSON object. An `Err` is a failure of the extension itself.
    fn call_tool(&self, name: &str, arguments: serde_json::Value) -> Result<ToolResult, String>;
}

#[doc(hidden)]
pub fn __identity(extension: &dyn Extension) -> api::ExtensionIdentity {
    let Identity { name, version } = extension.identity();
    api::ExtensionIdentity { name, version }
}

#[doc(hidden)]
pub fn __tools(extension: &dyn Extension) -> Vec<types::ToolSpec> {
    extension
        .tools()
        .into_iter()
        .map(|t| types::ToolSpec {
            name: t.name,
            description: t.description,
            input_schema: t.schema.to_string(),
            annotations: types::ToolAnnotations {
                title: None,
                read_only_hint: Some(t.read_only),
                destructive_hint: Some(!t.read_only),
                idempotent_hint: None,
                open_world_hint: Some(false),
            },
            capability: t.capability,
        })
        .collect()
}

#[doc(hidden)]
pub fn __call_tool(
    extension: &dyn Extension,
    name: &str,
    arguments: &str,
) -> Result<types::ToolResult, String> {
    let arguments = serde_json::from_str(arguments)
        .map_err(|e| format!("the host sent arguments that are not JSON: {e}"))?;
    extension.call_tool(name, arguments).map(|r| r.0)
}

/// Exports `$ty` (an [`Extension`]) as this component's `extension-api`.
#[macro_export]
macro_rules! register_extension {
    ($ty:ty) => {
        fn __jupyter_mcp_extension() -> &'static $ty {
            static INSTANCE: ::std::sync::OnceLock<$ty> = ::std::sync::OnceLock::new();
            INSTANCE.get_or_init(<$ty as $crate::Extension>::new)
        }

        struct __JupyterMcpExtension;

        impl $crate::bindings::exports::jupyter_mcp::extension::extension_api::Guest
            for __JupyterMcpExtension
        {
            fn identity()
            -> $crate::bindings::exports::jupyter_mcp::extension::extension_api::ExtensionIdentity
            {
                $crate::__identity(__jupyter_mcp_extension())
            }
            fn capabilities() -> ::std::vec::Vec<$crate::Capability> {
                $crate::Extension::capabilities(__jupyter_mcp_extension())
            }
            fn tools() -> ::std::vec::Vec<$crate::bindings::jupyter_mcp::extension::types::ToolSpec>
            {
                $crate::__tools(__jupyter_mcp_extension())
            }
            fn call_tool(
                name: ::std::string::String,
                arguments: ::std::string::String,
            ) -> ::std::result::Result<
                $crate::bindings::jupyter_mcp::extension::types::ToolResult,
                ::std::string::String,
            > {
                $crate::__call_tool(__jupyter_mcp_extension(), &name, &arguments)
            }
        }

        $crate::bindings::__export_extension!(__JupyterMcpExtension);
    };
}

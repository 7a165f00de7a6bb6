//! An extension that declares one capability and no tools, to test that extension declarations
//! reach the capability registry with the extension's name as their source.

wit_bindgen::generate!({ path: "../../../wit/v0.1.0", world: "extension" });

use exports::jupyter_mcp::extension::extension_api::{ExtensionIdentity, Guest};
use jupyter_mcp::extension::types::{Capability, ToolResult, ToolSpec};

struct Declares;

impl Guest for Declares {
    fn identity() -> ExtensionIdentity {
        ExtensionIdentity {
            name: "declares".into(),
            version: "0.1.0".into(),
        }
    }

    fn capabilities() -> Vec<Capability> {
        vec![Capability {
            name: "declares.demo".into(),
            description: "A capability declared by a test extension.".into(),
            enabled: false,
        }]
    }

    fn tools() -> Vec<ToolSpec> {
        Vec::new()
    }

    fn call_tool(name: String, _arguments: String) -> Result<ToolResult, String> {
        Err(format!("this extension has no tool {name:?}"))
    }
}

export!(Declares);

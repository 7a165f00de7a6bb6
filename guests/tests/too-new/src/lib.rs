//! A guest of a WIT version newer than the host's (its own `wit/`, package 0.4.0).

wit_bindgen::generate!({ path: "wit", world: "extension" });

use exports::jupyter_mcp::extension::extension_api::{ExtensionIdentity, Guest};

struct TooNew;

impl Guest for TooNew {
    fn identity() -> ExtensionIdentity {
        ExtensionIdentity {
            name: format!(
                "too-new (host {})",
                jupyter_mcp::extension::host_info::api_version()
            ),
            version: "0.1.0".into(),
        }
    }
}

export!(TooNew);

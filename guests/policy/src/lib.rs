//! A critical hook handler: refuses `before_execute` when the code contains any entry of the
//! deny list in its config (`config = { deny = ["import subprocess", "os.system"] }`).

wit_bindgen::generate!({ path: "../../wit/v0.1.0", world: "hook-handler" });

use std::sync::OnceLock;

use exports::jupyter_mcp::extension::hooks::Guest;
use jupyter_mcp::extension::log::{Level, log};
use jupyter_mcp::extension::types::HookEvent;

struct Policy;

/// The deny list, read once per instance from the operator's config.
fn deny_list() -> &'static [String] {
    static DENY: OnceLock<Vec<String>> = OnceLock::new();
    DENY.get_or_init(|| {
        let config = jupyter_mcp::extension::config::get_config();
        let parsed: serde_json::Value = serde_json::from_str(&config).unwrap_or_default();
        let deny: Vec<String> = parsed["deny"]
            .as_array()
            .map(|list| {
                list.iter()
                    .filter_map(|v| v.as_str().map(str::to_owned))
                    .collect()
            })
            .unwrap_or_default();
        if deny.is_empty() {
            log(
                Level::Warn,
                "no deny list in config (deny = [...]): nothing is refused",
            );
        }
        deny
    })
}

impl Guest for Policy {
    fn propagate_errors() -> bool {
        true
    }

    fn on_event(event: HookEvent, _context: String) -> Result<Option<String>, String> {
        let HookEvent::BeforeExecute(execute) = event else {
            return Ok(None);
        };
        match deny_list()
            .iter()
            .find(|d| execute.code.contains(d.as_str()))
        {
            Some(denied) => {
                log(Level::Info, &format!("refused code containing {denied:?}"));
                Err(format!(
                    "the operator's policy does not allow code containing {denied:?}; change the \
                     code or ask the operator to change the policy's deny list"
                ))
            }
            None => Ok(None),
        }
    }
}

export!(Policy);

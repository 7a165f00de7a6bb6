//! A critical hook handler: refuses `before_execute` when the code contains any entry of the
//! deny list in its config (`config = { deny = ["import subprocess", "os.system"] }`). Built with
//! the SDK (WIT 0.2.0).

use jupyter_mcp_extension::{self as ext, Extension, HookEvent, register_hook_handler};

struct Policy {
    /// The deny list, read once per instance from the operator's config.
    deny: Vec<String>,
}

impl Extension for Policy {
    fn new() -> Self {
        let deny: Vec<String> = ext::config()["deny"]
            .as_array()
            .map(|list| {
                list.iter()
                    .filter_map(|v| v.as_str().map(str::to_owned))
                    .collect()
            })
            .unwrap_or_default();
        if deny.is_empty() {
            ext::log::warn("no deny list in config (deny = [...]): nothing is refused");
        }
        Policy { deny }
    }

    fn propagate_errors(&self) -> bool {
        true
    }

    fn on_event(&self, event: &HookEvent, _context: &mut ext::Context) -> ext::Result<()> {
        let HookEvent::BeforeExecute(execute) = event else {
            return Ok(());
        };
        match self.deny.iter().find(|d| execute.code.contains(d.as_str())) {
            Some(denied) => {
                ext::log::info(&format!("refused code containing {denied:?}"));
                Err(ext::Error::failed(format!(
                    "the operator's policy does not allow code containing {denied:?}; change the \
                     code or ask the operator to change the policy's deny list"
                )))
            }
            None => Ok(()),
        }
    }
}

register_hook_handler!(Policy);

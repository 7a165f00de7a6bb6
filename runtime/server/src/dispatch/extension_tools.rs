//! Guests' tools joining and leaving the tool table: the table's side of `wasm_host::ToolTable`,
//! each `wasm_host::GuestTool` made a tool (`tools::extensions::ExtensionTool`) as it joins.

use std::sync::Arc;

use super::ToolRegistry;
use crate::tools::Tool;
use crate::tools::extensions::ExtensionTool;
use wasm_host::{GuestTool, ToolTable};

fn tool(guest: Arc<GuestTool>) -> Arc<dyn Tool> {
    Arc::new(ExtensionTool::new(guest))
}

impl ToolTable for ToolRegistry {
    fn add(&self, guest: Arc<GuestTool>) -> Result<(), String> {
        ToolRegistry::add(self, tool(guest)).map_err(|taken| taken.to_string())
    }

    fn holder(&self, name: &str) -> Option<Option<String>> {
        self.get(name)
            .map(|held| held.extension_name().map(str::to_owned))
    }

    fn remove_extension(&self, extension: &str, names: &[String]) {
        ToolRegistry::remove_extension(self, extension, names);
    }

    fn replace_extension(
        &self,
        extension: &str,
        tools: Vec<Arc<GuestTool>>,
    ) -> Vec<(String, String)> {
        let tools = tools.into_iter().map(tool).collect();
        ToolRegistry::replace_extension(self, extension, tools)
            .into_iter()
            .map(|(name, taken)| (name, taken.to_string()))
            .collect()
    }

    fn names_of(&self, extension: &str) -> Vec<String> {
        ToolRegistry::names_of(self, extension)
    }

    fn check_selection(&self) -> Result<(), Box<dyn std::error::Error + Send + Sync>> {
        ToolRegistry::check_selection(self).map_err(Into::into)
    }
}

#[cfg(test)]
mod tests {
    use std::path::PathBuf;

    use super::*;
    use crate::config::ExtensionConfig;
    use wasm_host::{WasmHost, register_tools};

    #[test]
    #[ignore = "needs the built guests (guests/build); tests/run runs it"]
    fn a_tool_name_taken_by_another_extension_is_refused_not_shadowed() {
        let dir = PathBuf::from(
            std::env::var_os("JUPYTER_MCP_GUESTS_DIR")
                .expect("JUPYTER_MCP_GUESTS_DIR is set by tests/run"),
        );
        let cache = std::env::temp_dir().join(format!("jmcp-tools-unit-{}", std::process::id()));
        let host = WasmHost::new(Some(cache)).unwrap();
        // The same guest twice, as two extensions would be that chose the same tool names.
        let load = || {
            host.load(&ExtensionConfig::with_defaults(dir.join("hello.wasm")))
                .unwrap()
        };
        let (first, second) = (load(), load());
        let capabilities = server_core::capabilities::Capabilities::build(
            &[first.extension().unwrap()],
            &Default::default(),
        )
        .unwrap();
        let tools = ToolRegistry::builtin();
        let core = tools.names().len();
        register_tools(&tools, &[first, second], &capabilities);
        assert_eq!(tools.names().len(), core + 1, "one 'hello', not two");
        let kept = tools.get("hello").unwrap();
        assert_eq!(kept.extension_name(), Some("hello"));
    }
}

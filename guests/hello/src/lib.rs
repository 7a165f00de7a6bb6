//! The guide's example (guests/README.md, step 3); keep the two identical.

use jupyter_mcp_extension::serde_json::{Value, json};
use jupyter_mcp_extension::{
    self as ext, Extension, Tool, ToolResult, notebook, register_extension,
};

struct Hello;

impl Extension for Hello {
    fn new() -> Self {
        Hello
    }
    fn identity(&self) -> ext::Identity {
        ext::Identity::new("hello", "0.1.0")
    }
    fn capabilities(&self) -> Vec<ext::Capability> {
        vec![ext::capability(
            "hello.greet",
            "Greets, and counts the cells it sees.",
            true,
        )]
    }
    fn tools(&self) -> Vec<Tool> {
        let schema = json!({"type": "object", "properties": {"who": {"type": "string"}}});
        vec![
            Tool::new("hello", "Greets someone.")
                .schema(schema)
                .read_only()
                .capability("hello.greet"),
        ]
    }
    fn call_tool(&self, _name: &str, args: Value) -> Result<ToolResult, String> {
        let who = args["who"].as_str().unwrap_or("world");
        Ok(match notebook::read_cells("") {
            Ok(cells) => ToolResult::text(format!("Hello, {who}! ({} cells)", cells.len())),
            Err(refused) => ToolResult::error(refused.message()),
        })
    }
}

register_extension!(Hello);

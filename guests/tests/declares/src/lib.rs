//! An extension that declares one capability (off by default) and two tools, to test that
//! declarations reach the capability registry with the extension's name as their source, that a
//! tool gated by an off capability is hidden, that a tool named like a core tool is refused, and
//! that `execute-code` runs through the kernel's execute path (hooks and policies included), and
//! that a guest's overwrite of a cell it read is refused when someone changed the cell since.

wit_bindgen::generate!({ path: "../../../wit/v0.1.0", world: "extension" });

use exports::jupyter_mcp::extension::extension_api::{ExtensionIdentity, Guest};
use jupyter_mcp::extension::types::{Capability, Content, ToolAnnotations, ToolResult, ToolSpec};

fn tool(name: &str, capability: Option<&str>) -> ToolSpec {
    ToolSpec {
        name: name.into(),
        description: "A test tool of the declares extension.".into(),
        input_schema: r#"{"type":"object","properties":{}}"#.into(),
        annotations: ToolAnnotations {
            title: None,
            read_only_hint: Some(true),
            destructive_hint: None,
            idempotent_hint: None,
            open_world_hint: None,
        },
        capability: capability.map(str::to_owned),
    }
}

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
        // `list_kernels` is a core tool: the host must refuse this one, not shadow the core one.
        vec![
            tool("declares_echo", Some("declares.demo")),
            tool("declares_run", None),
            tool("declares_edit", None),
            tool("declares_race", None),
            tool("list_kernels", None),
        ]
    }

    fn call_tool(name: String, arguments: String) -> Result<ToolResult, String> {
        match name.as_str() {
            "declares_echo" => Ok(ToolResult {
                content: vec![Content::Text(format!("declares echo: {arguments}"))],
                structured: None,
                is_error: false,
            }),
            // Runs `code` in the current notebook's kernel through the granted host function.
            "declares_run" => {
                let args: serde_json::Value =
                    serde_json::from_str(&arguments).map_err(|e| e.to_string())?;
                let code = args["code"].as_str().unwrap_or_default();
                let (text, is_error) =
                    match jupyter_mcp::extension::notebook::execute_code("", code, Some(30)) {
                        Ok(outputs) => (outputs, false),
                        Err(e) => (format!("{e:?}"), true),
                    };
                Ok(ToolResult {
                    content: vec![Content::Text(text)],
                    structured: None,
                    is_error,
                })
            }
            // One cell edit through a granted host function: overwrite (index, source) or move
            // (index, to) in the current notebook.
            "declares_edit" => {
                use jupyter_mcp::extension::notebook;
                let args: serde_json::Value =
                    serde_json::from_str(&arguments).map_err(|e| e.to_string())?;
                let index = args["index"].as_u64().unwrap_or_default() as u32;
                let done = match args["op"].as_str() {
                    Some("overwrite") => {
                        notebook::overwrite_cell("", index, args["source"].as_str().unwrap_or(""))
                    }
                    Some("move") => {
                        notebook::move_cell("", index, args["to"].as_u64().unwrap_or(0) as u32)
                    }
                    other => return Err(format!("unknown op {other:?}")),
                };
                let (text, is_error) = match done {
                    Ok(()) => ("done".to_owned(), false),
                    Err(e) => (format!("{e:?}"), true),
                };
                Ok(ToolResult {
                    content: vec![Content::Text(text)],
                    structured: None,
                    is_error,
                })
            }
            // Reads the cells, runs `between` (which may change the notebook, as a person would),
            // then overwrites the cell at `index` it read: the overwrite must not silently undo
            // a change made since the read.
            "declares_race" => {
                use jupyter_mcp::extension::notebook;
                let args: serde_json::Value =
                    serde_json::from_str(&arguments).map_err(|e| e.to_string())?;
                let index = args["index"].as_u64().unwrap_or_default() as u32;
                let between = args["between"].as_str().unwrap_or_default();
                let done = notebook::read_cells("")
                    .and_then(|_| notebook::execute_code("", between, Some(30)))
                    .and_then(|_| {
                        notebook::overwrite_cell("", index, args["source"].as_str().unwrap_or(""))
                    });
                let (text, is_error) = match done {
                    Ok(()) => ("done".to_owned(), false),
                    Err(e) => (format!("{e:?}"), true),
                };
                Ok(ToolResult {
                    content: vec![Content::Text(text)],
                    structured: None,
                    is_error,
                })
            }
            _ => Err(format!("this extension has no tool {name:?}")),
        }
    }
}

export!(Declares);

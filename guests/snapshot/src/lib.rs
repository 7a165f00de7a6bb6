//! Example extension: `snapshot_cells` keeps a notebook's cells (types and sources, in order)
//! under a name; `restore_cells` puts them back exactly; `list_snapshots` names what is kept.
//! Gated by its own capability `snapshot.cells`; needs the grants `read-cells`, `insert-cell`
//! and `delete-cell`. Snapshots live in the guest's memory: they last until the server stops
//! (or the guest is rebuilt after a failed call).

use std::collections::BTreeMap;
use std::sync::Mutex;

use jupyter_mcp_extension::serde_json::{Value, json};
use jupyter_mcp_extension::{
    self as ext, Capability, CellKind, Extension, Tool, ToolResult, notebook, register_extension,
};

const CAPABILITY: &str = "snapshot.cells";

struct Snapshots {
    kept: Mutex<BTreeMap<String, Vec<(CellKind, String)>>>,
}

fn arguments(args: &Value) -> (String, String) {
    let text = |key: &str, default: &str| args[key].as_str().unwrap_or(default).to_owned();
    (text("notebook", ""), text("name", "default"))
}

impl Snapshots {
    fn snapshot(&self, notebook: &str, name: String) -> Result<ToolResult, ext::HostError> {
        let cells = notebook::read_cells(notebook)?;
        let count = cells.len();
        let kept = cells.into_iter().map(|c| (c.kind, c.source)).collect();
        self.kept.lock().unwrap().insert(name.clone(), kept);
        Ok(ToolResult::json(json!({"snapshot": name, "cells": count})))
    }

    fn restore(&self, notebook: &str, name: &str) -> Result<ToolResult, ext::HostError> {
        let Some(cells) = self.kept.lock().unwrap().get(name).cloned() else {
            return Ok(ToolResult::error(format!(
                "there is no snapshot '{name}'; call snapshot_cells first, or list_snapshots"
            )));
        };
        // Cleared from the end, so each index stays valid, then rebuilt in order.
        for index in (0..notebook::read_cells(notebook)?.len() as u32).rev() {
            notebook::delete_cell(notebook, index)?;
        }
        for (index, (kind, source)) in cells.iter().enumerate() {
            notebook::insert_cell(notebook, index as u32, *kind, source)?;
        }
        Ok(ToolResult::json(
            json!({"restored": name, "cells": cells.len()}),
        ))
    }
}

impl Extension for Snapshots {
    fn new() -> Self {
        Snapshots {
            kept: Mutex::default(),
        }
    }

    fn identity(&self) -> ext::Identity {
        ext::Identity::new("snapshot", "0.1.0")
    }

    fn capabilities(&self) -> Vec<Capability> {
        let about = "Snapshot a notebook's cells and restore them later (snapshot_cells, \
                     restore_cells, list_snapshots).";
        vec![ext::capability(CAPABILITY, about, true)]
    }

    fn tools(&self) -> Vec<Tool> {
        let schema = json!({"type": "object", "properties": {
            "name": {"type": "string", "description": "The snapshot's name (default: default)."},
            "notebook": {"type": "string", "description": "A notebook in use; the current one if omitted."},
        }});
        vec![
            Tool::new(
                "snapshot_cells",
                "Keeps the notebook's cells (types, sources, order) under a name.",
            )
            .schema(schema.clone())
            .read_only()
            .capability(CAPABILITY),
            Tool::new(
                "restore_cells",
                "Replaces the notebook's cells with a snapshot's, exactly.",
            )
            .schema(schema)
            .capability(CAPABILITY),
            Tool::new(
                "list_snapshots",
                "Names the snapshots kept, with their cell counts.",
            )
            .read_only()
            .capability(CAPABILITY),
        ]
    }

    fn call_tool(&self, name: &str, args: Value) -> Result<ToolResult, String> {
        let (notebook, snapshot) = arguments(&args);
        let result = match name {
            "snapshot_cells" => self.snapshot(&notebook, snapshot),
            "restore_cells" => self.restore(&notebook, &snapshot),
            "list_snapshots" => {
                let kept = self.kept.lock().unwrap();
                let list: BTreeMap<_, _> = kept.iter().map(|(k, v)| (k.clone(), v.len())).collect();
                Ok(ToolResult::json(json!({"snapshots": list})))
            }
            other => return Err(format!("snapshot has no tool {other:?}")),
        };
        // A refused or failed host function is the tool's error, with the host's explanation.
        Ok(result.unwrap_or_else(|e| ToolResult::error(e.message())))
    }
}

register_extension!(Snapshots);

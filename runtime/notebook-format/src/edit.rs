//! Edits: the small operations every document backend applies to a notebook.

use serde_json::Value;

use crate::notebook::Cell;
use crate::outputs::Output;

/// One change to a notebook. Cells are named by id, so an edit computed from one version of the
/// document still means the same thing when it lands on a newer one.
#[derive(Debug, Clone, PartialEq)]
pub enum Edit {
    /// Inserts at `index` (clamped to the end).
    Insert {
        index: usize,
        cell: Cell,
    },
    /// Replaces a cell's source. With `expected`, refuses if someone else changed it meanwhile.
    SetSource {
        cell_id: String,
        source: String,
        expected: Option<String>,
    },
    /// Moves a cell to `to` (the index it has afterwards, clamped).
    Move {
        cell_id: String,
        to: usize,
    },
    Delete {
        cell_ids: Vec<String>,
    },
    SetOutputs {
        cell_id: String,
        outputs: Vec<Output>,
        execution_count: Option<i64>,
    },
    /// Shows a code cell as running or idle to collaborators (not part of nbformat: a file
    /// has nowhere to keep it).
    SetRunning {
        cell_id: String,
        running: bool,
    },
    /// Sets one key of the notebook's own metadata (e.g. `kernelspec` when it changes kernel).
    SetNotebookMetadata {
        key: String,
        value: Value,
    },
}

impl Edit {
    /// The ids of the cells this edit changes (none for the notebook's own metadata).
    pub fn cell_ids(&self) -> Vec<&str> {
        match self {
            Edit::Insert { cell, .. } => vec![cell.id.as_str()],
            Edit::SetSource { cell_id, .. }
            | Edit::Move { cell_id, .. }
            | Edit::SetOutputs { cell_id, .. }
            | Edit::SetRunning { cell_id, .. } => vec![cell_id.as_str()],
            Edit::Delete { cell_ids } => cell_ids.iter().map(String::as_str).collect(),
            Edit::SetNotebookMetadata { .. } => Vec::new(),
        }
    }
}

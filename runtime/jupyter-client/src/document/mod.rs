//! A notebook document: cells by index and id, edited through small operations, saved after each
//! batch. Tools hold a `dyn Document` and never know which backend is behind it: `file` (the
//! contents API) or `live` (a real-time collaboration room).

pub mod file;
pub mod live;
mod room_update;
pub mod ynotebook;
mod yvalues;

use std::future::Future;
use std::pin::Pin;
use std::sync::Arc;

use super::rest::RestError;
use notebook_format::notebook::{Cell, Notebook, NotebookError};
use notebook_format::outputs::Output;
use serde_json::{Map, Value};

pub use notebook_format::edit::Edit;

#[derive(Debug, thiserror::Error)]
pub enum DocumentError {
    #[error("notebook '{0}' was not found on the Jupyter Server")]
    NotFound(String),
    #[error(
        "cell '{cell_id}' of '{path}' changed or disappeared while this edit was being saved \
         (someone else edited the notebook); read it again and retry"
    )]
    Conflict { path: String, cell_id: String },
    #[error(
        "'{path}' kept being saved over by another writer: our edit was saved {saves} times and \
         each time replaced; read the notebook again and retry (or use the live backend)"
    )]
    Contended { path: String, saves: usize },
    #[error("'{path}' cannot be read as a notebook: {source}")]
    Invalid { path: String, source: NotebookError },
    #[error(
        "the Jupyter Server at {url} has no real-time collaboration, so '{path}' cannot be edited \
         live; install jupyter-collaboration (or jupyter-server-documents) there, or use \
         --document-backend file"
    )]
    NoCollaboration { url: String, path: String },
    /// The collaboration room could not be joined or kept; the message says why.
    #[error("{0}")]
    Room(String),
    /// The edit plan found the notebook unfit for the edit; the message says why.
    #[error("{0}")]
    Refused(String),
    #[error(
        "the last edits of '{path}' could not be confirmed on disk: {reason}. They are in the \
         collaboration room while the Jupyter Server runs; check the file (deleted, moved or \
         read-only?) and save it from JupyterLab, or use the notebook again to retry"
    )]
    NotSaved { path: String, reason: String },
    #[error(transparent)]
    Rest(#[from] RestError),
}

/// Where a cell is: its id, or its index.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum CellAt<'a> {
    Id(&'a str),
    Index(usize),
}

/// One cell of a notebook as it is now, and what a reader of one cell needs of the rest.
#[derive(Debug, Clone, PartialEq)]
pub struct CellRead {
    /// The cell and its index; `None` when no cell has that id or index.
    pub cell: Option<(usize, Cell)>,
    /// How many cells the notebook has.
    pub len: usize,
    /// The notebook's own metadata (widget states saved with it, its kernelspec).
    pub metadata: Map<String, Value>,
}

impl CellRead {
    /// The cell at `at` of a notebook read whole.
    pub fn pick(notebook: &Notebook, at: CellAt) -> Self {
        let index = match at {
            CellAt::Id(id) => notebook.index_of(id),
            CellAt::Index(index) => (index < notebook.cells.len()).then_some(index),
        };
        CellRead {
            cell: index.map(|index| (index, notebook.cells[index].clone())),
            len: notebook.cells.len(),
            metadata: notebook.metadata.clone(),
        }
    }
}

/// A page of a notebook's cells as they are now, and its structure.
#[derive(Debug, Clone, PartialEq)]
pub struct Page {
    /// The index of the first cell of `cells`.
    pub start: usize,
    pub cells: Vec<Cell>,
    /// Every cell's id, in order (what the notebook's structure version covers).
    pub ids: Vec<String>,
}

impl Page {
    /// Cells `start..start + limit` (`limit` 0: to the end) of a notebook read whole.
    pub fn of(notebook: &Notebook, start: usize, limit: usize) -> Self {
        let range = page_range(start, limit, notebook.cells.len());
        Page {
            start,
            cells: notebook.cells[range].to_vec(),
            ids: notebook.cells.iter().map(|cell| cell.id.clone()).collect(),
        }
    }
}

/// The indices of cells `start..start + limit` (`limit` 0: to the end) of `len` cells.
pub fn page_range(start: usize, limit: usize, len: usize) -> std::ops::Range<usize> {
    let end = match limit {
        0 => len,
        limit => start.saturating_add(limit).min(len),
    };
    start.min(end)..end
}

/// Whether an edit just answered is on disk.
#[derive(Debug, Clone, PartialEq)]
pub enum Persistence {
    /// Saved to the file (and checked, as the file backend checks its saves).
    Saved,
    /// In the shared document; the room saves it about `save_delay_secs` after the last change
    /// (`seen`: as this room was seen to save; else the default of `engine`, the extension that
    /// runs the room). `not_landing`: why our changes were last seen not to reach the file.
    InRoom {
        save_delay_secs: f64,
        seen: bool,
        engine: String,
        not_landing: Option<String>,
    },
}

/// Computes the edits to make from the notebook as it is at the moment of writing, or refuses.
impl DocumentError {
    pub fn no_collaboration(&self) -> bool {
        matches!(self, DocumentError::NoCollaboration { .. })
    }
}

pub type EditPlan<'a> = Box<dyn FnOnce(&Notebook) -> Result<Vec<Edit>, String> + Send + 'a>;

pub type DocumentFuture<'a, T> =
    Pin<Box<dyn Future<Output = Result<T, DocumentError>> + Send + 'a>>;

pub trait Document: Send + Sync {
    fn path(&self) -> &str;
    /// `file` or `live`.
    fn backend(&self) -> &'static str;
    /// The notebook as it is now.
    fn read(&self) -> DocumentFuture<'_, Notebook>;
    /// One cell as it is now, by id or index, with the notebook's size and metadata but not its
    /// other cells: what reading one cell needs, at the cost of that cell (a room reads it alone;
    /// the file backend copies nothing while the file has not moved).
    fn read_cell<'a>(&'a self, at: CellAt<'a>) -> DocumentFuture<'a, CellRead> {
        Box::pin(async move { Ok(CellRead::pick(&self.read().await?, at)) })
    }
    /// Cells `start..start + limit` (`limit` 0: to the end) as they are now, with every cell's
    /// id: a page of a big notebook costs that page and the ids.
    fn read_page(&self, start: usize, limit: usize) -> DocumentFuture<'_, Page> {
        Box::pin(async move { Ok(Page::of(&self.read().await?, start, limit)) })
    }
    /// Plans edits against the newest version and saves them, checking for other writers once;
    /// returns the notebook before and after. No edits, no write.
    fn update<'a>(
        &'a self,
        plan: EditPlan<'a>,
    ) -> DocumentFuture<'a, (Arc<Notebook>, Arc<Notebook>)>;
    /// Writes a running cell's outputs as they stand; `done`: the run ended (a room shows the
    /// cell idle again). By default an edit like any other; a room writes them into that cell
    /// alone, sending what is new, so a long-printing cell costs what it prints rather than the
    /// whole notebook at every write.
    fn write_outputs<'a>(
        &'a self,
        cell_id: &'a str,
        outputs: &'a [Output],
        execution_count: Option<i64>,
        done: bool,
    ) -> DocumentFuture<'a, ()> {
        Box::pin(async move {
            let mut edits = vec![Edit::SetOutputs {
                cell_id: cell_id.to_owned(),
                outputs: outputs.to_vec(),
                execution_count,
            }];
            if done && self.streams_outputs() {
                edits.push(Edit::SetRunning {
                    cell_id: cell_id.to_owned(),
                    running: false,
                });
            }
            self.update(Box::new(move |_| Ok(edits))).await.map(|_| ())
        })
    }
    /// Whether others see each write at once (a collaboration room). Then a running cell is shown
    /// as running and its outputs are written as they arrive; a file is rewritten at most once a
    /// second.
    fn streams_outputs(&self) -> bool {
        false
    }
    /// Whether our last answered edit is on disk.
    fn persistence(&self) -> Persistence {
        Persistence::Saved
    }
    /// Each other person present and where they are (a room's awareness says), sorted by name.
    fn whereabouts(&self) -> Vec<live::Presence> {
        Vec::new()
    }
    /// A counter that moves each time someone else changes the notebook, when the backend hears
    /// of such changes (a room does).
    fn changes_by_others(&self) -> Option<tokio::sync::watch::Receiver<u64>> {
        None
    }
    /// Who else changed the cell last, when the backend knows (a room's awareness names them).
    fn changed_by(&self, _cell_id: &str) -> Option<String> {
        None
    }
    /// Who else last inserted or deleted cells, when the backend knows.
    fn structure_changed_by(&self) -> Option<String> {
        None
    }
    /// Lets go of the document (e.g. leaves the room after sending what is pending).
    fn close(&self) -> DocumentFuture<'_, ()> {
        Box::pin(async { Ok(()) })
    }
}

/// Gives inserted cells ids that the notebook and the batch do not already use, so every backend
/// inserts exactly the cell the edit names.
pub fn fresh_insert_ids(edits: &mut [Edit], notebook: &Notebook) {
    if !edits.iter().any(|edit| matches!(edit, Edit::Insert { .. })) {
        return;
    }
    let held: std::collections::HashSet<&str> =
        notebook.cells.iter().map(|c| c.id.as_str()).collect();
    let mut batch: std::collections::HashSet<String> = std::collections::HashSet::new();
    for edit in edits {
        if let Edit::Insert { cell, .. } = edit {
            while held.contains(cell.id.as_str()) || batch.contains(&cell.id) {
                cell.id = notebook_format::notebook::new_cell_id();
            }
            batch.insert(cell.id.clone());
        }
    }
}

/// Applies edits in order; nothing is changed if one of them no longer fits. Inserted ids must be
/// fresh (see [`fresh_insert_ids`]).
pub fn apply_edits(
    notebook: &Notebook,
    edits: &[Edit],
    path: &str,
) -> Result<Notebook, DocumentError> {
    let mut next = notebook.clone();
    let conflict = |cell_id: &str| DocumentError::Conflict {
        path: path.to_owned(),
        cell_id: cell_id.to_owned(),
    };
    // Where the cell is now; a cell that vanished is a conflict, never a guess.
    let find =
        |next: &Notebook, cell_id: &str| next.index_of(cell_id).ok_or_else(|| conflict(cell_id));
    for edit in edits {
        match edit {
            Edit::Insert { index, cell } => {
                let at = (*index).min(next.cells.len());
                next.cells.insert(at, cell.clone());
            }
            Edit::SetSource {
                cell_id,
                source,
                expected,
            } => {
                let cell = next.cell_mut(cell_id).ok_or_else(|| conflict(cell_id))?;
                if expected.as_ref().is_some_and(|e| *e != cell.source) {
                    return Err(conflict(cell_id));
                }
                cell.source = source.clone();
            }
            Edit::Move { cell_id, to } => {
                let cell = next.cells.remove(find(&next, cell_id)?);
                let to = (*to).min(next.cells.len());
                next.cells.insert(to, cell);
            }
            Edit::Delete { cell_ids } => {
                for cell_id in cell_ids {
                    next.cells.remove(find(&next, cell_id)?);
                }
            }
            Edit::SetOutputs {
                cell_id,
                outputs,
                execution_count,
            } => {
                let cell = next.cell_mut(cell_id).ok_or_else(|| conflict(cell_id))?;
                cell.outputs = outputs.clone();
                cell.execution_count = *execution_count;
            }
            Edit::SetRunning { cell_id, .. } => {
                find(&next, cell_id)?;
            }
            Edit::SetNotebookMetadata { key, value } => {
                next.metadata.insert(key.clone(), value.clone());
            }
        }
    }
    Ok(next)
}

#[cfg(test)]
mod tests {
    use super::*;
    use notebook_format::notebook::{Cell, CellType};

    fn notebook(sources: &[&str]) -> Notebook {
        let mut nb = Notebook::empty();
        for (i, s) in sources.iter().enumerate() {
            let mut cell = Cell::new(CellType::Code, *s);
            cell.id = format!("c{i}");
            nb.cells.push(cell);
        }
        nb
    }

    fn sources(nb: &Notebook) -> Vec<&str> {
        nb.cells.iter().map(|c| c.source.as_str()).collect()
    }

    #[test]
    fn edits_apply_in_order() {
        let nb = notebook(&["a", "b", "c"]);
        let out = apply_edits(
            &nb,
            &[
                Edit::Insert {
                    index: 99,
                    cell: Cell::new(CellType::Markdown, "d"),
                },
                Edit::Move {
                    cell_id: "c0".into(),
                    to: 2,
                },
                Edit::SetSource {
                    cell_id: "c1".into(),
                    source: "B".into(),
                    expected: Some("b".into()),
                },
                Edit::Delete {
                    cell_ids: vec!["c2".into()],
                },
            ],
            "x.ipynb",
        )
        .unwrap();
        assert_eq!(sources(&out), vec!["B", "a", "d"]);
    }

    #[test]
    fn edits_to_vanished_or_changed_cells_conflict_and_change_nothing() {
        let nb = notebook(&["a"]);
        let gone = apply_edits(
            &nb,
            &[Edit::Delete {
                cell_ids: vec!["zz".into()],
            }],
            "x.ipynb",
        );
        assert!(matches!(gone, Err(DocumentError::Conflict { .. })));
        let changed = apply_edits(
            &nb,
            &[Edit::SetSource {
                cell_id: "c0".into(),
                source: "new".into(),
                expected: Some("old".into()),
            }],
            "x.ipynb",
        );
        assert!(matches!(changed, Err(DocumentError::Conflict { .. })));
    }
}

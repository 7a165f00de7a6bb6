//! Cell edits with their conflict semantics. Cells are named by index or id; every edit is
//! planned against the notebook as it is when the write happens, and a source replacement
//! carries the source it expects to replace, so a change someone else made meanwhile is refused
//! as a conflict instead of overwritten.

pub use jupyter_client::document::live::Presence;
use std::sync::Arc;

use super::Error;
use super::notebooks::NotebookInUse;
use super::versions::{check_cell, check_notebook};
use jupyter_client::document::{CellAt, CellRead, Persistence};
pub use jupyter_client::document::{Page, page_range};
/// The notebook model and its edits, as callers of the domain name them.
pub use notebook_format::edit::Edit;
pub use notebook_format::notebook::{Cell, CellType, Notebook};

/// Plans edits against the notebook as it is when the write happens (one check for other
/// writers per call); returns the notebook before and after.
pub async fn update<'a>(
    notebook: &NotebookInUse,
    plan: impl FnOnce(&Notebook) -> Result<Vec<Edit>, Error> + Send + 'a,
) -> Result<(Arc<Notebook>, Arc<Notebook>), Error> {
    // The plan's error travels as its message through the document; the error itself is kept
    // here, so a refusal keeps its kind (a version mismatch stays a conflict).
    let refusal = std::sync::Mutex::new(None);
    let planned = notebook
        .update(Box::new(|nb| {
            plan(nb).map_err(|e| {
                let message = e.message().to_string();
                *refusal.lock().expect("refusal lock") = Some(e);
                message
            })
        }))
        .await;
    match planned {
        Ok(done) => Ok(done),
        Err(e) => Err(refusal
            .into_inner()
            .expect("refusal lock")
            .unwrap_or_else(|| e.into())),
    }
}

/// The whole notebook, every cell's version remembered (the caller shows them all).
pub async fn read(notebook: &NotebookInUse) -> Result<Notebook, Error> {
    let read = notebook.read().await?;
    notebook.seen.record(&read);
    Ok(read)
}

/// The cell named by id (which wins) or index, read alone: its index and the cell, or the
/// error saying it is not there.
pub async fn read_cell(
    notebook: &NotebookInUse,
    index: Option<i64>,
    id: Option<&str>,
) -> Result<(usize, Cell, CellRead), Error> {
    let at = match (id, index) {
        (Some(id), _) => CellAt::Id(id),
        // A negative index is out of range like one past the end.
        (None, Some(index)) => CellAt::Index(usize::try_from(index).unwrap_or(usize::MAX)),
        (None, None) => return Err(no_cell_named()),
    };
    let mut read = notebook.read_cell(at).await?;
    match (read.cell.take(), id, index) {
        (Some((index, cell)), _, _) => Ok((index, cell, read)),
        (None, Some(id), _) => Err(unknown_id(id)),
        (None, None, Some(index)) => Err(index_out_of_range(index, read.len)),
        (None, None, None) => Err(no_cell_named()),
    }
}

/// The versions a caller says it last saw: of the cell it names, of the notebook's structure.
/// A mismatch at the moment of writing refuses the whole call.
#[derive(Debug, Clone, Default)]
pub struct Expected {
    pub cell: Option<String>,
    pub notebook: Option<String>,
}

impl Expected {
    /// Refuses unless the cell at `index` and the structure of `notebook` are as expected.
    pub fn check(
        &self,
        in_use: &NotebookInUse,
        notebook: &Notebook,
        index: usize,
    ) -> Result<(), Error> {
        self.check_structure(notebook)?;
        self.check_cell(in_use, &notebook.cells[index], index)
    }

    /// Refuses unless `cell`, at `index`, is as expected (its notebook's structure unchecked).
    pub fn check_cell(
        &self,
        in_use: &NotebookInUse,
        cell: &Cell,
        index: usize,
    ) -> Result<(), Error> {
        check_cell(cell, index, self.cell.as_deref(), &in_use.seen, |id| {
            in_use.document.changed_by(id)
        })
    }

    /// Refuses unless the structure of `notebook` is as expected.
    pub fn check_structure(&self, notebook: &Notebook) -> Result<(), Error> {
        check_notebook(notebook, self.notebook.as_deref())
    }
}

pub fn out_of_range(index: i64, notebook: &Notebook) -> Error {
    index_out_of_range(index, notebook.cells.len())
}

/// Cell `index` asked of a notebook of `len` cells.
pub fn index_out_of_range(index: i64, len: usize) -> Error {
    Error::Failed(format!("Cell index {index} is out of range. Notebook has {len} cells.").into())
}

fn no_cell_named() -> Error {
    Error::InvalidArguments("name the cell to act on, by cell_index or by cell_id".into())
}

pub fn unknown_id(id: &str) -> Error {
    Error::NotFound(format!(
        "No cell '{id}' in this notebook. It was deleted, or it belongs to another notebook. Read \
         the notebook again for current cell ids."
    ).into())
}

/// Finds the cell named by id (which wins) or index.
pub fn resolve_cell(
    notebook: &Notebook,
    index: Option<i64>,
    id: Option<&str>,
) -> Result<usize, Error> {
    match (id, index) {
        (Some(id), _) => notebook.index_of(id).ok_or_else(|| unknown_id(id)),
        (None, Some(index)) => usize::try_from(index)
            .ok()
            .filter(|i| *i < notebook.cells.len())
            .ok_or_else(|| out_of_range(index, notebook)),
        (None, None) => Err(no_cell_named()),
    }
}

/// Inserts a cell at `cell_index` (-1 appends); returns its index, id and the notebook after.
pub async fn insert(
    in_use: &NotebookInUse,
    cell_index: i64,
    cell: Cell,
    expected: &Expected,
) -> Result<(usize, String, Arc<Notebook>), Error> {
    let id = cell.id.clone();
    let (_, saved) = update(in_use, move |current| {
        expected.check_structure(current)?;
        let total = current.cells.len() as i64;
        if cell_index < -1 || cell_index > total {
            return Err(Error::Failed(format!(
                "Index {cell_index} is outside valid range [-1, {total}]. Use -1 to append at end."
            ).into()));
        }
        let at = if cell_index == -1 {
            current.cells.len()
        } else {
            cell_index as usize
        };
        Ok(vec![Edit::Insert { index: at, cell }])
    })
    .await?;
    let index = saved.index_of(&id).ok_or_else(|| unknown_id(&id))?;
    Ok((index, id, saved))
}

/// The edit that sets a cell's source, refused at write time if the cell's source is no longer
/// `expected` (by default, what it is as the edit is planned); no edit when nothing changes.
pub fn set_source(cell: &Cell, source: String, expected: Option<&str>) -> Vec<Edit> {
    if cell.source == source {
        return Vec::new();
    }
    vec![Edit::SetSource {
        cell_id: cell.id.clone(),
        source,
        expected: Some(expected.unwrap_or(&cell.source).to_owned()),
    }]
}

/// Which cell to overwrite, and what its source is expected to be.
pub struct Overwrite {
    pub index: Option<i64>,
    pub id: Option<String>,
    pub source: String,
    /// The source the caller last saw; someone else's change since then is a conflict.
    pub expected: Option<String>,
    /// New source, so old outputs no longer describe it (the WIT's `overwrite-cell`).
    pub clear_outputs: bool,
}

/// What an overwrite replaced.
pub struct Overwritten {
    pub index: usize,
    pub cell_id: String,
    pub old_source: String,
    /// The cell's version now.
    pub version: String,
}

pub async fn overwrite(in_use: &NotebookInUse, request: Overwrite) -> Result<Overwritten, Error> {
    overwrite_if(in_use, request, &Expected::default()).await
}

/// An overwrite refused unless the cell is still the version `expected` names.
pub async fn overwrite_if(
    in_use: &NotebookInUse,
    request: Overwrite,
    versions: &Expected,
) -> Result<Overwritten, Error> {
    let Overwrite {
        index,
        id,
        source,
        expected,
        clear_outputs,
    } = request;
    let (before, after) = update(in_use, |nb| {
        let at = resolve_cell(nb, index, id.as_deref())?;
        versions.check(in_use, nb, at)?;
        let cell = &nb.cells[at];
        let mut edits = set_source(cell, source.clone(), expected.as_deref());
        if let Some(expected) = &expected
            && edits.is_empty()
            && *expected != cell.source
        {
            // Even a write that changes nothing must not pretend the caller saw this version.
            edits.push(Edit::SetSource {
                cell_id: cell.id.clone(),
                source: source.clone(),
                expected: Some(expected.clone()),
            });
        }
        if clear_outputs && !edits.is_empty() && cell.cell_type == CellType::Code {
            edits.push(Edit::SetOutputs {
                cell_id: cell.id.clone(),
                outputs: Vec::new(),
                execution_count: None,
            });
        }
        Ok(edits)
    })
    .await?;
    let at = resolve_cell(&before, index, id.as_deref())?;
    let cell = &before.cells[at];
    Ok(Overwritten {
        index: at,
        cell_id: cell.id.clone(),
        old_source: cell.source.clone(),
        version: version_of(&after, &cell.id),
    })
}

/// Where a move starts and ends: a cell by id (which wins) or index.
#[derive(Debug, Clone, Default)]
pub struct MoveTargets {
    pub source_index: Option<i64>,
    pub source_id: Option<String>,
    pub target_index: Option<i64>,
    pub target_id: Option<String>,
}

impl MoveTargets {
    /// The source and target indices in `notebook`.
    pub fn resolve(&self, notebook: &Notebook) -> Result<(usize, usize), Error> {
        let total = notebook.cells.len();
        if total == 0 {
            return Err(Error::Failed("Notebook has no cells.".into()));
        }
        let find = |what: &str, id: &Option<String>, index: Option<i64>, missing: &str| {
            match (
            id, index,
        ) {
            (Some(id), _) => notebook.index_of(id).ok_or_else(|| unknown_id(id)),
            (None, Some(i)) => usize::try_from(i)
                .ok()
                .filter(|i| *i < total)
                .ok_or_else(|| {
                    Error::Failed(format!(
                        "{what} index {i} is out of range. Notebook has {total} cells (valid: 0-{}).",
                        total - 1
                    ).into())
                }),
            (None, None) => Err(Error::InvalidArguments(missing.to_owned().into())),
        }
        };
        let source = find(
            "Source",
            &self.source_id,
            self.source_index,
            "name the cell to move, by source_index or source_cell_id",
        )?;
        let target = find(
            "Target",
            &self.target_id,
            self.target_index,
            "name where to move it, by target_index or target_cell_id",
        )?;
        Ok((source, target))
    }
}

/// Moves a cell; returns the notebook before and after, and the source and target indices.
pub async fn move_cell(
    in_use: &NotebookInUse,
    targets: &MoveTargets,
) -> Result<(Arc<Notebook>, Arc<Notebook>, usize, usize), Error> {
    move_cell_if(in_use, targets, &Expected::default()).await
}

/// A move refused unless the cell and the structure are the versions `expected` names.
pub async fn move_cell_if(
    in_use: &NotebookInUse,
    targets: &MoveTargets,
    expected: &Expected,
) -> Result<(Arc<Notebook>, Arc<Notebook>, usize, usize), Error> {
    let (before, saved) = update(in_use, |nb| {
        let (source, target) = targets.resolve(nb)?;
        expected.check(in_use, nb, source)?;
        if source == target {
            return Ok(Vec::new());
        }
        Ok(vec![Edit::Move {
            cell_id: nb.cells[source].id.clone(),
            to: target,
        }])
    })
    .await?;
    let (source, target) = targets.resolve(&before)?;
    Ok((before, saved, source, target))
}

/// Deletes the cells `targets` finds; returns the notebook before and their indices in it.
pub async fn delete(
    in_use: &NotebookInUse,
    targets: impl Fn(&Notebook) -> Result<Vec<usize>, Error> + Send + Sync,
) -> Result<(Arc<Notebook>, Vec<usize>), Error> {
    let (before, indices, _) = delete_if(in_use, targets, &Expected::default()).await?;
    Ok((before, indices))
}

/// A delete refused unless the versions `expected` names still hold; with an expected cell
/// version, exactly one cell may be named. Also returns the notebook after.
pub async fn delete_if(
    in_use: &NotebookInUse,
    targets: impl Fn(&Notebook) -> Result<Vec<usize>, Error> + Send + Sync,
    expected: &Expected,
) -> Result<(Arc<Notebook>, Vec<usize>, Arc<Notebook>), Error> {
    let (before, after) = update(in_use, |nb| {
        let indices = targets(nb)?;
        match indices.as_slice() {
            [one] => expected.check(in_use, nb, *one)?,
            _ if expected.cell.is_some() => {
                return Err(Error::InvalidArguments(
                    "expected_version names one cell's version: delete one cell with it, or use expected_notebook_version for several"
                        .into(),
                ));
            }
            _ => expected.check_structure(nb)?,
        }
        let cell_ids = indices
            .iter()
            .map(|&i| nb.cells[i].id.clone())
            .collect();
        Ok(vec![Edit::Delete { cell_ids }])
    })
    .await?;
    let indices = targets(&before)?;
    Ok((before, indices, after))
}

/// Whether an edit just made is on disk, and the line that says so.
pub struct Persisted {
    pub on_disk: bool,
    pub note: String,
}

pub fn persisted(in_use: &NotebookInUse) -> Persisted {
    match in_use.document.persistence() {
        Persistence::Saved => Persisted {
            on_disk: true,
            note: "saved: the notebook file holds this change".into(),
        },
        Persistence::InRoom {
            not_landing: Some(reason),
            ..
        } => Persisted {
            on_disk: false,
            note: format!(
                "NOT saved: in the shared document (everyone in the notebook sees it), but not \
                 in the file: {reason}. Check the file; unuse_notebook writes it again from the \
                 room when it is gone."
            ),
        },
        Persistence::InRoom {
            save_delay_secs,
            seen,
            engine,
            not_landing: None,
        } => Persisted {
            on_disk: false,
            note: format!(
                "in the shared document (everyone in the notebook sees it); not yet saved: Jupyter saves the shared document {} s after the last change ({})",
                (save_delay_secs * 10.0).round() / 10.0,
                if seen {
                    "as this notebook's room was seen to save".to_owned()
                } else {
                    format!("{engine}'s default, until this room is seen to save")
                }
            ),
        },
    }
}

/// Each other person in the notebook now and where they are: the cell their cursor is in, else
/// the one they last changed (its room's awareness; none for a file).
pub fn whereabouts(in_use: &NotebookInUse) -> Vec<Presence> {
    in_use.document.whereabouts()
}

/// The version of the cell `cell_id` in `notebook` (empty if it is not there).
pub fn version_of(notebook: &Notebook, cell_id: &str) -> String {
    notebook
        .index_of(cell_id)
        .map(|i| super::versions::cell_version(&notebook.cells[i]))
        .unwrap_or_default()
}

#[cfg(test)]
mod tests {
    use super::*;
    use jupyter_client::document::{DocumentError, apply_edits};

    fn notebook(cells: &[(&str, CellType)]) -> Notebook {
        Notebook::with_cells(cells)
    }

    #[test]
    fn cells_resolve_by_id_first() {
        let nb = notebook(&[("a", CellType::Code), ("b", CellType::Code)]);
        let id = nb.cells[1].id.clone();
        assert_eq!(resolve_cell(&nb, Some(0), Some(&id)).unwrap(), 1);
        assert_eq!(resolve_cell(&nb, Some(1), None).unwrap(), 1);
        assert!(
            resolve_cell(&nb, Some(2), None)
                .unwrap_err()
                .to_string()
                .contains("out of range")
        );
        assert!(resolve_cell(&nb, Some(-1), None).is_err());
        assert!(
            resolve_cell(&nb, None, Some("nope"))
                .unwrap_err()
                .to_string()
                .contains("No cell 'nope'")
        );
        assert!(resolve_cell(&nb, None, None).is_err());
    }

    #[test]
    fn a_source_someone_changed_since_it_was_seen_is_a_conflict() {
        let nb = notebook(&[("seen", CellType::Code)]);
        let mut theirs = nb.clone();
        theirs.cells[0].source = "their edit".into();
        let edits = set_source(&nb.cells[0], "mine".into(), Some("seen"));
        let refused = apply_edits(&theirs, &edits, "x.ipynb").unwrap_err();
        assert!(matches!(refused, DocumentError::Conflict { .. }));
        let error = Error::from(refused).to_string();
        assert!(error.contains("changed or disappeared"), "{error}");
        // Without an expectation of its own the edit expects what it is planned against.
        assert_eq!(
            set_source(&theirs.cells[0], "mine".into(), None),
            vec![Edit::SetSource {
                cell_id: nb.cells[0].id.clone(),
                source: "mine".into(),
                expected: Some("their edit".into()),
            }]
        );
    }
}

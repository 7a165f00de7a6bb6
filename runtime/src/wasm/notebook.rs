//! The grantable notebook host functions in host terms, shared by every WIT version: each passes
//! the grant check of [`GuestState::on_notebook`] and is then a thin call into the domain (the
//! operations tools use), so a guest's `execute-code` gets kernel readiness, the auto-restart
//! policy and the gone-kernel message, and its edits the conflict check, as tools do. A version's
//! `host.rs` only converts its types.

use serde_json::Value;

use super::policy::grants::HostFunction;
use super::sandbox::{GuestState, HostResult};
use crate::domain::cells::{self, Overwrite, resolve_cell};
use crate::domain::outputs::{Output, StreamName};
use crate::jupyter::document::Edit;
use crate::jupyter::kernel::ExecutionRequest;
use crate::jupyter::notebook::{Cell, CellType, Notebook};

/// A cell as a guest names it: by id (stable) or by index (0-based, as it is when the edit is
/// planned).
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum CellAt {
    Id(String),
    Index(u32),
}

impl CellAt {
    /// The cell's index in `notebook`: an unknown id is not found, an index past the end is
    /// invalid.
    fn find(&self, notebook: &Notebook) -> Result<usize, crate::domain::Error> {
        match self {
            CellAt::Id(id) => resolve_cell(notebook, None, Some(id)),
            CellAt::Index(i) => resolve_cell(notebook, Some(i64::from(*i)), None)
                .map_err(|e| crate::domain::Error::InvalidArguments(e.to_string())),
        }
    }

    /// A position before which something goes: any cell, or (by index) the end.
    fn before(&self, notebook: &Notebook) -> Result<usize, crate::domain::Error> {
        match self {
            CellAt::Index(i) if *i as usize == notebook.cells.len() => Ok(notebook.cells.len()),
            other => other.find(notebook),
        }
    }
}

impl GuestState {
    /// Runs code in the notebook's kernel; the nbformat outputs as a JSON array.
    pub fn execute_code(
        &mut self,
        notebook: &str,
        code: String,
        timeout_seconds: Option<u32>,
    ) -> HostResult<String> {
        self.on_notebook(
            HostFunction::ExecuteCode,
            notebook,
            |in_use, domain| async move {
                let timeout = domain
                    .settings
                    .execution
                    .resolve(timeout_seconds.map_or(0.0, f64::from));
                // The domain's path, as execute_code's: kernel readiness (auto-restart policy),
                // the execute hooks and every policy, the gone-kernel message.
                let executed = domain
                    .execute_in(&in_use, ExecutionRequest::new(code, timeout))
                    .await?;
                let mut outputs = Output::all_from_json(&executed.outcome.outputs);
                if let Some(note) = executed.replaced {
                    // The guest sees the replacement where a person would: a stream before the
                    // outputs.
                    let note = Output::Stream {
                        name: StreamName::Stderr,
                        text: note,
                    };
                    outputs.insert(0, note);
                }
                Ok(Value::Array(Output::all_to_json(&outputs)).to_string())
            },
        )
    }

    /// Every cell of the notebook; what the guest saw is remembered for this call.
    pub fn read_cells(&mut self, notebook: &str) -> HostResult<Vec<Cell>> {
        let read = self.on_notebook(HostFunction::ReadCells, notebook, |in_use, _| async move {
            Ok((in_use.name.clone(), cells::read(&in_use).await?))
        });
        let (name, notebook) = read?;
        self.saw(name, &notebook);
        Ok(notebook.cells)
    }

    /// One cell and its index (needs the `read-cells` grant).
    pub fn read_cell(&mut self, notebook: &str, at: CellAt) -> HostResult<(usize, Cell)> {
        let read = self.on_notebook(HostFunction::ReadCells, notebook, |in_use, _| async move {
            Ok((in_use.name.clone(), cells::read(&in_use).await?))
        });
        let (name, notebook) = read?;
        let index = at.find(&notebook)?;
        self.saw(name, &notebook);
        let cell = notebook.cells.into_iter().nth(index).expect("found above");
        Ok((index, cell))
    }

    fn saw(&mut self, name: String, notebook: &Notebook) {
        let seen = notebook
            .cells
            .iter()
            .map(|c| (c.id.clone(), c.source.clone()))
            .collect();
        self.seen.insert(name, seen);
    }

    /// Inserts a cell before `before` (`None`: at the end); returns its id.
    pub fn insert_cell(
        &mut self,
        notebook: &str,
        before: Option<CellAt>,
        kind: CellType,
        source: String,
    ) -> HostResult<String> {
        self.on_notebook(HostFunction::InsertCell, notebook, |in_use, _| async move {
            let cell = Cell::new(kind, source);
            let id = cell.id.clone();
            cells::update(&in_use, move |nb| {
                let index = match &before {
                    Some(at) => at.before(nb)?,
                    None => nb.cells.len(),
                };
                Ok(vec![Edit::Insert { index, cell }])
            })
            .await?;
            Ok(id)
        })
    }

    /// Replaces a cell's source (a code cell's outputs are cleared). The cell must still hold
    /// `expected` when given, else the source this call read, else anything: otherwise the
    /// edit is a conflict, as for the overwrite tool.
    pub fn overwrite_cell(
        &mut self,
        notebook: &str,
        at: CellAt,
        source: String,
        expected: Option<String>,
    ) -> HostResult<()> {
        let seen = self.seen.clone();
        self.on_notebook(
            HostFunction::OverwriteCell,
            notebook,
            |in_use, _| async move {
                // A cell this call read is named by the id it had and must still have the
                // source the guest saw (unless the guest said what it expects).
                let read = GuestState::seen_in(&seen, &in_use.name, &at);
                let (index, id) = match (&at, &read) {
                    (_, Some((id, _))) | (CellAt::Id(id), None) => (None, Some(id.clone())),
                    (CellAt::Index(i), None) => (Some(i64::from(*i)), None),
                };
                let expected = expected.or(read.map(|(_, source)| source));
                cells::overwrite(
                    &in_use,
                    Overwrite {
                        index,
                        id,
                        source,
                        expected,
                        clear_outputs: true,
                    },
                )
                .await?;
                Ok(())
            },
        )
    }

    /// [`GuestState::seen_cell`] of a copy of the seen cells (the host function's future
    /// cannot borrow the state).
    fn seen_in(
        seen: &std::collections::HashMap<String, Vec<(String, String)>>,
        notebook: &str,
        at: &CellAt,
    ) -> Option<(String, String)> {
        let mut state_seen = seen.get(notebook)?.iter();
        match at {
            CellAt::Id(id) => state_seen.find(|(seen, _)| seen == id).cloned(),
            CellAt::Index(i) => state_seen.nth(*i as usize).cloned(),
        }
    }

    /// Moves a cell so that it ends up before `before` (`None`: at the end).
    pub fn move_cell(
        &mut self,
        notebook: &str,
        at: CellAt,
        before: Option<CellAt>,
    ) -> HostResult<()> {
        self.on_notebook(HostFunction::MoveCell, notebook, |in_use, _| async move {
            cells::update(&in_use, move |nb| {
                let from = at.find(nb)?;
                let before = match &before {
                    Some(target) => target.before(nb)?,
                    None => nb.cells.len(),
                };
                // Its index once it is out of the list, then back in before `before`.
                let to = if before > from { before - 1 } else { before };
                if to == from {
                    return Ok(Vec::new());
                }
                Ok(vec![Edit::Move {
                    cell_id: nb.cells[from].id.clone(),
                    to,
                }])
            })
            .await?;
            Ok(())
        })
    }

    /// Moves a cell to index `to` (its index afterwards): WIT 0.1.0's `move-cell`.
    pub fn move_cell_to(&mut self, notebook: &str, from: u32, to: u32) -> HostResult<()> {
        self.on_notebook(HostFunction::MoveCell, notebook, |in_use, _| async move {
            let targets = cells::MoveTargets {
                source_index: Some(i64::from(from)),
                target_index: Some(i64::from(to)),
                ..Default::default()
            };
            cells::move_cell(&in_use, &targets).await?;
            Ok(())
        })
    }

    /// Deletes a cell.
    pub fn delete_cell(&mut self, notebook: &str, at: CellAt) -> HostResult<()> {
        self.on_notebook(HostFunction::DeleteCell, notebook, |in_use, _| async move {
            cells::delete(&in_use, |nb| Ok(vec![at.find(nb)?])).await?;
            Ok(())
        })
    }
}

//! What this agent did to a notebook itself, so its changes are told from everyone else's.

use std::collections::{HashMap, HashSet};

use notebook_format::notebook::{Cell, Notebook};

use super::{outputs_digest, source_digest};

/// What this agent itself did to the notebook, to tell its changes from everyone else's: the
/// digests of the sources and outputs it left in each cell, the cells it inserted, deleted and
/// moved.
#[derive(Debug, Default)]
pub struct Ours {
    pub(super) sources: HashMap<String, u64>,
    pub(super) outputs: HashMap<String, u64>,
    pub(super) inserted: HashSet<String>,
    pub(super) deleted: HashSet<String>,
    pub(super) moved: HashSet<String>,
}

impl Ours {
    /// Notes what an edit of ours did: `before` and `after` are the notebook around it,
    /// `touched` the cells its edits named.
    pub fn edited(&mut self, before: &Notebook, after: &Notebook, touched: &HashSet<&str>) {
        let was: HashMap<&str, usize> = index_by_id(&before.cells);
        let now: HashMap<&str, usize> = index_by_id(&after.cells);
        for (index, cell) in after.cells.iter().enumerate() {
            let id = cell.id.as_str();
            match was.get(id) {
                None => {
                    self.inserted.insert(id.to_owned());
                }
                Some(old)
                    if touched.contains(id)
                        && relative_order_changed(before, after, *old, index) =>
                {
                    self.moved.insert(id.to_owned());
                }
                _ => {}
            }
            if touched.contains(id) || !was.contains_key(id) {
                self.sources
                    .insert(id.to_owned(), source_digest(&cell.source));
                self.outputs.insert(
                    id.to_owned(),
                    outputs_digest(&cell.outputs, cell.execution_count),
                );
            }
        }
        for cell in &before.cells {
            if !now.contains_key(cell.id.as_str()) {
                self.deleted.insert(cell.id.clone());
            }
        }
    }

    /// Notes the outputs a run of ours left in `cell`.
    pub fn ran(&mut self, cell: &Cell) {
        self.outputs.insert(
            cell.id.clone(),
            outputs_digest(&cell.outputs, cell.execution_count),
        );
    }
}

fn index_by_id(cells: &[Cell]) -> HashMap<&str, usize> {
    cells
        .iter()
        .enumerate()
        .map(|(i, c)| (c.id.as_str(), i))
        .collect()
}

/// Whether the cell at `old` in `before` (at `new` in `after`) changed its neighbours: a move,
/// not a shift from an insertion or deletion elsewhere.
fn relative_order_changed(before: &Notebook, after: &Notebook, old: usize, new: usize) -> bool {
    let neighbour = |cells: &[Cell], at: usize, keep: &dyn Fn(&str) -> bool| {
        cells[..at]
            .iter()
            .rev()
            .find(|c| keep(&c.id))
            .map(|c| c.id.clone())
    };
    let in_after: HashSet<&str> = after.cells.iter().map(|c| c.id.as_str()).collect();
    let in_before: HashSet<&str> = before.cells.iter().map(|c| c.id.as_str()).collect();
    neighbour(&before.cells, old, &|id| in_after.contains(id))
        != neighbour(&after.cells, new, &|id| in_before.contains(id))
}

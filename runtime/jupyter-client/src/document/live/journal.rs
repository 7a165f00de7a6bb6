//! The journal of our recent edits to a room, to re-apply after a rejoin and to tell whether the
//! file on disk holds them.

use std::collections::VecDeque;
use std::time::{Duration, Instant};

use crate::document::{Edit, apply_edits};
use notebook_format::notebook::Notebook;
use notebook_format::outputs::Output;

/// At most this many journal entries; the oldest proven ones go first.
const JOURNAL_LIMIT: usize = 2000;
/// How long a proven edit stays re-appliable: covers the room's save delay (1 s) and a server
/// that dies before saving.
const KEEP_PROVEN: Duration = Duration::from_secs(30);
/// Our recent edits, each with what the cell showed before it, to re-apply after a rejoin (the
/// file backend uses it too, to re-apply an edit another writer's save dropped).
#[derive(Default)]
pub(in crate::document) struct Journal {
    pub(super) entries: VecDeque<Entry>,
}

pub(super) struct Entry {
    edit: Edit,
    /// For source and output edits: the cell as it was before (source; outputs and count).
    before: Option<Prior>,
    /// The answer number on the current link that proves this edit; `None` once proven.
    pending: Option<u64>,
    proven_at: Option<Instant>,
}

#[derive(Clone, PartialEq)]
enum Prior {
    Source(String),
    Outputs(Vec<Output>, Option<i64>),
}

impl Journal {
    /// Records edits made to `base`; returns how many entries that added.
    pub(in crate::document) fn record(
        &mut self,
        base: &Notebook,
        edits: &[Edit],
        proof: u64,
    ) -> usize {
        let mut added = 0;
        for edit in edits {
            let cell = |id: &str| base.index_of(id).map(|i| &base.cells[i]);
            let before = match edit {
                Edit::SetSource { cell_id, .. } => {
                    cell(cell_id).map(|c| Prior::Source(c.source.clone()))
                }
                Edit::SetOutputs { cell_id, .. } => {
                    cell(cell_id).map(|c| Prior::Outputs(c.outputs.clone(), c.execution_count))
                }
                // Running marks are transient: a rejoin never brings them back.
                Edit::SetRunning { .. } => continue,
                _ => None,
            };
            self.entries.push_back(Entry {
                edit: edit.clone(),
                before,
                pending: Some(proof),
                proven_at: None,
            });
            added += 1;
        }
        while self.entries.len() > JOURNAL_LIMIT {
            self.entries.pop_front();
        }
        added
    }

    /// As [`Journal::record`], but a cell's outputs written again while the newest entry is an
    /// output write to that same cell (a running cell, every few milliseconds) update that
    /// entry: one copy of a cell's outputs is kept, not one per write. Its `before` stays the
    /// cell before the first of them; the room showing one of the writes in between (a prefix
    /// of the last) is recognised when replaying.
    pub(super) fn record_merging(&mut self, base: &Notebook, edits: &[Edit], proof: u64) {
        // Running marks are not journalled: a batch that also ends the run still merges.
        let kept: Vec<&Edit> = edits
            .iter()
            .filter(|edit| !matches!(edit, Edit::SetRunning { .. }))
            .collect();
        if let [
            Edit::SetOutputs {
                cell_id,
                outputs,
                execution_count,
            },
        ] = kept.as_slice()
            && self.merges_outputs_of(cell_id)
        {
            self.record_outputs(cell_id, outputs, *execution_count, None, proof);
            return;
        }
        self.record(base, edits, proof);
    }

    /// Whether a write of `cell_id`'s outputs now would update the newest entry.
    pub(super) fn merges_outputs_of(&self, cell_id: &str) -> bool {
        self.written_outputs(cell_id).is_some()
    }

    /// The outputs our newest entry wrote into `cell_id`, when it is that cell's outputs.
    pub(super) fn written_outputs(&self, cell_id: &str) -> Option<&[Output]> {
        match self.entries.back() {
            Some(Entry {
                edit:
                    Edit::SetOutputs {
                        cell_id: last,
                        outputs,
                        ..
                    },
                ..
            }) if last == cell_id => Some(outputs),
            _ => None,
        }
    }

    /// Records a write of a cell's outputs: into the newest entry when that is one for the
    /// same cell (copying what changed), else as a new entry, `before` being what the cell
    /// showed then.
    pub(super) fn record_outputs(
        &mut self,
        cell_id: &str,
        outputs: &[Output],
        execution_count: Option<i64>,
        before: Option<(Vec<Output>, Option<i64>)>,
        proof: u64,
    ) {
        if self.merges_outputs_of(cell_id)
            && let Some(last) = self.entries.back_mut()
            && let Edit::SetOutputs {
                outputs: kept,
                execution_count: kept_count,
                ..
            } = &mut last.edit
        {
            Output::sync_into(kept, outputs);
            *kept_count = execution_count;
            last.pending = Some(proof);
            last.proven_at = None;
            return;
        }
        self.entries.push_back(Entry {
            edit: Edit::SetOutputs {
                cell_id: cell_id.to_owned(),
                outputs: outputs.to_vec(),
                execution_count,
            },
            before: before.map(|(outputs, count)| Prior::Outputs(outputs, count)),
            pending: Some(proof),
            proven_at: None,
        });
        while self.entries.len() > JOURNAL_LIMIT {
            self.entries.pop_front();
        }
    }

    /// Marks entries proven by `answered` answers and forgets old proven ones.
    pub(super) fn settle(&mut self, answered: u64) {
        let now = Instant::now();
        for entry in &mut self.entries {
            if entry.pending.is_some_and(|proof| proof <= answered) {
                entry.pending = None;
                entry.proven_at = Some(now);
            }
        }
        self.entries.retain(|e| {
            e.proven_at
                .is_none_or(|at| now.duration_since(at) < KEEP_PROVEN)
        });
    }

    /// The file backend's proofs: entries held by save `through` or earlier are forgotten (a
    /// check after that save's settle time found the file holding them).
    pub(in crate::document) fn prove(&mut self, through: u64) {
        self.entries
            .retain(|e| e.pending.is_some_and(|proof| proof > through));
    }

    /// Every entry still unproven is to be proven by save `proof` (it re-applies them).
    pub(in crate::document) fn restamp(&mut self, proof: u64) {
        for entry in &mut self.entries {
            entry.pending = entry.pending.map(|_| proof);
        }
    }

    /// Drops the `count` newest entries (edits that were never saved).
    pub(in crate::document) fn forget_newest(&mut self, count: usize) {
        let keep = self.entries.len().saturating_sub(count);
        self.entries.truncate(keep);
    }

    /// The edits that bring a fresh copy of the room up to what we wrote, skipping those the room
    /// already shows and those someone else has since superseded.
    pub(in crate::document) fn replay(&self, room: &Notebook) -> (Vec<Edit>, usize) {
        let mut view = room.clone();
        let mut edits = Vec::new();
        let mut superseded = 0;
        for entry in &self.entries {
            let needed = match &entry.edit {
                Edit::Insert { cell, .. } => view.index_of(&cell.id).is_none(),
                Edit::Delete { cell_ids } => cell_ids.iter().any(|id| view.index_of(id).is_some()),
                Edit::Move { cell_id, to } => view
                    .index_of(cell_id)
                    .is_some_and(|at| at != (*to).min(view.cells.len() - 1)),
                Edit::SetSource {
                    cell_id, source, ..
                } => match view.index_of(cell_id).map(|i| &view.cells[i].source) {
                    Some(now) if now == source => false,
                    Some(now) if Some(Prior::Source(now.clone())) == entry.before => true,
                    Some(_) => {
                        superseded += 1;
                        false
                    }
                    None => false,
                },
                Edit::SetOutputs {
                    cell_id,
                    outputs,
                    execution_count,
                } => match view.index_of(cell_id).map(|i| &view.cells[i]) {
                    Some(c) if c.outputs == *outputs && c.execution_count == *execution_count => {
                        false
                    }
                    Some(c)
                        if Some(Prior::Outputs(c.outputs.clone(), c.execution_count))
                            == entry.before
                            || grows_into(&c.outputs, outputs) =>
                    {
                        true
                    }
                    Some(_) => {
                        superseded += 1;
                        false
                    }
                    None => false,
                },
                Edit::SetRunning { .. } => false,
                // Re-applied unless the room already shows it.
                Edit::SetNotebookMetadata { key, value } => view.metadata.get(key) != Some(value),
            };
            if !needed {
                continue;
            }
            let edit = match &entry.edit {
                Edit::Delete { cell_ids } => Edit::Delete {
                    cell_ids: cell_ids
                        .iter()
                        .filter(|id| view.index_of(id).is_some())
                        .cloned()
                        .collect(),
                },
                other => other.clone(),
            };
            if let Ok(next) = apply_edits(&view, std::slice::from_ref(&edit), "") {
                view = next;
                edits.push(edit);
            }
        }
        (edits, superseded)
    }
}

impl Journal {
    /// Whether `saved` (the file on disk) already shows every edit we recently made: replaying
    /// the journal onto it changes none of the cells. Someone else's newer version of a cell we
    /// edited counts as holding ours, as it does after a rejoin.
    pub(super) fn held_by(&self, saved: &Notebook) -> bool {
        let (edits, _) = self.replay(saved);
        if edits.is_empty() {
            return true;
        }
        match apply_edits(saved, &edits, "") {
            Ok(replayed) => same_cells(&replayed, saved),
            Err(_) => false,
        }
    }
}

/// Whether `earlier` is what a run's outputs were on the way to `later`: the same outputs, the
/// last of them possibly a stream that `later` continues (the writes a merged entry stands for).
fn grows_into(earlier: &[Output], later: &[Output]) -> bool {
    let Some((last, before)) = earlier.split_last() else {
        return false;
    };
    later.len() >= earlier.len()
        && before.iter().zip(later).all(|(a, b)| a == b)
        && match (last, &later[before.len()]) {
            (
                Output::Stream { name, text, extra },
                Output::Stream {
                    name: to_name,
                    text: to_text,
                    extra: to_extra,
                },
            ) => name == to_name && extra == to_extra && to_text.starts_with(text.as_str()),
            (a, b) => a == b,
        }
}

/// Cells compared by what a person sees: id, type, source, outputs and execution count
/// (metadata that the room or JupyterLab adds on its own is left out).
fn same_cells(a: &Notebook, b: &Notebook) -> bool {
    a.cells.len() == b.cells.len()
        && a.cells.iter().zip(&b.cells).all(|(x, y)| {
            x.id == y.id
                && x.cell_type == y.cell_type
                && x.source == y.source
                && x.outputs == y.outputs
                && x.execution_count == y.execution_count
        })
}

#[cfg(test)]
mod tests {
    use super::*;
    use notebook_format::notebook::{Cell, CellType};

    fn notebook(cells: &[(&str, &str)]) -> Notebook {
        let mut nb = Notebook::empty();
        for (id, source) in cells {
            let mut cell = Cell::new(CellType::Code, *source);
            cell.id = (*id).into();
            nb.cells.push(cell);
        }
        nb
    }

    #[test]
    fn an_insert_is_held_only_once_the_file_has_it() {
        let base = notebook(&[]);
        let mut cell = Cell::new(CellType::Code, "x = 1");
        cell.id = "a".into();
        let mut journal = Journal::default();
        journal.record(&base, &[Edit::Insert { index: 0, cell }], 1);
        assert!(!journal.held_by(&base));
        assert!(journal.held_by(&notebook(&[("a", "x = 1")])));
    }

    #[test]
    fn an_insert_then_delete_is_held_by_a_file_without_the_cell() {
        let base = notebook(&[("b", "keep")]);
        let mut cell = Cell::new(CellType::Code, "gone");
        cell.id = "a".into();
        let mut journal = Journal::default();
        journal.record(&base, &[Edit::Insert { index: 0, cell }], 1);
        journal.record(
            &notebook(&[("a", "gone"), ("b", "keep")]),
            &[Edit::Delete {
                cell_ids: vec!["a".into()],
            }],
            2,
        );
        assert!(journal.held_by(&base));
        assert!(!journal.held_by(&notebook(&[("a", "gone"), ("b", "keep")])));
    }

    #[test]
    fn a_source_edit_is_not_held_by_the_old_source() {
        let base = notebook(&[("a", "old")]);
        let mut journal = Journal::default();
        journal.record(
            &base,
            &[Edit::SetSource {
                cell_id: "a".into(),
                source: "new".into(),
                expected: None,
            }],
            1,
        );
        assert!(!journal.held_by(&base));
        assert!(journal.held_by(&notebook(&[("a", "new")])));
    }

    #[test]
    fn a_running_cells_writes_keep_one_entry_and_replay_over_a_partial_room() {
        use notebook_format::outputs::StreamName;
        let base = notebook(&[("a", "for i in range(3): print(i)")]);
        let printed = |text: &str| Edit::SetOutputs {
            cell_id: "a".into(),
            outputs: vec![Output::stream(StreamName::Stdout, text)],
            execution_count: None,
        };
        let mut journal = Journal::default();
        journal.record_merging(&base, &[printed("0\n")], 1);
        journal.record_merging(&base, &[printed("0\n1\n")], 2);
        journal.record_merging(
            &base,
            &[
                printed("0\n1\n2\n"),
                Edit::SetRunning {
                    cell_id: "a".into(),
                    running: false,
                },
            ],
            3,
        );
        assert_eq!(journal.entries.len(), 1, "one copy of the cell's outputs");
        // A room that kept only an earlier write gets the last one again.
        let partial = apply_edits(&base, &[printed("0\n1\n")], "").unwrap();
        let (edits, superseded) = journal.replay(&partial);
        assert_eq!((edits.len(), superseded), (1, 0));
        assert!(!journal.held_by(&partial));
        // Someone else's outputs are theirs.
        let other = apply_edits(&base, &[printed("something else\n")], "").unwrap();
        assert_eq!(journal.replay(&other).1, 1);
    }
}

//! Versions of cells and of a notebook's structure, and the conditional edits they allow.
//!
//! A cell's version is 8 hex digits of a hash over its type and source: it changes exactly when
//! either does, and is the same on every read, after a restart of this server and on both
//! backends. A notebook's version is the same over its cell ids in order (which cells, in which
//! order). A caller that names the version it saw is refused, with what changed, when the cell
//! (or the structure) is no longer that version at the moment of writing; the check runs inside
//! the edit's plan, so it is atomic with the write (see `cells::update`).

use std::collections::{HashMap, VecDeque};
use std::sync::Mutex;

use super::Error;
use notebook_format::notebook::{Cell, Notebook};
pub use notebook_format::versions::{cell_version, notebook_version, structure_version};

/// How many versions' sources each notebook keeps to show a diff against (oldest go first).
const SEEN_LIMIT: usize = 512;
/// Sources longer than this are not kept (a diff against them would be unreadable anyway).
const SEEN_SOURCE_LIMIT: usize = 64 * 1024;

/// The sources of versions this server has seen, per notebook (bounded), so a refused write
/// can show what changed since the version the caller names.
#[derive(Default)]
pub struct SeenSources {
    inner: Mutex<Seen>,
}

#[derive(Default)]
struct Seen {
    by_version: HashMap<String, String>,
    order: VecDeque<String>,
}

impl SeenSources {
    /// Remembers every cell of `notebook` as it is now.
    pub fn record(&self, notebook: &Notebook) {
        self.record_cells(&notebook.cells);
    }

    /// Remembers these cells as they are now: the ones whose versions a caller is shown, so a
    /// read of a few cells of a big notebook hashes those few.
    pub fn record_cells<'a>(&self, cells: impl IntoIterator<Item = &'a Cell>) {
        let mut seen = self.inner.lock().expect("seen lock");
        for cell in cells {
            if cell.source.len() > SEEN_SOURCE_LIMIT {
                continue;
            }
            let version = cell_version(cell);
            if seen.by_version.contains_key(&version) {
                continue;
            }
            seen.by_version.insert(version.clone(), cell.source.clone());
            seen.order.push_back(version);
            while seen.order.len() > SEEN_LIMIT {
                if let Some(oldest) = seen.order.pop_front() {
                    seen.by_version.remove(&oldest);
                }
            }
        }
    }

    pub fn source_of(&self, version: &str) -> Option<String> {
        let seen = self.inner.lock().expect("seen lock");
        seen.by_version.get(version).cloned()
    }
}

/// Who else changed a cell lately, as the room tells it (`None` when it does not).
pub type LastChange = Option<String>;

/// Refuses unless `cell`, at `index`, is still `expected` (when given).
pub fn check_cell(
    cell: &Cell,
    index: usize,
    expected: Option<&str>,
    seen: &SeenSources,
    changed_by: impl FnOnce(&str) -> LastChange,
) -> Result<(), Error> {
    let Some(expected) = expected else {
        return Ok(());
    };
    let current = cell_version(cell);
    if current == expected.trim() {
        return Ok(());
    }
    let mut text = format!(
        "Cell {index} (id {}) changed since you read it: you expected version {expected}, it is \
         now version {current}. Nothing was changed or run.",
        cell.id
    );
    if let Some(who) = changed_by(&cell.id) {
        text.push_str(&format!("\nLast changed by: {who}."));
    }
    match seen.source_of(expected.trim()) {
        Some(old) if old != cell.source => {
            if let Some(diff) = source_diff(&old, &cell.source) {
                text.push_str(&format!(
                    "\nWhat changed since version {expected}:\n```diff\n{diff}\n```"
                ));
            }
        }
        Some(_) => text.push_str(&format!(
            "\nIts source is unchanged; its type is now {}.",
            cell.type_name()
        )),
        None => text.push_str(&format!(
            "\nThis server no longer knows what version {expected} held, so no diff."
        )),
    }
    text.push_str(&format!(
        "\nCurrent source ({} cell, version {current}):\n```\n{}\n```\nDecide from this source; to \
         write over it, call again with expected_version=\"{current}\".",
        cell.type_name(),
        cell.source
    ));
    Err(Error::Conflict(text.into()))
}

/// Refuses unless the notebook's structure is still `expected` (when given).
pub fn check_notebook(notebook: &Notebook, expected: Option<&str>) -> Result<(), Error> {
    let Some(expected) = expected else {
        return Ok(());
    };
    let current = notebook_version(notebook);
    if current == expected.trim() {
        return Ok(());
    }
    let cells: Vec<String> = notebook
        .cells
        .iter()
        .enumerate()
        .map(|(i, c)| {
            let first = c.source.lines().next().unwrap_or("");
            format!(
                "{i}\t{}\t{}\t{}\t{first}",
                c.id,
                c.type_name(),
                cell_version(c)
            )
        })
        .collect();
    Err(Error::Conflict(format!(
        "The notebook's cells changed since you read it (cells inserted, deleted or moved): you \
         expected notebook version {expected}, it is now {current}. Nothing was changed or run.\n\
         It now has {} cells:\nIndex\tId\tType\tVersion\tFirst Line\n{}\nCheck the indices against \
         these cells; to go ahead, call again with expected_notebook_version=\"{current}\".",
        notebook.cells.len(),
        cells.join("\n")
    ).into()))
}

/// A unified diff of two sources, `None` when nothing changed.
pub fn source_diff(old: &str, new: &str) -> Option<String> {
    if old == new {
        return None;
    }
    let diff = similar::TextDiff::from_lines(old, new);
    let mut text = String::from("--- \n+++ ");
    for hunk in diff.unified_diff().context_radius(3).iter_hunks() {
        text.push('\n');
        text.push_str(hunk.header().to_string().trim_end());
        for change in hunk.iter_changes() {
            let sign = match change.tag() {
                similar::ChangeTag::Delete => '-',
                similar::ChangeTag::Insert => '+',
                similar::ChangeTag::Equal => ' ',
            };
            text.push('\n');
            text.push(sign);
            text.push_str(change.value().trim_end_matches('\n'));
        }
    }
    Some(text)
}

#[cfg(test)]
mod tests {
    use super::*;
    use notebook_format::notebook::{Cell, CellType};

    #[test]
    fn a_stale_version_is_refused_with_the_diff_and_current_source() {
        let seen = SeenSources::default();
        let mut nb = Notebook::with_cells(&[("x = 1\ny = 2", CellType::Code)]);
        seen.record(&nb);
        let old = cell_version(&nb.cells[0]);
        assert!(check_cell(&nb.cells[0], 0, Some(&old), &seen, |_| None).is_ok());
        nb.cells[0].source = "x = 1\ny = 3".into();
        let now = cell_version(&nb.cells[0]);
        let refused = check_cell(&nb.cells[0], 0, Some(&old), &seen, |_| Some("Ada".into()))
            .unwrap_err()
            .to_string();
        assert!(
            refused.contains(&format!("it is now version {now}")),
            "{refused}"
        );
        assert!(refused.contains("-y = 2\n+y = 3"), "{refused}");
        assert!(refused.contains("Last changed by: Ada."), "{refused}");
        assert!(refused.contains("```\nx = 1\ny = 3\n```"), "{refused}");
        let unknown = check_cell(&nb.cells[0], 0, Some("00000000"), &seen, |_| None)
            .unwrap_err()
            .to_string();
        assert!(unknown.contains("no longer knows"), "{unknown}");
        assert!(check_cell(&nb.cells[0], 0, None, &seen, |_| None).is_ok());
    }

    #[test]
    fn seen_sources_stay_bounded() {
        let seen = SeenSources::default();
        for i in 0..(SEEN_LIMIT + 10) {
            seen.record(&Notebook::with_cells(&[(&format!("v{i}"), CellType::Code)]));
        }
        let first = Cell::new(CellType::Code, "v0");
        let last = Cell::new(CellType::Code, format!("v{}", SEEN_LIMIT + 9));
        assert_eq!(seen.source_of(&cell_version(&first)), None);
        assert!(seen.source_of(&cell_version(&last)).is_some());
    }
}

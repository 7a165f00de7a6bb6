//! The Python server's texts, shared by every module that shows notebooks: the cell tools,
//! the notebook tools, MCP resources and prompts. Kept apart from any tool so that showing a
//! notebook never means importing one.

use std::time::Duration;

use server_core::domain::cells::{Cell, Notebook, Page, page_range};
use server_core::domain::versions::cell_version;

pub fn count_text(cell: &Cell) -> String {
    match cell.execution_count {
        Some(n) if n > 0 => n.to_string(),
        _ => "N/A".into(),
    }
}

pub fn cell_header(index: usize, cell: &Cell) -> String {
    format!(
        "=====Cell {index} | type: {} | execution count: {}=====",
        cell.cell_type.as_str(),
        count_text(cell)
    )
}

/// The Python server's cell header with the cell's version in it.
pub fn versioned_header(index: usize, cell: &Cell) -> String {
    format!(
        "=====Cell {index} | type: {} | execution count: {} | version: {}=====",
        cell.cell_type.as_str(),
        count_text(cell),
        cell_version(cell)
    )
}

/// The most characters of a cell's first line a brief table shows: one long line (a minified
/// script, a data literal) must not make the table the size of the notebook.
pub const FIRST_LINE_CHARS: usize = 200;

/// How an answer listing cells is bounded: by `--max-output-chars` (0: not at all), a cell's
/// source cut with a note naming its resource in notebook `name`.
#[derive(Debug, Clone, Copy)]
pub struct Bound<'a> {
    pub max_chars: usize,
    pub name: &'a str,
}

/// Cells of a notebook at hand: all of them, or a page read alone.
#[derive(Debug, Clone, Copy)]
pub struct Shown<'a> {
    /// The index of the first of `cells`.
    pub start: usize,
    pub cells: &'a [Cell],
    /// How many cells the notebook has.
    pub total: usize,
}

impl<'a> From<&'a Notebook> for Shown<'a> {
    fn from(notebook: &'a Notebook) -> Self {
        Shown {
            start: 0,
            cells: &notebook.cells,
            total: notebook.cells.len(),
        }
    }
}

impl<'a> From<&'a Page> for Shown<'a> {
    fn from(page: &'a Page) -> Self {
        Shown {
            start: page.start,
            cells: &page.cells,
            total: page.ids.len(),
        }
    }
}

impl Shown<'_> {
    fn cell(&self, index: usize) -> &Cell {
        &self.cells[index - self.start]
    }

    /// The end of cells `start..start + limit` (`limit` 0: to the end), within those at hand.
    fn end(&self, start: usize, limit: usize) -> usize {
        page_range(start, limit, self.total)
            .end
            .min(self.start + self.cells.len())
    }
}

/// The table the Python server shows for a range of cells, each first line cut at
/// `FIRST_LINE_CHARS`; rows past `bound` are left out with a note saying where to read on.
pub fn brief_table<'a>(
    shown: impl Into<Shown<'a>>,
    start: usize,
    limit: usize,
    bound: Bound,
) -> String {
    let shown = shown.into();
    if shown.total == 0 {
        return "Notebook is empty".into();
    }
    let end = shown.end(start, limit);
    if start >= end || start < shown.start {
        return "No cells in the specified range".into();
    }
    let rows = (start..end).map(|index| {
        let cell = shown.cell(index);
        let mut source_lines = cell.source.lines();
        let first = cut(source_lines.next().unwrap_or(""), FIRST_LINE_CHARS);
        let hidden = source_lines.count();
        let first = if hidden > 0 {
            format!("{first}...({hidden} lines hidden)")
        } else {
            first
        };
        let row = format!(
            "{index}\t{}\t{}\t{first}",
            cell.cell_type.as_str(),
            count_text(cell)
        );
        (index, row)
    });
    fitted(
        "Index\tType\tCount\tFirst Line".to_owned(),
        rows,
        "\n",
        end,
        bound,
    )
}

/// Every cell of a range with its header (and version) and source; a source longer than
/// `bound` is cut with a note naming its resource, and cells past it are left out with a note.
pub fn detailed<'a>(
    shown: impl Into<Shown<'a>>,
    start: usize,
    limit: usize,
    bound: Bound,
) -> String {
    let shown = shown.into();
    let end = shown.end(start, limit);
    let parts = (start.max(shown.start)..end).map(|index| {
        let cell = shown.cell(index);
        let source = bounded_source(
            &cell.source,
            bound.max_chars,
            &cell_uri(bound.name, &cell.id),
        );
        (
            index,
            format!("{}\n\n{source}\n\n", versioned_header(index, cell)),
        )
    });
    fitted(String::new(), parts, "\n", end, bound)
}

/// `head` and the parts joined while they fit `bound` (the first always does); then a note
/// naming the first cell left out.
fn fitted(
    head: String,
    parts: impl Iterator<Item = (usize, String)>,
    separator: &str,
    end: usize,
    bound: Bound,
) -> String {
    let mut text = head;
    let mut used = text.chars().count();
    for (shown, (index, part)) in parts.enumerate() {
        let size = part.chars().count() + separator.len();
        if bound.max_chars > 0 && shown > 0 && used + size > bound.max_chars {
            let left = end - index;
            text.push_str(&format!(
                "{separator}[{left} more cell(s) not shown: this answer reached --max-output-chars \
                 ({} characters). Read on with start_index={index}.]",
                bound.max_chars
            ));
            return text;
        }
        if !text.is_empty() {
            text.push_str(separator);
        }
        text.push_str(&part);
        used += size;
    }
    text
}

/// A cell's source, cut at `max_chars` (0: whole) with a note saying how much is left out and
/// where the whole source is (`uri`, readable with resources/read).
pub fn bounded_source(source: &str, max_chars: usize, uri: &str) -> String {
    cut_with(source, max_chars, |total| {
        format!(
            "\n[Source cut: {max_chars} of {total} characters shown (--max-output-chars); the \
             whole source is in the resource {uri}]"
        )
    })
}

/// `line` cut at `max` characters, saying how many more it has.
fn cut(line: &str, max: usize) -> String {
    cut_with(line, max, |total| format!("…(+{} characters)", total - max))
}

/// `text` cut at `max` characters (0: never), followed by `note(total characters)` when cut.
pub(crate) fn cut_with(text: &str, max: usize, note: impl FnOnce(usize) -> String) -> String {
    let total = text.chars().count();
    if max == 0 || total <= max {
        return text.to_owned();
    }
    let mut kept: String = text.chars().take(max).collect();
    kept.push_str(&note(total));
    kept
}

pub use server_core::domain::versions::source_diff;

/// "Cell N <done> successfully!" with a fenced diff, or the no-change variant; a diff longer
/// than `max_chars` (0: no limit) is cut with a note.
pub fn change_report(index: usize, done: &str, old: &str, new: &str, max_chars: usize) -> String {
    match source_diff(old, new) {
        Some(diff) => {
            let diff = cut_with(&diff, max_chars, |total| {
                format!(
                    "\n[Diff cut: {max_chars} of {total} characters shown (--max-output-chars); \
                     read_cell shows the cell as it is now]"
                )
            });
            format!("Cell {index} {done} successfully!\n\n```diff\n{diff}\n```")
        }
        None => format!("Cell {index} {done} successfully - no changes detected"),
    }
}

/// The resource of a cell; its outputs are under `{uri}/outputs/{index}`.
pub fn cell_uri(name: &str, cell_id: &str) -> String {
    format!("notebook://{name}/cells/{cell_id}")
}

/// Where to find what was cut from a cell's output.
pub fn full_output_hint(name: &str, cell_id: &str) -> String {
    format!(
        "The whole output is saved in the notebook: read notebook://{name}/cells/{cell_id}/outputs/<index>."
    )
}

/// Formats seconds the way people write them: `30`, `2.5`.
pub fn format_secs(duration: Duration) -> String {
    let secs = duration.as_secs_f64();
    if (secs - secs.round()).abs() < 1e-9 {
        format!("{}", secs.round() as u64)
    } else {
        format!("{secs:.1}")
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use server_core::domain::cells::CellType;

    fn notebook(cells: &[(&str, CellType)]) -> Notebook {
        Notebook::with_cells(cells)
    }

    #[test]
    fn brief_table_like_upstream() {
        let mut nb = notebook(&[
            ("import os\nprint(1)\nx", CellType::Code),
            ("# Title", CellType::Markdown),
            ("", CellType::Code),
        ]);
        nb.cells[0].execution_count = Some(3);
        assert_eq!(
            brief_table(&nb, 0, 20, UNBOUNDED),
            "Index\tType\tCount\tFirst Line\n0\tcode\t3\timport os...(2 lines hidden)\n1\tmarkdown\tN/A\t# Title\n2\tcode\tN/A\t"
        );
        assert_eq!(
            brief_table(&nb, 5, 1, UNBOUNDED),
            "No cells in the specified range"
        );
        assert_eq!(
            brief_table(&Notebook::empty(), 0, 0, UNBOUNDED),
            "Notebook is empty"
        );
    }

    const UNBOUNDED: Bound = Bound {
        max_chars: 0,
        name: "nb",
    };

    #[test]
    fn long_sources_and_many_cells_stay_within_the_bound() {
        let long = "x".repeat(10_000_000);
        let mut nb = notebook(&[(long.as_str(), CellType::Code), ("y = 1", CellType::Code)]);
        nb.cells[0].id = "big".into();
        let bound = Bound {
            max_chars: 1000,
            name: "nb",
        };
        let table = brief_table(&nb, 0, 0, bound);
        assert!(table.len() < 400, "{}", table.len());
        assert!(table.contains("…(+9999800 characters)"), "{table}");
        let shown = detailed(&nb, 0, 0, bound);
        assert!(shown.chars().count() < 1400, "{}", shown.chars().count());
        assert!(shown.contains("[Source cut: 1000 of 10000000 characters shown"));
        assert!(shown.contains("notebook://nb/cells/big"));
        assert!(
            shown.contains("[1 more cell(s) not shown") && shown.contains("start_index=1"),
            "{shown}"
        );
        // Unbounded: whole.
        assert!(detailed(&nb, 0, 0, UNBOUNDED).contains(&long));
    }

    #[test]
    fn diffs_are_unified() {
        assert_eq!(
            source_diff("a\nb\nc", "a\nB\nc"),
            Some("--- \n+++ \n@@ -1,3 +1,3 @@\n a\n-b\n+B\n c".into())
        );
        assert_eq!(source_diff("same", "same"), None);
    }
}

//! The Python server's texts, shared by every module that shows notebooks: the cell tools,
//! the notebook tools, MCP resources and prompts. Kept apart from any tool so that showing a
//! notebook never means importing one.

use std::time::Duration;

use server_core::domain::cells::{Cell, Notebook};
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

/// The table the Python server shows for a range of cells.
pub fn brief_table(notebook: &Notebook, start: usize, limit: usize) -> String {
    if notebook.cells.is_empty() {
        return "Notebook is empty".into();
    }
    let end = if limit == 0 {
        notebook.cells.len()
    } else {
        (start + limit).min(notebook.cells.len())
    };
    if start >= end {
        return "No cells in the specified range".into();
    }
    let mut lines = vec!["Index\tType\tCount\tFirst Line".to_owned()];
    for (index, cell) in notebook.cells.iter().enumerate().take(end).skip(start) {
        let mut source_lines = cell.source.lines();
        let first = source_lines.next().unwrap_or("").to_owned();
        let hidden = source_lines.count();
        let first = if hidden > 0 {
            format!("{first}...({hidden} lines hidden)")
        } else {
            first
        };
        lines.push(format!(
            "{index}\t{}\t{}\t{first}",
            cell.cell_type.as_str(),
            count_text(cell)
        ));
    }
    lines.join("\n")
}

/// Every cell of a range with its header (and version) and whole source.
pub fn detailed(notebook: &Notebook, start: usize, limit: usize) -> String {
    let end = if limit == 0 {
        notebook.cells.len()
    } else {
        (start + limit).min(notebook.cells.len())
    };
    notebook
        .cells
        .iter()
        .enumerate()
        .take(end)
        .skip(start)
        .map(|(index, cell)| format!("{}\n\n{}\n\n", versioned_header(index, cell), cell.source))
        .collect::<Vec<_>>()
        .join("\n")
}

pub use server_core::domain::versions::source_diff;

/// "Cell N <done> successfully!" with a fenced diff, or the no-change variant.
pub fn change_report(index: usize, done: &str, old: &str, new: &str) -> String {
    match source_diff(old, new) {
        Some(diff) => format!("Cell {index} {done} successfully!\n\n```diff\n{diff}\n```"),
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
            brief_table(&nb, 0, 20),
            "Index\tType\tCount\tFirst Line\n0\tcode\t3\timport os...(2 lines hidden)\n1\tmarkdown\tN/A\t# Title\n2\tcode\tN/A\t"
        );
        assert_eq!(brief_table(&nb, 5, 1), "No cells in the specified range");
        assert_eq!(brief_table(&Notebook::empty(), 0, 0), "Notebook is empty");
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

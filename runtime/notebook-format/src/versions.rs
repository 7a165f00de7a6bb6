//! Versions of cells and of a notebook's structure: 8 hex digits of a hash over a cell's type and
//! source, or over the notebook's cell ids in order. The same on every read, restart and backend.

use sha2::{Digest, Sha256};

use crate::notebook::{Cell, Notebook};

fn short_hash(parts: &[&str]) -> String {
    let mut hasher = Sha256::new();
    for part in parts {
        hasher.update(part.as_bytes());
        // A separator no source holds alone keeps ("ab", "c") apart from ("a", "bc").
        hasher.update([0u8]);
    }
    crate::hex::lower_hex(&hasher.finalize()[..4])
}

/// The cell's version: changes when its source or type does, never otherwise.
pub fn cell_version(cell: &Cell) -> String {
    short_hash(&[cell.type_name(), &cell.source])
}

/// The notebook's structure version: which cells, in which order.
pub fn notebook_version(notebook: &Notebook) -> String {
    let ids: Vec<&str> = notebook.cells.iter().map(|c| c.id.as_str()).collect();
    short_hash(&ids)
}

/// The structure version of a notebook whose cells have these ids, in order.
pub fn structure_version<'a>(ids: impl IntoIterator<Item = &'a str>) -> String {
    let ids: Vec<&str> = ids.into_iter().collect();
    short_hash(&ids)
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::notebook::CellType;

    #[test]
    fn a_version_moves_with_source_and_type_only() {
        let mut nb = Notebook::with_cells(&[("x = 1", CellType::Code), ("x = 1", CellType::Code)]);
        let v = cell_version(&nb.cells[0]);
        assert_eq!(v.len(), 8);
        assert_eq!(
            v,
            cell_version(&nb.cells[1]),
            "ids and outputs are not part of it"
        );
        nb.cells[0].execution_count = Some(3);
        assert_eq!(v, cell_version(&nb.cells[0]));
        nb.cells[1].cell_type = CellType::Markdown;
        assert_ne!(v, cell_version(&nb.cells[1]));
        nb.cells[0].source = "x = 2".into();
        assert_ne!(v, cell_version(&nb.cells[0]));
        // Stable across processes: a fixed input has a fixed version.
        let fixed = Cell::new(CellType::Code, "print(1)");
        assert_eq!(cell_version(&fixed), short_hash(&["code", "print(1)"]));
    }

    #[test]
    fn the_notebook_version_follows_ids_in_order() {
        let nb = Notebook::with_cells(&[("a", CellType::Code), ("b", CellType::Code)]);
        let v = notebook_version(&nb);
        assert_eq!(v, structure_version(nb.cells.iter().map(|c| c.id.as_str())));
        let mut edited = nb.clone();
        edited.cells[0].source = "changed".into();
        assert_eq!(v, notebook_version(&edited));
        edited.cells.swap(0, 1);
        assert_ne!(v, notebook_version(&edited));
    }
}

use super::layout::python_float;
use super::write::split_lines;
use super::*;
use serde_json::json;

#[test]
fn numbers_in_metadata_survive_a_round_trip_exactly() {
    // Found by the nbformat fuzzer: serde_json's fast float parser read this as a neighbour.
    let text = r#"{"cells": [], "metadata": {"kmat": 1111111111.2232225}, "nbformat": 4, "nbformat_minor": 5}"#;
    let written = Notebook::parse(text).unwrap().to_ipynb();
    assert!(written.contains("1111111111.2232225"), "{written}");
    assert_eq!(Notebook::parse(&written).unwrap().to_ipynb(), written);
}

const SAVED_BY_JUPYTER: &str = r##"{
 "cells": [
  {
   "cell_type": "markdown",
   "id": "a1b2c3d4",
   "metadata": {},
   "source": [
    "# Title\n",
    "text"
   ]
  },
  {
   "cell_type": "code",
   "execution_count": 1,
   "id": "e5f6a7b8",
   "metadata": {
    "tags": []
   },
   "outputs": [
    {
     "name": "stdout",
     "output_type": "stream",
     "text": [
      "1\n",
      "2\n"
     ]
    },
    {
     "data": {
      "application/json": {
       "a": 1
      },
      "text/plain": [
       "x\n",
       "y"
      ]
     },
     "execution_count": 1,
     "metadata": {},
     "output_type": "execute_result"
    }
   ],
   "source": [
    "print(1)\n",
    "print(2)"
   ]
  }
 ],
 "metadata": {
  "kernelspec": {
   "display_name": "Python 3",
   "language": "python",
   "name": "python3"
  }
 },
 "nbformat": 4,
 "nbformat_minor": 5
}
"##;

#[test]
fn round_trips_jupyters_layout_byte_for_byte() {
    let notebook = Notebook::parse(SAVED_BY_JUPYTER).unwrap();
    assert_eq!(notebook.cells.len(), 2);
    assert_eq!(notebook.cells[0].source, "# Title\ntext");
    assert_eq!(notebook.cells[1].outputs[0].to_json()["text"], "1\n2\n");
    assert_eq!(notebook.to_ipynb(), SAVED_BY_JUPYTER);
}

/// A newer minor version, in Jupyter's layout: an unknown cell type, unknown fields at every
/// level, an attachment, and lines broken where Python breaks them.
const NEWER_MINOR: &str = r##"{
 "cells": [
  {
   "cell_type": "future cell",
   "future_field": {
    "a": [
     1,
     2.5
    ]
   },
   "id": "f1",
   "metadata": {},
   "outputs": "kept verbatim",
   "source": [
    "line\r\n",
    "next "
   ]
  },
  {
   "attachments": {
    "image.png": {
     "image/png": "iVBORw0KGgo=",
     "text/plain": [
      "a\n",
      "b"
     ]
    }
   },
   "cell_type": "markdown",
   "id": "m1",
   "metadata": {},
   "source": [
    "![x](attachment:image.png) é"
   ]
  },
  {
   "cell_type": "code",
   "execution_count": 3,
   "id": "c1",
   "metadata": {
    "execution": {
     "iopub.execute_input": "2024-01-01T00:00:00.000001Z"
    }
   },
   "new_code_field": true,
   "outputs": [
    {
     "ename": "ValueError",
     "evalue": "x",
     "output_type": "error",
     "traceback": [
      "\u001b[0;31mValueError\u001b[0m"
     ]
    }
   ],
   "source": []
  },
  {
   "cell_type": "future cell",
   "id": "f2",
   "key": "value"
  },
  {
   "cell_type": "code",
   "execution_count": 99,
   "id": "c2",
   "metadata": {},
   "outputs": [
    {
     "output_type": "future output",
     "some key": [
      "some data"
     ]
    },
    {
     "extra": "yes",
     "name": "stdout",
     "output_type": "stream",
     "text": [
      "after\n"
     ]
    }
   ],
   "source": [
    "later()"
   ]
  }
 ],
 "metadata": {
  "widgets": {
   "application/vnd.jupyter.widget-state+json": {
    "state": {},
    "version_major": 2
   }
  }
 },
 "nbformat": 4,
 "nbformat_minor": 7,
 "top_field": [
  1
 ]
}
"##;

#[test]
fn newer_minor_versions_round_trip_exactly() {
    let notebook = Notebook::parse(NEWER_MINOR).unwrap();
    let future = &notebook.cells[0];
    assert_eq!(future.cell_type, CellType::Raw);
    assert_eq!(future.type_name(), "future cell");
    assert_eq!(future.source, "line\r\nnext\u{2028}");
    assert!(future.extra.contains_key("outputs"));
    assert_eq!(notebook.nbformat_minor, 7);
    assert!(notebook.extra.contains_key("top_field"));
    // A future cell with no source or metadata gets neither; an edit that gives it a source
    // writes one.
    let bare = &notebook.cells[3];
    assert_eq!(
        (bare.type_name(), bare.source.as_str()),
        ("future cell", "")
    );
    assert_eq!(notebook.to_ipynb(), NEWER_MINOR);
    let mut edited = notebook.clone();
    edited.cells[3].source = "now".into();
    let value = edited.to_value();
    assert_eq!(value["cells"][3]["source"], "now");
    assert!(value["cells"][3].get("metadata").is_none());
}

#[test]
fn lines_break_where_python_breaks_them() {
    let lines = |text: &str| split_lines(text);
    assert_eq!(lines(""), json!([]));
    assert_eq!(lines("a\nb"), json!(["a\n", "b"]));
    assert_eq!(lines("a\r\nb\rc\n"), json!(["a\r\n", "b\r", "c\n"]));
    assert_eq!(lines("é\u{2028}x\u{85}"), json!(["é\u{2028}", "x\u{85}"]));
}

#[test]
fn floats_are_written_as_python_writes_them() {
    let cases = [
        (0.0, "0.0"),
        (-0.0, "-0.0"),
        (1.0, "1.0"),
        (0.1, "0.1"),
        (0.0001, "0.0001"),
        (0.00001, "1e-05"),
        (-1.5e-7, "-1.5e-07"),
        (123.456, "123.456"),
        (1e15, "1000000000000000.0"),
        (1e16, "1e+16"),
        (1.2345678901234567e16, "1.2345678901234568e+16"),
        (1e100, "1e+100"),
        (1111111111.2232225, "1111111111.2232225"),
    ];
    for (value, python) in cases {
        assert_eq!(python_float(value), python, "{value:e}");
    }
}

#[test]
fn older_minor_versions_are_upgraded_to_ids() {
    let text = r#"{"nbformat": 4, "nbformat_minor": 2, "metadata": {}, "extra": 1,
            "cells": [{"cell_type": "markdown", "source": "a", "metadata": {}, "attachments": null}]}"#;
    let written = Notebook::parse(text).unwrap().to_ipynb();
    assert!(written.contains("\"nbformat_minor\": 5"), "{written}");
    assert!(written.contains("\"id\": "), "{written}");
    assert!(written.contains("\"extra\": 1"), "{written}");
    assert!(written.contains("\"attachments\": null"), "{written}");
}

#[test]
fn missing_and_duplicate_ids_are_replaced() {
    let text = r#"{"nbformat": 4, "nbformat_minor": 4, "metadata": {}, "cells": [
            {"cell_type": "code", "source": "a", "metadata": {"trusted": true}, "outputs": [], "execution_count": null},
            {"cell_type": "raw", "id": "dup", "source": "b", "metadata": {}},
            {"cell_type": "raw", "id": "dup", "source": "c", "metadata": {}}]}"#;
    let notebook = Notebook::parse(text).unwrap();
    let ids: HashSet<_> = notebook.cells.iter().map(|c| c.id.clone()).collect();
    assert_eq!(ids.len(), 3);
    assert!(notebook.cells.iter().all(|c| valid_cell_id(&c.id)));
    assert!(notebook.cells[0].metadata.is_empty(), "trusted is stripped");
    assert!(notebook.to_ipynb().contains("\"nbformat_minor\": 5"));
}

#[test]
fn transient_is_never_written_and_bad_input_is_refused() {
    let mut notebook = Notebook::empty();
    let mut cell = Cell::new(CellType::Code, "x");
    cell.outputs.push(Output::from_json(&json!({"output_type": "display_data", "data": {"text/plain": "1"}, "metadata": {}, "transient": {"display_id": "d"}})));
    notebook.cells.push(cell);
    assert!(!notebook.to_ipynb().contains("transient"));
    assert!(matches!(
        Notebook::parse("{"),
        Err(NotebookError::NotJson(_))
    ));
    assert_eq!(
        Notebook::parse(r#"{"nbformat": 3, "worksheets": []}"#),
        Err(NotebookError::Older(3))
    );
    assert!(matches!(
        Notebook::parse(r#"{"nbformat": 5, "cells": []}"#),
        Err(NotebookError::UnsupportedVersion(_))
    ));
    assert!(matches!(
        Notebook::parse(r#"{"nbformat": 4, "cells": [{"source": "x"}]}"#),
        Err(NotebookError::BadCell { index: 0, .. })
    ));
}

#[test]
fn a_write_reusing_unchanged_cells_is_the_whole_write() {
    let mut notebook = Notebook::parse(SAVED_BY_JUPYTER).unwrap();
    notebook
        .cells
        .push(Cell::new(CellType::Markdown, "# notes\nmore"));
    let before = notebook.to_ipynb_reusing(|_, _| None);
    assert_eq!(before.text, notebook.to_ipynb());
    assert_eq!(before.cells.len(), notebook.cells.len());
    for (index, cell) in notebook.cells.iter().enumerate() {
        let alone: Value = serde_json::from_str(before.cell(index).unwrap()).unwrap();
        assert_eq!(
            alone["id"],
            cell.id.as_str(),
            "each range holds its own cell"
        );
    }

    // One cell changed and one inserted: the others are taken as written, and the text is the
    // same as a write from scratch.
    let old = notebook.clone();
    notebook.cells[0].source = "changed = True\n".into();
    notebook
        .cells
        .insert(1, Cell::new(CellType::Code, "inserted()"));
    let mut reused = 0;
    let after = notebook.to_ipynb_reusing(|_, cell| {
        let at = old.index_of(&cell.id)?;
        (old.cells[at] == *cell).then(|| {
            reused += 1;
            before.cell(at).unwrap()
        })
    });
    assert_eq!(reused, notebook.cells.len() - 2);
    assert_eq!(after.text, notebook.to_ipynb());
    assert_eq!(Notebook::parse(&after.text).unwrap(), notebook);

    let empty = Notebook::empty().to_ipynb_reusing(|_, _| None);
    assert!(empty.text.contains("\"cells\": [],"), "{}", empty.text);
    assert!(empty.cells.is_empty());
}

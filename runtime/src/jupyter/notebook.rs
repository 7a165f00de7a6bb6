//! nbformat 4.5 notebooks as this server reads and writes them.
//!
//! Reading accepts what Jupyter and other tools write (sources as strings or line lists, missing
//! ids in notebooks older than 4.5). Writing produces Jupyter's own on-disk layout (indent 1,
//! sorted keys, multi-line strings as line lists, trailing newline), so a notebook we save looks
//! exactly as if Jupyter had saved it and diffs stay small.

use std::collections::HashSet;

use serde_json::{Map, Value, json};

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum CellType {
    Code,
    Markdown,
    Raw,
}

impl CellType {
    pub fn as_str(self) -> &'static str {
        match self {
            CellType::Code => "code",
            CellType::Markdown => "markdown",
            CellType::Raw => "raw",
        }
    }

    pub fn parse(value: &str) -> Option<Self> {
        match value {
            "code" => Some(CellType::Code),
            "markdown" => Some(CellType::Markdown),
            "raw" => Some(CellType::Raw),
            _ => None,
        }
    }
}

#[derive(Debug, Clone, PartialEq)]
pub struct Cell {
    pub id: String,
    pub cell_type: CellType,
    pub source: String,
    pub metadata: Map<String, Value>,
    /// Code cells only.
    pub outputs: Vec<Value>,
    /// Code cells only.
    pub execution_count: Option<i64>,
    /// Markdown and raw cells only.
    pub attachments: Option<Value>,
}

impl Cell {
    pub fn new(cell_type: CellType, source: impl Into<String>) -> Self {
        Cell {
            id: new_cell_id(),
            cell_type,
            source: source.into(),
            metadata: Map::new(),
            outputs: Vec::new(),
            execution_count: None,
            attachments: None,
        }
    }
}

/// A fresh cell id: 8 hex digits, as Python's nbformat mints them.
pub fn new_cell_id() -> String {
    uuid::Uuid::new_v4().simple().to_string()[..8].to_owned()
}

fn valid_cell_id(id: &str) -> bool {
    (1..=64).contains(&id.len())
        && id
            .bytes()
            .all(|b| b.is_ascii_alphanumeric() || b == b'-' || b == b'_')
}

#[derive(Debug, Clone, PartialEq)]
pub struct Notebook {
    pub cells: Vec<Cell>,
    pub metadata: Map<String, Value>,
}

#[derive(Debug, thiserror::Error, PartialEq)]
pub enum NotebookError {
    #[error("not a notebook: {0}")]
    NotJson(String),
    #[error(
        "not an nbformat 4 notebook (nbformat is {0}); open and save it with Jupyter to upgrade it"
    )]
    UnsupportedVersion(String),
    #[error("cell {index} is malformed: {reason}")]
    BadCell { index: usize, reason: String },
}

/// The text of an nbformat multiline string (a string, or a list of lines to join); `None` when
/// the value is neither.
pub fn multiline_text(value: &Value) -> Option<String> {
    match value {
        Value::String(s) => Some(s.clone()),
        Value::Array(lines) => Some(lines.iter().filter_map(Value::as_str).collect()),
        _ => None,
    }
}

/// A multiline field, empty when missing or malformed.
fn multiline(value: Option<&Value>) -> String {
    value.and_then(multiline_text).unwrap_or_default()
}

impl Notebook {
    pub fn empty() -> Self {
        Notebook {
            cells: Vec::new(),
            metadata: Map::new(),
        }
    }

    /// A notebook of new cells with these sources and types, for unit tests.
    #[cfg(test)]
    pub fn with_cells(cells: &[(&str, CellType)]) -> Self {
        let mut notebook = Notebook::empty();
        for (source, cell_type) in cells {
            notebook.cells.push(Cell::new(*cell_type, *source));
        }
        notebook
    }

    pub fn parse(text: &str) -> Result<Self, NotebookError> {
        let value: Value =
            serde_json::from_str(text).map_err(|e| NotebookError::NotJson(e.to_string()))?;
        Self::from_value(value)
    }

    pub fn from_value(value: Value) -> Result<Self, NotebookError> {
        let Value::Object(mut top) = value else {
            return Err(NotebookError::NotJson(
                "the top level is not an object".into(),
            ));
        };
        match top.get("nbformat").and_then(Value::as_i64) {
            Some(4) => {}
            other => {
                return Err(NotebookError::UnsupportedVersion(
                    other.map_or("missing".into(), |v| v.to_string()),
                ));
            }
        }
        let metadata = match top.remove("metadata") {
            Some(Value::Object(m)) => m,
            _ => Map::new(),
        };
        let raw_cells = match top.remove("cells") {
            Some(Value::Array(cells)) => cells,
            None => Vec::new(),
            Some(_) => {
                return Err(NotebookError::NotJson("'cells' is not a list".into()));
            }
        };
        let mut seen = HashSet::new();
        let mut cells = Vec::with_capacity(raw_cells.len());
        for (index, raw) in raw_cells.into_iter().enumerate() {
            let Value::Object(mut raw) = raw else {
                return Err(NotebookError::BadCell {
                    index,
                    reason: "not an object".into(),
                });
            };
            let type_name = raw.get("cell_type").and_then(Value::as_str).unwrap_or("");
            let cell_type = CellType::parse(type_name).ok_or_else(|| NotebookError::BadCell {
                index,
                reason: format!("unknown cell_type '{type_name}'"),
            })?;
            // Older notebooks have no ids, and hand-edited ones may repeat them: mint fresh ones.
            let id = raw
                .get("id")
                .and_then(Value::as_str)
                .filter(|id| valid_cell_id(id) && !seen.contains(*id))
                .map(str::to_owned)
                .unwrap_or_else(new_cell_id);
            seen.insert(id.clone());
            let mut metadata = match raw.remove("metadata") {
                Some(Value::Object(m)) => m,
                _ => Map::new(),
            };
            metadata.remove("trusted");
            cells.push(Cell {
                id,
                cell_type,
                source: multiline(raw.get("source")),
                metadata,
                outputs: match (cell_type, raw.remove("outputs")) {
                    (CellType::Code, Some(Value::Array(outputs))) => {
                        outputs.into_iter().map(join_output_lines).collect()
                    }
                    _ => Vec::new(),
                },
                execution_count: raw.get("execution_count").and_then(Value::as_i64),
                attachments: match cell_type {
                    CellType::Code => None,
                    _ => raw.remove("attachments").filter(|a| !a.is_null()),
                },
            });
        }
        Ok(Notebook { cells, metadata })
    }

    pub fn index_of(&self, id: &str) -> Option<usize> {
        self.cells.iter().position(|c| c.id == id)
    }

    pub fn cell_mut(&mut self, id: &str) -> Option<&mut Cell> {
        self.cells.iter_mut().find(|c| c.id == id)
    }

    /// The notebook as nbformat JSON (lines not yet split).
    pub fn to_value(&self) -> Value {
        let cells: Vec<Value> = self.cells.iter().map(cell_to_value).collect();
        let mut metadata = self.metadata.clone();
        for stripped in ["orig_nbformat", "orig_nbformat_minor", "signature"] {
            metadata.remove(stripped);
        }
        json!({
            "cells": cells,
            "metadata": metadata,
            "nbformat": 4,
            "nbformat_minor": 5,
        })
    }

    /// The bytes Jupyter would write for this notebook.
    pub fn to_ipynb(&self) -> String {
        let mut value = self.to_value();
        split_multiline_fields(&mut value);
        let sorted = sort_keys(value);
        let mut out = Vec::new();
        let formatter = serde_json::ser::PrettyFormatter::with_indent(b" ");
        let mut serializer = serde_json::Serializer::with_formatter(&mut out, formatter);
        serde::Serialize::serialize(&sorted, &mut serializer).expect("JSON values serialize");
        let mut text = String::from_utf8(out).expect("serde_json writes UTF-8");
        text.push('\n');
        text
    }
}

fn cell_to_value(cell: &Cell) -> Value {
    let mut object = Map::new();
    object.insert("id".into(), json!(cell.id));
    object.insert("cell_type".into(), json!(cell.cell_type.as_str()));
    object.insert("metadata".into(), Value::Object(cell.metadata.clone()));
    object.insert("source".into(), json!(cell.source));
    match cell.cell_type {
        CellType::Code => {
            let outputs: Vec<Value> = cell.outputs.iter().map(clean_output).collect();
            object.insert("outputs".into(), Value::Array(outputs));
            object.insert("execution_count".into(), json!(cell.execution_count));
        }
        CellType::Markdown | CellType::Raw => {
            if let Some(attachments) = &cell.attachments {
                object.insert("attachments".into(), attachments.clone());
            }
        }
    }
    Value::Object(object)
}

/// Outputs as nbformat stores them: no `transient`, multiline text joined (split on write).
fn clean_output(output: &Value) -> Value {
    let mut output = output.clone();
    if let Value::Object(map) = &mut output {
        map.remove("transient");
        if map.get("output_type").and_then(Value::as_str) == Some("stream") {
            let text = multiline(map.get("text"));
            map.insert("text".into(), Value::String(text));
        }
        if map.get("output_type").and_then(Value::as_str) == Some("execute_result")
            && !map.contains_key("execution_count")
        {
            map.insert("execution_count".into(), Value::Null);
        }
    }
    output
}

/// Outputs in memory hold multiline text as single strings; the file holds line lists.
fn join_output_lines(mut output: Value) -> Value {
    if let Some(text) = output.get("text").filter(|t| t.is_array()) {
        output["text"] = Value::String(multiline(Some(text)));
    }
    if let Some(data) = output.get_mut("data").and_then(Value::as_object_mut) {
        for (mime, value) in data.iter_mut() {
            if is_multiline_mime(mime) && value.is_array() {
                *value = Value::String(multiline(Some(value)));
            }
        }
    }
    output
}

/// Whether a mimebundle entry is written as a list of lines (text, SVG, JavaScript; not JSON).
fn is_multiline_mime(mime: &str) -> bool {
    (mime.starts_with("text/") || mime == "image/svg+xml" || mime == "application/javascript")
        && !mime.ends_with("+json")
}

fn split_lines(text: &str) -> Value {
    if text.is_empty() {
        return json!([]);
    }
    Value::Array(
        text.split_inclusive('\n')
            .map(|line| Value::String(line.to_owned()))
            .collect(),
    )
}

/// A string field as nbformat's list of lines, as Jupyter writes it.
fn split_field(holder: &mut Value, field: &str) {
    if let Some(text) = holder.get(field).and_then(Value::as_str).map(str::to_owned) {
        holder[field] = split_lines(&text);
    }
}

fn split_multiline_fields(notebook: &mut Value) {
    let Some(cells) = notebook.get_mut("cells").and_then(Value::as_array_mut) else {
        return;
    };
    for cell in cells {
        split_field(cell, "source");
        let Some(outputs) = cell.get_mut("outputs").and_then(Value::as_array_mut) else {
            continue;
        };
        for output in outputs {
            split_field(output, "text");
            if let Some(data) = output.get_mut("data").and_then(Value::as_object_mut) {
                for (mime, value) in data.iter_mut() {
                    if is_multiline_mime(mime)
                        && let Some(text) = value.as_str().map(str::to_owned)
                    {
                        *value = split_lines(&text);
                    }
                }
            }
        }
    }
}

/// Rebuilds objects with sorted keys whatever map type serde_json was built with.
fn sort_keys(value: Value) -> Value {
    match value {
        Value::Object(map) => {
            let mut entries: Vec<(String, Value)> = map.into_iter().collect();
            entries.sort_by(|a, b| a.0.cmp(&b.0));
            Value::Object(
                entries
                    .into_iter()
                    .map(|(k, v)| (k, sort_keys(v)))
                    .collect(),
            )
        }
        Value::Array(items) => Value::Array(items.into_iter().map(sort_keys).collect()),
        other => other,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

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
        assert_eq!(notebook.cells[1].outputs[0]["text"], "1\n2\n");
        assert_eq!(notebook.to_ipynb(), SAVED_BY_JUPYTER);
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
        cell.outputs.push(json!({"output_type": "display_data", "data": {"text/plain": "1"}, "metadata": {}, "transient": {"display_id": "d"}}));
        notebook.cells.push(cell);
        assert!(!notebook.to_ipynb().contains("transient"));
        assert!(matches!(
            Notebook::parse("{"),
            Err(NotebookError::NotJson(_))
        ));
        assert!(matches!(
            Notebook::parse(r#"{"nbformat": 3, "worksheets": []}"#),
            Err(NotebookError::UnsupportedVersion(_))
        ));
        assert!(matches!(
            Notebook::parse(r#"{"nbformat": 4, "cells": [{"cell_type": "weird"}]}"#),
            Err(NotebookError::BadCell { index: 0, .. })
        ));
    }
}

//! Writing a notebook as Jupyter writes it: nbformat JSON with multiline text split into lines,
//! in Jupyter's layout, unchanged cells' JSON reusable from an earlier write.

use serde_json::{Map, Value, json};

use super::{Cell, CellType, Notebook, for_each_bundle, has_bundle, layout, multiline};

impl Notebook {
    /// The notebook as nbformat JSON (lines not yet split).
    pub fn to_value(&self) -> Value {
        let cells: Vec<Value> = self.cells.iter().map(cell_to_value).collect();
        let mut top = self.to_value_without_cells();
        top.insert("cells".into(), Value::Array(cells));
        Value::Object(top)
    }

    /// The bytes Jupyter would write for this notebook.
    pub fn to_ipynb(&self) -> String {
        self.to_ipynb_reusing(|_, _| None).text
    }

    /// The bytes Jupyter would write, with where each cell's JSON is in them. `reuse` may give
    /// a cell's JSON as an earlier write made it (from [`Ipynb::cell`]), when the cell has not
    /// changed since: only the other cells are written again, so an edit of a big notebook costs
    /// the cells it changed plus one copy.
    pub fn to_ipynb_reusing<'a>(
        &self,
        mut reuse: impl FnMut(usize, &Cell) -> Option<&'a str>,
    ) -> Ipynb {
        let mut top = self.to_value_without_cells();
        top.insert("cells".into(), Value::Null);
        let mut keys: Vec<&String> = top.keys().collect();
        keys.sort_unstable();
        let mut text = String::new();
        let mut ranges = Vec::with_capacity(self.cells.len());
        layout::write_items(
            &mut text,
            0,
            '{',
            '}',
            keys.into_iter(),
            |out, key, depth| {
                layout::write_string(out, key);
                out.push_str(": ");
                if key != "cells" {
                    return layout::write_value(out, &top[key], depth);
                }
                layout::write_items(
                    out,
                    depth,
                    '[',
                    ']',
                    self.cells.iter().enumerate(),
                    |out, (index, cell), depth| {
                        let start = out.len();
                        match reuse(index, cell) {
                            Some(written) => out.push_str(written),
                            None => {
                                let mut value = cell_to_value(cell);
                                split_cell_fields(&mut value);
                                layout::write_value(out, &value, depth);
                            }
                        }
                        ranges.push(start..out.len());
                    },
                );
            },
        );
        text.push('\n');
        Ipynb {
            text,
            cells: ranges,
        }
    }

    /// The notebook's own fields as nbformat JSON: everything but its cells.
    fn to_value_without_cells(&self) -> Map<String, Value> {
        let mut metadata = self.metadata.clone();
        // What nbformat strips on every write.
        for stripped in ["orig_nbformat", "orig_nbformat_minor", "signature"] {
            metadata.remove(stripped);
        }
        let mut top = self.extra.clone();
        top.insert("metadata".into(), Value::Object(metadata));
        top.insert("nbformat".into(), json!(4));
        top.insert("nbformat_minor".into(), json!(self.nbformat_minor));
        top
    }
}

/// A notebook's file text as [`Notebook::to_ipynb_reusing`] wrote it, with the byte range of
/// each cell's JSON, in the notebook's cell order.
#[derive(Debug, Clone, Default)]
pub struct Ipynb {
    pub text: String,
    pub cells: Vec<std::ops::Range<usize>>,
}

impl Ipynb {
    /// Cell `index`'s JSON as written.
    pub fn cell(&self, index: usize) -> Option<&str> {
        self.cells.get(index).map(|range| &self.text[range.clone()])
    }
}

fn cell_to_value(cell: &Cell) -> Value {
    let mut object = cell.extra.clone();
    object.insert("id".into(), json!(cell.id));
    object.insert("cell_type".into(), json!(cell.type_name()));
    if cell.writes_metadata() {
        object.insert("metadata".into(), Value::Object(cell.metadata.clone()));
    }
    if cell.writes_source() {
        object.insert("source".into(), json!(cell.source));
    }
    match (cell.cell_type, &cell.unknown_type) {
        (CellType::Code, None) => {
            let outputs: Vec<Value> = cell
                .outputs
                .iter()
                .map(|output| clean_output(&output.to_json()))
                .collect();
            object.insert("outputs".into(), Value::Array(outputs));
            object.insert("execution_count".into(), json!(cell.execution_count));
        }
        _ => {
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

/// Splits a mimebundle's text into lines, as nbformat does on write: text, SVG and JavaScript.
fn split_bundle(bundle: &mut Value) {
    let Some(entries) = bundle.as_object_mut() else {
        return;
    };
    for (mime, value) in entries.iter_mut() {
        let split = mime.starts_with("text/")
            || mime == "image/svg+xml"
            || mime == "application/javascript";
        if split && let Some(text) = value.as_str() {
            *value = split_lines(text);
        }
    }
}

/// A string as the list of lines Python's `str.splitlines(keepends=True)` makes of it, which is
/// what nbformat writes: it breaks at `\r` and a few other characters as well as at `\n`.
pub(super) fn split_lines(text: &str) -> Value {
    let mut lines = Vec::new();
    let mut start = 0;
    let mut chars = text.char_indices().peekable();
    while let Some((at, c)) = chars.next() {
        let end = match c {
            '\r' if chars.peek().is_some_and(|&(_, next)| next == '\n') => {
                chars.next();
                at + 2
            }
            '\n' | '\r' | '\x0b' | '\x0c' | '\x1c' | '\x1d' | '\x1e' | '\u{85}' | '\u{2028}'
            | '\u{2029}' => at + c.len_utf8(),
            _ => continue,
        };
        lines.push(Value::String(text[start..end].to_owned()));
        start = end;
    }
    if start < text.len() {
        lines.push(Value::String(text[start..].to_owned()));
    }
    Value::Array(lines)
}

/// A string field as nbformat's list of lines, as Jupyter writes it.
fn split_field(holder: &mut Value, field: &str) {
    if let Some(text) = holder.get(field).and_then(Value::as_str) {
        let lines = split_lines(text);
        holder[field] = lines;
    }
}

/// A cell's multiline fields as nbformat's lists of lines, as Jupyter writes them.
fn split_cell_fields(cell: &mut Value) {
    split_field(cell, "source");
    if let Some(attachments) = cell.get_mut("attachments") {
        for_each_bundle(attachments, split_bundle);
    }
    if cell.get("cell_type").and_then(Value::as_str) != Some("code") {
        return;
    }
    let Some(outputs) = cell.get_mut("outputs").and_then(Value::as_array_mut) else {
        return;
    };
    for output in outputs {
        if has_bundle(output) {
            if let Some(data) = output.get_mut("data") {
                split_bundle(data);
            }
        } else if output.get("output_type").and_then(Value::as_str) == Some("stream") {
            split_field(output, "text");
        }
    }
}

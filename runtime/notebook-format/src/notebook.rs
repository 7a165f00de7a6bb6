//! nbformat 4 notebooks as this server reads and writes them.
//!
//! Reading accepts what Jupyter and other tools write (sources as strings or line lists, missing
//! ids in notebooks older than 4.5, cell types and fields of newer minor versions, which are kept
//! as they are). Writing produces Jupyter's own on-disk layout (indent 1, sorted keys, multiline
//! strings as nbformat splits them, trailing newline), so a notebook we save looks exactly as if
//! Jupyter had saved it and diffs stay small.

use std::collections::HashSet;

use serde_json::{Map, Value};

use crate::outputs::Output;

mod layout;
mod write;

pub use write::Ipynb;

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
    /// How tools see the cell; a type newer than we know is shown as raw (see `unknown_type`).
    pub cell_type: CellType,
    /// The `cell_type` as the file names it when it is none we know (a newer nbformat minor):
    /// written back as it was.
    pub unknown_type: Option<String>,
    pub source: String,
    pub metadata: Map<String, Value>,
    /// Code cells only.
    pub outputs: Vec<Output>,
    /// Code cells only.
    pub execution_count: Option<i64>,
    /// Markdown and raw cells only (and cells of unknown types).
    pub attachments: Option<Value>,
    /// Fields we do not know, written back untouched.
    pub extra: Map<String, Value>,
    /// Fields a cell of an unknown type came without, left out again when still empty.
    pub absent: Absent,
}

/// The fields every cell we know has, missing from one of a type we do not know (nbformat's
/// own 4.99 "future cell" has no `source`): it is written back without them, as read.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct Absent {
    pub source: bool,
    pub metadata: bool,
}

impl Cell {
    pub fn new(cell_type: CellType, source: impl Into<String>) -> Self {
        Cell {
            id: new_cell_id(),
            cell_type,
            unknown_type: None,
            source: source.into(),
            metadata: Map::new(),
            outputs: Vec::new(),
            execution_count: None,
            attachments: None,
            extra: Map::new(),
            absent: Absent::default(),
        }
    }

    /// One cell of a notebook read alone (cell `index` of it), as [`Notebook::from_value`]
    /// reads each: an id it lacks is minted (with no other cell at hand, a repeated one is
    /// kept).
    pub fn from_value(value: Value, index: usize) -> Result<Self, NotebookError> {
        let Value::Object(raw) = value else {
            return Err(NotebookError::BadCell {
                index,
                reason: "not an object".into(),
            });
        };
        read_cell(raw, index, &mut HashSet::new())
    }

    /// Whether the file gets a `source` field for this cell.
    pub fn writes_source(&self) -> bool {
        !(self.absent.source && self.source.is_empty())
    }

    /// Whether the file gets a `metadata` field for this cell.
    pub fn writes_metadata(&self) -> bool {
        !(self.absent.metadata && self.metadata.is_empty())
    }

    /// The `cell_type` written to the file.
    pub fn type_name(&self) -> &str {
        self.unknown_type
            .as_deref()
            .unwrap_or(self.cell_type.as_str())
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

/// The nbformat minor version we write at least: 4.5 is the one with cell ids.
const MINOR_WITH_IDS: i64 = 5;

#[derive(Debug, Clone, PartialEq)]
pub struct Notebook {
    pub cells: Vec<Cell>,
    pub metadata: Map<String, Value>,
    /// The minor version written back: the file's when it is 5 or newer (kept as it is, with
    /// whatever that version added), else 5 (older ones are upgraded, as cell ids are minted).
    pub nbformat_minor: i64,
    /// Top-level fields we do not know, written back untouched.
    pub extra: Map<String, Value>,
}

#[derive(Debug, thiserror::Error, PartialEq)]
pub enum NotebookError {
    #[error("not a notebook: {0}")]
    NotJson(String),
    #[error(
        "not an nbformat 4 notebook (nbformat is {0}); open and save it with Jupyter to upgrade it"
    )]
    UnsupportedVersion(String),
    /// nbformat 1 to 3: Jupyter converts these on read, and so do we, through it.
    #[error("an nbformat {0} notebook, which only Jupyter's conversion reads")]
    Older(i64),
    #[error(
        "an nbformat {version} notebook that Jupyter could not convert to nbformat 4 ({reason}); \
         open it in Jupyter to see why"
    )]
    Unconvertible { version: i64, reason: String },
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

/// The fields a cell of each type has in nbformat 4; any other is kept in `Cell::extra`.
fn known_fields(cell_type: Option<CellType>) -> &'static [&'static str] {
    match cell_type {
        Some(CellType::Code) => &[
            "id",
            "cell_type",
            "source",
            "metadata",
            "outputs",
            "execution_count",
        ],
        _ => &["id", "cell_type", "source", "metadata", "attachments"],
    }
}

impl Notebook {
    pub fn empty() -> Self {
        Notebook {
            cells: Vec::new(),
            metadata: Map::new(),
            nbformat_minor: MINOR_WITH_IDS,
            extra: Map::new(),
        }
    }

    /// A notebook of new cells with these sources and types.
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

    /// Reads nbformat 4 of any minor version, as Jupyter does: fields and cell types we do not
    /// know are kept, to be written back as they were. Older majors are `Older` (the caller
    /// has Jupyter convert them); anything else that is not nbformat 4 is refused.
    pub fn from_value(value: Value) -> Result<Self, NotebookError> {
        let Value::Object(mut top) = value else {
            return Err(NotebookError::NotJson(
                "the top level is not an object".into(),
            ));
        };
        match top.get("nbformat").and_then(Value::as_i64) {
            Some(4) => {}
            Some(older @ 1..=3) => return Err(NotebookError::Older(older)),
            other => {
                return Err(NotebookError::UnsupportedVersion(
                    other.map_or("missing".into(), |v| v.to_string()),
                ));
            }
        }
        top.remove("nbformat");
        let nbformat_minor = top
            .remove("nbformat_minor")
            .and_then(|minor| minor.as_i64())
            .map_or(MINOR_WITH_IDS, |minor| minor.max(MINOR_WITH_IDS));
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
            let Value::Object(raw) = raw else {
                return Err(NotebookError::BadCell {
                    index,
                    reason: "not an object".into(),
                });
            };
            cells.push(read_cell(raw, index, &mut seen)?);
        }
        Ok(Notebook {
            cells,
            metadata,
            nbformat_minor,
            extra: top,
        })
    }

    pub fn index_of(&self, id: &str) -> Option<usize> {
        self.cells.iter().position(|c| c.id == id)
    }

    pub fn cell_mut(&mut self, id: &str) -> Option<&mut Cell> {
        self.cells.iter_mut().find(|c| c.id == id)
    }
}

/// One cell of the file; `seen` holds the ids of the cells before it.
fn read_cell(
    mut raw: Map<String, Value>,
    index: usize,
    seen: &mut HashSet<String>,
) -> Result<Cell, NotebookError> {
    let (cell_type, unknown_type) = match raw.get("cell_type") {
        Some(Value::String(name)) => match CellType::parse(name) {
            Some(known) => (known, None),
            None => (CellType::Raw, Some(name.clone())),
        },
        _ => {
            return Err(NotebookError::BadCell {
                index,
                reason: "it has no cell_type".into(),
            });
        }
    };
    let known = known_fields(unknown_type.is_none().then_some(cell_type));
    // Older notebooks have no ids, and hand-edited ones may repeat them: mint fresh ones.
    let id = raw
        .get("id")
        .and_then(Value::as_str)
        .filter(|id| valid_cell_id(id) && !seen.contains(*id))
        .map(str::to_owned)
        .unwrap_or_else(new_cell_id);
    seen.insert(id.clone());
    let absent = match unknown_type {
        Some(_) => Absent {
            source: !raw.contains_key("source"),
            metadata: !raw.contains_key("metadata"),
        },
        None => Absent::default(),
    };
    let mut metadata = match raw.remove("metadata") {
        Some(Value::Object(m)) => m,
        _ => Map::new(),
    };
    metadata.remove("trusted");
    let source = multiline(raw.get("source"));
    let mut cell = Cell {
        id,
        cell_type,
        unknown_type,
        source,
        metadata,
        outputs: Vec::new(),
        execution_count: None,
        attachments: None,
        extra: Map::new(),
        absent,
    };
    if known.contains(&"outputs") {
        if let Some(Value::Array(outputs)) = raw.remove("outputs") {
            cell.outputs = outputs
                .into_iter()
                .map(|output| Output::from_json(&join_output_lines(output)))
                .collect();
        }
        cell.execution_count = raw.remove("execution_count").and_then(|n| n.as_i64());
    } else {
        cell.attachments = raw.remove("attachments").map(|mut attachments| {
            for_each_bundle(&mut attachments, join_bundle);
            attachments
        });
    }
    raw.retain(|key, _| !known.contains(&key.as_str()));
    cell.extra = raw;
    Ok(cell)
}

/// Whether an output carries a mimebundle in `data` (nbformat joins and splits only those).
fn has_bundle(output: &Value) -> bool {
    matches!(
        output.get("output_type").and_then(Value::as_str),
        Some("execute_result" | "display_data")
    )
}

/// Outputs in memory hold multiline text as single strings; the file holds line lists.
fn join_output_lines(mut output: Value) -> Value {
    if let Some(text) = output.get("text").filter(|t| is_list_of_strings(t)) {
        output["text"] = Value::String(multiline(Some(text)));
    }
    if has_bundle(&output)
        && let Some(data) = output.get_mut("data")
    {
        join_bundle(data);
    }
    output
}

fn is_list_of_strings(value: &Value) -> bool {
    value
        .as_array()
        .is_some_and(|items| items.iter().all(Value::is_string))
}

/// A mimebundle entry nbformat leaves as JSON rather than text.
fn is_json_mime(mime: &str) -> bool {
    mime == "application/json" || (mime.starts_with("application/") && mime.ends_with("+json"))
}

/// Joins the line lists of a mimebundle, as nbformat does on read: every entry but JSON.
fn join_bundle(bundle: &mut Value) {
    let Some(entries) = bundle.as_object_mut() else {
        return;
    };
    for (mime, value) in entries.iter_mut() {
        if !is_json_mime(mime) && is_list_of_strings(value) {
            *value = Value::String(multiline(Some(value)));
        }
    }
}

/// Runs `each` on every bundle of a cell's `attachments` (a map of name to mimebundle).
fn for_each_bundle(attachments: &mut Value, each: fn(&mut Value)) {
    if let Some(named) = attachments.as_object_mut() {
        named.values_mut().for_each(each);
    }
}

#[cfg(test)]
mod tests;

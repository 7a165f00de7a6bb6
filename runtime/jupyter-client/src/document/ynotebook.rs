//! A notebook's shared Y document, laid out as jupyter_ydoc and JupyterLab expect (document
//! version 2.0.0): `meta` {nbformat, nbformat_minor, metadata}, `cells` [Map{id, cell_type,
//! source: Text, metadata, outputs: [Map], execution_count, execution_state}].
//!
//! Reading accepts what every writer produces: numbers as floats (pycrdt), outputs as maps or plain
//! JSON (jupyter-nbmodel-client), stream text as Text or a string. Writing mirrors jupyter_ydoc so
//! JupyterLab renders our cells like its own; a move is a delete and a re-insert, because the
//! JavaScript side has no move operation.

use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Mutex};

use serde_json::{Map as JsonMap, Value};
use yrs::block::ClientID;
use yrs::types::ToJson;
use yrs::{
    Any, Array, ArrayPrelim, ArrayRef, Doc, GetString, In, Map, MapPrelim, MapRef, Out, ReadTxn,
    Text, TextPrelim, TextRef, Transact, TransactionMut,
};

use super::yvalues::{
    any_to_json, is_empty, json_to_any, normalize_cell, normalize_output, object_prelim,
    out_to_json, output_prelim,
};
use super::{CellAt, CellRead, Edit, Page, page_range};
use notebook_format::notebook::{Cell, CellType, Notebook, NotebookError, new_cell_id};
use notebook_format::outputs::Output;

pub struct YNotebook {
    doc: Doc,
    cells: ArrayRef,
    meta: MapRef,
    /// Counts the document's write transactions, whoever made them (a peer's update through
    /// the room, our writes): a conversion is current while the count has not moved.
    transactions: Arc<AtomicU64>,
    /// The notebook last converted whole, or kept true through our own writes since, and the
    /// count it is true at: an edit plans against it without converting every cell again.
    converted: Mutex<Option<(u64, Arc<Notebook>)>>,
    /// How many times the whole document was converted (what the kept conversion saves).
    whole_conversions: AtomicU64,
}

impl Default for YNotebook {
    fn default() -> Self {
        Self::new()
    }
}

impl YNotebook {
    /// An empty document with a fresh client id, to be filled by syncing with the room.
    pub fn new() -> Self {
        let doc = Doc::new();
        let cells = doc.get_or_insert_array("cells");
        let meta = doc.get_or_insert_map("meta");
        let transactions = Arc::new(AtomicU64::new(0));
        let counter = transactions.clone();
        // Every transaction counts, even one that changed only the room's save state: a
        // needless conversion costs time, a missed change would hand out an old notebook.
        doc.observe_after_transaction("converted-notebook", move |_| {
            counter.fetch_add(1, Ordering::SeqCst);
        })
        .expect("a new document has no transaction open");
        YNotebook {
            doc,
            cells,
            meta,
            transactions,
            converted: Mutex::new(None),
            whole_conversions: AtomicU64::new(0),
        }
    }

    pub fn doc(&self) -> &Doc {
        &self.doc
    }

    /// The cells list, for observers of who changes what.
    pub fn cells(&self) -> &ArrayRef {
        &self.cells
    }

    /// The id of the cell whose source is the shared text created as item (`client`, `clock`):
    /// where a peer's editor cursor points (y-codemirror names the text it is in that way).
    pub fn cell_with_source(&self, client: u64, clock: u32) -> Option<String> {
        // Client ids are 53-bit (JavaScript's safe integers); anything larger names nothing.
        if client >= 1 << 53 {
            return None;
        }
        let wanted = yrs::branch::BranchID::Nested(yrs::ID::new(ClientID::new(client), clock));
        let txn = self.doc.transact();
        self.cells.iter(&txn).find_map(|cell| {
            let Out::YMap(map) = &cell else { return None };
            match map.get(&txn, "source") {
                Some(Out::YText(text))
                    if AsRef::<yrs::branch::Branch>::as_ref(&text).id() == wanted =>
                {
                    stored_id(&cell, &txn).map(|id| id.to_string())
                }
                _ => None,
            }
        })
    }

    /// The notebook as it is in the document now.
    pub fn read(&self) -> Result<Notebook, NotebookError> {
        Ok(Notebook::clone(&*self.read_shared()?))
    }

    fn read_unguarded(&self) -> Result<Notebook, NotebookError> {
        let txn = self.doc.transact();
        let mut meta = any_to_json(self.meta.to_json(&txn));
        let cells: Vec<Value> = self
            .cells
            .iter(&txn)
            .map(|cell| {
                let mut value = out_to_json(cell, &txn);
                normalize_cell(&mut value);
                value
            })
            .collect();
        let metadata = meta
            .get_mut("metadata")
            .map(Value::take)
            .unwrap_or_else(|| Value::Object(JsonMap::new()));
        let integer = |key: &str| {
            meta.get(key)
                .and_then(Value::as_f64)
                .map_or(Value::Null, |n| Value::from(n as i64))
        };
        let notebook = serde_json::json!({
            // A room still loading has no meta yet; it is nbformat 4 all the same.
            "nbformat": if meta.get("nbformat").is_some() { integer("nbformat") } else { Value::from(4) },
            "nbformat_minor": integer("nbformat_minor"),
            "metadata": metadata,
            "cells": cells,
        });
        Notebook::from_value(notebook)
    }

    /// One cell as it is in the document now, converted alone: the other cells are not read
    /// (an id is looked up by each cell's `id` field, an index directly).
    pub fn read_cell(&self, at: CellAt) -> Result<CellRead, NotebookError> {
        guarded(|| {
            let txn = self.doc.transact();
            let len = self.cells.len(&txn) as usize;
            let found = match at {
                CellAt::Id(id) => self
                    .find(&txn, id)
                    .map(|(index, map)| (index as usize, Out::YMap(map))),
                CellAt::Index(index) => u32::try_from(index)
                    .ok()
                    .and_then(|i| self.cells.get(&txn, i))
                    .map(|cell| (index, cell)),
            };
            let cell = match found {
                Some((index, cell)) => Some((index, cell_alone(cell, index, &txn)?)),
                None => None,
            };
            let metadata = self.metadata(&txn);
            Ok(CellRead {
                cell,
                len,
                metadata,
            })
        })
    }

    /// Cells `start..start + limit` (`limit` 0: to the end), converted alone, and every cell's
    /// id (read from its `id` field; the others are not converted).
    pub fn read_page(&self, start: usize, limit: usize) -> Result<Page, NotebookError> {
        guarded(|| {
            let txn = self.doc.transact();
            let range = page_range(start, limit, self.cells.len(&txn) as usize);
            let mut cells = Vec::with_capacity(range.len());
            let mut ids = Vec::with_capacity(self.cells.len(&txn) as usize);
            for (index, cell) in self.cells.iter(&txn).enumerate() {
                if range.contains(&index) {
                    let cell = cell_alone(cell, index, &txn)?;
                    ids.push(cell.id.clone());
                    cells.push(cell);
                    continue;
                }
                // A cell without an id gets a fresh one on every read, as in `read`.
                ids.push(stored_id(&cell, &txn).map_or_else(new_cell_id, |id| id.to_string()));
            }
            Ok(Page { start, cells, ids })
        })
    }

    /// Applies edits already checked against `read()` in one transaction and returns the update
    /// that carries them to the room. A document that yrs accepted from a malformed update can
    /// make yrs panic here (found by fuzzing); that is caught and reported, and the caller should
    /// drop this document.
    pub fn write(&self, edits: &[Edit]) -> Result<Vec<u8>, String> {
        std::panic::catch_unwind(std::panic::AssertUnwindSafe(|| {
            let mut txn = self.doc.transact_mut();
            for edit in edits {
                self.write_one(&mut txn, edit);
            }
            // This transaction's changes alone: a diff against the state before it would carry
            // the whole document's deletions, read from every block of the store, every write.
            txn.encode_update_v1()
        }))
        .map_err(|_| "the shared document is damaged (yrs failed writing to it)".to_owned())
    }

    /// The notebook's own metadata as the document holds it.
    fn metadata<T: ReadTxn>(&self, txn: &T) -> JsonMap<String, Value> {
        match self.meta.get(txn, "metadata").map(|m| out_to_json(m, txn)) {
            Some(Value::Object(metadata)) => metadata,
            _ => JsonMap::new(),
        }
    }

    /// The outputs and execution count cell `cell_id` shows, without reading the rest of the
    /// notebook; `None` when there is no such cell.
    pub fn cell_outputs(&self, cell_id: &str) -> Option<(Vec<Output>, Option<i64>)> {
        let txn = self.doc.transact();
        let (_, cell) = self.find(&txn, cell_id)?;
        let outputs = match cell.get(&txn, "outputs") {
            Some(Out::YArray(array)) => array
                .iter(&txn)
                .map(|output| {
                    let mut value = out_to_json(output, &txn);
                    normalize_output(&mut value);
                    Output::from_json(&value)
                })
                .collect(),
            _ => Vec::new(),
        };
        // Peers store counts as floats.
        let count = cell
            .get(&txn, "execution_count")
            .map(|count| out_to_json(count, &txn))
            .and_then(|count| {
                count.as_i64().or_else(|| {
                    count
                        .as_f64()
                        .filter(|n| n.fract() == 0.0)
                        .map(|n| n as i64)
                })
            });
        Some((outputs, count))
    }

    /// Writes a running cell's outputs and count, touching no other cell (what is new since
    /// the last write, for streams that grew), and marks it idle once `done`; returns the
    /// update for the room, or `None` when the cell is gone. `written`: the outputs our last
    /// write put there, if known, so a stream that grew is checked against them rather than
    /// read back from the room. Caught as [`YNotebook::write`] is.
    pub fn write_outputs(
        &self,
        cell_id: &str,
        outputs: &[Output],
        execution_count: Option<i64>,
        done: bool,
        written: Option<&[Output]>,
    ) -> Result<Option<Vec<u8>>, String> {
        std::panic::catch_unwind(std::panic::AssertUnwindSafe(|| {
            let mut txn = self.doc.transact_mut();
            let (_, cell) = self.find(&txn, cell_id)?;
            set_outputs(&mut txn, &cell, outputs, written);
            let count = execution_count.map_or(Any::Null, |n| Any::from(n as f64));
            cell.insert(&mut txn, "execution_count", count);
            if done {
                cell.insert(&mut txn, "execution_state", "idle");
            }
            Some(txn.encode_update_v1())
        }))
        .map_err(|_| "the shared document is damaged (yrs failed writing to it)".to_owned())
    }

    fn write_one(&self, txn: &mut TransactionMut, edit: &Edit) {
        match edit {
            Edit::Insert { index, cell } => {
                let at = (*index as u32).min(self.cells.len(txn));
                self.cells.insert(txn, at, cell_prelim(cell));
            }
            Edit::SetSource {
                cell_id, source, ..
            } => {
                let Some((_, cell)) = self.find(txn, cell_id) else {
                    return;
                };
                match cell.get(txn, "source") {
                    Some(Out::YText(text)) => replace_text(txn, &text, source),
                    _ => {
                        cell.insert(txn, "source", TextPrelim::new(source.as_str()));
                    }
                }
            }
            Edit::Move { cell_id, to } => {
                let Some((from, cell)) = self.find(txn, cell_id) else {
                    return;
                };
                let mut value = out_to_json(Out::YMap(cell), txn);
                normalize_cell(&mut value);
                let Ok(copy) = Notebook::from_value(serde_json::json!({
                    "nbformat": 4, "nbformat_minor": 5, "cells": [value],
                })) else {
                    return;
                };
                let Some(mut copy) = copy.cells.into_iter().next() else {
                    return;
                };
                copy.id = cell_id.clone();
                self.cells.remove(txn, from);
                let to = (*to as u32).min(self.cells.len(txn));
                self.cells.insert(txn, to, cell_prelim(&copy));
            }
            Edit::Delete { cell_ids } => {
                for cell_id in cell_ids {
                    if let Some((index, _)) = self.find(txn, cell_id) {
                        self.cells.remove(txn, index);
                    }
                }
            }
            Edit::SetOutputs {
                cell_id,
                outputs,
                execution_count,
            } => {
                let Some((_, cell)) = self.find(txn, cell_id) else {
                    return;
                };
                set_outputs(txn, &cell, outputs, None);
                let count = execution_count.map_or(Any::Null, |n| Any::from(n as f64));
                cell.insert(txn, "execution_count", count);
            }
            Edit::SetRunning { cell_id, running } => {
                let Some((_, cell)) = self.find(txn, cell_id) else {
                    return;
                };
                let state = if *running { "running" } else { "idle" };
                cell.insert(txn, "execution_state", state);
            }
            Edit::SetNotebookMetadata { key, value } => match self.meta.get(txn, "metadata") {
                Some(Out::YMap(metadata)) => {
                    metadata.insert(txn, key.as_str(), json_to_any(value));
                }
                _ => {
                    let mut object = JsonMap::new();
                    object.insert(key.clone(), value.clone());
                    self.meta.insert(txn, "metadata", object_prelim(&object));
                }
            },
        }
    }

    /// The file hash the room wrote into the document's `state` map at its last save.
    pub fn saved_hash(&self) -> Option<String> {
        let txn = self.doc.transact();
        let state = txn.get_map("state")?;
        match state.get(&txn, "hash") {
            Some(Out::Any(Any::String(hash))) => Some(hash.to_string()),
            _ => None,
        }
    }

    /// A cursor at the end of a cell's source, as y-protocols awareness states carry one (a Y.js
    /// relative position in JSON, every field present, as JupyterLab's peers send it). Scoped to
    /// the source's text itself, so it stays at the end whatever is typed before it.
    pub fn end_of_source(&self, cell_id: &str) -> Option<Value> {
        let txn = self.doc.transact();
        let (_, cell) = self.find(&txn, cell_id)?;
        let Some(Out::YText(text)) = cell.get(&txn, "source") else {
            return None;
        };
        let branch: &yrs::branch::Branch = text.as_ref();
        let (scope, tname) = match branch.id() {
            yrs::branch::BranchID::Nested(id) => (
                serde_json::json!({ "client": id.client, "clock": id.clock }),
                Value::Null,
            ),
            yrs::branch::BranchID::Root(name) => (Value::Null, Value::from(&*name)),
        };
        Some(serde_json::json!({ "type": scope, "tname": tname, "item": null, "assoc": 0 }))
    }

    fn find<T: ReadTxn>(&self, txn: &T, cell_id: &str) -> Option<(u32, MapRef)> {
        self.cells.iter(txn).enumerate().find_map(|(index, cell)| {
            match (stored_id(&cell, txn), cell) {
                (Some(id), Out::YMap(map)) if &*id == cell_id => Some((index as u32, map)),
                _ => None,
            }
        })
    }
}

/// Runs a read of the document, a panic in yrs (found by fuzzing, on a document it accepted
/// from a malformed update) reported as damage rather than taking the caller down.
fn guarded<T>(read: impl FnOnce() -> Result<T, NotebookError>) -> Result<T, NotebookError> {
    std::panic::catch_unwind(std::panic::AssertUnwindSafe(read)).unwrap_or_else(|_| {
        Err(NotebookError::NotJson(
            "the shared document is damaged (yrs failed reading it)".into(),
        ))
    })
}

/// The `id` a cell of the document holds, when it is a string.
fn stored_id<T: ReadTxn>(cell: &Out, txn: &T) -> Option<std::sync::Arc<str>> {
    match cell {
        Out::YMap(map) => match map.get(txn, "id") {
            Some(Out::Any(Any::String(id))) => Some(id),
            _ => None,
        },
        _ => None,
    }
}

/// Cell `index` of the document converted alone, as `read` converts each.
fn cell_alone<T: ReadTxn>(cell: Out, index: usize, txn: &T) -> Result<Cell, NotebookError> {
    let mut value = out_to_json(cell, txn);
    normalize_cell(&mut value);
    Cell::from_value(value, index)
}

/// The smallest splice that turns the text into `wanted`, so collaborators' cursors stay put.
fn replace_text(txn: &mut TransactionMut, text: &TextRef, wanted: &str) {
    let current = text.get_string(txn);
    if current == wanted {
        return;
    }
    let prefix = current
        .chars()
        .zip(wanted.chars())
        .take_while(|(a, b)| a == b)
        .map(|(c, _)| c.len_utf8())
        .sum::<usize>();
    let suffix = current[prefix..]
        .chars()
        .rev()
        .zip(wanted[prefix..].chars().rev())
        .take_while(|(a, b)| a == b)
        .map(|(c, _)| c.len_utf8())
        .sum::<usize>();
    // Our document counts text offsets in bytes (yrs's default; peers see characters, not
    // offsets). Counting UTF-16 units here made yrs panic on non-ASCII text.
    let start = prefix as u32;
    let removed = (current.len() - suffix - prefix) as u32;
    if removed > 0 {
        text.remove_range(txn, start, removed);
    }
    let inserted = &wanted[prefix..wanted.len() - suffix];
    if !inserted.is_empty() {
        text.insert(txn, start, inserted);
    }
}

/// Keeps the outputs that are unchanged and replaces the rest, so streaming output appends.
/// `written`: what our last write put in the cell, when known (see `YNotebook::write_outputs`).
fn set_outputs(
    txn: &mut TransactionMut,
    cell: &MapRef,
    outputs: &[Output],
    written: Option<&[Output]>,
) {
    let array = match cell.get(txn, "outputs") {
        Some(Out::YArray(array)) => array,
        _ => cell.insert(txn, "outputs", ArrayPrelim::default()),
    };
    let entries: Vec<Out> = array.iter(txn).collect();
    let mut same = 0;
    for (index, (entry, output)) in entries.iter().zip(outputs).enumerate() {
        let was = written.and_then(|written| written.get(index));
        if grown_stream(txn, entry, output, was) {
            same += 1;
            continue;
        }
        let mut value = out_to_json(entry.clone(), txn);
        normalize_output(&mut value);
        if Output::from_json(&value) != *output {
            break;
        }
        same += 1;
    }
    if entries.len() > same {
        array.remove_range(txn, same as u32, (entries.len() - same) as u32);
    }
    for output in &outputs[same..] {
        array.push_back(txn, output_prelim(&output.to_json()));
    }
}

/// Whether `entry`, a stream output as the room keeps it (a map whose text is a Y.Text), now
/// shows `output` because `output` continues its text: the new tail is appended, so a cell that
/// prints for minutes sends the room what is new, not its whole output again at every write.
/// `was`: the output our last write put there; while the room's text still has its length, the
/// new text is checked against it instead of reading the room's whole text back at every write.
fn grown_stream(
    txn: &mut TransactionMut,
    entry: &Out,
    output: &Output,
    was: Option<&Output>,
) -> bool {
    let (Out::YMap(map), Output::Stream { name, text, extra }) = (entry, output) else {
        return false;
    };
    // Only the plain shape: output_type, name and text, nothing else to compare.
    if !extra.is_empty() || map.len(txn) != 3 {
        return false;
    }
    let named =
        matches!(map.get(txn, "name"), Some(Out::Any(Any::String(n))) if *n == *name.as_str());
    let typed =
        matches!(map.get(txn, "output_type"), Some(Out::Any(Any::String(t))) if &*t == "stream");
    let Some(Out::YText(shown)) = map.get(txn, "text") else {
        return false;
    };
    if !named || !typed {
        return false;
    }
    if let Some(Output::Stream {
        name: was_name,
        text: was_text,
        ..
    }) = was
        && was_name == name
        && shown.len(txn) as usize == was_text.len()
        && text.starts_with(was_text.as_str())
    {
        if text.len() > was_text.len() {
            shown.push(txn, &text[was_text.len()..]);
        }
        return true;
    }
    let current = shown.get_string(txn);
    if !text.starts_with(current.as_str()) {
        return false;
    }
    if text.len() > current.len() {
        shown.push(txn, &text[current.len()..]);
    }
    true
}

fn cell_prelim(cell: &Cell) -> MapPrelim {
    // Fields we do not know first, so that ours win a clash.
    let mut map: Vec<(&str, In)> = cell
        .extra
        .iter()
        .map(|(key, value)| (key.as_str(), In::Any(json_to_any(value))))
        .collect();
    map.extend([
        ("id", In::from(cell.id.as_str())),
        ("cell_type", In::from(cell.type_name())),
    ]);
    if cell.writes_source() {
        map.push(("source", TextPrelim::new(cell.source.as_str()).into()));
    }
    if cell.writes_metadata() {
        map.push(("metadata", object_prelim(&cell.metadata).into()));
    }
    match (cell.cell_type, &cell.unknown_type) {
        (CellType::Code, None) => {
            let outputs: ArrayPrelim = cell
                .outputs
                .iter()
                .map(|output| output_prelim(&output.to_json()))
                .collect();
            map.push(("outputs", outputs.into()));
            let count = cell
                .execution_count
                .map_or(Any::Null, |n| Any::from(n as f64));
            map.push(("execution_count", In::Any(count)));
            map.push(("execution_state", In::from("idle")));
        }
        _ => {
            if let Some(attachments) = cell.attachments.as_ref().filter(|a| !is_empty(a)) {
                map.push(("attachments", In::Any(json_to_any(attachments))));
            }
        }
    }
    map.into_iter().collect()
}

mod kept;
mod sync;
#[cfg(test)]
mod tests;

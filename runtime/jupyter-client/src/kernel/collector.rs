//! An execution's outputs, collected as the format crate's typed outputs from the iopub messages
//! that answer it (their JSON is read here, once), under one size budget.

use std::collections::HashMap;
use std::sync::atomic::{AtomicU64, Ordering};

use serde_json::{Map, Value};

use notebook_format::outputs::{MimeBundle, Output, StreamName};

/// Builds the outputs of one execution from the iopub messages that answer it, as nbformat stores
/// them: consecutive stream text of one name merged, `clear_output` and `update_display_data`
/// applied, `transient` dropped.
#[derive(Debug, Default)]
pub struct OutputCollector {
    outputs: Vec<Output>,
    /// `clear_output(wait=True)`: clear when the next output arrives.
    clear_pending: bool,
    /// display_id → indices of the outputs showing it.
    displays: HashMap<String, Vec<usize>>,
    pub execution_count: Option<i64>,
    /// Output bytes kept so far, every kind together (see `within_budget`).
    kept_bytes: usize,
    /// Whether the budget ran out and the cut was marked.
    cut: bool,
    /// Moves at every clear (see [`OutputEpoch`]).
    epoch: OutputEpoch,
}

/// Which collector, and which clear of its outputs, a report follows: unique in the process.
/// Between two reports of one epoch the outputs only grew: streams were appended to (never
/// rewritten), outputs added, displays updated in place; so a copy taken at one report is
/// brought up to date without comparing what it already holds (`Output::sync_grown`). Another
/// collector (a run resumed) or a clear gives a new epoch, and the copy is compared again.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct OutputEpoch(u64);

impl Default for OutputEpoch {
    /// A new epoch, equal to no other.
    fn default() -> Self {
        static NEXT: AtomicU64 = AtomicU64::new(0);
        OutputEpoch(NEXT.fetch_add(1, Ordering::Relaxed))
    }
}

/// A copy of a running execution's outputs, brought up to date report by report: a report of
/// the epoch it was last brought up to date from only grew from it, any other is compared.
#[derive(Debug, Default)]
pub struct OutputsCopy {
    outputs: Vec<Output>,
    epoch: Option<OutputEpoch>,
}

impl From<Vec<Output>> for OutputsCopy {
    fn from(outputs: Vec<Output>) -> Self {
        OutputsCopy {
            outputs,
            epoch: None,
        }
    }
}

impl OutputsCopy {
    /// Brings the copy up to date with the report `now` of `epoch`.
    pub fn catch_up(&mut self, now: &[Output], epoch: OutputEpoch) {
        if self.epoch.replace(epoch) == Some(epoch) {
            Output::sync_grown(&mut self.outputs, now);
        } else {
            Output::sync_into(&mut self.outputs, now);
        }
    }

    /// Outputs that came from elsewhere (a store, a record's end): the next report is compared.
    pub fn set(&mut self, outputs: Vec<Output>) {
        self.outputs = outputs;
        self.epoch = None;
    }

    pub fn outputs(&self) -> &[Output] {
        &self.outputs
    }

    /// The epoch of the report it was last brought up to date from, if any.
    pub fn epoch(&self) -> Option<OutputEpoch> {
        self.epoch
    }
}

/// The most output one execution keeps: stream text, rich data (images included), results and
/// tracebacks share it, so no kind of output can exhaust our memory.
pub(crate) const MAX_OUTPUT_BYTES: usize = 16 << 20;

impl OutputCollector {
    /// Stream text beyond the budget is dropped, with one notice where it was cut, so a kernel
    /// printing without end cannot exhaust our memory (or the notebook's readers').
    fn within_budget<'t>(&mut self, text: &'t str) -> std::borrow::Cow<'t, str> {
        if self.cut {
            return std::borrow::Cow::Borrowed("");
        }
        let room = MAX_OUTPUT_BYTES - self.kept_bytes;
        if text.len() < room {
            self.kept_bytes += text.len();
            return std::borrow::Cow::Borrowed(text);
        }
        let mut cut = room;
        while !text.is_char_boundary(cut) {
            cut -= 1;
        }
        self.kept_bytes = MAX_OUTPUT_BYTES;
        self.cut = true;
        std::borrow::Cow::Owned(format!("{}\n{}", &text[..cut], cut_notice()))
    }

    /// Whether a rich output of `size` bytes fits the budget (then it is counted). When it does
    /// not, the budget is spent: the cut is marked once and everything after it is dropped.
    fn admit(&mut self, size: usize) -> bool {
        if !self.cut && self.kept_bytes + size <= MAX_OUTPUT_BYTES {
            self.kept_bytes += size;
            return true;
        }
        if !self.cut {
            self.cut = true;
            self.kept_bytes = MAX_OUTPUT_BYTES;
            self.outputs
                .push(Output::stream(StreamName::Stderr, cut_notice()));
        }
        false
    }

    /// A collector going on from outputs collected elsewhere (a run resumed by another process):
    /// later stream text joins theirs, and the budget counts what they hold.
    pub fn resumed(outputs: Vec<Output>) -> Self {
        let kept_bytes = outputs
            .iter()
            .map(|output| json_bytes(&output.to_json()))
            .sum::<usize>()
            .min(MAX_OUTPUT_BYTES);
        OutputCollector {
            outputs,
            kept_bytes,
            ..OutputCollector::default()
        }
    }

    pub fn outputs(&self) -> &[Output] {
        &self.outputs
    }

    pub fn epoch(&self) -> OutputEpoch {
        self.epoch
    }

    pub fn into_outputs(mut self) -> Vec<Output> {
        // A stream grown by appends has up to twice its length allocated; what is kept (an
        // execution's record, for as long as it is remembered) holds only its text.
        for output in &mut self.outputs {
            if let Output::Stream { text, .. } = output {
                text.shrink_to_fit();
            }
        }
        self.outputs.shrink_to_fit();
        self.outputs
    }

    /// Applies one iopub message; returns whether the outputs changed.
    pub fn apply(&mut self, msg_type: &str, content: &Value) -> bool {
        match msg_type {
            "stream" => {
                let name = match content.get("name").and_then(Value::as_str) {
                    Some("stderr") => StreamName::Stderr,
                    _ => StreamName::Stdout,
                };
                let text = content.get("text").and_then(Value::as_str).unwrap_or("");
                self.before_output();
                let text = self.within_budget(text);
                if text.is_empty() {
                    return false;
                }
                if let Some(Output::Stream {
                    name: last_name,
                    text: stored,
                    ..
                }) = self.outputs.last_mut()
                    && *last_name == name
                {
                    // In place: re-copying the text at every message would be quadratic.
                    stored.push_str(&text);
                } else {
                    self.outputs.push(Output::stream(name, text.into_owned()));
                }
                true
            }
            "display_data" | "execute_result" => {
                self.before_output();
                // Measured before anything is copied: a refused output costs no memory here.
                let size = ["data", "metadata"]
                    .iter()
                    .filter_map(|key| content.get(key))
                    .map(json_bytes)
                    .sum();
                if !self.admit(size) {
                    return true;
                }
                let (data, metadata) = (bundle(content), metadata(content));
                let output = if msg_type == "execute_result" {
                    let count = content.get("execution_count").and_then(Value::as_i64);
                    if count.is_some() {
                        self.execution_count = count;
                    }
                    Output::ExecuteResult {
                        data,
                        metadata,
                        execution_count: count,
                        extra: Map::new(),
                    }
                } else {
                    Output::DisplayData {
                        data,
                        metadata,
                        extra: Map::new(),
                    }
                };
                if let Some(id) = display_id(content) {
                    self.displays
                        .entry(id)
                        .or_default()
                        .push(self.outputs.len());
                }
                self.outputs.push(output);
                true
            }
            "update_display_data" => {
                let Some(id) = display_id(content) else {
                    return false;
                };
                let Some(indices) = self.displays.get(&id).cloned() else {
                    return false;
                };
                let new_size: usize = ["data", "metadata"]
                    .iter()
                    .filter_map(|key| content.get(key))
                    .map(json_bytes)
                    .sum();
                let old_size: usize = indices
                    .iter()
                    .filter_map(|&i| match self.outputs.get(i) {
                        Some(
                            Output::DisplayData { data, metadata, .. }
                            | Output::ExecuteResult { data, metadata, .. },
                        ) => Some(map_bytes(data.entries()) + map_bytes(metadata)),
                        _ => None,
                    })
                    .sum();
                // Updates replace data in place: only growth is charged to the budget.
                let growth = (new_size * indices.len()).saturating_sub(old_size);
                if !self.admit(growth) {
                    return true;
                }
                for &index in &indices {
                    if let Some(
                        Output::DisplayData { data, metadata, .. }
                        | Output::ExecuteResult { data, metadata, .. },
                    ) = self.outputs.get_mut(index)
                    {
                        *data = bundle(content);
                        *metadata = self::metadata(content);
                    }
                }
                true
            }
            "error" => {
                self.before_output();
                if !self.admit(json_bytes(content)) {
                    return true;
                }
                let text = |key: &str| {
                    content
                        .get(key)
                        .and_then(Value::as_str)
                        .unwrap_or_default()
                        .to_owned()
                };
                let traceback = content
                    .get("traceback")
                    .and_then(Value::as_array)
                    .map(|lines| {
                        lines
                            .iter()
                            .filter_map(Value::as_str)
                            .map(str::to_owned)
                            .collect()
                    })
                    .unwrap_or_default();
                self.outputs
                    .push(Output::error(text("ename"), text("evalue"), traceback));
                true
            }
            "clear_output" => {
                if content.get("wait").and_then(Value::as_bool) == Some(true) {
                    self.clear_pending = true;
                    false
                } else {
                    self.clear();
                    true
                }
            }
            "execute_input" => {
                if let Some(n) = content.get("execution_count").and_then(Value::as_i64) {
                    self.execution_count = Some(n);
                }
                false
            }
            _ => false,
        }
    }

    fn before_output(&mut self) {
        if self.clear_pending {
            self.clear();
        }
    }

    fn clear(&mut self) {
        self.epoch = OutputEpoch::default();
        self.outputs.clear();
        self.displays.clear();
        self.clear_pending = false;
        self.kept_bytes = 0;
        self.cut = false;
    }
}

fn cut_notice() -> String {
    format!(
        "[output cut: this execution produced more than {} MiB of output; the rest was dropped]\n",
        MAX_OUTPUT_BYTES >> 20
    )
}

/// A display's MIME bundle as the message carries it (none: an empty one).
fn bundle(content: &Value) -> MimeBundle {
    MimeBundle::new(metadata_like(content, "data"))
}

fn metadata(content: &Value) -> Map<String, Value> {
    metadata_like(content, "metadata")
}

fn metadata_like(content: &Value, key: &str) -> Map<String, Value> {
    match content.get(key) {
        Some(Value::Object(map)) => map.clone(),
        _ => Map::new(),
    }
}

fn map_bytes(map: &Map<String, Value>) -> usize {
    map.iter()
        .map(|(k, v)| k.len() + 4 + json_bytes(v))
        .sum::<usize>()
        + 2
}

/// About how many bytes a JSON value holds (its strings, plus a little per node): what keeping
/// it costs, computed without serializing it.
fn json_bytes(value: &Value) -> usize {
    match value {
        Value::String(s) => s.len() + 2,
        Value::Array(items) => items.iter().map(json_bytes).sum::<usize>() + 2,
        Value::Object(map) => map_bytes(map),
        _ => 8,
    }
}

fn display_id(content: &Value) -> Option<String> {
    content
        .get("transient")
        .and_then(|t| t.get("display_id"))
        .and_then(Value::as_str)
        .map(str::to_owned)
}

#[cfg(test)]
mod tests;

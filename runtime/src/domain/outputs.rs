//! The outputs of a code cell or an execution, typed: nbformat's four output kinds with their
//! MIME bundles. The kernel and document layers speak nbformat JSON; it becomes an [`Output`]
//! once, where the domain hands it to a tool, and JSON again only at the edges (MCP structured
//! content, a guest's WIT record, hook events, documents).

use std::collections::VecDeque;
use std::sync::{Arc, Mutex};

use serde_json::{Map, Value, json};

use crate::jupyter::notebook::multiline_text;

/// Which stream a `stream` output was written to.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum StreamName {
    Stdout,
    Stderr,
}

impl StreamName {
    pub fn as_str(self) -> &'static str {
        match self {
            StreamName::Stdout => "stdout",
            StreamName::Stderr => "stderr",
        }
    }
}

/// A MIME bundle: each MIME type's data as nbformat holds it (text as a string or a list of
/// lines, read joined; JSON types as JSON).
#[derive(Debug, Clone, Default, PartialEq)]
pub struct MimeBundle(Map<String, Value>);

impl MimeBundle {
    /// The data of a text MIME type (a string or nbformat's list of lines), joined.
    pub fn text(&self, mime: &str) -> Option<String> {
        self.0.get(mime).and_then(multiline_text)
    }

    /// The data of a MIME type as it came (JSON types are objects).
    pub fn json(&self, mime: &str) -> Option<&Value> {
        self.0.get(mime)
    }

    pub fn contains(&self, mime: &str) -> bool {
        self.0.contains_key(mime)
    }

    pub fn mime_types(&self) -> impl Iterator<Item = &str> {
        self.0.keys().map(String::as_str)
    }
}

/// One nbformat output.
#[derive(Debug, Clone, PartialEq)]
pub enum Output {
    Stream {
        name: StreamName,
        text: String,
    },
    DisplayData {
        data: MimeBundle,
        metadata: Map<String, Value>,
    },
    ExecuteResult {
        data: MimeBundle,
        metadata: Map<String, Value>,
        execution_count: Option<i64>,
    },
    Error {
        ename: String,
        evalue: String,
        traceback: Vec<String>,
    },
    /// An output type nbformat does not define, kept as it came.
    Other(Value),
}

impl Output {
    /// Reads one nbformat output; what is malformed is read as empty, an unknown type kept whole.
    pub fn from_json(value: &Value) -> Output {
        let text = |key: &str| value.get(key).and_then(multiline_text).unwrap_or_default();
        let object = |key: &str| match value.get(key) {
            Some(Value::Object(map)) => map.clone(),
            _ => Map::new(),
        };
        match value.get("output_type").and_then(Value::as_str) {
            Some("stream") => Output::Stream {
                name: match value.get("name").and_then(Value::as_str) {
                    Some("stderr") => StreamName::Stderr,
                    _ => StreamName::Stdout,
                },
                text: text("text"),
            },
            Some("display_data") => Output::DisplayData {
                data: MimeBundle(object("data")),
                metadata: object("metadata"),
            },
            Some("execute_result") => Output::ExecuteResult {
                data: MimeBundle(object("data")),
                metadata: object("metadata"),
                execution_count: value.get("execution_count").and_then(Value::as_i64),
            },
            Some("error") => Output::Error {
                ename: text("ename"),
                evalue: text("evalue"),
                traceback: value
                    .get("traceback")
                    .and_then(Value::as_array)
                    .map(|lines| {
                        lines
                            .iter()
                            .filter_map(Value::as_str)
                            .map(str::to_owned)
                            .collect()
                    })
                    .unwrap_or_default(),
            },
            _ => Output::Other(value.clone()),
        }
    }

    pub fn all_from_json(values: &[Value]) -> Vec<Output> {
        values.iter().map(Output::from_json).collect()
    }

    /// The output as nbformat JSON.
    pub fn to_json(&self) -> Value {
        match self {
            Output::Stream { name, text } => {
                json!({"output_type": "stream", "name": name.as_str(), "text": text})
            }
            Output::DisplayData { data, metadata } => {
                json!({"output_type": "display_data", "data": data.0, "metadata": metadata})
            }
            Output::ExecuteResult {
                data,
                metadata,
                execution_count,
            } => json!({
                "output_type": "execute_result",
                "data": data.0,
                "metadata": metadata,
                "execution_count": execution_count,
            }),
            Output::Error {
                ename,
                evalue,
                traceback,
            } => json!({
                "output_type": "error",
                "ename": ename,
                "evalue": evalue,
                "traceback": traceback,
            }),
            Output::Other(value) => value.clone(),
        }
    }

    pub fn all_to_json(outputs: &[Output]) -> Vec<Value> {
        outputs.iter().map(Output::to_json).collect()
    }

    /// nbformat's name of the output's kind.
    pub fn output_type(&self) -> &str {
        match self {
            Output::Stream { .. } => "stream",
            Output::DisplayData { .. } => "display_data",
            Output::ExecuteResult { .. } => "execute_result",
            Output::Error { .. } => "error",
            Output::Other(value) => value
                .get("output_type")
                .and_then(Value::as_str)
                .unwrap_or(""),
        }
    }

    /// The MIME bundle of a display or a result.
    pub fn data(&self) -> Option<&MimeBundle> {
        match self {
            Output::DisplayData { data, .. } | Output::ExecuteResult { data, .. } => Some(data),
            _ => None,
        }
    }

    /// The text an error shows: its traceback, a line each, or `ename: evalue` when it has none.
    pub fn error_text(ename: &str, evalue: &str, traceback: &[String]) -> String {
        if traceback.is_empty() {
            let ename = if ename.is_empty() { "Error" } else { ename };
            format!("{ename}: {evalue}")
        } else {
            traceback.join("\n")
        }
    }
}

/// The URI scheme of kept outputs: `execution://{id}/outputs/{index}`.
pub const EXECUTION_SCHEME: &str = "execution://";

/// How many bytes the kept outputs of executions may hold together, and how many executions.
const KEPT_BYTES: usize = 64 << 20;
const KEPT_EXECUTIONS: usize = 512;

/// The whole outputs of recent `execute_code` calls, which keep no notebook copy: what a
/// shortened result points to (`execution://{id}/outputs/{index}`). Bounded in memory, the
/// oldest going first; an execution larger than the whole bound is not kept.
#[derive(Default)]
pub struct KeptOutputs {
    kept: Mutex<VecDeque<Kept>>,
}

/// One execution's outputs as kept, with the bytes they count for against the bound.
struct Kept {
    id: String,
    outputs: Arc<Vec<Output>>,
    bytes: usize,
}

impl KeptOutputs {
    /// Keeps these outputs; returns their id, or `None` when they alone exceed the bound.
    pub fn keep(&self, outputs: Vec<Output>) -> Option<String> {
        let size: usize = outputs.iter().map(|o| o.to_json().to_string().len()).sum();
        if size > KEPT_BYTES {
            return None;
        }
        let id = uuid::Uuid::new_v4().simple().to_string()[..12].to_owned();
        let mut kept = self.kept.lock().expect("kept outputs lock");
        let mut total: usize = kept.iter().map(|kept| kept.bytes).sum::<usize>() + size;
        while total > KEPT_BYTES || kept.len() >= KEPT_EXECUTIONS {
            let Some(dropped) = kept.pop_front() else {
                break;
            };
            total -= dropped.bytes;
        }
        kept.push_back(Kept {
            id: id.clone(),
            outputs: Arc::new(outputs),
            bytes: size,
        });
        Some(id)
    }

    pub fn get(&self, id: &str) -> Option<Arc<Vec<Output>>> {
        let kept = self.kept.lock().expect("kept outputs lock");
        kept.iter()
            .find(|kept| kept.id == id)
            .map(|kept| kept.outputs.clone())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn every_kind_round_trips_through_json() {
        let outputs = [
            json!({"output_type": "stream", "name": "stderr", "text": "w\n"}),
            json!({"output_type": "display_data", "data": {"image/png": "iVBO", "text/plain": "<Figure>"}, "metadata": {"image/png": {"width": 3}}}),
            json!({"output_type": "execute_result", "data": {"application/json": {"a": 1}}, "metadata": {}, "execution_count": 4}),
            json!({"output_type": "error", "ename": "E", "evalue": "v", "traceback": ["t1", "t2"]}),
            json!({"output_type": "future_kind", "x": 1}),
        ];
        for value in outputs {
            assert_eq!(Output::from_json(&value).to_json(), value);
        }
    }

    #[test]
    fn line_lists_are_joined() {
        let value = json!({"output_type": "display_data", "data": {"text/plain": ["a\n", "b"]}, "metadata": {}});
        let output = Output::from_json(&value);
        assert_eq!(output.data().unwrap().text("text/plain").unwrap(), "a\nb");
        let stream = json!({"output_type": "stream", "name": "stdout", "text": ["x\n", "y"]});
        assert_eq!(
            Output::from_json(&stream),
            Output::Stream {
                name: StreamName::Stdout,
                text: "x\ny".into()
            }
        );
    }

    #[test]
    fn kept_outputs_are_bounded_oldest_first() {
        let kept = KeptOutputs::default();
        let big = || {
            vec![Output::Stream {
                name: StreamName::Stdout,
                text: "x".repeat(KEPT_BYTES / 3),
            }]
        };
        let first = kept.keep(big()).unwrap();
        let second = kept.keep(big()).unwrap();
        let third = kept.keep(big()).unwrap();
        assert!(kept.get(&first).is_none(), "the oldest made room");
        assert!(kept.get(&second).is_some() && kept.get(&third).is_some());
        let huge = vec![Output::Stream {
            name: StreamName::Stdout,
            text: "x".repeat(KEPT_BYTES + 1),
        }];
        assert!(kept.keep(huge).is_none());
    }
}

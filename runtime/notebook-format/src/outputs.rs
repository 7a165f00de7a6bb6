//! The outputs of a code cell or an execution, typed: nbformat's four output kinds with their
//! MIME bundles, read from nbformat JSON and written back as JSON only at the edges (MCP
//! structured content, a guest's WIT record, hook events, documents).

use serde_json::{Map, Value, json};

use crate::notebook::multiline_text;

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
}

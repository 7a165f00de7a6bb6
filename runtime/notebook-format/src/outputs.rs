//! The outputs of a code cell or an execution, typed: nbformat's four output kinds with their
//! MIME bundles, read from nbformat JSON and written back as JSON only at the edges (MCP
//! structured content, a guest's WIT record, hook events, documents).

use serde::{Deserialize, Deserializer, Serialize, Serializer};
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
    pub fn new(entries: Map<String, Value>) -> MimeBundle {
        MimeBundle(entries)
    }

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

    pub fn entries(&self) -> &Map<String, Value> {
        &self.0
    }
}

/// One nbformat output. Each kind keeps the fields nbformat does not define in `extra` (a
/// kernel's `transient`, a newer minor's additions), so an output read and written back is
/// the same JSON; an output that does not fit its kind's shape is kept whole as `Other`.
#[derive(Debug, Clone, PartialEq)]
pub enum Output {
    Stream {
        name: StreamName,
        text: String,
        extra: Map<String, Value>,
    },
    DisplayData {
        data: MimeBundle,
        metadata: Map<String, Value>,
        extra: Map<String, Value>,
    },
    ExecuteResult {
        data: MimeBundle,
        metadata: Map<String, Value>,
        execution_count: Option<i64>,
        extra: Map<String, Value>,
    },
    Error {
        ename: String,
        evalue: String,
        traceback: Vec<String>,
        extra: Map<String, Value>,
    },
    /// An output type nbformat does not define, or one malformed, kept as it came.
    Other(Value),
}

impl Output {
    pub fn stream(name: StreamName, text: impl Into<String>) -> Output {
        Output::Stream {
            name,
            text: text.into(),
            extra: Map::new(),
        }
    }

    pub fn error(
        ename: impl Into<String>,
        evalue: impl Into<String>,
        traceback: Vec<String>,
    ) -> Output {
        Output::Error {
            ename: ename.into(),
            evalue: evalue.into(),
            traceback,
            extra: Map::new(),
        }
    }

    /// Reads one nbformat output. Multiline text (a list of lines) is read joined; anything
    /// that does not fit its kind is kept whole as [`Output::Other`].
    pub fn from_json(value: &Value) -> Output {
        Output::typed(value).unwrap_or_else(|| Output::Other(value.clone()))
    }

    fn typed(value: &Value) -> Option<Output> {
        let Value::Object(object) = value else {
            return None;
        };
        let mut extra = object.clone();
        let output_type = extra.remove("output_type")?;
        let mut take = |key: &str| extra.remove(key);
        let output = match output_type.as_str()? {
            "stream" => {
                let name = match take("name")?.as_str()? {
                    "stdout" => StreamName::Stdout,
                    "stderr" => StreamName::Stderr,
                    _ => return None,
                };
                let text = multiline_text(&take("text")?)?;
                Output::Stream {
                    name,
                    text,
                    extra: Map::new(),
                }
            }
            // A missing bundle or metadata reads as empty (and is written so, as nbformat
            // requires); one of the wrong type keeps the output whole.
            "display_data" => Output::DisplayData {
                data: MimeBundle(object_of(take("data"))?),
                metadata: object_of(take("metadata"))?,
                extra: Map::new(),
            },
            "execute_result" => Output::ExecuteResult {
                data: MimeBundle(object_of(take("data"))?),
                metadata: object_of(take("metadata"))?,
                // Missing reads as null, as nbformat writes it.
                execution_count: match take("execution_count") {
                    None | Some(Value::Null) => None,
                    Some(n) => Some(n.as_i64()?),
                },
                extra: Map::new(),
            },
            "error" => Output::Error {
                ename: take("ename")?.as_str()?.to_owned(),
                evalue: take("evalue")?.as_str()?.to_owned(),
                traceback: match take("traceback")? {
                    Value::Array(lines) => lines
                        .into_iter()
                        .map(|line| match line {
                            Value::String(line) => Some(line),
                            _ => None,
                        })
                        .collect::<Option<Vec<_>>>()?,
                    _ => return None,
                },
                extra: Map::new(),
            },
            _ => return None,
        };
        Some(output.with_extra(extra))
    }

    fn with_extra(mut self, more: Map<String, Value>) -> Output {
        if let Some(extra) = self.extra_mut() {
            *extra = more;
        }
        self
    }

    /// The fields nbformat does not define for the output's kind.
    pub fn extra_mut(&mut self) -> Option<&mut Map<String, Value>> {
        match self {
            Output::Stream { extra, .. }
            | Output::DisplayData { extra, .. }
            | Output::ExecuteResult { extra, .. }
            | Output::Error { extra, .. } => Some(extra),
            Output::Other(_) => None,
        }
    }

    pub fn all_from_json(values: &[Value]) -> Vec<Output> {
        values.iter().map(Output::from_json).collect()
    }

    /// The output as nbformat JSON.
    pub fn to_json(&self) -> Value {
        let (mut object, extra) = match self {
            Output::Stream { name, text, extra } => (
                json!({"output_type": "stream", "name": name.as_str(), "text": text}),
                extra,
            ),
            Output::DisplayData {
                data,
                metadata,
                extra,
            } => (
                json!({"output_type": "display_data", "data": data.0, "metadata": metadata}),
                extra,
            ),
            Output::ExecuteResult {
                data,
                metadata,
                execution_count,
                extra,
            } => (
                json!({
                    "output_type": "execute_result",
                    "data": data.0,
                    "metadata": metadata,
                    "execution_count": execution_count,
                }),
                extra,
            ),
            Output::Error {
                ename,
                evalue,
                traceback,
                extra,
            } => (
                json!({
                    "output_type": "error",
                    "ename": ename,
                    "evalue": evalue,
                    "traceback": traceback,
                }),
                extra,
            ),
            Output::Other(value) => return value.clone(),
        };
        if let Value::Object(map) = &mut object {
            for (key, value) in extra {
                map.entry(key.clone()).or_insert_with(|| value.clone());
            }
        }
        object
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

    /// About how many bytes the output holds in memory: its text and data, not the
    /// bookkeeping around them. Cheap (no serialising), for memory budgets.
    pub fn approx_bytes(&self) -> usize {
        let map_bytes = |map: &Map<String, Value>| -> usize {
            map.iter().map(|(k, v)| k.len() + json_bytes(v)).sum()
        };
        match self {
            Output::Stream { text, extra, .. } => text.len() + map_bytes(extra),
            Output::DisplayData {
                data,
                metadata,
                extra,
            }
            | Output::ExecuteResult {
                data,
                metadata,
                extra,
                ..
            } => map_bytes(&data.0) + map_bytes(metadata) + map_bytes(extra),
            Output::Error {
                ename,
                evalue,
                traceback,
                extra,
            } => {
                ename.len()
                    + evalue.len()
                    + traceback.iter().map(String::len).sum::<usize>()
                    + map_bytes(extra)
            }
            Output::Other(value) => json_bytes(value),
        }
    }

    /// Makes `kept` equal to `now` while copying only what changed: a stream whose text grew
    /// gets the new tail, an output unchanged is left alone. A running cell's outputs mostly
    /// grow at the end, so a progress copy taken often costs what is new, not the whole again.
    pub fn sync_into(kept: &mut Vec<Output>, now: &[Output]) {
        Self::sync(kept, now, false);
    }

    /// [`Output::sync_into`] for a `now` known to have grown from `kept` (no `clear_output`
    /// between them, see the kernel's `OutputEpoch`): a stream's text is taken to continue the
    /// kept one without comparing it all again, which at every report of a cell printing
    /// megabytes was a pass over everything printed so far.
    pub fn sync_grown(kept: &mut Vec<Output>, now: &[Output]) {
        Self::sync(kept, now, true);
    }

    fn sync(kept: &mut Vec<Output>, now: &[Output], grown: bool) {
        kept.truncate(now.len());
        for (kept, now) in kept.iter_mut().zip(now) {
            if let (
                Output::Stream {
                    name: kept_name,
                    text: kept_text,
                    extra: kept_extra,
                },
                Output::Stream { name, text, extra },
            ) = (&mut *kept, now)
                && kept_name == name
                && kept_extra == extra
                && text.len() >= kept_text.len()
                && text.is_char_boundary(kept_text.len())
                && (grown || text.as_bytes().starts_with(kept_text.as_bytes()))
            {
                kept_text.push_str(&text[kept_text.len()..]);
            } else if kept != now {
                *kept = now.clone();
            }
        }
        let have = kept.len();
        kept.extend(now[have..].iter().cloned());
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

/// About how many bytes a JSON value holds: its strings and keys, a word per other node.
fn json_bytes(value: &Value) -> usize {
    match value {
        Value::String(text) => text.len(),
        Value::Array(items) => items.iter().map(json_bytes).sum::<usize>() + 8,
        Value::Object(map) => {
            map.iter()
                .map(|(k, v)| k.len() + json_bytes(v))
                .sum::<usize>()
                + 8
        }
        _ => 8,
    }
}

fn object_of(value: Option<Value>) -> Option<Map<String, Value>> {
    match value {
        None => Some(Map::new()),
        Some(Value::Object(map)) => Some(map),
        Some(_) => None,
    }
}

/// Stored (execution records) and sent (hook events) as nbformat JSON.
impl Serialize for Output {
    fn serialize<S: Serializer>(&self, serializer: S) -> Result<S::Ok, S::Error> {
        self.to_json().serialize(serializer)
    }
}

impl<'de> Deserialize<'de> for Output {
    fn deserialize<D: Deserializer<'de>>(deserializer: D) -> Result<Output, D::Error> {
        Value::deserialize(deserializer).map(|value| Output::from_json(&value))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn sync_into_copies_what_changed() {
        let stream = |text: &str| Output::stream(StreamName::Stdout, text);
        let mut kept = vec![stream("a\n")];
        let now = [
            stream("a\nb\n"),
            Output::from_json(
                &json!({"output_type": "display_data", "data": {"text/plain": "x"}, "metadata": {}}),
            ),
        ];
        Output::sync_into(&mut kept, &now);
        assert_eq!(kept, now);
        // A cleared and rewritten stream (not a growth of the old text) is replaced whole.
        let now = [stream("c\n")];
        Output::sync_into(&mut kept, &now);
        assert_eq!(kept, now);
        // Known to have grown: the new tail is taken as it is, and what did not grow is
        // still replaced.
        let now = [stream("c\nd\n"), stream("e")];
        Output::sync_grown(&mut kept, &now);
        assert_eq!(kept, now);
        let now = [stream("c\nd\n"), stream("e")];
        let mut shorter = vec![stream("c\nd\nmore\n")];
        Output::sync_grown(&mut shorter, &now);
        assert_eq!(shorter, now);
        assert!(now[0].approx_bytes() >= 2);
    }

    #[test]
    fn every_kind_round_trips_through_json() {
        let outputs = [
            json!({"output_type": "stream", "name": "stderr", "text": "w\n"}),
            json!({"output_type": "display_data", "data": {"image/png": "iVBO", "text/plain": "<Figure>"}, "metadata": {"image/png": {"width": 3}}}),
            json!({"output_type": "execute_result", "data": {"application/json": {"a": 1}}, "metadata": {}, "execution_count": 4}),
            json!({"output_type": "error", "ename": "E", "evalue": "v", "traceback": ["t1", "t2"]}),
            json!({"output_type": "future_kind", "x": 1}),
            // Fields nbformat does not define stay.
            json!({"output_type": "display_data", "data": {}, "metadata": {}, "transient": {"display_id": "d"}}),
            // Malformed: kept whole.
            json!({"output_type": "stream", "name": "stdweird", "text": "x"}),
            json!({"output_type": "error", "ename": "E", "evalue": "v", "traceback": [1]}),
            json!({"output_type": "display_data", "data": "not a bundle", "metadata": {}}),
        ];
        for value in outputs {
            assert_eq!(Output::from_json(&value).to_json(), value);
        }
    }

    #[test]
    fn a_display_without_metadata_reads_with_empty_metadata() {
        let bare = json!({"output_type": "display_data", "data": {"text/plain": "1"}});
        let output = Output::from_json(&bare);
        assert_eq!(output.data().unwrap().text("text/plain").unwrap(), "1");
        assert_eq!(output.to_json()["metadata"], json!({}));
    }

    #[test]
    fn line_lists_are_joined() {
        let value = json!({"output_type": "display_data", "data": {"text/plain": ["a\n", "b"]}, "metadata": {}});
        let output = Output::from_json(&value);
        assert_eq!(output.data().unwrap().text("text/plain").unwrap(), "a\nb");
        let stream = json!({"output_type": "stream", "name": "stdout", "text": ["x\n", "y"]});
        assert_eq!(
            Output::from_json(&stream),
            Output::stream(StreamName::Stdout, "x\ny")
        );
    }
}

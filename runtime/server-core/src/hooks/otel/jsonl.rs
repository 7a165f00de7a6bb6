//! The JSONL exporter: each finished span as one line of the OpenTelemetry Python SDK's span
//! JSON (its field order, separators and ASCII escapes), written by a thread of its own so a
//! tool call never waits on the disk and lines never interleave.

use std::fs::File;
use std::io::Write;
use std::sync::{Mutex, mpsc};
use std::time::SystemTime;

use opentelemetry::Value as OtelValue;
use opentelemetry::trace::SpanId;
use opentelemetry_sdk::Resource;
use opentelemetry_sdk::error::OTelSdkResult;
use opentelemetry_sdk::trace::{SpanData, SpanExporter};
use serde_json::{Map, Value, json};

impl JsonlExporter {
    /// The exporter and the thread that writes its lines to `file`.
    pub fn start(file: File) -> (Self, std::thread::JoinHandle<()>) {
        let (lines, receiver) = mpsc::channel::<String>();
        let thread = std::thread::Builder::new()
            .name("otel-jsonl".into())
            .spawn(move || write_lines(file, receiver))
            .expect("a thread can be started");
        let exporter = JsonlExporter {
            lines: Mutex::new(Some(lines)),
            resource: Mutex::new(Map::new()),
        };
        (exporter, thread)
    }
}

fn write_lines(mut file: File, lines: mpsc::Receiver<String>) {
    for line in lines {
        if let Err(e) = file.write_all(line.as_bytes()).and_then(|_| file.flush()) {
            tracing::warn!("cannot write a span: {e}");
        }
    }
}

#[derive(Debug)]
pub struct JsonlExporter {
    lines: Mutex<Option<mpsc::Sender<String>>>,
    resource: Mutex<Map<String, Value>>,
}

impl SpanExporter for JsonlExporter {
    fn export(
        &self,
        batch: Vec<SpanData>,
    ) -> impl std::future::Future<Output = OTelSdkResult> + Send {
        let resource = self.resource.lock().expect("resource").clone();
        if let Some(lines) = self.lines.lock().expect("lines").as_ref() {
            for span in &batch {
                let mut line = span_line(span, &resource);
                line.push('\n');
                let _ = lines.send(line);
            }
        }
        std::future::ready(Ok(()))
    }

    fn shutdown_with_timeout(&self, _timeout: std::time::Duration) -> OTelSdkResult {
        // Dropping the sender lets the writer thread finish the queue and end.
        self.lines.lock().expect("lines").take();
        Ok(())
    }

    fn set_resource(&mut self, resource: &Resource) {
        let attributes: Map<String, Value> = resource
            .iter()
            .map(|(k, v)| (k.to_string(), otel_value(v)))
            .collect();
        *self.resource.lock().expect("resource") = attributes;
    }
}

fn otel_value(value: &OtelValue) -> Value {
    match value {
        OtelValue::Bool(b) => json!(b),
        OtelValue::I64(i) => json!(i),
        OtelValue::F64(f) => json!(f),
        other => json!(other.to_string()),
    }
}

fn iso(time: SystemTime) -> String {
    chrono::DateTime::<chrono::Utc>::from(time)
        .format("%Y-%m-%dT%H:%M:%S%.6fZ")
        .to_string()
}

/// A span as the OpenTelemetry Python SDK's `ReadableSpan.to_json` shows it, fields in its order.
fn span_line(span: &SpanData, resource: &Map<String, Value>) -> String {
    let parent =
        (span.parent_span_id != SpanId::INVALID).then(|| format!("0x{}", span.parent_span_id));
    let attributes: Map<String, Value> = span
        .attributes
        .iter()
        .map(|kv| (kv.key.to_string(), otel_value(&kv.value)))
        .collect();
    let status = match &span.status {
        opentelemetry::trace::Status::Error { description } => ordered(&[
            ("status_code", python_json(&json!("ERROR"))),
            ("description", python_json(&json!(description.to_string()))),
        ]),
        opentelemetry::trace::Status::Ok => ordered(&[("status_code", python_json(&json!("OK")))]),
        opentelemetry::trace::Status::Unset => {
            ordered(&[("status_code", python_json(&json!("UNSET")))])
        }
    };
    let context = ordered(&[
        (
            "trace_id",
            python_json(&json!(format!("0x{}", span.span_context.trace_id()))),
        ),
        (
            "span_id",
            python_json(&json!(format!("0x{}", span.span_context.span_id()))),
        ),
        ("trace_state", python_json(&json!("[]"))),
    ]);
    let resource = ordered(&[
        ("attributes", python_json(&Value::Object(resource.clone()))),
        ("schema_url", python_json(&json!(""))),
    ]);
    ordered(&[
        ("name", python_json(&json!(span.name))),
        ("context", context),
        ("kind", python_json(&json!("SpanKind.INTERNAL"))),
        ("parent_id", python_json(&json!(parent))),
        ("start_time", python_json(&json!(iso(span.start_time)))),
        ("end_time", python_json(&json!(iso(span.end_time)))),
        ("status", status),
        ("attributes", python_json(&Value::Object(attributes))),
        ("events", events(span)),
        ("links", "[]".into()),
        ("resource", resource),
    ])
}

/// The span's events as the Python SDK lists them: name, timestamp, attributes.
fn events(span: &SpanData) -> String {
    let events: Vec<String> = span
        .events
        .iter()
        .map(|event| {
            let attributes: Map<String, Value> = event
                .attributes
                .iter()
                .map(|kv| (kv.key.to_string(), otel_value(&kv.value)))
                .collect();
            ordered(&[
                ("name", python_json(&json!(event.name.to_string()))),
                ("timestamp", python_json(&json!(iso(event.timestamp)))),
                ("attributes", python_json(&Value::Object(attributes))),
            ])
        })
        .collect();
    format!("[{}]", events.join(", "))
}

/// An object whose fields keep the given order; values are already JSON.
fn ordered(fields: &[(&str, String)]) -> String {
    let body: Vec<String> = fields
        .iter()
        .map(|(key, value)| format!("{}: {value}", python_json(&json!(key))))
        .collect();
    format!("{{{}}}", body.join(", "))
}

/// JSON as Python's `json.dumps` writes it: `", "` and `": "` separators, non-ASCII escaped.
pub fn python_json(value: &Value) -> String {
    let mut out = String::new();
    write_python(value, &mut out);
    out
}

fn write_python(value: &Value, out: &mut String) {
    match value {
        Value::Object(map) => {
            out.push('{');
            for (i, (key, value)) in map.iter().enumerate() {
                if i > 0 {
                    out.push_str(", ");
                }
                write_string(key, out);
                out.push_str(": ");
                write_python(value, out);
            }
            out.push('}');
        }
        Value::Array(items) => {
            out.push('[');
            for (i, item) in items.iter().enumerate() {
                if i > 0 {
                    out.push_str(", ");
                }
                write_python(item, out);
            }
            out.push(']');
        }
        Value::String(s) => write_string(s, out),
        Value::Bool(true) => out.push_str("true"),
        Value::Bool(false) => out.push_str("false"),
        Value::Null => out.push_str("null"),
        Value::Number(n) => out.push_str(&n.to_string()),
    }
}

fn write_string(s: &str, out: &mut String) {
    out.push('"');
    for c in s.chars() {
        match c {
            '"' => out.push_str("\\\""),
            '\\' => out.push_str("\\\\"),
            '\n' => out.push_str("\\n"),
            '\r' => out.push_str("\\r"),
            '\t' => out.push_str("\\t"),
            c if (c as u32) < 0x20 || (c as u32) > 0x7e => {
                let mut units = [0u16; 2];
                for unit in c.encode_utf16(&mut units) {
                    out.push_str(&format!("\\u{unit:04x}"));
                }
            }
            c => out.push(c),
        }
    }
    out.push('"');
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn python_separators_and_ascii() {
        let v = json!({"b": [1, true, null], "a": "é\n\"x\"", "emoji": "😀"});
        assert_eq!(
            python_json(&v),
            r#"{"a": "\u00e9\n\"x\"", "b": [1, true, null], "emoji": "\ud83d\ude00"}"#
        );
    }
}

//! The built-in OpenTelemetry hook handler: spans for tool calls, executions and kernel lifecycle,
//! written as JSONL in the OpenTelemetry Python SDK's span JSON, so tools written for the Python
//! server read our files.
//!
//! Spans are made with the OpenTelemetry SDK; our exporter hands each finished span to a writer
//! thread, so a tool call never waits on the disk and lines never interleave. An `execute` span
//! is a child of its tool call's span, and a W3C `traceparent` in the request's `_meta` continues
//! the caller's trace.

use std::collections::HashMap;
use std::fs::{File, OpenOptions};
use std::io::Write;
use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Mutex, mpsc};
use std::time::SystemTime;

use opentelemetry::trace::{
    Span as _, SpanContext, SpanId, TraceContextExt, TraceFlags, TraceId, TraceState, Tracer as _,
    TracerProvider as _,
};
use opentelemetry::{Context, KeyValue, Value as OtelValue};
use opentelemetry_sdk::Resource;
use opentelemetry_sdk::error::OTelSdkResult;
use opentelemetry_sdk::trace::{SdkTracerProvider, SpanData, SpanExporter};
use serde_json::{Map, Value, json};

use super::{CallScope, HookEvent, HookFuture, HookHandler, HookKind};

/// The key under which the tool call's span context is left for its `execute` spans.
const TOOL_SPAN_KEY: &str = "otel.tool_span";

#[derive(Debug, thiserror::Error)]
#[error("cannot open the OpenTelemetry span file {path}: {source}")]
pub struct OtelFileError {
    path: PathBuf,
    source: std::io::Error,
}

pub struct OtelHandler {
    provider: SdkTracerProvider,
    tracer: opentelemetry_sdk::trace::SdkTracer,
    open: Mutex<HashMap<u64, opentelemetry_sdk::trace::Span>>,
    next: AtomicU64,
    writer: Mutex<Option<std::thread::JoinHandle<()>>>,
}

impl OtelHandler {
    /// Appends spans to `path` (created if missing).
    pub fn to_file(path: &Path) -> Result<Self, OtelFileError> {
        Self::new(Some(path), None)
    }

    /// Writes spans to a JSONL file, sends them to an OTLP/HTTP collector, or both. The collector
    /// is only used when asked for explicitly: spans carry code.
    pub fn new(path: Option<&Path>, endpoint: Option<url::Url>) -> Result<Self, OtelFileError> {
        let mut builder = SdkTracerProvider::builder().with_resource(
            Resource::builder()
                .with_service_name("jupyter-mcp-server")
                .build(),
        );
        let mut writer = None;
        if let Some(path) = path {
            let file = OpenOptions::new()
                .create(true)
                .append(true)
                .open(path)
                .map_err(|source| OtelFileError {
                    path: path.to_owned(),
                    source,
                })?;
            let (lines, receiver) = mpsc::channel::<String>();
            writer = Some(
                std::thread::Builder::new()
                    .name("otel-jsonl".into())
                    .spawn(move || write_lines(file, receiver))
                    .expect("a thread can be started"),
            );
            builder = builder.with_simple_exporter(JsonlExporter {
                lines: Mutex::new(Some(lines)),
                resource: Mutex::new(Map::new()),
            });
        }
        if let Some(endpoint) = endpoint {
            builder = builder.with_simple_exporter(OtlpExporter::start(endpoint));
        }
        let provider = builder.build();
        let tracer = provider.tracer("jupyter-mcp-server");
        Ok(OtelHandler {
            provider,
            tracer,
            open: Mutex::default(),
            next: AtomicU64::new(1),
            writer: Mutex::new(writer),
        })
    }

    fn start(
        &self,
        name: String,
        parent: &Context,
        attributes: Vec<KeyValue>,
    ) -> opentelemetry_sdk::trace::Span {
        let builder = self.tracer.span_builder(name).with_attributes(attributes);
        self.tracer.build_with_context(builder, parent)
    }

    fn keep(&self, span: opentelemetry_sdk::trace::Span, context: &mut Map<String, Value>) {
        let id = self.next.fetch_add(1, Ordering::Relaxed);
        self.open.lock().expect("open spans").insert(id, span);
        context.insert("_otel_span".into(), json!(id));
    }

    fn take(&self, context: &Map<String, Value>) -> Option<opentelemetry_sdk::trace::Span> {
        let id = context.get("_otel_span")?.as_u64()?;
        self.open.lock().expect("open spans").remove(&id)
    }

    fn handle(&self, event: &HookEvent, context: &mut Map<String, Value>) {
        let text = |key: &str| event.str(key).unwrap_or_default().to_owned();
        match event.kind {
            HookKind::BeforeToolCall => {
                let scope = CallScope::current();
                let parent = scope
                    .as_ref()
                    .and_then(|s| s.traceparent.as_deref())
                    .and_then(parse_traceparent)
                    .map(|remote| Context::new().with_remote_span_context(remote))
                    .unwrap_or_default();
                let tool = text("tool_name");
                let span = self.start(
                    format!("tool_call:{tool}"),
                    &parent,
                    vec![KeyValue::new("tool.name", tool)],
                );
                if let Some(scope) = scope {
                    let sc = span.span_context();
                    scope.shared.lock().expect("call scope").insert(
                        TOOL_SPAN_KEY.into(),
                        json!([sc.trace_id().to_string(), sc.span_id().to_string()]),
                    );
                }
                self.keep(span, context);
            }
            HookKind::BeforeExecute => {
                let parent = CallScope::current()
                    .and_then(|s| {
                        s.shared
                            .lock()
                            .expect("call scope")
                            .get(TOOL_SPAN_KEY)
                            .cloned()
                    })
                    .and_then(|ids| {
                        let trace = TraceId::from_hex(ids.get(0)?.as_str()?).ok()?;
                        let span = SpanId::from_hex(ids.get(1)?.as_str()?).ok()?;
                        Some(SpanContext::new(
                            trace,
                            span,
                            TraceFlags::SAMPLED,
                            false,
                            TraceState::default(),
                        ))
                    })
                    .map(|sc| Context::new().with_remote_span_context(sc))
                    .unwrap_or_default();
                let code: String = text("code").chars().take(200).collect();
                let span = self.start(
                    "execute".into(),
                    &parent,
                    vec![
                        KeyValue::new("kernel.id", text("kernel_id")),
                        KeyValue::new("code.snippet", code),
                    ],
                );
                self.keep(span, context);
            }
            HookKind::AfterToolCall | HookKind::AfterExecute => {
                let Some(mut span) = self.take(context) else {
                    return;
                };
                match event.data.get("error").and_then(Value::as_str) {
                    Some(error) => {
                        span.set_attribute(KeyValue::new("error", true));
                        span.set_attribute(KeyValue::new("error.message", error.to_owned()));
                    }
                    None if event.kind == HookKind::AfterToolCall => {
                        let summary: String = text("result").chars().take(200).collect();
                        span.set_attribute(KeyValue::new("result.summary", summary));
                    }
                    None => {
                        let count = event
                            .data
                            .get("outputs")
                            .and_then(Value::as_array)
                            .map_or(0, Vec::len);
                        span.set_attribute(KeyValue::new("output.count", count as i64));
                    }
                }
                span.end();
            }
            HookKind::KernelLifecycle => {
                let mut span = self.start(
                    "kernel_lifecycle".into(),
                    &Context::new(),
                    vec![
                        KeyValue::new("event_type", text("event_type")),
                        KeyValue::new("kernel.id", text("kernel_id")),
                        KeyValue::new("kernel.name", text("kernel_name")),
                    ],
                );
                span.end();
            }
        }
    }
}

impl HookHandler for OtelHandler {
    fn name(&self) -> &str {
        "opentelemetry"
    }

    fn propagate_errors(&self) -> bool {
        false
    }

    fn on_event<'a>(
        &'a self,
        event: &'a HookEvent,
        context: &'a mut Map<String, Value>,
    ) -> HookFuture<'a> {
        self.handle(event, context);
        Box::pin(std::future::ready(Ok(())))
    }

    /// Ends spans still open, writes every finished span and closes the file.
    fn shutdown(&self) {
        for (_, mut span) in self.open.lock().expect("open spans").drain() {
            span.end();
        }
        if let Err(e) = self.provider.shutdown() {
            tracing::debug!("OpenTelemetry shutdown: {e}");
        }
        if let Some(writer) = self.writer.lock().expect("writer").take() {
            let _ = writer.join();
        }
    }
}

fn parse_traceparent(value: &str) -> Option<SpanContext> {
    let mut parts = value.trim().split('-');
    let (version, trace, span, flags) =
        (parts.next()?, parts.next()?, parts.next()?, parts.next()?);
    if version.len() != 2 || trace.len() != 32 || span.len() != 16 || flags.len() != 2 {
        return None;
    }
    let trace = TraceId::from_hex(trace)
        .ok()
        .filter(|t| *t != TraceId::INVALID)?;
    let span = SpanId::from_hex(span)
        .ok()
        .filter(|s| *s != SpanId::INVALID)?;
    let flags = u8::from_str_radix(flags, 16).ok()?;
    Some(SpanContext::new(
        trace,
        span,
        TraceFlags::new(flags),
        true,
        TraceState::default(),
    ))
}

fn write_lines(mut file: File, lines: mpsc::Receiver<String>) {
    for line in lines {
        if let Err(e) = file.write_all(line.as_bytes()).and_then(|_| file.flush()) {
            tracing::warn!("cannot write a span: {e}");
        }
    }
}

#[derive(Debug)]
struct JsonlExporter {
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

/// Sends spans to an OTLP/HTTP collector (protobuf, `POST {endpoint}/v1/traces`) from a task of
/// its own, so exporting never waits on the network. Written with our reqwest (rustls on ring)
/// rather than opentelemetry-otlp, whose client is a second reqwest with aws-lc.
#[derive(Debug)]
struct OtlpExporter {
    batches: Mutex<Option<tokio::sync::mpsc::UnboundedSender<Vec<SpanData>>>>,
    resource: Arc<Mutex<Resource>>,
    done: Mutex<Option<mpsc::Receiver<()>>>,
}

impl OtlpExporter {
    fn start(endpoint: url::Url) -> Self {
        let url = if endpoint.path().ends_with("/v1/traces") {
            endpoint
        } else {
            let mut url = endpoint;
            let path = format!("{}/v1/traces", url.path().trim_end_matches('/'));
            url.set_path(&path);
            url
        };
        let (batches, mut receiver) = tokio::sync::mpsc::unbounded_channel::<Vec<SpanData>>();
        let resource = Arc::new(Mutex::new(Resource::builder_empty().build()));
        let (done_tx, done) = mpsc::channel();
        let task_resource = resource.clone();
        tokio::spawn(async move {
            let client = reqwest::Client::new();
            while let Some(batch) = receiver.recv().await {
                use prost::Message as _;
                let resource = task_resource.lock().expect("resource").clone();
                let request = opentelemetry_proto::tonic::collector::trace::v1::ExportTraceServiceRequest {
                    resource_spans: opentelemetry_proto::transform::trace::tonic::group_spans_by_resource_and_scope(
                        batch,
                        &(&resource).into(),
                    ),
                };
                let sent = client
                    .post(url.clone())
                    .header(reqwest::header::CONTENT_TYPE, "application/x-protobuf")
                    .body(request.encode_to_vec())
                    .timeout(std::time::Duration::from_secs(10))
                    .send()
                    .await;
                match sent {
                    Ok(response) if response.status().is_success() => {}
                    Ok(response) => {
                        tracing::warn!("OTLP collector at {url} answered {}", response.status())
                    }
                    Err(e) => tracing::warn!("cannot send spans to {url}: {e}"),
                }
            }
            let _ = done_tx.send(());
        });
        OtlpExporter {
            batches: Mutex::new(Some(batches)),
            resource,
            done: Mutex::new(Some(done)),
        }
    }
}

impl SpanExporter for OtlpExporter {
    fn export(
        &self,
        batch: Vec<SpanData>,
    ) -> impl std::future::Future<Output = OTelSdkResult> + Send {
        if let Some(batches) = self.batches.lock().expect("batches").as_ref() {
            let _ = batches.send(batch);
        }
        std::future::ready(Ok(()))
    }

    fn shutdown_with_timeout(&self, timeout: std::time::Duration) -> OTelSdkResult {
        self.batches.lock().expect("batches").take();
        if let Some(done) = self.done.lock().expect("done").take() {
            // The sender task runs on another worker; wait for it to send what is queued.
            let wait = || done.recv_timeout(timeout);
            let _ = match tokio::runtime::Handle::try_current() {
                Ok(handle)
                    if handle.runtime_flavor() == tokio::runtime::RuntimeFlavor::MultiThread =>
                {
                    tokio::task::block_in_place(wait)
                }
                _ => wait(),
            };
        }
        Ok(())
    }

    fn set_resource(&mut self, resource: &Resource) {
        *self.resource.lock().expect("resource") = resource.clone();
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
        ("events", "[]".into()),
        ("links", "[]".into()),
        ("resource", resource),
    ])
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

    #[test]
    fn traceparents() {
        let sc =
            parse_traceparent("00-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-01").unwrap();
        assert_eq!(
            sc.trace_id().to_string(),
            "4bf92f3577b34da6a3ce929d0e0e4736"
        );
        assert!(sc.is_remote());
        assert!(
            parse_traceparent("00-00000000000000000000000000000000-00f067aa0ba902b7-01").is_none()
        );
        assert!(parse_traceparent("garbage").is_none());
    }
}

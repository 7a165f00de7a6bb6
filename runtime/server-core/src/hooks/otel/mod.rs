//! The built-in OpenTelemetry hook handler: spans for tool calls, executions and kernel lifecycle,
//! written as JSONL in the OpenTelemetry Python SDK's span JSON, so tools written for the Python
//! server read our files.
//!
//! Spans are made with the OpenTelemetry SDK; our exporter hands each finished span to a writer
//! thread, so a tool call never waits on the disk and lines never interleave. An `execute` span
//! is a child of its tool call's span, and a W3C `traceparent` in the request's `_meta` continues
//! the caller's trace.

use std::collections::HashMap;
use std::fs::OpenOptions;
use std::os::unix::fs::OpenOptionsExt;
use std::path::{Path, PathBuf};
use std::sync::Mutex;
use std::sync::atomic::{AtomicU64, Ordering};

use opentelemetry::trace::{
    Span as _, SpanContext, SpanId, TraceContextExt, TraceFlags, TraceId, TraceState, Tracer as _,
    TracerProvider as _,
};
use opentelemetry::{Context, KeyValue};
use opentelemetry_sdk::Resource;
use opentelemetry_sdk::trace::SdkTracerProvider;
use serde_json::{Map, Value, json};

mod jsonl;
mod otlp;

use jsonl::JsonlExporter;
pub use jsonl::python_json;
use otlp::OtlpExporter;

use super::{CallScope, ExecutionNote, HookEvent, HookFuture, HookHandler};

/// The key under which the tool call's span context is left for its `execute` spans.
const TOOL_SPAN_KEY: &str = "otel.tool_span";

#[derive(Debug, thiserror::Error)]
#[error("cannot open the OpenTelemetry span file {path}: {source}")]
pub struct OtelFileError {
    path: PathBuf,
    source: std::io::Error,
}

struct Running {
    span: u64,
    egress_allowed: i64,
}

pub struct OtelHandler {
    provider: SdkTracerProvider,
    tracer: opentelemetry_sdk::trace::SdkTracer,
    open: Mutex<HashMap<u64, opentelemetry_sdk::trace::Span>>,
    /// The open `execute` span of each kernel, with the egress it was allowed so far.
    running: Mutex<HashMap<String, Running>>,
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
            // Spans carry code and outputs: a file we create is ours alone (0600 from the start;
            // an existing file keeps the mode its owner gave it).
            let file = OpenOptions::new()
                .create(true)
                .append(true)
                .mode(0o600)
                .open(path)
                .map_err(|source| OtelFileError {
                    path: path.to_owned(),
                    source,
                })?;
            let (exporter, thread) = JsonlExporter::start(file);
            writer = Some(thread);
            builder = builder.with_simple_exporter(exporter);
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
            running: Mutex::default(),
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

    fn keep(&self, span: opentelemetry_sdk::trace::Span, context: &mut Map<String, Value>) -> u64 {
        let id = self.next.fetch_add(1, Ordering::Relaxed);
        self.open.lock().expect("open spans").insert(id, span);
        context.insert("_otel_span".into(), json!(id));
        id
    }

    fn take(&self, context: &Map<String, Value>) -> Option<opentelemetry_sdk::trace::Span> {
        let id = context.get("_otel_span")?.as_u64()?;
        self.open.lock().expect("open spans").remove(&id)
    }

    fn handle(&self, event: &HookEvent, context: &mut Map<String, Value>) {
        match event {
            HookEvent::BeforeToolCall { tool_name, .. } => {
                let scope = CallScope::current();
                let parent = scope
                    .as_ref()
                    .and_then(|s| s.traceparent.as_deref())
                    .and_then(parse_traceparent)
                    .map(|remote| Context::new().with_remote_span_context(remote))
                    .unwrap_or_default();
                let span = self.start(
                    format!("tool_call:{tool_name}"),
                    &parent,
                    vec![KeyValue::new("tool.name", tool_name.clone())],
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
            HookEvent::BeforeExecute { kernel_id, code } => {
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
                let code: String = code.chars().take(200).collect();
                let span = self.start(
                    "execute".into(),
                    &parent,
                    vec![
                        KeyValue::new("kernel.id", kernel_id.clone()),
                        KeyValue::new("code.snippet", code),
                    ],
                );
                let id = self.keep(span, context);
                self.running.lock().expect("running executions").insert(
                    kernel_id.clone(),
                    Running {
                        span: id,
                        egress_allowed: 0,
                    },
                );
            }
            HookEvent::AfterToolCall { error, result, .. } => {
                let summary = result.as_deref().unwrap_or_default().chars().take(200);
                let outcome = KeyValue::new("result.summary", summary.collect::<String>());
                self.end_uses(context);
                self.finish(context, error.as_deref(), outcome);
            }
            HookEvent::AfterExecute {
                error,
                outputs,
                kernel_id,
            } => {
                self.end_running(kernel_id, context);
                let outcome = KeyValue::new("output.count", outputs.len() as i64);
                self.finish(context, error.as_deref(), outcome);
            }
            HookEvent::KernelLifecycle {
                event_type,
                kernel_id,
                kernel_name,
            } => {
                let mut span = self.start(
                    "kernel_lifecycle".into(),
                    &Context::new(),
                    vec![
                        KeyValue::new("event_type", event_type.clone()),
                        KeyValue::new("kernel.id", kernel_id.clone()),
                        KeyValue::new("kernel.name", kernel_name.clone()),
                    ],
                );
                span.end();
            }
        }
    }

    /// What extensions used during the tool call, as child spans of its span with their own
    /// times.
    fn end_uses(&self, context: &Map<String, Value>) {
        let Some(scope) = CallScope::current() else {
            return;
        };
        let uses = std::mem::take(&mut *scope.uses.lock().expect("call scope"));
        if uses.is_empty() {
            return;
        }
        let Some(id) = context.get("_otel_span").and_then(Value::as_u64) else {
            return;
        };
        let parent = match self.open.lock().expect("open spans").get(&id) {
            Some(span) => Context::new().with_remote_span_context(span.span_context().clone()),
            None => return,
        };
        for used in uses {
            let builder = self
                .tracer
                .span_builder(used.name)
                .with_start_time(used.start)
                .with_attributes(used.attributes);
            let mut span = self.tracer.build_with_context(builder, &parent);
            span.end_with_timestamp(used.end);
        }
    }

    /// The kernel's execution is over: what it was allowed is set on its span.
    fn end_running(&self, kernel_id: &str, context: &Map<String, Value>) {
        let Some(id) = context.get("_otel_span").and_then(Value::as_u64) else {
            return;
        };
        let mut running = self.running.lock().expect("running executions");
        if running.get(kernel_id).is_some_and(|r| r.span == id)
            && let Some(ended) = running.remove(kernel_id)
            && ended.egress_allowed > 0
            && let Some(span) = self.open.lock().expect("open spans").get_mut(&id)
        {
            span.set_attribute(KeyValue::new("egress.allowed", ended.egress_allowed));
        }
    }

    /// Ends the span a before event opened: the error if there was one, else what it produced.
    fn finish(&self, context: &Map<String, Value>, error: Option<&str>, outcome: KeyValue) {
        let Some(mut span) = self.take(context) else {
            return;
        };
        match error {
            Some(error) => {
                span.set_attribute(KeyValue::new("error", true));
                span.set_attribute(KeyValue::new("error.message", error.to_owned()));
            }
            None => span.set_attribute(outcome),
        }
        span.end();
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

    /// An allowed egress is counted on the kernel's running `execute` span; anything else becomes
    /// an event on it. Nothing running there: nothing to note it on.
    fn on_execution_note(&self, kernel_id: &str, note: &ExecutionNote) {
        let mut running = self.running.lock().expect("running executions");
        let Some(execution) = running.get_mut(kernel_id) else {
            return;
        };
        if note.name == "egress.allowed" {
            execution.egress_allowed += 1;
            return;
        }
        if let Some(span) = self
            .open
            .lock()
            .expect("open spans")
            .get_mut(&execution.span)
        {
            let attributes = note
                .attributes
                .iter()
                .map(|(key, value)| KeyValue::new(*key, value.clone()))
                .collect();
            span.add_event(note.name, attributes);
        }
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

#[cfg(test)]
mod tests {
    use super::*;

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

    /// An egress refusal becomes an event on the kernel's running `execute` span, in the Python
    /// SDK's JSON; allowed ones are counted on it; a kernel with nothing running gets nothing.
    #[test]
    fn execution_notes_land_on_the_running_execute_span() {
        let path =
            std::env::temp_dir().join(format!("jmcp-otel-notes-{}.jsonl", std::process::id()));
        let _ = std::fs::remove_file(&path);
        let handler = OtelHandler::to_file(&path).expect("span file");
        let refused = ExecutionNote {
            name: "egress.refused",
            attributes: vec![
                ("egress.host", "example.org".into()),
                ("egress.port", "443".into()),
            ],
        };
        let allowed = ExecutionNote {
            name: "egress.allowed",
            attributes: Vec::new(),
        };
        handler.on_execution_note("k1", &refused);
        let mut context = Map::new();
        handler.handle(&HookEvent::before_execute("k1", "fetch()"), &mut context);
        handler.on_execution_note("k1", &refused);
        handler.on_execution_note("k1", &allowed);
        handler.on_execution_note("k1", &allowed);
        handler.on_execution_note("k2", &refused);
        handler.handle(&HookEvent::after_execute("k1", &[], None), &mut context);
        // After its end, nothing is noted on it any more.
        handler.on_execution_note("k1", &refused);
        handler.shutdown();
        let text = std::fs::read_to_string(&path).expect("spans written");
        let _ = std::fs::remove_file(&path);
        let span: Value =
            serde_json::from_str(text.lines().next().expect("one span")).expect("JSON");
        assert_eq!(text.lines().count(), 1);
        assert_eq!(span["name"], "execute");
        assert_eq!(span["attributes"]["egress.allowed"], 2);
        let events = span["events"].as_array().expect("events");
        assert_eq!(events.len(), 1, "{events:?}");
        assert_eq!(events[0]["name"], "egress.refused");
        assert_eq!(events[0]["attributes"]["egress.host"], "example.org");
        assert_eq!(events[0]["attributes"]["egress.port"], "443");
        assert!(
            events[0]["timestamp"]
                .as_str()
                .is_some_and(|t| t.ends_with('Z'))
        );
    }
}

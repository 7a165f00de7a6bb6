//! Cost of the hook path per tool call: no handler, and the OpenTelemetry JSONL handler.
//! Prints nanoseconds per event (a tool call fires two: before and after). Target: < 20 µs.
//! Run: cargo bench -p jupyter-mcp-server --bench hooks

use std::sync::Arc;
use std::time::Instant;

use serde_json::json;
use server_core::hooks::otel::OtelHandler;
use server_core::hooks::{HookEvent, Hooks};

fn per_event(hooks: &Hooks, runtime: &tokio::runtime::Runtime, calls: u32) -> f64 {
    let arguments = json!({"code": "i + 1", "timeout": 30});
    runtime.block_on(async {
        let started = Instant::now();
        for _ in 0..calls {
            if hooks.is_empty() {
                continue;
            }
            let (pair, refused) = hooks
                .before(&HookEvent::before_tool_call("execute_code", &arguments))
                .await;
            refused.unwrap();
            let after =
                HookEvent::after_tool_call("execute_code", &arguments, Some("2".into()), None);
            hooks.after(pair, &after).await.unwrap();
        }
        started.elapsed().as_nanos() as f64 / f64::from(calls) / 2.0
    })
}

fn main() {
    let runtime = tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()
        .unwrap();
    let calls = 20_000;

    let empty = Hooks::default();
    per_event(&empty, &runtime, 1_000);
    let none = per_event(&empty, &runtime, calls);

    let dir = std::env::temp_dir().join(format!("jmcp-bench-{}", std::process::id()));
    std::fs::create_dir_all(&dir).unwrap();
    let file = dir.join("spans.jsonl");
    let otel = Arc::new(OtelHandler::to_file(&file).unwrap());
    let with_otel = Hooks::default();
    with_otel.register(otel.clone());
    per_event(&with_otel, &runtime, 1_000);
    let traced = per_event(&with_otel, &runtime, calls);
    server_core::hooks::HookHandler::shutdown(otel.as_ref());
    let lines = std::fs::read_to_string(&file).unwrap().lines().count();
    std::fs::remove_dir_all(&dir).unwrap();

    println!("hook path, {calls} tool calls (2 events each)");
    println!("{:34} {:>12}", "handlers", "ns / event");
    println!("{:34} {:>12.1}", "none", none);
    println!("{:34} {:>12.1}", "OpenTelemetry JSONL", traced);
    println!("target: < 20000 ns / event; spans written: {lines}");
}

//! Cost of wasm hook handlers: a raw hook-event call into a pre-instantiated Rust guest, the
//! whole hooks-bus dispatch with that guest registered, and a fresh instance from `InstancePre`
//! (Rust and Python guests). Prints medians beside the targets.
//! Run (the dev profile's dependencies, with this crate optimized: wasmtime's typed calls are
//! generic, so they are compiled in this crate and run unoptimized at its dev opt-level 0):
//!   JUPYTER_MCP_GUESTS_DIR=$(guests/build) cargo bench --profile dev \
//!     --config 'profile.dev.package.jupyter-mcp-server.opt-level=3' -p jupyter-mcp-server --bench wasm

use std::path::PathBuf;
use std::sync::Arc;
use std::time::{Duration, Instant};

use jupyter_mcp_server::config::{ExtensionConfig, GuestLimits};
use jupyter_mcp_server::hooks::{HookEvent, Hooks};
use jupyter_mcp_server::wasm::{GuestSettings, WasmHookHandler, WasmHost};
use serde_json::json;

fn median(mut samples: Vec<Duration>) -> Duration {
    samples.sort();
    samples[samples.len() / 2]
}

fn settings(name: &str, config: serde_json::Value) -> Arc<GuestSettings> {
    Arc::new(GuestSettings {
        name: name.into(),
        config_json: config.to_string(),
        grants: Vec::new(),
        limits: GuestLimits::default(),
        link: Default::default(),
    })
}

fn row(what: &str, value: Duration, target: &str) {
    println!(
        "{what:52} {:>10.2} µs   target {target}",
        value.as_secs_f64() * 1e6
    );
}

fn main() {
    let Some(dir) = std::env::var_os("JUPYTER_MCP_GUESTS_DIR").map(PathBuf::from) else {
        println!("set JUPYTER_MCP_GUESTS_DIR to the built guests (guests/build prints it)");
        return;
    };
    let cache = std::env::var_os("JUPYTER_MCP_TEST_WASM_CACHE")
        .map(PathBuf::from)
        .unwrap_or_else(|| {
            PathBuf::from(std::env::var_os("HOME").unwrap_or_default())
                .join(".cache/jupyter-mcp-server/wasm-test")
        });
    let host = WasmHost::new(cache).expect("wasm host");
    let policy = dir.join("policy.wasm");
    let deny = json!({"deny": ["import subprocess"]});
    let template = host
        .template(&policy, settings("policy", deny.clone()))
        .expect("policy guest");

    // Raw call: event lowering, the guest's work and the answer, on a live instance.
    let mut live = template.instantiate().expect("instance");
    let event = WasmHookHandler::to_wit(&HookEvent::before_execute("kernel-1", "print(6 * 7)"));
    let mut samples = Vec::with_capacity(20_000);
    for i in 0..22_000 {
        let started = Instant::now();
        let answer = live.on_event(&event, "{}").expect("call");
        let took = started.elapsed();
        assert_eq!(answer, Ok(None));
        if i >= 2_000 {
            samples.push(took);
        }
    }
    let raw = median(samples);

    // Whole dispatch: the hooks bus, the guest's thread and back, as a tool call sees it.
    let loaded = host
        .load(&ExtensionConfig {
            config: deny,
            ..ExtensionConfig::with_defaults(policy.clone())
        })
        .expect("load policy");
    let hooks = Arc::new(Hooks::default());
    hooks.register(loaded.hook_handler().expect("a hook handler"));
    let runtime = tokio::runtime::Builder::new_multi_thread()
        .worker_threads(2)
        .enable_all()
        .build()
        .unwrap();
    // On a worker, as a tool call's events are.
    let bus = hooks.clone();
    let dispatch = runtime
        .block_on(runtime.spawn(async move {
            let event = HookEvent::before_execute("kernel-1", "print(6 * 7)");
            let mut samples = Vec::with_capacity(20_000);
            for i in 0..22_000 {
                let started = Instant::now();
                let (_, outcome) = bus.before(&event).await;
                let took = started.elapsed();
                outcome.unwrap();
                if i >= 2_000 {
                    samples.push(took);
                }
            }
            median(samples)
        }))
        .unwrap();

    // Fresh instances from InstancePre (what a failed call costs before the next one).
    let fresh = |template: &jupyter_mcp_server::wasm::Template, n: usize| {
        let mut samples = Vec::with_capacity(n);
        for _ in 0..n {
            let started = Instant::now();
            let live = template.instantiate().expect("instance");
            drop(live);
            samples.push(started.elapsed());
        }
        median(samples)
    };
    let fresh_rust = fresh(&template, 500);
    let audit = dir.join("audit.wasm");
    let load_started = Instant::now();
    let python = host
        .template(&audit, settings("audit", json!({})))
        .expect("audit guest");
    let python_load = load_started.elapsed();
    let fresh_python = fresh(&python, 30);

    println!("wasm hook handlers (medians)");
    row(
        "raw before_execute call, pre-instantiated Rust",
        raw,
        "≤ 2 µs",
    );
    row(
        "hooks bus dispatch, Rust guest registered",
        dispatch,
        "≤ 20 µs",
    );
    row(
        "fresh instance from InstancePre, Rust",
        fresh_rust,
        "≤ 100 µs",
    );
    row(
        "fresh instance from InstancePre, Python",
        fresh_python,
        "≤ 2000 µs",
    );
    println!(
        "Python guest load (compile cache hit unless first run): {:.1} ms",
        python_load.as_secs_f64() * 1e3
    );
    hooks.shutdown();
}

//! Cost of wasm hook handlers: a raw hook-event call into a pre-instantiated Rust guest, the
//! whole hooks-bus dispatch with that guest registered, and a fresh instance from `InstancePre`
//! (Rust and Python guests); an extension's tool call against the same tool written natively,
//! both through the whole dispatch; and server start with three extensions loaded from the
//! compile cache (in process, and the real binary when `JUPYTER_MCP_SERVER_BIN` is set); and
//! per word-count example (every `wordcount*.wasm` of the guests' folder, one per language): its
//! size, its cold compile, a raw hook event and a `word_count` call through the whole dispatch
//! (the host answering its `read-cells` at once: the benchmark has no server to read from), for
//! the table of guests/README.md. Prints medians beside the targets.
//! Run (the dev profile's dependencies, with our crates optimized: wasmtime's typed calls are
//! generic, so they are compiled in the wasm host and run unoptimized at its dev opt-level 0):
//!   JUPYTER_MCP_GUESTS_DIR=$(guests/build) cargo bench --profile dev \
//!     --config 'profile.dev.package.wasm-host.opt-level=3' \
//!     --config 'profile.dev.package.server-core.opt-level=3' \
//!     --config 'profile.dev.package.jupyter-mcp-server.opt-level=3' -p jupyter-mcp-server --bench wasm

use std::path::PathBuf;
use std::sync::Arc;
use std::time::{Duration, Instant};

use jupyter_client::Jupyter;
use jupyter_client::rest::JupyterRest;
use jupyter_mcp_server::config::{Cli, Config, ExtensionConfig, GuestLimits, WasmConfig};
use jupyter_mcp_server::dispatch::{ToolRegistry, call_tool};
use jupyter_mcp_server::tools::{ToolContext, ToolOutput, declare};
use serde_json::json;
use server_core::capabilities::{Capabilities, Settings};
use server_core::domain::Domain;
use server_core::hooks::{HookEvent, Hooks};
use wasm_host::{CallKind, GuestSettings, WasmHost};
use wasm_host::{load_all, register_tools};

fn median(mut samples: Vec<Duration>) -> Duration {
    samples.sort();
    samples[samples.len() / 2]
}

fn settings(name: &str, config: serde_json::Value) -> Arc<GuestSettings> {
    Arc::new(GuestSettings::new(
        name.into(),
        config.to_string(),
        Default::default(),
        GuestLimits::default(),
        Default::default(),
    ))
}

fn cache_dir() -> PathBuf {
    std::env::var_os("JUPYTER_MCP_TEST_WASM_CACHE")
        .map(PathBuf::from)
        .unwrap_or_else(|| {
            PathBuf::from(std::env::var_os("HOME").unwrap_or_default())
                .join(".cache/jupyter-mcp-server/wasm-test")
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
    let host = WasmHost::new(Some(cache_dir())).expect("wasm host");
    let policy = dir.join("policy.wasm");
    let deny = json!({"deny": ["import subprocess"]});
    let template = host
        .template(&policy, settings("policy", deny.clone()))
        .expect("policy guest");

    // Raw call: the event's conversion and lowering, the guest's work and the answer, on a live
    // instance.
    let mut live = template.instantiate().expect("instance");
    let event = HookEvent::before_execute("kernel-1", "print(6 * 7)");
    let mut samples = Vec::with_capacity(20_000);
    for i in 0..22_000 {
        let started = Instant::now();
        let answer = live
            .call(CallKind::Hook, |api, store| {
                api.on_event(store, &event, "{}")
            })
            .expect("call");
        let took = started.elapsed();
        assert_eq!(answer, Ok(wasm_host::HookReply::default()));
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
    let fresh = |template: &wasm_host::Template, n: usize| {
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

    tools_and_start(&dir, &runtime);
    word_count_examples(&dir, &runtime);
}

/// The word-count example of each language: what a guest of that language costs per call.
fn word_count_examples(dir: &std::path::Path, runtime: &tokio::runtime::Runtime) {
    let mut examples: Vec<PathBuf> = std::fs::read_dir(dir)
        .expect("guests dir")
        .flatten()
        .map(|e| e.path())
        .filter(|p| {
            p.file_name()
                .and_then(|n| n.to_str())
                .is_some_and(|n| n.starts_with("wordcount") && n.ends_with(".wasm"))
        })
        .collect();
    examples.sort();
    println!("word-count examples (medians; compile: an empty cache, once)");
    for path in examples {
        let name = path.file_stem().unwrap().to_string_lossy().into_owned();
        let size = std::fs::metadata(&path).map(|m| m.len()).unwrap_or(0);
        // Cold: a cache of its own, empty.
        let cold =
            std::env::temp_dir().join(format!("jmcp-bench-cold-{}-{name}", std::process::id()));
        let started = Instant::now();
        let template = WasmHost::new(Some(cold.clone()))
            .expect("wasm host")
            .template(&path, settings(&name, json!({})))
            .expect("the example loads");
        let compile = started.elapsed();
        let _ = std::fs::remove_dir_all(&cold);
        let mut live = template.instantiate().expect("instance");
        let hook = template.exports.handles_hooks().then(|| {
            let event = HookEvent::before_tool_call("word_count", &json!({}));
            let mut samples = Vec::with_capacity(10_000);
            for i in 0..11_000 {
                let started = Instant::now();
                live.call(CallKind::Hook, |api, store| {
                    api.on_event(store, &event, "{}")
                })
                .expect("call")
                .expect("not refused");
                if i >= 1_000 {
                    samples.push(started.elapsed());
                }
            }
            median(samples)
        });
        drop(live);
        let wasm = WasmConfig {
            cache_dir: Some(cache_dir()),
            extensions: vec![ExtensionConfig {
                grants: vec!["read-cells".into()],
                ..ExtensionConfig::with_defaults(path.clone())
            }],
            ..Default::default()
        };
        let guests = load_all(&wasm, Arc::default());
        let declarations: Vec<_> = guests.iter().filter_map(|g| g.extension()).collect();
        let capabilities =
            Capabilities::build(&declarations, &Settings::default()).expect("capabilities");
        let tools = ToolRegistry::builtin();
        register_tools(&tools, &guests, &capabilities);
        let domain = domain(capabilities);
        let tools = Arc::new(tools);
        let call = runtime
            .block_on(runtime.spawn(async move {
                let mut samples = Vec::with_capacity(5_000);
                for i in 0..5_500 {
                    let context = ToolContext::internal(domain.clone());
                    let started = Instant::now();
                    let result = call_tool(&tools, None, "word_count", None, context, None)
                        .await
                        .expect("a known tool");
                    let took = started.elapsed();
                    // The host answers read-cells at once (not-available: no server here).
                    assert_eq!(result.is_error, Some(true), "{result:?}");
                    if i >= 500 {
                        samples.push(took);
                    }
                }
                median(samples)
            }))
            .unwrap();
        for guest in &guests {
            guest.guest.stop();
        }
        println!(
            "{name:24} {:>8.1} KiB  cold compile {:>8.1} ms  raw hook event {:>9}  word_count via dispatch {:>9.2} µs",
            size as f64 / 1024.0,
            compile.as_secs_f64() * 1e3,
            hook.map_or("—".to_owned(), |h| format!(
                "{:.2} µs",
                h.as_secs_f64() * 1e6
            )),
            call.as_secs_f64() * 1e6
        );
    }
}

#[derive(serde::Deserialize, schemars::JsonSchema)]
struct EchoArgs {
    said: String,
}

/// The domain a tool call sees; no Jupyter Server is needed for the echo tools.
fn domain(capabilities: Capabilities) -> Arc<Domain> {
    use clap::Parser as _;
    let cli = Cli::try_parse_from(["jupyter-mcp-server", "start"]).expect("arguments");
    let config = Config::from_args_and_env(cli.start, |_| None).expect("config");
    let hooks = Arc::new(Hooks::default());
    let rest = JupyterRest::new("http://127.0.0.1:9".parse().unwrap(), None);
    Domain::new(
        config.domain_settings(),
        Jupyter::new(rest, hooks.clone()),
        Arc::new(capabilities),
        hooks,
    )
}

fn extension_configs(dir: &std::path::Path) -> Vec<ExtensionConfig> {
    ["snapshot", "stats", "declares"]
        .iter()
        .map(|name| ExtensionConfig::with_defaults(dir.join(format!("{name}.wasm"))))
        .collect()
}

fn tools_and_start(dir: &std::path::Path, runtime: &tokio::runtime::Runtime) {
    let wasm = WasmConfig {
        cache_dir: Some(cache_dir()),
        extensions: extension_configs(dir),
        ..Default::default()
    };
    // Warms the compile cache, so the timed loads below are what a restart costs.
    let guests = load_all(&wasm, Arc::default());
    assert_eq!(guests.len(), 3, "snapshot, stats and declares load");
    let declarations: Vec<_> = guests.iter().filter_map(|g| g.extension()).collect();
    let settings = Settings {
        cli: vec!["declares.demo".into()],
        ..Default::default()
    };
    let capabilities = Capabilities::build(&declarations, &settings).expect("capabilities");
    let mut tools = ToolRegistry::builtin();
    // The native twin of the declares guest's declares_echo: same text back.
    tools.insert(
        declare("native_echo", "Echoes its arguments.")
            .read_only()
            .run(|_context, args: EchoArgs| async move {
                let arguments = json!({ "said": args.said }).to_string();
                Ok(ToolOutput::text(format!("declares echo: {arguments}")))
            }),
    );
    register_tools(&tools, &guests, &capabilities);
    let domain = domain(capabilities);
    let tools = Arc::new(tools);
    let time_calls = |name: &'static str| {
        let domain = domain.clone();
        let tools = tools.clone();
        runtime
            .block_on(runtime.spawn(async move {
                let mut samples = Vec::with_capacity(10_000);
                for i in 0..11_000 {
                    let mut arguments = serde_json::Map::new();
                    arguments.insert("said".into(), json!("hi"));
                    let context = ToolContext::internal(domain.clone());
                    let started = Instant::now();
                    let result = call_tool(&tools, None, name, Some(arguments), context, None)
                        .await
                        .expect("a known tool");
                    let took = started.elapsed();
                    assert_ne!(result.is_error, Some(true), "{name}: {result:?}");
                    if i >= 1_000 {
                        samples.push(took);
                    }
                }
                median(samples)
            }))
            .unwrap()
    };
    let native_call = time_calls("native_echo");
    let extension_call = time_calls("declares_echo");
    for guest in &guests {
        guest.guest.stop();
    }

    // In process: what `run` does for the guests before it serves.
    let mut samples = Vec::new();
    for _ in 0..10 {
        let started = Instant::now();
        let guests = load_all(&wasm, Arc::default());
        let declarations: Vec<_> = guests.iter().filter_map(|g| g.extension()).collect();
        let capabilities = Capabilities::build(&declarations, &settings).expect("capabilities");
        let tools = ToolRegistry::builtin();
        register_tools(&tools, &guests, &capabilities);
        samples.push(started.elapsed());
        for guest in &guests {
            guest.guest.stop();
        }
    }
    let load_three = median(samples);

    println!("extensions (medians)");
    row("tool call through dispatch, native", native_call, "—");
    row(
        "tool call through dispatch, Rust extension",
        extension_call,
        "≤ 50 µs",
    );
    row(
        "load 3 extensions from cache (Rust x2, Python)",
        load_three,
        "≤ 200000 µs",
    );
    match binary_start(dir) {
        Some(start) => row(
            "server start to serving, 3 extensions cached",
            start,
            "≤ 500000 µs",
        ),
        None => println!("(set JUPYTER_MCP_SERVER_BIN to time the real binary's start)"),
    }
}

/// The real binary, from spawn to its "serving" log line, with three cached extensions.
fn binary_start(dir: &std::path::Path) -> Option<Duration> {
    use std::io::{BufRead, BufReader};
    let binary = std::env::var_os("JUPYTER_MCP_SERVER_BIN")?;
    let config = std::env::temp_dir().join(format!("jmcp-bench-{}.toml", std::process::id()));
    let mut text = format!("cache_dir = {:?}\n", cache_dir().display().to_string());
    for entry in extension_configs(dir) {
        text += &format!(
            "[[extension]]\npath = {:?}\n",
            entry.path.display().to_string()
        );
    }
    std::fs::write(&config, text).ok()?;
    let mut samples = Vec::new();
    for _ in 0..5 {
        let port = std::net::TcpListener::bind("127.0.0.1:0")
            .and_then(|l| l.local_addr())
            .ok()?
            .port();
        let started = Instant::now();
        let mut child = std::process::Command::new(&binary)
            .args(["start", "--jupyter-url", "http://127.0.0.1:9", "--config"])
            .arg(&config)
            .args([
                "--transport",
                "streamable-http",
                "--port",
                &port.to_string(),
            ])
            .args(["--mcp-token", "bench"])
            .stdin(std::process::Stdio::null())
            .stdout(std::process::Stdio::null())
            .stderr(std::process::Stdio::piped())
            .spawn()
            .ok()?;
        let stderr = child.stderr.take()?;
        let serving = BufReader::new(stderr)
            .lines()
            .map_while(Result::ok)
            .any(|line| line.contains("serving MCP"));
        let took = started.elapsed();
        let _ = child.kill();
        let _ = child.wait();
        if !serving {
            eprintln!("the server exited before serving");
            return None;
        }
        samples.push(took);
    }
    let _ = std::fs::remove_file(&config);
    Some(median(samples))
}

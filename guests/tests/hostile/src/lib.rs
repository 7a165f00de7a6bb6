//! A guest that misbehaves on purpose, for the host's containment tests. Its config says how
//! (`mode`: loop, memory, trap, panic, stack, deep, ungranted, sleep), whether it is critical
//! (`critical`, default true) and when: on `before_execute` for code containing `trigger`
//! (default `HOSTILE`), with `always = true` on every event, and whenever its one tool
//! (`<name>_run`, `-` as `_`) is called. Every other event is answered normally. It is an
//! extension too, named `name` (default `hostile-<mode>`).

wit_bindgen::generate!({ path: "../../../wit/v0.1.0", world: "extension-with-hooks" });

use exports::jupyter_mcp::extension::extension_api::{self, ExtensionIdentity};
use exports::jupyter_mcp::extension::hooks::Guest;
use jupyter_mcp::extension::types::{
    Capability, Content, HookEvent, ToolAnnotations, ToolResult, ToolSpec,
};

struct Hostile;

fn config() -> serde_json::Value {
    serde_json::from_str(&jupyter_mcp::extension::config::get_config()).unwrap_or_default()
}

// Recursion without end is the point: it must overflow the guest's stack.
#[inline(never)]
#[allow(unconditional_recursion)]
fn recurse(depth: u64) -> u64 {
    let local = [depth; 64];
    std::hint::black_box(&local);
    recurse(depth + 1) + local[7]
}

/// Small frames, so the wasm stack runs out before Rust's stack in linear memory does.
#[inline(never)]
fn deep(n: u64) -> u64 {
    if n == 0 {
        return 0;
    }
    let below = deep(std::hint::black_box(n - 1));
    std::hint::black_box(below) ^ n
}

fn mode() -> String {
    config()["mode"].as_str().unwrap_or_default().to_owned()
}

fn name() -> String {
    match config()["name"].as_str() {
        Some(name) => name.to_owned(),
        None => format!("hostile-{}", mode()),
    }
}

/// Does what `mode` says; the modes that end return what the guest answers.
fn misbehave() -> Result<Option<String>, String> {
    match mode().as_str() {
        "loop" => {
            let mut n: u64 = 0;
            loop {
                n = std::hint::black_box(n.wrapping_add(1));
            }
        }
        "memory" => {
            let mut hoard: Vec<Vec<u8>> = Vec::new();
            loop {
                hoard.push(vec![1; 1 << 20]);
                std::hint::black_box(&hoard);
            }
        }
        "trap" => core::arch::wasm32::unreachable(),
        "panic" => {
            println!("the hostile guest is about to panic");
            panic!("the hostile guest panics on purpose")
        }
        "stack" => Ok(Some(recurse(0).to_string())),
        "deep" => Ok(Some(deep(u64::MAX).to_string())),
        "ungranted" => match jupyter_mcp::extension::notebook::read_cells("") {
            Ok(cells) => Ok(Some(format!("{{\"cells\": {}}}", cells.len()))),
            Err(e) => Err(format!("read-cells was refused: {e:?}")),
        },
        // A wait in WASI (a monotonic-clock subscription and a poll): no CPU, no end.
        "sleep" => {
            eprintln!("the hostile guest {} goes to sleep", name());
            loop {
                std::thread::sleep(std::time::Duration::from_secs(3600));
            }
        }
        other => Err(format!("unknown mode {other:?}")),
    }
}

impl extension_api::Guest for Hostile {
    fn identity() -> ExtensionIdentity {
        ExtensionIdentity {
            name: name(),
            version: "0.1.0".into(),
        }
    }

    fn capabilities() -> Vec<Capability> {
        Vec::new()
    }

    fn tools() -> Vec<ToolSpec> {
        vec![ToolSpec {
            name: format!("{}_run", name().replace('-', "_")),
            description: "Misbehaves as the hostile guest's config says.".into(),
            input_schema: r#"{"type":"object","properties":{}}"#.into(),
            annotations: ToolAnnotations {
                title: None,
                read_only_hint: Some(true),
                destructive_hint: None,
                idempotent_hint: None,
                open_world_hint: None,
            },
            capability: None,
        }]
    }

    fn call_tool(_name: String, _arguments: String) -> Result<ToolResult, String> {
        let text = misbehave()?.unwrap_or_default();
        Ok(ToolResult {
            content: vec![Content::Text(text)],
            structured: None,
            is_error: false,
        })
    }
}

impl Guest for Hostile {
    fn propagate_errors() -> bool {
        config()["critical"].as_bool().unwrap_or(true)
    }

    fn on_event(event: HookEvent, _context: String) -> Result<Option<String>, String> {
        let config = config();
        let triggered = match event {
            _ if config["always"] == true => true,
            HookEvent::BeforeExecute(execute) => execute
                .code
                .contains(config["trigger"].as_str().unwrap_or("HOSTILE")),
            _ => false,
        };
        if !triggered {
            return Ok(None);
        }
        misbehave()
    }
}

export!(Hostile);

//! A guest that misbehaves on purpose, for the host's containment tests. Its config says how
//! (`mode`: loop, memory, trap, panic, stack, deep, ungranted), whether it is critical (`critical`,
//! default true) and when: on `before_execute` for code containing `trigger` (default
//! `HOSTILE`), or with `always = true` on every event. Every other event is answered normally.

wit_bindgen::generate!({ path: "../../../wit/v0.1.0", world: "hook-handler" });

use exports::jupyter_mcp::extension::hooks::Guest;
use jupyter_mcp::extension::types::HookEvent;

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
        match config["mode"].as_str().unwrap_or_default() {
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
            "panic" => panic!("the hostile guest panics on purpose"),
            "stack" => Ok(Some(recurse(0).to_string())),
            "deep" => Ok(Some(deep(u64::MAX).to_string())),
            "ungranted" => match jupyter_mcp::extension::notebook::read_cells("") {
                Ok(cells) => Ok(Some(format!("{{\"cells\": {}}}", cells.len()))),
                Err(e) => Err(format!("read-cells was refused: {e:?}")),
            },
            other => Err(format!("unknown mode {other:?}")),
        }
    }
}

export!(Hostile);

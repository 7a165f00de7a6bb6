//! What a guest may import, checked from the component's import section before anything is
//! compiled (reading it takes microseconds; compiling a 12 MB JavaScript guest takes a minute),
//! so a guest that needs something we lack is refused at once, with the import named.

use wasmtime::wasmparser::{Parser, Payload};

/// WASI 0.2 as linked by `add_to_linker_sync` (any 0.2.x matches: the linker resolves imports
/// by semver), and `wasi:http`'s client side (its requests are checked against the guest's
/// `allowed_hosts`), without the unstable interfaces or exports such as `cli/run`.
const WASI_0_2: &[(&str, &[&str])] = &[
    (
        "wasi:cli",
        &[
            "environment",
            "exit",
            "stdin",
            "stdout",
            "stderr",
            "terminal-input",
            "terminal-output",
            "terminal-stdin",
            "terminal-stdout",
            "terminal-stderr",
        ],
    ),
    ("wasi:clocks", &["monotonic-clock", "wall-clock"]),
    ("wasi:filesystem", &["types", "preopens"]),
    ("wasi:http", &["types", "outgoing-handler"]),
    ("wasi:io", &["error", "poll", "streams"]),
    ("wasi:random", &["random", "insecure", "insecure-seed"]),
    (
        "wasi:sockets",
        &[
            "network",
            "instance-network",
            "ip-name-lookup",
            "tcp",
            "tcp-create-socket",
            "udp",
            "udp-create-socket",
        ],
    ),
];

/// Our own interfaces, WIT `jupyter-mcp:extension@0.1.x`.
const EXTENSION_0_1: (&str, &[&str]) = (
    "jupyter-mcp:extension",
    &["types", "log", "config", "notebook"],
);

/// The names of the component's own imports (not those of components nested in it).
fn imports(bytes: &[u8]) -> Result<Vec<String>, String> {
    Ok(surface(bytes)?.0)
}

/// The names of the component's own exports, read without compiling it (so a start knows at
/// once whether a guest handles hooks).
pub fn exports(bytes: &[u8]) -> Result<Vec<String>, String> {
    Ok(surface(bytes)?.1)
}

/// The component's own imports and exports.
fn surface(bytes: &[u8]) -> Result<(Vec<String>, Vec<String>), String> {
    let mut names = Vec::new();
    let mut exports = Vec::new();
    let mut depth = 0usize;
    for payload in Parser::new(0).parse_all(bytes) {
        match payload.map_err(|e| format!("not a valid component: {e}"))? {
            Payload::ModuleSection { .. } | Payload::ComponentSection { .. } => depth += 1,
            Payload::End(_) => depth = depth.saturating_sub(1),
            Payload::ComponentImportSection(reader) if depth == 0 => {
                for import in reader {
                    let import = import.map_err(|e| format!("not a valid component: {e}"))?;
                    names.push(import.name.name.to_owned());
                }
            }
            Payload::ComponentExportSection(reader) if depth == 0 => {
                for export in reader {
                    let export = export.map_err(|e| format!("not a valid component: {e}"))?;
                    exports.push(export.name.name.to_owned());
                }
            }
            _ => {}
        }
    }
    Ok((names, exports))
}

/// Whether the host offers `name` (`namespace:package/interface@version`).
fn offered(name: &str) -> bool {
    let Some((path, version)) = name.split_once('@') else {
        return false;
    };
    let Some((package, interface)) = path.split_once('/') else {
        return false;
    };
    let matches = |(p, interfaces): &(&str, &[&str]), major_minor: &str| {
        *p == package && interfaces.contains(&interface) && version.starts_with(major_minor)
    };
    WASI_0_2.iter().any(|entry| matches(entry, "0.2.")) || matches(&EXTENSION_0_1, "0.1.")
}

/// Refuses a component importing anything the host does not offer, naming it and what is.
pub fn check(bytes: &[u8]) -> Result<(), String> {
    let missing: Vec<String> = imports(bytes)?
        .into_iter()
        .filter(|name| !offered(name))
        .collect();
    if missing.is_empty() {
        return Ok(());
    }
    let wasi: Vec<String> = WASI_0_2
        .iter()
        .map(|(package, interfaces)| format!("{package}/{{{}}}", interfaces.join(",")))
        .collect();
    let hint = "";
    Err(format!(
        "it imports {}, which this host does not offer{hint}; guests may import WASI 0.2.x \
         ({}) and {}/{{{}}}@0.1.x",
        missing.join(", "),
        wasi.join(", "),
        EXTENSION_0_1.0,
        EXTENSION_0_1.1.join(",")
    ))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn offered_interfaces_by_name_and_version() {
        assert!(offered("wasi:io/poll@0.2.0"));
        assert!(offered("wasi:cli/stderr@0.2.6"));
        assert!(offered("jupyter-mcp:extension/notebook@0.1.0"));
        assert!(offered("wasi:http/types@0.2.10"));
        assert!(offered("wasi:http/outgoing-handler@0.2.0"));
        assert!(
            !offered("wasi:http/incoming-handler@0.2.0"),
            "a guest serves no HTTP"
        );
        assert!(!offered("wasi:io/poll@0.3.0"));
        assert!(!offered("wasi:io/poll"));
        assert!(!offered("evil:escape/door@1.0.0"));
        assert!(!offered("jupyter-mcp:extension/notebook@0.2.0"));
    }
}

//! What a guest may import, checked from the component's import section before anything is
//! compiled (reading it takes microseconds; compiling a 12 MB JavaScript guest takes a minute),
//! so a guest that needs something we lack is refused at once, with the import named. A guest
//! built against a newer WIT than this host implements (by its imports, its exports or the API
//! version an SDK stamped into it) is refused the same way, naming both versions.

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

/// Our own package.
const EXTENSION: &str = "jupyter-mcp:extension";

/// Our own interfaces a guest may import, per WIT version (`major.minor.`), newest first.
const EXTENSION_VERSIONS: &[(&str, &[&str])] = &[
    (
        "0.3.",
        &[
            "types",
            "log",
            "config",
            "host-info",
            "notebook",
            "client",
            "secrets",
        ],
    ),
    ("0.2.", &["types", "log", "config", "host-info", "notebook"]),
    ("0.1.", &["types", "log", "config", "notebook"]),
];

/// The custom section in which an SDK stamps the WIT version a guest was built against (UTF-8,
/// e.g. `0.2.0`); read at load, so a guest newer than the host is refused with both versions
/// named even when its imports would link.
pub const API_VERSION_SECTION: &str = "jupyter-mcp:api-version";

/// The names of the component's own exports, read without compiling it (so a start knows at
/// once whether a guest handles hooks).
pub fn exports(bytes: &[u8]) -> Result<Vec<String>, String> {
    Ok(surface(bytes)?.exports)
}

/// What a component shows of itself without being compiled.
struct Surface {
    /// Its own imports (not those of components nested in it).
    imports: Vec<String>,
    /// Its own exports.
    exports: Vec<String>,
    /// The API versions stamped into it (at any depth: an SDK stamps its core module).
    stamped: Vec<String>,
}

fn surface(bytes: &[u8]) -> Result<Surface, String> {
    let mut names = Vec::new();
    let mut exports = Vec::new();
    let mut stamped = Vec::new();
    let mut depth = 0usize;
    for payload in Parser::new(0).parse_all(bytes) {
        match payload.map_err(|e| format!("not a valid component: {e}"))? {
            Payload::ModuleSection { .. } | Payload::ComponentSection { .. } => depth += 1,
            Payload::End(_) => depth = depth.saturating_sub(1),
            Payload::CustomSection(section) if section.name() == API_VERSION_SECTION => {
                stamped.push(String::from_utf8_lossy(section.data()).trim().to_owned());
            }
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
    Ok(Surface {
        imports: names,
        exports,
        stamped,
    })
}

/// `major.minor` of a version (`0.2` of `0.2.0`), comparable.
fn major_minor(version: &str) -> Option<(u64, u64)> {
    let mut parts = version.split(['.', '-', '+']);
    Some((parts.next()?.parse().ok()?, parts.next()?.parse().ok()?))
}

/// The newest WIT version the guest was built against, when it is newer than the host's
/// (`api`): from its imports and exports of our package, and its stamp.
fn newer_than(surface: &Surface, api: &str) -> Option<String> {
    let host = major_minor(api)?;
    let ours = surface
        .imports
        .iter()
        .chain(&surface.exports)
        .filter_map(|name| {
            let (path, version) = name.split_once('@')?;
            path.starts_with(&format!("{EXTENSION}/"))
                .then_some(version)
        });
    ours.chain(surface.stamped.iter().map(String::as_str))
        .filter(|v| major_minor(v).is_some_and(|v| v > host))
        .max_by_key(|v| major_minor(v))
        .map(str::to_owned)
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
    WASI_0_2.iter().any(|entry| matches(entry, "0.2."))
        || EXTENSION_VERSIONS
            .iter()
            .any(|(version, interfaces)| matches(&(EXTENSION, interfaces), version))
}

/// Refuses a component built against a newer WIT than `api` (the host's), or importing anything
/// the host does not offer, naming it and what is.
pub fn check(bytes: &[u8], api: &str) -> Result<(), String> {
    let surface = surface(bytes)?;
    if let Some(newer) = newer_than(&surface, api) {
        return Err(format!(
            "it was built against WIT {EXTENSION}@{newer}, newer than this server's API version \
             {api} (it also loads guests of older versions); upgrade jupyter-mcp-server to a \
             release that implements {newer}, or rebuild the guest against wit/v{api} (the SDK \
             release for {api})"
        ));
    }
    let missing: Vec<String> = surface
        .imports
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
    let ours: Vec<String> = EXTENSION_VERSIONS
        .iter()
        .map(|(version, interfaces)| format!("{EXTENSION}/{{{}}}@{version}x", interfaces.join(",")))
        .collect();
    Err(format!(
        "it imports {}, which this host does not offer; guests may import WASI 0.2.x \
         ({}) and {}",
        missing.join(", "),
        wasi.join(", "),
        ours.join(" or ")
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
        assert!(offered("jupyter-mcp:extension/notebook@0.2.0"));
        assert!(offered("jupyter-mcp:extension/host-info@0.2.0"));
        assert!(!offered("jupyter-mcp:extension/host-info@0.1.0"));
        assert!(offered("jupyter-mcp:extension/client@0.3.0"));
        assert!(offered("jupyter-mcp:extension/secrets@0.3.0"));
        assert!(!offered("jupyter-mcp:extension/client@0.2.0"));
        assert!(!offered("jupyter-mcp:extension/notebook@0.4.0"));
    }

    #[test]
    fn a_guest_newer_than_the_host_is_named_by_its_newest_version() {
        let surface = |imports: &[&str], exports: &[&str], stamped: &[&str]| Surface {
            imports: imports.iter().map(|s| s.to_string()).collect(),
            exports: exports.iter().map(|s| s.to_string()).collect(),
            stamped: stamped.iter().map(|s| s.to_string()).collect(),
        };
        let current = surface(
            &["jupyter-mcp:extension/notebook@0.2.0", "wasi:io/poll@0.3.0"],
            &["jupyter-mcp:extension/extension-api@0.2.0"],
            &["0.2.0"],
        );
        assert_eq!(
            newer_than(&current, "0.2.0"),
            None,
            "WASI's versions are not ours"
        );
        assert_eq!(
            newer_than(
                &surface(&[], &["jupyter-mcp:extension/hooks@0.3.0"], &[]),
                "0.2.0"
            ),
            Some("0.3.0".into())
        );
        assert_eq!(
            newer_than(
                &surface(&["jupyter-mcp:extension/log@0.1.0"], &[], &["0.10.1"]),
                "0.2.0"
            ),
            Some("0.10.1".into())
        );
        assert_eq!(
            newer_than(
                &surface(&["jupyter-mcp:extension/client@0.4.0"], &[], &[]),
                "0.3.0"
            ),
            Some("0.4.0".into())
        );
        // A patch release of the same minor version is no newer API.
        assert_eq!(newer_than(&surface(&[], &[], &["0.2.7"]), "0.2.0"), None);
    }
}

//! Whose log lines are ours. The program is several crates; `jupyter_mcp_server` in `RUST_LOG`
//! (as the README and the Python server's users write it) names all of them.

/// The crates of this program, as `tracing` names their targets.
pub const OUR_CRATES: [&str; 5] = [
    "jupyter_mcp_server",
    "server_core",
    "jupyter_client",
    "wasm_host",
    "notebook_format",
];

/// The logger a client is told a line came from: the program's name first, so a client that
/// filters on `jupyter_mcp_server` hears every crate of ours (`jupyter_mcp_server::server_core::…`).
pub fn logger_name(target: &str) -> String {
    if target.starts_with(OUR_CRATES[0]) {
        target.to_owned()
    } else {
        format!("{}::{target}", OUR_CRATES[0])
    }
}

/// `filter` with each `jupyter_mcp_server[=LEVEL]` directive applied to every crate of ours.
pub fn widen(filter: &str) -> String {
    let mut directives: Vec<String> = Vec::new();
    for directive in filter.split(',').map(str::trim).filter(|d| !d.is_empty()) {
        directives.push(directive.to_owned());
        let (target, level) = match directive.split_once('=') {
            Some((target, level)) => (target, Some(level)),
            None => (directive, None),
        };
        if target != OUR_CRATES[0] {
            continue;
        }
        for other in &OUR_CRATES[1..] {
            directives.push(match level {
                Some(level) => format!("{other}={level}"),
                None => (*other).to_owned(),
            });
        }
    }
    directives.join(",")
}

#[cfg(test)]
mod tests {
    use super::widen;

    #[test]
    fn a_clients_logger_name_starts_with_the_programs() {
        assert_eq!(
            super::logger_name("server_core::domain::notebooks::open"),
            "jupyter_mcp_server::server_core::domain::notebooks::open"
        );
        assert_eq!(
            super::logger_name("jupyter_mcp_server::mcp"),
            "jupyter_mcp_server::mcp"
        );
    }

    #[test]
    fn our_name_covers_every_crate_of_ours() {
        assert_eq!(
            widen("jupyter_mcp_server=debug,warn"),
            "jupyter_mcp_server=debug,server_core=debug,jupyter_client=debug,wasm_host=debug,\
             notebook_format=debug,warn"
        );
        assert_eq!(widen("rmcp=trace"), "rmcp=trace");
        assert_eq!(
            widen("jupyter_mcp_server"),
            "jupyter_mcp_server,server_core,jupyter_client,wasm_host,notebook_format"
        );
    }
}

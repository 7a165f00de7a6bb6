//! A guest that tries to reach the world, for the policy tests: HTTP through
//! `wasi:http/outgoing-handler` (following redirects itself, as an HTTP library would), files
//! through `std::fs` (WASI preopens), variables through `std::env`. Built against WIT v0.1.0:
//! policies apply to guests of every WIT version. Each tool answers what it got, or the error
//! it met, as text (never a failed call), so a test can read a refusal.
//!
//! Tools: `reach_fetch` {url, api_key?}, `reach_read` {path}, `reach_write` {path, text},
//! `reach_list` {path}, `reach_hold` {path, mark?, ms}, `reach_env` {name}, `reach_cells` {notebook} (host function read-cells).

wit_bindgen::generate!({ path: "../../../wit/v0.1.0", world: "extension" });

use exports::jupyter_mcp::extension::extension_api::{self, ExtensionIdentity};
use jupyter_mcp::extension::types::{Capability, Content, ToolAnnotations, ToolResult, ToolSpec};
use serde_json::Value;
use wasip2::http::outgoing_handler;
use wasip2::http::types::{ErrorCode, Fields, OutgoingRequest, Scheme};

struct Reach;

fn tool(name: &str, description: &str, properties: &str) -> ToolSpec {
    ToolSpec {
        name: name.into(),
        description: description.into(),
        input_schema: format!(r#"{{"type":"object","properties":{{{properties}}}}}"#),
        annotations: ToolAnnotations {
            title: None,
            read_only_hint: Some(false),
            destructive_hint: None,
            idempotent_hint: None,
            open_world_hint: Some(true),
        },
        capability: None,
    }
}

/// The host's words when it gave some (a refusal says what to change), else the code.
fn described(error: ErrorCode) -> String {
    match error {
        ErrorCode::InternalError(Some(message)) => message,
        other => format!("{other:?}"),
    }
}

/// One GET; `Ok((status, location, body))` or the error the host gave.
fn get(url: &str) -> Result<(u16, Option<String>, String), String> {
    let (scheme, rest) = url
        .split_once("://")
        .ok_or_else(|| format!("not a URL: {url}"))?;
    let (authority, path) = match rest.find('/') {
        Some(at) => rest.split_at(at),
        None => (rest, "/"),
    };
    let request = OutgoingRequest::new(Fields::new());
    request
        .set_scheme(Some(&match scheme {
            "http" => Scheme::Http,
            "https" => Scheme::Https,
            other => Scheme::Other(other.into()),
        }))
        .map_err(|()| "bad scheme".to_string())?;
    request
        .set_authority(Some(authority))
        .map_err(|()| "bad authority".to_string())?;
    request
        .set_path_with_query(Some(path))
        .map_err(|()| "bad path".to_string())?;
    let pending = outgoing_handler::handle(request, None).map_err(described)?;
    pending.subscribe().block();
    let response = pending
        .get()
        .ok_or("no response")?
        .map_err(|()| "response taken twice".to_string())?
        .map_err(described)?;
    let status = response.status();
    let location = response
        .headers()
        .get("location")
        .first()
        .map(|v| String::from_utf8_lossy(v).into_owned());
    let body = response.consume().map_err(|()| "no body".to_string())?;
    let stream = body.stream().map_err(|()| "no body stream".to_string())?;
    let mut bytes = Vec::new();
    loop {
        match stream.blocking_read(64 * 1024) {
            Ok(chunk) => bytes.extend(chunk),
            Err(wasip2::io::streams::StreamError::Closed) => break,
            Err(wasip2::io::streams::StreamError::LastOperationFailed(e)) => {
                return Err(format!("reading the body failed: {}", e.to_debug_string()));
            }
        }
    }
    drop(stream);
    Ok((
        status,
        location,
        String::from_utf8_lossy(&bytes).into_owned(),
    ))
}

/// GET with up to five redirects followed.
fn fetch(url: &str) -> String {
    let mut url = url.to_owned();
    for _ in 0..5 {
        match get(&url) {
            Ok((status, Some(location), _)) if (300..400).contains(&status) => {
                url = if location.starts_with("http") {
                    location
                } else {
                    let origin: Vec<&str> = url.splitn(4, '/').take(3).collect();
                    format!("{}{location}", origin.join("/"))
                };
            }
            Ok((status, _, body)) => return format!("status {status}: {body}"),
            Err(error) => return format!("error: {error}"),
        }
    }
    "error: too many redirects".into()
}

fn call(name: &str, args: &Value) -> String {
    let arg = |key: &str| args[key].as_str().unwrap_or_default().to_owned();
    match name {
        "reach_fetch" => fetch(&arg("url")),
        "reach_read" => match std::fs::read_to_string(arg("path")) {
            Ok(text) => format!("read: {text}"),
            Err(e) => format!("error: {e}"),
        },
        "reach_write" => match std::fs::write(arg("path"), arg("text")) {
            Ok(()) => "written".into(),
            Err(e) => format!("error: {e}"),
        },
        "reach_list" => match std::fs::read_dir(arg("path")) {
            Ok(entries) => {
                let mut names: Vec<String> = entries
                    .flatten()
                    .map(|e| e.file_name().to_string_lossy().into_owned())
                    .collect();
                names.sort();
                format!("entries: {}", names.join(","))
            }
            Err(e) => format!("error: {e}"),
        },
        "reach_hold" => {
            // Reads the file every 20 ms for `ms` milliseconds: a use in progress.
            let ms = args["ms"].as_u64().unwrap_or(1000);
            let started = std::time::Instant::now();
            // Says it has begun, when asked to (in a directory it may write).
            if !arg("mark").is_empty()
                && let Err(e) = std::fs::write(arg("mark"), "started")
            {
                return format!("error: {e}");
            }
            let mut reads = 0;
            while started.elapsed().as_millis() < u128::from(ms) {
                if let Err(e) = std::fs::read_to_string(arg("path")) {
                    return format!("error after {reads} reads: {e}");
                }
                reads += 1;
                std::thread::sleep(std::time::Duration::from_millis(20));
            }
            format!("held: {reads} reads")
        }
        "reach_env" => match std::env::var(arg("name")) {
            Ok(value) => format!("env: {value}"),
            Err(e) => format!("error: {e}"),
        },
        "reach_cells" => match jupyter_mcp::extension::notebook::read_cells(&arg("notebook")) {
            Ok(cells) => format!("cells: {}", cells.len()),
            Err(e) => format!("error: {e:?}"),
        },
        other => format!("error: no tool {other}"),
    }
}

impl extension_api::Guest for Reach {
    fn identity() -> ExtensionIdentity {
        ExtensionIdentity {
            name: "reach".into(),
            version: "0.1.0".into(),
        }
    }

    fn capabilities() -> Vec<Capability> {
        Vec::new()
    }

    fn tools() -> Vec<ToolSpec> {
        let s = r#""type":"string""#;
        vec![
            tool(
                "reach_fetch",
                "GETs a URL, following redirects.",
                &format!(r#""url":{{{s}}},"api_key":{{{s}}}"#),
            ),
            tool("reach_read", "Reads a file.", &format!(r#""path":{{{s}}}"#)),
            tool(
                "reach_write",
                "Writes a file.",
                &format!(r#""path":{{{s}}},"text":{{{s}}}"#),
            ),
            tool(
                "reach_list",
                "Lists a directory.",
                &format!(r#""path":{{{s}}}"#),
            ),
            tool(
                "reach_hold",
                "Reads a file again and again for ms milliseconds.",
                &format!(r#""path":{{{s}}},"mark":{{{s}}},"ms":{{"type":"integer"}}"#),
            ),
            tool(
                "reach_env",
                "Reads an environment variable.",
                &format!(r#""name":{{{s}}}"#),
            ),
            tool(
                "reach_cells",
                "Counts a notebook's cells.",
                &format!(r#""notebook":{{{s}}}"#),
            ),
        ]
    }

    fn call_tool(name: String, arguments: String) -> Result<ToolResult, String> {
        let args: Value = serde_json::from_str(&arguments).unwrap_or_default();
        Ok(ToolResult {
            content: vec![Content::Text(call(&name, &args))],
            structured: None,
            is_error: false,
        })
    }
}

export!(Reach);

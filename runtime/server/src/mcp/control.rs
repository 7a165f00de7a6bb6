//! The client side of the management routes: what the `connect` and `stop` subcommands send
//! to a running server over HTTP. Kept out of the server transport, which only answers them.

use http::Method;
use serde_json::{Value, json};

/// What the `connect` and `stop` subcommands send to a running server.
pub async fn remote_control(
    server_url: &url::Url,
    mcp_token: Option<&str>,
    method: Method,
    path: &str,
    body: Option<Value>,
) -> Result<Value, String> {
    let url = server_url.join(path).map_err(|e| e.to_string())?;
    let client = reqwest::Client::new();
    let mut request = client.request(method, url.clone());
    if let Some(token) = mcp_token {
        request = request.bearer_auth(token);
    }
    if let Some(body) = body {
        request = request.json(&body);
    }
    let response = request.send().await.map_err(|e| {
        format!(
            "cannot reach {url}: {}",
            jupyter_client::rest::error_chain(&e)
        )
    })?;
    let status = response.status();
    let text = response.text().await.unwrap_or_default();
    let value: Value = serde_json::from_str(&text).unwrap_or_else(|_| json!({ "body": text }));
    if status.is_success() {
        Ok(value)
    } else {
        Err(format!("{url} answered HTTP {status}: {value}"))
    }
}

/// The body of `POST /api/extensions`: the `[[extension]]` entry `extension add` describes, its
/// `--config-entry` lines read as TOML (so they are written as in the config file) and a local
/// path made absolute (the server does not know the caller's directory).
pub fn extension_entry(path: &str, config_entries: &[String]) -> Result<Value, String> {
    let path = if path.starts_with("oci://") {
        path.to_owned()
    } else {
        std::path::absolute(path)
            .map_err(|e| format!("cannot make {path} an absolute path: {e}"))?
            .display()
            .to_string()
    };
    let mut table: toml::Table = toml::from_str(&config_entries.join("\n")).map_err(|e| {
        format!(
            "the --config-entry lines are not TOML of an [[extension]] entry ({e}); write them \
             as in the config file, e.g. --config-entry 'grants = [\"read-cells\"]'"
        )
    })?;
    if table.contains_key("path") {
        return Err("give the path as the argument, not as a --config-entry".into());
    }
    table.insert("path".into(), toml::Value::String(path));
    serde_json::to_value(table).map_err(|e| e.to_string())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn config_entries_are_toml_lines_of_the_entry() {
        let body = extension_entry(
            "oci://127.0.0.1:5000/ext/hello:1",
            &[
                "grants = [\"read-cells\"]".into(),
                "limits.memory_mb = 64".into(),
                "config = { greeting = \"hi\" }".into(),
            ],
        )
        .unwrap();
        assert_eq!(body["path"], "oci://127.0.0.1:5000/ext/hello:1");
        assert_eq!(body["grants"][0], "read-cells");
        assert_eq!(body["limits"]["memory_mb"], 64);
        assert_eq!(body["config"]["greeting"], "hi");
        let relative = extension_entry("hello.wasm", &[]).unwrap();
        assert!(
            std::path::Path::new(relative["path"].as_str().unwrap()).is_absolute(),
            "{relative}"
        );
        assert!(extension_entry("a.wasm", &["grants = [".into()]).is_err());
        assert!(extension_entry("a.wasm", &["path = \"b.wasm\"".into()]).is_err());
    }
}

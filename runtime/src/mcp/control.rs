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
            crate::jupyter::rest::error_chain(&e)
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

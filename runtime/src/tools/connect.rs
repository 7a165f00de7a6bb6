//! `connect_to_jupyter`: point the server at another Jupyter Server without restarting it.

use std::sync::Arc;

use schemars::JsonSchema;
use serde::Deserialize;
use url::Url;

use super::{Tool, ToolContext, ToolError, ToolOutput, native};
use crate::jupyter::Jupyter;
use crate::jupyter::rest::JupyterRest;

fn default_provider() -> String {
    "jupyter".to_owned()
}

#[derive(Debug, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct ConnectArgs {
    /// Jupyter Server URL to connect to (e.g. 'http://localhost:8888').
    pub jupyter_url: String,
    /// Jupyter Server authentication token.
    #[serde(default)]
    pub jupyter_token: Option<String>,
    /// Which backend holds the notebook documents (only "jupyter" is supported).
    #[serde(default = "default_provider")]
    pub document_provider: String,
}

pub fn connect_to_jupyter() -> Arc<dyn Tool> {
    native(
        "connect_to_jupyter",
        "Connect to another Jupyter Server by URL and token, without restarting the MCP server. \
         The server is checked before it is used; kernels this server started on the previous \
         one are shut down.",
        false,
        run,
    )
}

/// Checks a Jupyter Server and makes it the one in use.
pub async fn connect(
    state: &crate::state::ServerState,
    url: &str,
    token: Option<String>,
) -> Result<String, ToolError> {
    let url = Url::parse(url)
        .ok()
        .filter(|u| matches!(u.scheme(), "http" | "https"))
        .ok_or_else(|| {
            ToolError::InvalidArguments(
                "the jupyter_url is not an http:// or https:// URL of a Jupyter Server".into(),
            )
        })?;
    let token =
        token.filter(|t| !matches!(t.trim().to_ascii_lowercase().as_str(), "" | "none" | "null"));
    let rest = JupyterRest::new(url.clone(), token.clone());
    let shown = rest.shown_url();
    rest.status().await.map_err(|e| {
        ToolError::Failed(format!("Failed to connect to Jupyter server {shown}: {e}"))
    })?;
    let previous = state.replace_jupyter(Jupyter::new(rest, state.hooks.clone()));
    // Notebooks in use belong to the previous server.
    state.notebooks.clear();
    tokio::spawn(async move { previous.shutdown().await });
    let auth = if token.is_some() {
        "Token-based"
    } else {
        "None (anonymous)"
    };
    Ok(format!(
        "Successfully connected to Jupyter server: {shown}\nAuthentication: {auth}"
    ))
}

async fn run(context: ToolContext, args: ConnectArgs) -> Result<ToolOutput, ToolError> {
    if args.document_provider != "jupyter" {
        return Err(ToolError::InvalidArguments(format!(
            "document_provider '{}' is not supported; use \"jupyter\"",
            args.document_provider
        )));
    }
    let message = connect(&context.state, &args.jupyter_url, args.jupyter_token).await?;
    let (first, rest) = message.split_once('\n').unwrap_or((&message, ""));
    Ok(ToolOutput::text(format!(
        "{first}\nDocumentProvider: {}\n{rest}",
        args.document_provider
    )))
}

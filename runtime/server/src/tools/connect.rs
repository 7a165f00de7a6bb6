//! `connect_to_jupyter`: point the server at another Jupyter Server without restarting it.

use std::sync::Arc;

use schemars::JsonSchema;
use serde::Deserialize;

use super::{Tool, ToolContext, ToolError, ToolOutput, ToolResult, declare};
use crate::tools::wire::Shape;

pub const NAME: &str = "connect_to_jupyter";

fn default_provider() -> String {
    "jupyter".to_owned()
}

#[derive(Debug, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct ConnectArgs {
    /// Jupyter Server URL to connect to (e.g. 'http://localhost:8888').
    pub jupyter_url: String,
    /// Jupyter Server authentication token.
    pub jupyter_token: Option<String>,
    /// Which backend holds the notebook documents (only "jupyter" is supported).
    #[serde(default = "default_provider")]
    pub document_provider: String,
}

pub fn connect_to_jupyter() -> Arc<dyn Tool> {
    declare(
        NAME,
        "Connect to another Jupyter Server by URL and token, without restarting the MCP server. \
         The server is checked before it is used; kernels this server started on the previous \
         one are shut down.",
    )
    .administers()
    .secret_arguments(super::CREDENTIAL_ARGUMENTS)
    .shape(Shape::Text)
    .run(run)
}

async fn run(context: ToolContext, args: ConnectArgs) -> ToolResult {
    if args.document_provider != "jupyter" {
        return Err(ToolError::InvalidArguments(
            format!(
                "document_provider '{}' is not supported; use \"jupyter\"",
                args.document_provider
            )
            .into(),
        ));
    }
    let message = context
        .domain
        .connect(&args.jupyter_url, args.jupyter_token)
        .await?;
    let (first, rest) = message.split_once('\n').unwrap_or((&message, ""));
    Ok(ToolOutput::text(format!(
        "{first}\nDocumentProvider: {}\n{rest}",
        args.document_provider
    )))
}

//! The core's catalog of what extensions serve, in MCP's types: its entries checked against them
//! when they join, listed as them, and its providers' answers and refusals turned into them.

use rmcp::ErrorData as McpError;
use rmcp::model::{
    GetPromptResult, JsonObject, Prompt, ReadResourceResult, Resource, ResourceTemplate,
};
use serde::de::DeserializeOwned;
use serde_json::{Value, json};
use server_core::catalog::{Kind, Listed, Provider, ServeError};

/// The catalog's check that an entry is what MCP lists for its kind.
pub fn fits(kind: Kind, item: &Listed) -> Result<(), String> {
    let item = Value::Object(item.clone());
    let fitted = match kind {
        Kind::Resource => serde_json::from_value::<Resource>(item).map(drop),
        Kind::Template => serde_json::from_value::<ResourceTemplate>(item).map(drop),
        Kind::Prompt => serde_json::from_value::<Prompt>(item).map(drop),
    };
    fitted.map_err(|e| e.to_string())
}

/// Entries as MCP's types. Each fit when it joined; one that does not now is left out, logged.
pub fn entries<T: DeserializeOwned>(listed: Vec<Listed>) -> impl Iterator<Item = T> {
    listed.into_iter().filter_map(|item| {
        serde_json::from_value(Value::Object(item))
            .inspect_err(|e| {
                tracing::error!("an extension's catalog entry no longer fits MCP: {e}")
            })
            .ok()
    })
}

/// Reads a resource an extension serves.
pub async fn read(provider: &dyn Provider, uri: String) -> Result<ReadResourceResult, McpError> {
    let mut answer = provider.read(uri).await.map_err(protocol_error)?;
    let contents = answer
        .get_mut("contents")
        .map(Value::take)
        .unwrap_or_default();
    answered(provider, contents).map(ReadResourceResult::new)
}

/// Renders a prompt an extension serves.
pub async fn prompt(
    provider: &dyn Provider,
    name: String,
    arguments: JsonObject,
) -> Result<GetPromptResult, McpError> {
    let answer = provider
        .prompt(name, arguments)
        .await
        .map_err(protocol_error)?;
    answered(provider, answer)
}

fn answered<T: DeserializeOwned>(provider: &dyn Provider, answer: Value) -> Result<T, McpError> {
    serde_json::from_value(answer).map_err(|e| {
        McpError::internal_error(
            format!(
                "extension '{}' failed: its answer does not fit MCP: {e}",
                provider.owner()
            ),
            None,
        )
    })
}

fn protocol_error(error: ServeError) -> McpError {
    match error {
        ServeError::NotFound { message, uri } => {
            McpError::resource_not_found(message, Some(json!({ "uri": uri })))
        }
        ServeError::Refused(message) => McpError::invalid_params(message, None),
        ServeError::Failed(message) => McpError::internal_error(message, None),
    }
}

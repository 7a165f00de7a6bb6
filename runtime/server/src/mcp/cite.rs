//! The core's one prompt, `jupyter_cite`: its declaration and its rendering (the text itself is
//! `resources::cite_text`).

use rmcp::ErrorData as McpError;
use rmcp::model::JsonObject;

use super::{McpServer, resources};
use server_core::domain::Domain;

/// The core's one prompt.
pub(super) const CITE_PROMPT: &str = "jupyter_cite";

pub(super) fn cite_prompt() -> rmcp::model::Prompt {
    serde_json::from_value(serde_json::json!({
        "name": CITE_PROMPT,
        "description": "Cite cells of a notebook in use (as they are now, unsaved edits included) \
            ahead of your instruction.",
        "arguments": [
            {"name": "prompt", "description": "User prompt for the cited cells", "required": true},
            {"name": "cell_indices", "description": "Cell indices to cite (0-based), e.g. '0,1,2', '0-2', '0-2,4' or '3-' (to the end)", "required": true},
            {"name": "notebook_name", "description": "Notebook to cite from (default: the current notebook)", "required": false}
        ]
    }))
    .expect("prompt JSON matches the rmcp model")
}

impl McpServer {
    pub(super) async fn cite(
        &self,
        domain: &Domain,
        arguments: Option<&JsonObject>,
    ) -> Result<rmcp::model::GetPromptResult, McpError> {
        let argument = |key: &str| {
            arguments
                .and_then(|a| a.get(key))
                .and_then(serde_json::Value::as_str)
                .unwrap_or_default()
                .to_owned()
        };
        let in_use = domain
            .notebooks
            .resolve(
                Some(&argument("notebook_name"))
                    .filter(|n| !n.is_empty())
                    .map(String::as_str),
            )
            .map_err(|e| McpError::invalid_params(e.to_string(), None))?;
        let notebook = in_use
            .document
            .read()
            .await
            .map_err(|e| McpError::internal_error(e.to_string(), None))?;
        let indices = resources::parse_cell_ranges(&argument("cell_indices"), notebook.cells.len())
            .map_err(|e| McpError::invalid_params(e, None))?;
        let text = resources::cite_text(&in_use.name, &notebook, &indices, &argument("prompt"));
        Ok(serde_json::from_value(serde_json::json!({
            "resultType": "complete",
            "messages": [{"role": "user", "content": {"type": "text", "text": text}}]
        }))
        .expect("prompt JSON matches the rmcp model"))
    }
}

//! MCP Apps (`io.modelcontextprotocol/ui`): a notebook output viewer the client renders beside a
//! tool result, so people see tables, charts and images rather than the text the model reads.
//!
//! Only for clients that declare the extension: for them the server declares it too, lists the
//! viewer (`ui://` resource, one HTML file compiled into the binary), points the output tools at it
//! (`_meta.ui.resourceUri`) and keeps the outputs' MIME bundles in `structuredContent.outputs`
//! beside `result`. Everyone else sees exactly what they saw before.

use rmcp::model::{ClientCapabilities, JsonObject, ReadResourceResult, Resource, ResourceContents};
use serde_json::{Value, json};

/// The extension's identifier.
pub const EXTENSION: &str = "io.modelcontextprotocol/ui";
/// The MIME type of an MCP App's HTML.
pub const MIME_TYPE: &str = "text/html;profile=mcp-app";
/// Where the output viewer is served.
pub const VIEWER_URI: &str = "ui://jupyter-mcp/output-viewer";
/// The viewer: one self-contained file, no network (see its header for what it draws).
const VIEWER_HTML: &str = include_str!("apps/viewer.html");

/// The tools whose results carry notebook outputs and point at the viewer.
pub fn shows_outputs(tool: &str) -> bool {
    matches!(
        tool,
        "execute_cell" | "execute_code" | "insert_execute_code_cell" | "read_cell"
    )
}

/// Whether a client declared the extension (and, if it lists the MIME types it renders, ours).
pub fn supported_by(capabilities: Option<&ClientCapabilities>) -> bool {
    let Some(settings) = capabilities
        .and_then(|c| c.extensions.as_ref())
        .and_then(|e| e.get(EXTENSION))
    else {
        return false;
    };
    match settings.get("mimeTypes").and_then(Value::as_array) {
        Some(types) => types.iter().any(|t| t.as_str() == Some(MIME_TYPE)),
        None => true,
    }
}

/// What the server declares under `capabilities.extensions`.
pub fn declaration() -> JsonObject {
    JsonObject::new()
}

/// The viewer as `resources/list` shows it.
pub fn viewer_resource() -> Resource {
    let mut resource = Resource::new(VIEWER_URI, "output-viewer").with_description(
        "Renders notebook outputs (HTML tables, images, SVG, Markdown, JSON, simple Plotly and \
         Vega-Lite charts) of execute_cell, execute_code, insert_execute_code_cell and read_cell.",
    );
    resource.mime_type = Some(MIME_TYPE.into());
    resource.title = Some("Jupyter output viewer".into());
    resource
}

/// `resources/read` of the viewer: its HTML and a CSP that allows no network at all.
pub fn read_viewer() -> ReadResourceResult {
    let mut contents = ResourceContents::text(VIEWER_HTML, VIEWER_URI).with_mime_type(MIME_TYPE);
    if let ResourceContents::TextResourceContents { meta, .. } = &mut contents {
        *meta = Some(
            serde_json::from_value(json!({
                "ui": { "csp": { "connectDomains": [], "resourceDomains": [] }, "prefersBorder": true }
            }))
            .expect("a JSON object"),
        );
    }
    ReadResourceResult::new(vec![contents])
}

/// Points a tool definition at the viewer.
pub fn link_tool(tool: &mut rmcp::model::Tool) {
    let meta = tool.meta.get_or_insert_with(Default::default);
    meta.0
        .insert("ui".into(), json!({ "resourceUri": VIEWER_URI }));
}

/// Shapes an output tool's result for the client: with the extension, `structuredContent` holds
/// the text the model reads as `result` beside the `outputs` the tool collected; without it, no
/// structured content, as before.
pub fn shape_result(result: &mut rmcp::model::CallToolResult, supported: bool) {
    let outputs = result.structured_content.take();
    if !supported {
        return;
    }
    let mut structured = match outputs {
        Some(Value::Object(object)) => object,
        _ => JsonObject::new(),
    };
    structured.insert(
        "result".into(),
        Value::String(crate::tools::wire::text_of(&result.content)),
    );
    result.structured_content = Some(Value::Object(structured));
}

#[cfg(test)]
mod tests {
    use super::*;

    fn caps(value: Value) -> ClientCapabilities {
        serde_json::from_value(value).unwrap()
    }

    #[test]
    fn only_clients_that_declare_the_extension_get_the_viewer() {
        assert!(!supported_by(None));
        assert!(!supported_by(Some(&caps(json!({})))));
        assert!(supported_by(Some(&caps(
            json!({"extensions": {EXTENSION: {}}})
        ))));
        assert!(supported_by(Some(&caps(
            json!({"extensions": {EXTENSION: {"mimeTypes": [MIME_TYPE]}}})
        ))));
        assert!(!supported_by(Some(&caps(
            json!({"extensions": {EXTENSION: {"mimeTypes": ["text/x-other"]}}})
        ))));
    }

    #[test]
    fn the_viewer_is_one_file_without_network() {
        assert!(VIEWER_HTML.starts_with("<!DOCTYPE html>"));
        for remote in [
            "<script src",
            "<link",
            "src=\"http",
            "fetch(",
            "XMLHttpRequest",
        ] {
            assert!(!VIEWER_HTML.contains(remote), "{remote}");
        }
    }

    #[test]
    fn results_keep_outputs_only_for_clients_with_the_extension() {
        let mut result =
            rmcp::model::CallToolResult::success(vec![rmcp::model::ContentBlock::text("42")]);
        result.structured_content = Some(json!({"outputs": [{"output_type": "stream"}]}));
        let mut without = result.clone();
        shape_result(&mut without, false);
        assert_eq!(without.structured_content, None);
        shape_result(&mut result, true);
        assert_eq!(
            result.structured_content,
            Some(json!({"outputs": [{"output_type": "stream"}], "result": "42"}))
        );
    }
}

//! MCP Apps (`io.modelcontextprotocol/ui`): a notebook output viewer the client renders beside a
//! tool result, so people see tables, charts and images rather than the text the model reads.
//!
//! Only for clients that declare the extension: for them the server declares it too, lists the
//! viewer (`ui://` resource, one HTML file compiled into the binary), points the output tools at it
//! (`_meta.ui.resourceUri`) and keeps the outputs' MIME bundles in `structuredContent.outputs`
//! beside `result`. Everyone else sees exactly what they saw before.

use std::sync::OnceLock;

use base64::Engine;
use rmcp::model::{ClientCapabilities, JsonObject, ReadResourceResult, Resource, ResourceContents};
use serde_json::{Value, json};

use crate::tools::wire;

/// The extension's identifier.
pub const EXTENSION: &str = "io.modelcontextprotocol/ui";
/// The MIME type of an MCP App's HTML.
pub const MIME_TYPE: &str = "text/html;profile=mcp-app";
/// Where the output viewer is served.
pub const VIEWER_URI: &str = "ui://jupyter-mcp/output-viewer";
/// The viewer's own code: one file, no network (see its header for what it draws).
const VIEWER_HTML: &str = include_str!("apps/viewer.html");
/// Where the vendored libraries go into the viewer.
const LIBRARIES_MARK: &str = "<!-- vendored libraries -->";
/// The libraries the viewer loads when an output needs them, as `apps/vendor/fetch` made them:
/// gzip-compressed minified JavaScript (licences and versions beside them, in `apps/vendor/`).
const LIBRARIES: [(&str, &[u8]); 6] = [
    ("katex", include_bytes!("apps/vendor/katex.js.gz")),
    ("plotly", include_bytes!("apps/vendor/plotly.js.gz")),
    ("vega", include_bytes!("apps/vendor/vega.js.gz")),
    ("vega-lite", include_bytes!("apps/vendor/vega-lite.js.gz")),
    ("vega-embed", include_bytes!("apps/vendor/vega-embed.js.gz")),
    (
        "vega-interpreter",
        include_bytes!("apps/vendor/vega-interpreter.js.gz"),
    ),
];

/// The viewer as served: its code with every library inside it, still compressed (base64 of the
/// gzip bytes in inert `<script type="application/gzip">` elements), so the one file stays about
/// 2.6 MB instead of 6.5 MB and the browser decompresses (`DecompressionStream`) and runs only
/// the libraries the outputs at hand need. Built once, on first read.
fn viewer_html() -> &'static str {
    static HTML: OnceLock<String> = OnceLock::new();
    HTML.get_or_init(|| {
        let engine = base64::engine::general_purpose::STANDARD;
        let libraries: String = LIBRARIES
            .iter()
            .map(|(name, gz)| {
                format!(
                    "<script type=\"application/gzip\" id=\"lib-{name}\">{}</script>\n",
                    engine.encode(gz)
                )
            })
            .collect();
        VIEWER_HTML.replacen(LIBRARIES_MARK, &libraries, 1)
    })
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
        "Renders notebook outputs (HTML tables, images, SVG, Markdown and LaTeX math, JSON, \
         Plotly figures, Vega and Vega-Lite charts, widgets in their current state) of \
         execute_cell, execute_code, insert_execute_code_cell and read_cell.",
    );
    resource.mime_type = Some(MIME_TYPE.into());
    resource.title = Some("Jupyter output viewer".into());
    resource
}

/// `resources/read` of the viewer: its HTML and a CSP that allows no network at all.
pub fn read_viewer() -> ReadResourceResult {
    let mut contents = ResourceContents::text(viewer_html(), VIEWER_URI).with_mime_type(MIME_TYPE);
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

/// Points a tool definition at the viewer (for the tools whose spec says they show outputs).
pub fn link_tool(tool: &mut rmcp::model::Tool) {
    let meta = tool.meta.get_or_insert_with(Default::default);
    meta.0
        .insert("ui".into(), json!({ "resourceUri": VIEWER_URI }));
}

/// Shapes an output tool's result for the client. With the extension, `structuredContent`
/// holds the text the model reads as `result` beside the `outputs` (MIME bundles) and widget
/// state the tool collected for the viewer. Without it, a tool of the Python server's gets its
/// answer in that server's shape (`wire::outputs_answer`, `kind` given), any other none.
pub fn shape_result(result: &mut rmcp::model::CallToolResult, supported: bool, kind: Option<&str>) {
    let bundles = result.structured_content.take();
    if !supported {
        result.structured_content =
            kind.map(|kind| Value::Object(wire::outputs_answer(kind, &result.content)));
        return;
    }
    let mut structured = match bundles {
        Some(Value::Object(object)) => object,
        _ => JsonObject::new(),
    };
    if let Some(kind) = kind {
        structured.insert("kind".into(), json!(kind));
    }
    structured.insert(
        "result".into(),
        Value::String(wire::text_of(&result.content)),
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
    fn every_library_is_inside_the_served_viewer() {
        let html = viewer_html();
        assert!(VIEWER_HTML.contains(LIBRARIES_MARK));
        assert!(!html.contains(LIBRARIES_MARK));
        for (name, gz) in LIBRARIES {
            // gzip's magic number: the files are what `fetch` wrote.
            assert_eq!(&gz[..2], [0x1f, 0x8b], "{name}");
            assert!(html.contains(&format!("id=\"lib-{name}\">H4sI")), "{name}");
        }
    }

    #[test]
    fn results_keep_outputs_only_for_clients_with_the_extension() {
        let mut result =
            rmcp::model::CallToolResult::success(vec![rmcp::model::ContentBlock::text("42")]);
        result.structured_content = Some(json!({"outputs": [{"output_type": "stream"}]}));
        let mut without = result.clone();
        let mut own = result.clone();
        shape_result(&mut own, false, None);
        assert_eq!(own.structured_content, None);
        shape_result(&mut without, false, Some("code.execute"));
        assert_eq!(
            without.structured_content,
            Some(
                json!({"kind": "code.execute", "result": ["42"], "outputs": ["42"], "count": 1, "images": 0})
            )
        );
        shape_result(&mut result, true, Some("code.execute"));
        assert_eq!(
            result.structured_content,
            Some(
                json!({"outputs": [{"output_type": "stream"}], "result": "42", "kind": "code.execute"})
            )
        );
    }
}

//! An extension's tool among the tools: a guest's tool (`wasm_host::GuestTool`, the call in host
//! terms) presented as a [`Tool`], its answer bounded and turned into MCP content as kernel
//! output is. The tool table takes it through `dispatch`'s side of `wasm_host::ToolTable`.

use std::sync::Arc;

use base64::Engine as _;
use rmcp::model::{ContentBlock as Content, JsonObject};
use serde_json::Value;

use super::outputs::{self, Rendered};
use super::{Tool, ToolContext, ToolError, ToolFuture, ToolOutput, ToolSpec};
use wasm_host::{AnswerContent, GuestTool, ToolAnswer};

/// The most structured content (JSON text) kept from one answer of a guest.
const MAX_STRUCTURED_BYTES: usize = 1 << 20;
/// The most image bytes kept from one answer of a guest (kernel outputs share a 16 MiB budget).
const MAX_GUEST_IMAGE_BYTES: usize = 16 << 20;

pub struct ExtensionTool {
    guest: Arc<GuestTool>,
    spec: ToolSpec,
}

impl ExtensionTool {
    pub fn new(guest: Arc<GuestTool>) -> Self {
        // A guest's schemas are made portable by the same rewrite as the core tools'.
        let portable = |schema: &JsonObject| {
            let mut schema = schema.clone();
            super::wire::portable(&mut schema);
            Arc::new(schema)
        };
        let spec = ToolSpec {
            name: guest.name.clone(),
            description: guest.description.clone(),
            input_schema: portable(&guest.input_schema),
            read_only: guest.read_only,
            // An extension's tool needs what its annotation says: reading or writing notebooks.
            scope: super::scope::Scope::from_read_only(guest.read_only),
            // A guest's tool may take credentials under these names too; hooks never see them.
            secret_arguments: super::CREDENTIAL_ARGUMENTS,
            capability: guest.capability.clone(),
            output_schema: guest.output_schema.as_deref().map(portable),
            ..ToolSpec::default()
        };
        ExtensionTool { guest, spec }
    }

    /// Turns the guest's answer into a tool result; `is-error` becomes a failure the agent sees.
    /// Bounded like kernel output: text by `--max-output-chars`, images and structured content
    /// by byte caps, each cut said in a note.
    fn output(&self, result: ToolAnswer, max_chars: usize) -> Result<ToolOutput, ToolError> {
        let mut image_bytes = 0;
        let mut dropped_images = 0;
        let mut links = Vec::new();
        let rendered: Vec<Rendered> = result
            .content
            .into_iter()
            .filter_map(|c| match c {
                AnswerContent::Text(text) => Some(Rendered::Text(text)),
                AnswerContent::ResourceLink(uri) => {
                    links.push(uri);
                    None
                }
                AnswerContent::Image { data, mime_type } => {
                    image_bytes += data.len();
                    if image_bytes > MAX_GUEST_IMAGE_BYTES {
                        dropped_images += 1;
                        return None;
                    }
                    Some(Rendered::Image {
                        data: base64::engine::general_purpose::STANDARD.encode(&data),
                        mime_type,
                    })
                }
            })
            .collect();
        let mut rendered = outputs::cut_text(
            rendered,
            max_chars,
            "The extension's whole answer is not kept; ask it for less.",
        );
        if dropped_images > 0 {
            rendered.push(Rendered::Text(format!(
                "[{dropped_images} image(s) left out: the images of one answer are limited to {} MiB]",
                MAX_GUEST_IMAGE_BYTES >> 20
            )));
        }
        let mut content = outputs::to_content(rendered);
        content.extend(links.into_iter().filter_map(|uri| {
            serde_json::from_value(
                serde_json::json!({"type": "resource_link", "uri": uri, "name": uri}),
            )
            .ok()
        }));
        if result.is_error {
            let text: Vec<&str> = content
                .iter()
                .filter_map(|c| c.as_text().map(|t| t.text.as_str()))
                .collect();
            return Err(ToolError::Failed(text.join("\n").into()));
        }
        let structured = match result.structured {
            None => None,
            // Refused before parsing: a huge answer costs no second copy.
            Some(text) if text.len() > MAX_STRUCTURED_BYTES => {
                content.push(Content::text(format!(
                    "[structured result left out: {} bytes, over the limit of {} MiB]",
                    text.len(),
                    MAX_STRUCTURED_BYTES >> 20
                )));
                None
            }
            Some(text) => match serde_json::from_str::<Value>(&text) {
                Ok(value @ Value::Object(_)) => Some(value),
                _ => {
                    return Err(ToolError::Failed(
                        format!(
                            "extension '{}' answered with structured output that is not a JSON \
                         object; its author should fix the tool '{}'",
                            self.guest.extension, self.guest.name
                        )
                        .into(),
                    ));
                }
            },
        };
        Ok(ToolOutput {
            structured,
            ..ToolOutput::content(content)
        })
    }
}

impl Tool for ExtensionTool {
    fn spec(&self) -> &ToolSpec {
        &self.spec
    }

    fn extension_name(&self) -> Option<&str> {
        Some(&self.guest.extension)
    }

    fn check_arguments(&self, arguments: JsonObject) -> Result<(), ToolError> {
        self.guest.check_arguments(&arguments)
    }

    fn call(&self, context: ToolContext, arguments: JsonObject) -> ToolFuture<'_> {
        let max_chars = context.domain.settings.output.max_chars;
        Box::pin(
            self.guest
                .call(arguments, move |answer| self.output(answer, max_chars)),
        )
    }
}

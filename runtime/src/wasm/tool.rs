//! An extension's tool, registered beside the native ones: listed, gated by its capability, and
//! called through the same dispatch (and so the same hooks). The guest runs the way a hook
//! handler does, on the caller's thread without holding up the async runtime.

use std::sync::Arc;
use std::time::{Duration, SystemTime};

use base64::Engine as _;
use opentelemetry::KeyValue;
use rmcp::model::{ContentBlock as Content, JsonObject};
use serde_json::Value;

use super::Loaded;
use super::guest::CallKind;
use super::manifest::ToolDeclaration;
use super::policy::Policy;
use super::slot::GuestSlot;
use crate::capabilities::Capabilities;
use crate::dispatch::ToolRegistry;
use crate::hooks::{CallScope, GuestUse};
use crate::tools::outputs::{self, Rendered};
use crate::tools::{Tool, ToolContext, ToolError, ToolFuture, ToolOutput, ToolSpec};

/// The most structured content (JSON text) kept from one answer of a guest.
const MAX_STRUCTURED_BYTES: usize = 1 << 20;
/// The most image bytes kept from one answer of a guest (kernel outputs share a 16 MiB budget).
const MAX_GUEST_IMAGE_BYTES: usize = 16 << 20;

/// A guest tool's answer, whatever WIT version the guest was built against.
pub struct ToolAnswer {
    pub content: Vec<AnswerContent>,
    /// JSON text, parsed (and bounded) here.
    pub structured: Option<String>,
    pub is_error: bool,
}

pub enum AnswerContent {
    Text(String),
    Image {
        data: Vec<u8>,
        mime_type: String,
    },
    /// A link to a resource, by URI (WIT 0.2.0 on).
    ResourceLink(String),
}

pub struct ExtensionTool {
    /// Its guest, which may still be loading when the tool is listed.
    guest: Arc<GuestSlot>,
    /// How long a call waits for a guest still loading: the guest's own limit for a tool call.
    wait: Duration,
    /// The extension's name (from its identity), for log lines and clash reports.
    pub extension: String,
    spec: ToolSpec,
}

impl ExtensionTool {
    /// Checks what the guest declared: a usable name and an object schema.
    pub fn new(
        guest: Arc<GuestSlot>,
        wait: Duration,
        extension: &str,
        spec: &ToolDeclaration,
    ) -> Result<Self, String> {
        let name = spec.name.clone();
        let valid_name = !name.is_empty()
            && name.len() <= 64
            && name
                .bytes()
                .all(|b| b.is_ascii_alphanumeric() || b == b'_' || b == b'-' || b == b'.');
        if !valid_name {
            return Err(format!(
                "its tool name {name:?} is not 1-64 characters of letters, digits, '_', '-' or '.'"
            ));
        }
        let schema = match serde_json::from_str::<Value>(&spec.input_schema) {
            Ok(Value::Object(schema)) if schema.get("type") == Some(&Value::from("object")) => {
                schema
            }
            _ => {
                return Err(format!(
                    "the input schema of its tool '{name}' is not a JSON object with \"type\": \
                     \"object\""
                ));
            }
        };
        let output_schema = match spec.output_schema.as_deref().map(serde_json::from_str) {
            None => None,
            Some(Ok(Value::Object(schema))) => Some(Arc::new(schema)),
            Some(_) => {
                return Err(format!(
                    "the output schema of its tool '{name}' is not a JSON object"
                ));
            }
        };
        Ok(ExtensionTool {
            guest,
            wait,
            extension: extension.to_owned(),
            spec: ToolSpec {
                name,
                description: spec.description.clone(),
                input_schema: Arc::new(schema),
                read_only: spec.read_only,
                capability: spec.capability.clone(),
                output_schema,
                ..ToolSpec::default()
            },
        })
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
            return Err(ToolError::Failed(text.join("\n")));
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
                    return Err(ToolError::Failed(format!(
                        "extension '{}' answered with structured output that is not a JSON \
                         object; its author should fix the tool '{}'",
                        self.extension, self.spec.name
                    )));
                }
            },
        };
        Ok(ToolOutput {
            structured,
            ..ToolOutput::content(content)
        })
    }
}

/// The checks the host makes before a guest sees arguments: required properties present and
/// top-level properties of the declared JSON type (no full JSON Schema validation).
fn check_against(schema: &JsonObject, arguments: &JsonObject) -> Result<(), ToolError> {
    let required = schema.get("required").and_then(Value::as_array);
    for name in required.into_iter().flatten().filter_map(Value::as_str) {
        if !arguments.contains_key(name) {
            return Err(ToolError::InvalidArguments(format!(
                "missing field '{name}'; see the tool's input schema"
            )));
        }
    }
    let properties = schema.get("properties").and_then(Value::as_object);
    for (name, value) in arguments {
        let Some(expected) = properties
            .and_then(|p| p.get(name))
            .and_then(|p| p.get("type"))
            .and_then(Value::as_str)
        else {
            continue;
        };
        let fits = match expected {
            "string" => value.is_string(),
            "integer" => value.is_i64() || value.is_u64(),
            "number" => value.is_number(),
            "boolean" => value.is_boolean(),
            "array" => value.is_array(),
            "object" => value.is_object(),
            "null" => value.is_null(),
            _ => true,
        };
        if !fits {
            return Err(ToolError::InvalidArguments(format!(
                "'{name}' must be of type {expected}, not {value}"
            )));
        }
    }
    Ok(())
}

impl Tool for ExtensionTool {
    fn spec(&self) -> &ToolSpec {
        &self.spec
    }

    fn extension_name(&self) -> Option<&str> {
        Some(&self.extension)
    }

    fn check_arguments(&self, arguments: JsonObject) -> Result<(), ToolError> {
        check_against(&self.spec.input_schema, &arguments)
    }

    fn call(&self, context: ToolContext, arguments: JsonObject) -> ToolFuture<'_> {
        let max_chars = context.domain.settings.output.max_chars;
        Box::pin(async move {
            check_against(&self.spec.input_schema, &arguments)?;
            let name = self.spec.name.clone();
            let arguments = Value::Object(arguments);
            let guest = self
                .guest
                .wait(self.wait)
                .await
                .map_err(ToolError::failed)?;
            let started = SystemTime::now();
            let shown = redacted(&arguments, &guest.policy());
            let text = arguments.to_string();
            let answer = guest
                .call(CallKind::Tool, move |api, store| {
                    api.call_tool(store, &name, &text)
                })
                .await
                .map_err(ToolError::failed);
            let outcome = match answer {
                Ok(Ok(result)) => self.output(result, max_chars),
                Ok(Err(message)) => Err(ToolError::Failed(format!(
                    "extension '{}' failed: {message}",
                    self.extension
                ))),
                Err(error) => Err(error),
            };
            let mut attributes = vec![
                KeyValue::new("extension.name", self.extension.clone()),
                KeyValue::new("tool.name", self.spec.name.clone()),
                KeyValue::new("tool.arguments", shown.to_string()),
                KeyValue::new("allowed", true),
            ];
            if let Err(error) = &outcome {
                attributes.push(KeyValue::new("error", true));
                attributes.push(KeyValue::new("error.message", error.to_string()));
            }
            GuestUse::ended("extension.tool_call", started, attributes)
                .record(CallScope::current().as_ref());
            outcome
        })
    }
}

/// The arguments with the values of names listed in `redact` replaced, at any depth (and in
/// the query of a URL given as a value).
fn redacted(value: &Value, policy: &Policy) -> Value {
    match value {
        Value::Object(map) => Value::Object(
            map.iter()
                .map(|(name, v)| {
                    let shown = if policy.redacts(name) {
                        Value::from("[redacted]")
                    } else {
                        redacted(v, policy)
                    };
                    (name.clone(), shown)
                })
                .collect(),
        ),
        Value::Array(items) => Value::Array(items.iter().map(|v| redacted(v, policy)).collect()),
        Value::String(text) => Value::String(policy.redact_url(text)),
        other => other.clone(),
    }
}

/// Adds the extensions' tools to the registry, in load order. A name already taken (by a core
/// tool or an earlier extension) is refused and logged; the tool that has it keeps it.
pub fn register_tools(registry: &ToolRegistry, loaded: &[Loaded], capabilities: &Capabilities) {
    for tool in loaded.iter().flat_map(|l| l.tools.iter()) {
        register(registry, tool.clone(), capabilities);
    }
}

/// Adds one extension tool to the registry, or logs why not.
pub fn register(registry: &ToolRegistry, tool: Arc<ExtensionTool>, capabilities: &Capabilities) {
    let name = tool.spec.name.clone();
    let extension = tool.extension.clone();
    if let Some(needed) = &tool.spec.capability
        && capabilities.get(needed).is_none()
    {
        tracing::warn!(
            extension,
            "tool '{name}' needs capability '{needed}', which nothing declares; it stays hidden \
             until an extension declares it"
        );
    }
    if let Err(taken) = registry.add(tool as Arc<dyn Tool>) {
        tracing::error!(
            extension,
            "refused tool '{name}' of extension '{extension}': {taken}; rename the extension's \
             tool"
        );
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    fn object(value: Value) -> JsonObject {
        value.as_object().unwrap().clone()
    }

    #[test]
    fn arguments_are_checked_against_the_declared_schema() {
        let schema = object(json!({"type": "object", "required": ["name"],
            "properties": {"name": {"type": "string"}, "count": {"type": "integer"}}}));
        assert!(check_against(&schema, &object(json!({"name": "a", "count": 2}))).is_ok());
        let missing = check_against(&schema, &object(json!({"count": 2}))).unwrap_err();
        assert!(
            missing.to_string().contains("missing field 'name'"),
            "{missing}"
        );
        let wrong = check_against(&schema, &object(json!({"name": 1}))).unwrap_err();
        assert!(
            wrong.to_string().contains("'name' must be of type string"),
            "{wrong}"
        );
        // Properties the schema does not describe are the guest's business.
        assert!(check_against(&schema, &object(json!({"name": "a", "extra": []}))).is_ok());
    }
}

//! The fixtures the official MCP conformance suite calls (tools, resources, prompts named in its
//! server requirements), so that its checks exercise our transport and handler for real.
//!
//! Compiled only with the `conformance-fixtures` feature, which the test setup enables for a
//! separate binary; the shipped binary never contains any of this.

use std::sync::Arc;
use std::time::Duration;

use rmcp::ErrorData as McpError;
use rmcp::model::{
    CallToolResponse, ClientCapabilities, CompleteResult, ContentBlock, GetPromptResult,
    JsonObject, Prompt, ReadResourceResult, Resource, ResourceContents, ResourceTemplate,
};
use schemars::JsonSchema;
use serde::Deserialize;
use serde_json::{Value, json};

use crate::tools::{
    TaskSupport, Tool, ToolContext, ToolError, ToolFuture, ToolOutput, ToolSpec, declare,
};

/// A 1x1 PNG.
const PNG: &str = "iVBORw0KGgoAAAANSUhEUgAAAAEAAAABCAYAAAAfFcSJAAAADUlEQVR42mP8z8DwHwAFBQIAX8jx0gAAAABJRU5ErkJggg==";
/// 8 samples of silence as a WAV file.
const WAV: &str =
    "UklGRjQAAABXQVZFZm10IBAAAAABAAEAQB8AAEAfAAABAAgAZGF0YRAAAACAgICAgICAgICAgICAgICA";

#[derive(Deserialize, JsonSchema)]
struct NoArgs {}

#[derive(Deserialize, JsonSchema)]
struct SlowArgs {
    /// Seconds to sleep before answering.
    #[serde(default)]
    seconds: f64,
    /// Echoed in the answer.
    #[serde(default)]
    label: String,
}

#[derive(Deserialize, JsonSchema)]
struct GreetArgs {
    /// Who to greet.
    name: String,
}

fn from_json<T: serde::de::DeserializeOwned>(value: Value) -> T {
    serde_json::from_value(value).expect("fixture JSON matches the rmcp model")
}

fn content(items: Vec<ContentBlock>) -> ToolOutput {
    ToolOutput::content(items)
}

fn embedded(uri: &str, mime: &str, text: &str) -> ContentBlock {
    ContentBlock::resource(ResourceContents::text(text, uri).with_mime_type(mime))
}

/// A tool whose input schema is given as JSON rather than derived.
struct RawSchemaTool(ToolSpec);

impl Tool for RawSchemaTool {
    fn spec(&self) -> &ToolSpec {
        &self.0
    }

    fn call(&self, _context: ToolContext, arguments: JsonObject) -> ToolFuture<'_> {
        Box::pin(async move { Ok(ToolOutput::text(Value::Object(arguments).to_string())) })
    }
}

pub fn tools() -> Vec<Arc<dyn Tool>> {
    let text = |name: &str, reply: &'static str| {
        declare(name, "Conformance fixture.")
            .read_only()
            .run(move |_c: ToolContext, _a: NoArgs| async move { Ok(ToolOutput::text(reply)) })
    };
    // A tool answering with fixed content blocks.
    let blocks = |name: &str, make: fn() -> Vec<ContentBlock>| {
        declare(name, "Conformance fixture.")
            .read_only()
            .run(move |_c: ToolContext, _a: NoArgs| async move { Ok(content(make())) })
    };
    let schema: JsonObject = from_json(json!({
        "$schema": "https://json-schema.org/draft/2020-12/schema",
        "type": "object",
        "$defs": {"address": {"$anchor": "addressDef", "type": "object",
            "properties": {"street": {"type": "string"}, "city": {"type": "string"}}}},
        "properties": {"name": {"type": "string"}, "address": {"$ref": "#/$defs/address"},
            "contactMethod": {"type": "string", "enum": ["phone", "email"]},
            "phone": {"type": "string"}, "email": {"type": "string"}},
        "allOf": [{"anyOf": [{"required": ["phone"]}, {"required": ["email"]}]}],
        "if": {"properties": {"contactMethod": {"const": "phone"}}, "required": ["contactMethod"]},
        "then": {"required": ["phone"]},
        "else": {"required": ["email"]},
        "additionalProperties": false
    }));
    vec![
        text(
            "test_simple_text",
            "This is a simple text response for testing.",
        ),
        declare(
            "test_logging_tool",
            "Conformance fixture: logs one line through the server's logging.",
        )
        .read_only()
        .run(|_c: ToolContext, _a: NoArgs| async {
            tracing::info!("test_logging_tool ran");
            Ok(ToolOutput::text("Logged one line at info."))
        }),
        text("test_streaming_elicitation", "No elicitation needed."),
        blocks("test_image_content", || {
            vec![ContentBlock::image(PNG, "image/png")]
        }),
        blocks("test_audio_content", || {
            vec![ContentBlock::audio(WAV, "audio/wav")]
        }),
        blocks("test_embedded_resource", || {
            vec![embedded(
                "test://embedded-resource",
                "text/plain",
                "This is an embedded resource content.",
            )]
        }),
        blocks("test_multiple_content_types", || {
            vec![
                ContentBlock::text("Multiple content types test:"),
                ContentBlock::image(PNG, "image/png"),
                embedded(
                    "test://mixed-content-resource",
                    "application/json",
                    r#"{"test":"data","value":123}"#,
                ),
            ]
        }),
        declare("test_error_handling", "Conformance fixture.")
            .read_only()
            .run(|_c: ToolContext, _a: NoArgs| async {
                Err(ToolError::Failed(
                    "This tool intentionally returns an error for testing".into(),
                ))
            }),
        declare("test_tool_with_progress", "Conformance fixture.")
            .read_only()
            .run(|c: ToolContext, _a: NoArgs| async move {
                if let Some(report) = &c.progress {
                    for step in [0.0, 50.0, 100.0] {
                        report(step, Some(100.0), format!("{step}%"));
                        tokio::time::sleep(Duration::from_millis(50)).await;
                    }
                }
                Ok(ToolOutput::text("Progress test completed"))
            }),
        declare(
            "slow_compute",
            "Conformance fixture: sleeps `seconds` (cancellable), then answers.",
        )
        .read_only()
        .tasks(TaskSupport::Optional)
        .run(|c: ToolContext, a: SlowArgs| async move {
            tokio::select! {
                _ = tokio::time::sleep(crate::tools::seconds(a.seconds)) => {}
                _ = c.cancel.cancelled() => {
                    return Err(ToolError::Failed("cancelled".into()));
                }
            }
            Ok(ToolOutput::text(format!(
                "Computed '{}' after {}s",
                a.label, a.seconds
            )))
        }),
        declare(
            "failing_job",
            "Conformance fixture: fails as a tool after a second.",
        )
        .read_only()
        .tasks(TaskSupport::Required)
        .run(|_c: ToolContext, _a: NoArgs| async {
            tokio::time::sleep(Duration::from_secs(1)).await;
            Err::<ToolOutput, _>(ToolError::Failed(
                "the job failed, as it always does".into(),
            ))
        }),
        declare("protocol_error_job", "Conformance fixture.")
            .read_only()
            .tasks(TaskSupport::Optional)
            .run(|_c: ToolContext, _a: NoArgs| async {
                Ok(ToolOutput::text("unreachable: fails before running"))
            }),
        declare("greet", "Conformance fixture.").read_only().run(
            |_c: ToolContext, a: GreetArgs| async move {
                Ok(ToolOutput::text(format!("Hello, {}!", a.name)))
            },
        ),
        Arc::new(RawSchemaTool(ToolSpec {
            name: "json_schema_2020_12_tool".into(),
            description: "Tool with JSON Schema 2020-12 features".into(),
            input_schema: Arc::new(schema),
            read_only: true,
            ..ToolSpec::default()
        })),
        text("test_missing_capability", "unreachable: intercepted"),
        text("test_trigger_tool_change", "unreachable: intercepted"),
        declare(
            "test_tool_with_logging",
            "Conformance fixture: three log lines through the server's logging, 50 ms apart.",
        )
        .read_only()
        .run(|_c: ToolContext, _a: NoArgs| async {
            for line in [
                "Tool execution started",
                "Tool processing data",
                "Tool execution completed",
            ] {
                tracing::info!("{line}");
                tokio::time::sleep(Duration::from_millis(50)).await;
            }
            Ok(ToolOutput::text("Logging test completed"))
        }),
    ]
}

/// A prompt that comes and goes with `test_trigger_prompt_change`, served as an extension's.
struct DynamicPrompt;

impl server_core::catalog::Provider for DynamicPrompt {
    fn owner(&self) -> &str {
        "conformance-fixtures"
    }

    fn read(&self, uri: String) -> server_core::catalog::CatalogFuture<'_, Value> {
        Box::pin(async move {
            Err(server_core::catalog::ServeError::NotFound {
                message: format!("no resource {uri}"),
                uri,
            })
        })
    }

    fn prompt(
        &self,
        _name: String,
        _arguments: JsonObject,
    ) -> server_core::catalog::CatalogFuture<'_, Value> {
        Box::pin(async {
            Ok(json!({"messages": [
                {"role": "user", "content": {"type": "text", "text": "here"}}
            ]}))
        })
    }
}

/// Fixture tools whose answer is a protocol-level behaviour rather than a tool result.
pub fn intercept_call(
    name: &str,
    tools: &crate::dispatch::ToolRegistry,
    catalog: &server_core::catalog::Catalog,
) -> Option<Result<CallToolResponse, McpError>> {
    match name {
        // Changes the prompt list, as an extension becoming ready does.
        "test_trigger_prompt_change" => {
            const DYNAMIC: &str = "test_dynamic_prompt";
            if catalog.prompt_provider(DYNAMIC).is_some() {
                catalog.remove_owner("conformance-fixtures");
            } else {
                let prompt = json!({ "name": DYNAMIC, "description": "Comes and goes." });
                let prompt = prompt.as_object().cloned().unwrap_or_default();
                let added = catalog.add_prompt(prompt, Arc::new(DynamicPrompt));
                debug_assert!(added.is_ok());
            }
            Some(Ok(CallToolResponse::from(
                rmcp::model::CallToolResult::success(vec![rmcp::model::ContentBlock::text(
                    "the prompt list changed",
                )]),
            )))
        }
        // Changes the tool list, as an extension becoming ready does.
        "test_trigger_tool_change" => {
            const DYNAMIC: &str = "test_dynamic_tool";
            if !tools.remove(DYNAMIC) {
                let added = tools.add(
                    declare(
                        DYNAMIC,
                        "Conformance fixture: comes and goes with test_trigger_tool_change.",
                    )
                    .read_only()
                    .run(|_c: ToolContext, _a: NoArgs| async { Ok(ToolOutput::text("here")) }),
                );
                debug_assert!(added.is_ok());
            }
            Some(Ok(CallToolResponse::from(
                rmcp::model::CallToolResult::success(vec![rmcp::model::ContentBlock::text(
                    "the tool list changed",
                )]),
            )))
        }
        "test_missing_capability" => {
            let sampling: ClientCapabilities = from_json(json!({"sampling": {}}));
            Some(Err(McpError::missing_required_client_capability(sampling)))
        }
        _ => None,
    }
}

/// The protocol-level failure of `protocol_error_job`, which a task reports as `failed`.
pub fn task_protocol_error(tool: &str) -> Option<McpError> {
    (tool == "protocol_error_job")
        .then(|| McpError::internal_error("protocol_error_job always fails", None))
}

pub fn resources() -> Vec<Resource> {
    vec![
        Resource::new("test://static-text", "static-text").with_description("Static text fixture"),
        Resource::new("test://static-binary", "static-binary")
            .with_description("Static PNG fixture"),
    ]
}

pub fn resource_templates() -> Vec<ResourceTemplate> {
    vec![ResourceTemplate::new(
        "test://template/{id}/data",
        "template-data",
    )]
}

pub fn read_resource(uri: &str) -> Option<ReadResourceResult> {
    let contents = if uri == "test://static-text" {
        json!({"uri": uri, "mimeType": "text/plain", "text": "This is the content of the static text resource."})
    } else if uri == "test://static-binary" {
        json!({"uri": uri, "mimeType": "image/png", "blob": PNG})
    } else if let Some(id) = uri
        .strip_prefix("test://template/")
        .and_then(|r| r.strip_suffix("/data"))
    {
        let text = json!({"id": id, "templateTest": true, "data": format!("Data for ID: {id}")})
            .to_string();
        json!({"uri": uri, "mimeType": "application/json", "text": text})
    } else {
        return None;
    };
    Some(from_json(
        json!({"resultType": "complete", "contents": [contents]}),
    ))
}

pub fn prompts() -> Vec<Prompt> {
    from_json(json!([
        {"name": "test_simple_prompt", "description": "A prompt without arguments"},
        {"name": "test_prompt_with_arguments", "description": "A prompt with two arguments",
         "arguments": [{"name": "arg1", "description": "First", "required": true},
                       {"name": "arg2", "description": "Second", "required": true}]},
        {"name": "test_prompt_with_embedded_resource", "description": "A prompt embedding a resource",
         "arguments": [{"name": "resourceUri", "description": "URI to embed", "required": true}]},
        {"name": "test_prompt_with_image", "description": "A prompt with an image"}
    ]))
}

pub fn get_prompt(name: &str, arguments: Option<&JsonObject>) -> Option<GetPromptResult> {
    let arg = |key: &str| {
        arguments
            .and_then(|a| a.get(key))
            .and_then(Value::as_str)
            .unwrap_or_default()
            .to_owned()
    };
    let user_text =
        |text: String| json!({"role": "user", "content": {"type": "text", "text": text}});
    let messages = match name {
        "test_simple_prompt" => json!([user_text("This is a simple prompt for testing.".into())]),
        "test_prompt_with_arguments" => json!([user_text(format!(
            "Prompt with arguments: arg1='{}', arg2='{}'",
            arg("arg1"),
            arg("arg2")
        ))]),
        "test_prompt_with_embedded_resource" => json!([
            {"role": "user", "content": {"type": "resource", "resource": {
                "uri": arg("resourceUri"), "mimeType": "text/plain",
                "text": "Embedded resource content for testing."}}},
            user_text("Please process the embedded resource above.".into())
        ]),
        "test_prompt_with_image" => json!([
            {"role": "user", "content": {"type": "image", "data": PNG, "mimeType": "image/png"}},
            user_text("Please analyze the image above.".into())
        ]),
        _ => return None,
    };
    Some(from_json(
        json!({"resultType": "complete", "messages": messages}),
    ))
}

pub fn complete() -> CompleteResult {
    from_json(json!({"resultType": "complete", "completion": {"values": []}}))
}

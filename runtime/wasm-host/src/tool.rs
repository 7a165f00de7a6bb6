//! An extension's tool in host terms: what the guest declared (checked), the call into the guest
//! with its argument check and its span, and what this layer needs of the tool table. The layer
//! that owns the table (dispatch) makes a `GuestTool` one of its tools, so the tool is listed,
//! gated by its capability and called through the same dispatch and hooks as a native one. The
//! guest runs the way a hook handler does, on the caller's thread without holding up the async
//! runtime.

use std::sync::Arc;
use std::time::{Duration, SystemTime};

use opentelemetry::KeyValue;
use serde_json::{Map, Value};

use super::answers::ToolAnswer;
use super::distribution::manifest::{Manifest, ToolDeclaration};
use super::guest::CallKind;
use super::policy::Policy;
use super::slot::GuestSlot;
use server_core::domain::Error;
use server_core::extensions::ExtensionConfig;
use server_core::hooks::{CallScope, GuestUse};

/// A JSON object: a tool's schema or its arguments.
pub type JsonObject = Map<String, Value>;

/// An extension's tool as its guest declared it.
pub struct GuestTool {
    /// Its guest, which may still be loading when the tool is listed.
    guest: Arc<GuestSlot>,
    /// How long a call waits for a guest still loading: the guest's own limit for a tool call.
    wait: Duration,
    /// The extension's name (from its identity), for log lines and clash reports.
    pub extension: String,
    /// What it declared, checked by [`GuestTool::new`].
    pub name: String,
    pub input_schema: Arc<JsonObject>,
    pub output_schema: Option<Arc<JsonObject>>,
    pub description: String,
    pub capability: Option<String>,
    pub read_only: bool,
}

impl GuestTool {
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
        Ok(GuestTool {
            guest,
            wait,
            extension: extension.to_owned(),
            name,
            input_schema: Arc::new(schema),
            output_schema,
            description: spec.description.clone(),
            capability: spec.capability.clone(),
            read_only: spec.read_only,
        })
    }

    /// The checks the host makes before the guest sees arguments.
    pub fn check_arguments(&self, arguments: &JsonObject) -> Result<(), Error> {
        check_against(&self.input_schema, arguments)
    }

    /// Calls the guest's tool once the guest is ready; `shape` turns its answer into the
    /// caller's result (an `is-error` answer or a bad one into a failure). The call is recorded
    /// as a use of the extension, its arguments redacted by the current policy.
    pub async fn call<T>(
        &self,
        arguments: JsonObject,
        shape: impl FnOnce(ToolAnswer) -> Result<T, Error>,
    ) -> Result<T, Error> {
        check_against(&self.input_schema, &arguments)?;
        let name = self.name.clone();
        let arguments = Value::Object(arguments);
        let guest = self.guest.wait(self.wait).await.map_err(Error::failed)?;
        let started = SystemTime::now();
        let shown = redacted(&arguments, &guest.policy());
        let text = arguments.to_string();
        let answer = guest
            .call(CallKind::Tool, move |api, store| {
                api.call_tool(store, &name, &text)
            })
            .await
            .map_err(Error::failed);
        let outcome = match answer {
            Ok(Ok(result)) => shape(result),
            Ok(Err(message)) => Err(Error::Failed(
                format!(
                    "extension '{}' failed: {}",
                    self.extension,
                    guest.redact(&message)
                )
                .into(),
            )),
            Err(error) => Err(error),
        };
        let mut attributes = vec![
            KeyValue::new("extension.name", self.extension.clone()),
            KeyValue::new("tool.name", self.name.clone()),
            KeyValue::new("tool.arguments", shown.to_string()),
            KeyValue::new("allowed", true),
        ];
        if let Err(error) = &outcome {
            attributes.push(KeyValue::new("error", true));
            attributes.push(KeyValue::new("error.message", error.message().to_string()));
        }
        GuestUse::ended("extension.tool_call", started, attributes)
            .record(CallScope::current().as_ref());
        outcome
    }
}

/// The tool table as guests' tools join and leave it. The layer that owns the table implements
/// it, making each `GuestTool` a tool of its own kind; names and reasons are its texts.
pub trait ToolTable: Send + Sync {
    /// Adds a tool; a name already taken is refused with the reason.
    fn add(&self, tool: Arc<GuestTool>) -> Result<(), String>;
    /// Who holds a name: `None` when nobody, `Some(None)` a core tool, else the extension.
    fn holder(&self, name: &str) -> Option<Option<String>>;
    /// Withdraws those of `names` the extension holds.
    fn remove_extension(&self, extension: &str, names: &[String]);
    /// Puts `tools` in place of every tool the extension holds, in one change; returns the
    /// tools left out, each with why its name is taken.
    fn replace_extension(
        &self,
        extension: &str,
        tools: Vec<Arc<GuestTool>>,
    ) -> Vec<(String, String)>;
    /// The names of the tools an extension holds now.
    fn names_of(&self, extension: &str) -> Vec<String>;
    /// Once every guest declared: whether the operator's tool selection names only tools that
    /// exist.
    fn check_selection(&self) -> Result<(), Box<dyn std::error::Error + Send + Sync>>;
}

/// The checks the host makes before a guest sees arguments: required properties present and
/// top-level properties of the declared JSON type (no full JSON Schema validation).
fn check_against(schema: &JsonObject, arguments: &JsonObject) -> Result<(), Error> {
    let required = schema.get("required").and_then(Value::as_array);
    for name in required.into_iter().flatten().filter_map(Value::as_str) {
        if !arguments.contains_key(name) {
            return Err(Error::InvalidArguments(
                format!("missing field '{name}'; see the tool's input schema").into(),
            ));
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
            return Err(Error::InvalidArguments(
                format!("'{name}' must be of type {expected}, not {value}").into(),
            ));
        }
    }
    Ok(())
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

/// The tools a manifest declares, bound to the guest's slot; the first unusable one refuses
/// the guest.
pub(crate) fn extension_tools(
    manifest: &Manifest,
    slot: &Arc<GuestSlot>,
    entry: &ExtensionConfig,
) -> Result<Vec<Arc<GuestTool>>, String> {
    let Some(extension) = &manifest.extension else {
        return Ok(Vec::new());
    };
    let wait = CallKind::Tool.wall_limit(&entry.limits);
    extension
        .tools
        .iter()
        .map(|spec| GuestTool::new(slot.clone(), wait, &extension.name, spec).map(Arc::new))
        .collect()
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

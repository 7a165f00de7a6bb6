//! What a client written for the Python server expects of a core tool's call and result, kept in
//! one place so the tools themselves only say what happened.
//!
//! - A tool answering text also returns it as `structuredContent: {"result": text}` and declares
//!   an output schema to match; the tools that answer outputs (text and images) return them as
//!   the Python server 2.x does, `{"kind", "result": [...], "outputs", "count", "images"}`, so a
//!   client that reads a bare number in the text as JSON (Gemini CLI) finds an object there.
//! - Facts a tool adds for programs (the ids of the cells it acted on) go in `_meta` under this
//!   server's namespace, never in place of the result.
//! - Arguments a tool does not know are ignored, as the Python server ignores them, but the
//!   caller is told which and what it may have meant, so a typo never passes unseen.

use std::sync::Arc;

use notebook_format::hex::lower_hex;
use rmcp::model::{ContentBlock as Content, JsonObject};
use serde_json::{Value, json};
use sha2::{Digest, Sha256};

use super::{ToolError, ToolResult};

/// The namespace of this server's `_meta` keys (the Python server's): `_meta` is shared with the
/// protocol and every extension, so a bare `cell_id` would collide sooner or later.
pub const META_NAMESPACE: &str = "io.jupyter-mcp";

/// A `_meta` key of ours: `io.jupyter-mcp/<name>`.
pub fn meta_key(name: &str) -> String {
    format!("{META_NAMESPACE}/{name}")
}

/// How a tool's result is shaped on the wire: each core tool of the Python server declares the
/// shape it answers in there (its tools that return a list of content are registered with
/// `structured_output=False`; the others return one string).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub enum Shape {
    /// One text, also given as `structuredContent.result`.
    Text,
    /// Outputs for the model (text and images), also listed in `structuredContent` under the
    /// Python server's `kind` for this tool (`cell.execute`, `code.execute`, …).
    Outputs(&'static str),
    /// Not a tool of the Python server (ours alone, extensions', the conformance fixtures): left
    /// as the tool made it.
    #[default]
    Own,
}

/// The output schema of a text tool, as the Python SDK derives it for a `str` return.
pub fn text_output_schema(tool: &str) -> Arc<JsonObject> {
    let schema = json!({
        "type": "object",
        "title": format!("{tool}Output"),
        "properties": { "result": { "type": "string", "title": "Result" } },
        "required": ["result"],
    });
    match schema {
        Value::Object(object) => Arc::new(object),
        _ => unreachable!("a JSON object literal"),
    }
}

/// The output schema of an outputs tool: the Python server's answer shape, open to more keys
/// (a client with an output viewer also gets the outputs' MIME bundles and widget state).
pub fn outputs_output_schema(tool: &str) -> Arc<JsonObject> {
    let item = json!({ "anyOf": [{ "type": "string" }, { "type": "object" }] });
    let schema = json!({
        "type": "object",
        "title": format!("{tool}Output"),
        "properties": {
            "kind": { "type": "string", "title": "Kind",
                      "description": "What this answer is: cell.execute, cell.insert_execute, cell.read or code.execute." },
            "result": {
                "title": "Result",
                "description": "The outputs in order: each text as a string, each image as an object whose data is in the image content (a client with an output viewer gets the text as one string).",
                "anyOf": [{ "type": "array", "items": item }, { "type": "string" }],
            },
            "outputs": { "type": "array", "items": item, "title": "Outputs" },
            "count": { "type": "integer", "title": "Count", "description": "How many items result has." },
            "images": { "type": "integer", "title": "Images", "description": "How many of them are images." },
        },
        "required": ["kind", "result"],
    });
    match schema {
        Value::Object(object) => Arc::new(object),
        _ => unreachable!("a JSON object literal"),
    }
}

/// An outputs tool's `structuredContent` for `content`, in the Python server's shape: every
/// item in order, text as itself and an image as its type and MIME type (its bytes stay in
/// the image content, named by digest, never sent twice).
pub fn outputs_answer(kind: &str, content: &[Content]) -> JsonObject {
    let mut images = 0;
    let items: Vec<Value> = content
        .iter()
        .filter_map(|item| {
            if let Some(text) = item.as_text() {
                return Some(Value::String(text.text.clone()));
            }
            if let Some(link) = item.as_resource_link() {
                // `--images link`: the image is read by its URI.
                images += 1;
                return Some(json!({
                    "type": "resource_link",
                    "uri": link.uri,
                    "mimeType": link.mime_type,
                }));
            }
            let image = item.as_image()?;
            images += 1;
            let digest = lower_hex(&Sha256::digest(image.data.as_bytes()));
            Some(json!({
                "type": "image",
                "mimeType": image.mime_type,
                "data": format!("[omitted: see image content block; sha256:{digest}]"),
            }))
        })
        .collect();
    let mut answer = JsonObject::new();
    answer.insert("kind".into(), json!(kind));
    answer.insert("count".into(), json!(items.len()));
    answer.insert("images".into(), json!(images));
    answer.insert("result".into(), Value::Array(items.clone()));
    answer.insert("outputs".into(), Value::Array(items));
    answer
}

/// Gives every optional argument that may be null and has no default `"default": null`, as the
/// Python server's schemas do (pydantic writes it for each `Optional` parameter), so the
/// argument structs need no `#[serde(default)]` on their `Option` fields to say so.
pub fn optional_arguments_default_to_null(schema: &mut JsonObject) {
    let required: Vec<Value> = match schema.get("required") {
        Some(Value::Array(names)) => names.clone(),
        _ => Vec::new(),
    };
    let Some(Value::Object(properties)) = schema.get_mut("properties") else {
        return;
    };
    for (name, property) in properties.iter_mut() {
        if required.iter().any(|r| r.as_str() == Some(name)) {
            continue;
        }
        let mut types = Vec::new();
        collect_types(property, &mut types);
        if let Value::Object(property) = property
            && types.iter().any(|t| t == "null")
        {
            property.entry("default").or_insert(Value::Null);
        }
    }
}

/// Rewrites a schema (and every schema inside it) so that clients mapping tool schemas onto a
/// single-`type` dialect (several model vendors' function calling) can take it: a `type` list
/// becomes `anyOf` branches of one type each, as pydantic writes an `Optional` parameter
/// (`{"anyOf": [{"type": "integer", "minimum": 0}, {"type": "null"}], "default": null}`).
/// What constrains a value of one type goes into that type's branch; annotations (`title`,
/// `description`, `default`) stay beside the `anyOf`. Applied to every tool schema we build,
/// core and extension tools alike.
pub fn portable(schema: &mut JsonObject) {
    let mut value = Value::Object(std::mem::take(schema));
    portable_value(&mut value);
    if let Value::Object(object) = value {
        *schema = object;
    }
}

fn portable_value(schema: &mut Value) {
    let Value::Object(node) = schema else {
        return;
    };
    for (key, child) in node.iter_mut() {
        match key.as_str() {
            "properties" | "patternProperties" | "$defs" | "definitions" | "dependentSchemas" => {
                if let Value::Object(map) = child {
                    map.values_mut().for_each(portable_value);
                }
            }
            "anyOf" | "oneOf" | "allOf" | "prefixItems" => {
                if let Value::Array(list) = child {
                    list.iter_mut().for_each(portable_value);
                }
            }
            "items"
            | "additionalProperties"
            | "not"
            | "contains"
            | "propertyNames"
            | "if"
            | "then"
            | "else" => portable_value(child),
            _ => {}
        }
    }
    let Some(Value::Array(types)) = node.get("type") else {
        return;
    };
    let types: Vec<String> = types
        .iter()
        .filter_map(Value::as_str)
        .map(str::to_owned)
        .collect();
    if types.len() < 2 || node.contains_key("anyOf") {
        if let [only] = types.as_slice() {
            node.insert("type".into(), Value::String(only.clone()));
        }
        return;
    }
    node.remove("type");
    let others: Vec<&String> = types.iter().filter(|t| *t != "null").collect();
    let mut branches: Vec<JsonObject> = types
        .iter()
        .map(|t| JsonObject::from_iter([("type".to_owned(), Value::String(t.clone()))]))
        .collect();
    let keys: Vec<String> = node.keys().cloned().collect();
    for key in keys {
        if ANNOTATIONS.contains(&key.as_str()) {
            continue;
        }
        let value = node.remove(&key).expect("a key just listed");
        for (branch, t) in branches.iter_mut().zip(&types) {
            // With one type beside null (an `Optional`) every constraint is that type's.
            let belongs = match others.as_slice() {
                [only] => t == *only,
                _ => applies_to(&key, &value, t),
            };
            if !belongs {
                continue;
            }
            let value = match (key.as_str(), &value) {
                ("enum", Value::Array(values)) => Value::Array(
                    values
                        .iter()
                        .filter(|v| is_of_type(v, t))
                        .cloned()
                        .collect(),
                ),
                _ => value.clone(),
            };
            branch.insert(key.clone(), value);
        }
    }
    node.insert(
        "anyOf".into(),
        Value::Array(branches.into_iter().map(Value::Object).collect()),
    );
}

/// Keywords that describe a value rather than constrain it: they stay beside `anyOf`.
const ANNOTATIONS: &[&str] = &[
    "title",
    "description",
    "default",
    "examples",
    "deprecated",
    "readOnly",
    "writeOnly",
    "$comment",
];

/// Whether a constraining keyword applies to values of JSON type `t`.
fn applies_to(key: &str, value: &Value, t: &str) -> bool {
    let numeric = matches!(t, "integer" | "number");
    match key {
        "minimum" | "maximum" | "exclusiveMinimum" | "exclusiveMaximum" | "multipleOf" => numeric,
        "minLength" | "maxLength" | "pattern" | "contentEncoding" | "contentMediaType" => {
            t == "string"
        }
        "format" => match value.as_str() {
            Some(f)
                if f.starts_with("int")
                    || f.starts_with("uint")
                    || f == "float"
                    || f == "double" =>
            {
                numeric
            }
            _ => t == "string",
        },
        "items" | "prefixItems" | "minItems" | "maxItems" | "uniqueItems" | "contains" => {
            t == "array"
        }
        "properties"
        | "required"
        | "additionalProperties"
        | "patternProperties"
        | "propertyNames"
        | "minProperties"
        | "maxProperties" => t == "object",
        "enum" => value
            .as_array()
            .is_some_and(|values| values.iter().any(|v| is_of_type(v, t))),
        _ => t != "null",
    }
}

fn is_of_type(value: &Value, t: &str) -> bool {
    match value {
        Value::Null => t == "null",
        Value::Bool(_) => t == "boolean",
        Value::Number(n) => t == "number" || (t == "integer" && (n.is_i64() || n.is_u64())),
        Value::String(_) => t == "string",
        Value::Array(_) => t == "array",
        Value::Object(_) => t == "object",
    }
}

/// Declares that arguments beyond the listed ones are accepted (and ignored with a note).
pub fn accept_unknown_arguments(schema: &mut JsonObject) {
    schema.remove("additionalProperties");
}

/// A tool that takes no arguments says so (`properties: {}`, `additionalProperties: false`):
/// strict function-calling dialects (the OpenAI Agents SDK's) refuse an object open to anything.
/// A call that passes some anyway is still answered, with them ignored and noted.
pub fn close_when_empty(schema: &mut JsonObject) {
    let declares_none = match schema.get("properties") {
        None => true,
        Some(Value::Object(properties)) => properties.is_empty(),
        Some(_) => false,
    };
    if declares_none {
        schema.insert("properties".into(), json!({}));
        schema.insert("additionalProperties".into(), Value::Bool(false));
    }
}

/// An argument a tool declares: its name and the JSON types it takes (empty: not known).
#[derive(Debug, Clone)]
pub struct Declared {
    pub name: String,
    types: Vec<String>,
}

impl Declared {
    /// Whether a value could be meant for this argument (unknown types take anything).
    fn takes(&self, value: &Value) -> bool {
        let kind = match value {
            Value::Null => "null",
            Value::Bool(_) => "boolean",
            Value::Number(n) if n.is_i64() || n.is_u64() => "integer",
            Value::Number(_) => "number",
            Value::String(_) => "string",
            Value::Array(_) => "array",
            Value::Object(_) => "object",
        };
        self.types.is_empty()
            || self
                .types
                .iter()
                .any(|t| t == kind || (t == "number" && kind == "integer"))
    }
}

/// The arguments a schema declares.
pub fn declared_arguments(schema: &JsonObject) -> Vec<Declared> {
    let Some(properties) = schema.get("properties").and_then(Value::as_object) else {
        return Vec::new();
    };
    properties
        .iter()
        .map(|(name, property)| {
            let mut types = Vec::new();
            collect_types(property, &mut types);
            Declared {
                name: name.clone(),
                types,
            }
        })
        .collect()
}

fn collect_types(schema: &Value, types: &mut Vec<String>) {
    match schema.get("type") {
        Some(Value::String(t)) => types.push(t.clone()),
        Some(Value::Array(list)) => {
            types.extend(list.iter().filter_map(Value::as_str).map(String::from))
        }
        _ => {}
    }
    for key in ["anyOf", "oneOf"] {
        for branch in schema
            .get(key)
            .and_then(Value::as_array)
            .into_iter()
            .flatten()
        {
            collect_types(branch, types);
        }
    }
}

/// Arguments renamed since the Python server's 1.x, as (old, current).
const RENAMED_ARGUMENTS: &[(&str, &str)] = &[("timeout_seconds", "timeout")];

/// Arguments a call passed that the tool does not declare.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Ignored {
    pub names: Vec<String>,
    /// For the caller: each ignored name with the closest real one.
    pub note: String,
}

/// Splits off the arguments the tool does not declare; returns the rest and what was ignored
/// (`None` when every argument is known).
pub fn split_unknown(
    declared: &[Declared],
    mut arguments: JsonObject,
) -> (JsonObject, Option<Ignored>) {
    // Names the Python server's clients still send (written for its 1.x), read as the names
    // they became, when the tool takes that one and the call did not also give it.
    for (old, current) in RENAMED_ARGUMENTS {
        if declared.iter().any(|d| d.name == *current)
            && !arguments.contains_key(*current)
            && let Some(value) = arguments.remove(*old)
        {
            tracing::debug!("read the argument '{old}' as '{current}'");
            arguments.insert((*current).to_owned(), value);
        }
    }
    let unknown: Vec<String> = arguments
        .keys()
        .filter(|k| !declared.iter().any(|d| &d.name == *k))
        .cloned()
        .collect();
    if unknown.is_empty() {
        return (arguments, None);
    }
    let parts: Vec<String> = unknown
        .iter()
        .map(|name| {
            let value = arguments.remove(name).unwrap_or_default();
            match closest(name, &value, declared) {
                Some(real) => format!("ignored '{name}'; did you mean '{real}'?"),
                None => format!("ignored '{name}'; this tool takes no arguments"),
            }
        })
        .collect();
    let note = format!("Note: {}", parts.join(" "));
    (
        arguments,
        Some(Ignored {
            names: unknown,
            note,
        }),
    )
}

/// The declared argument nearest to `name`: one that takes a value like the one given first,
/// then one whose name contains it (or is contained in it), then the smallest edit distance.
fn closest<'a>(name: &str, value: &Value, declared: &'a [Declared]) -> Option<&'a str> {
    let name = name.to_ascii_lowercase();
    declared
        .iter()
        .min_by_key(|real| {
            let lower = real.name.to_ascii_lowercase();
            let related = name.contains(&lower) || lower.contains(&name);
            (!real.takes(value), !related, edit_distance(&name, &lower))
        })
        .map(|d| d.name.as_str())
}

/// Levenshtein distance over chars.
fn edit_distance(a: &str, b: &str) -> usize {
    let b: Vec<char> = b.chars().collect();
    let mut previous: Vec<usize> = (0..=b.len()).collect();
    for (i, ca) in a.chars().enumerate() {
        let mut current = vec![i + 1; b.len() + 1];
        for (j, cb) in b.iter().enumerate() {
            let substitute = previous[j] + usize::from(ca != *cb);
            current[j + 1] = substitute.min(previous[j + 1] + 1).min(current[j] + 1);
        }
        previous = current;
    }
    previous[b.len()]
}

/// The text pieces of a result, one per line (images left out).
pub fn text_of(content: &[Content]) -> String {
    content
        .iter()
        .filter_map(|c| c.as_text().map(|t| t.text.as_str()))
        .collect::<Vec<_>>()
        .join("\n")
}

/// Gives a tool's outcome the shape its clients expect, with the note on ignored arguments.
pub fn finish(outcome: ToolResult, shape: Shape, ignored: Option<&Ignored>) -> ToolResult {
    let mut output = match outcome {
        Ok(output) => output,
        Err(error) => return Err(with_note(error, ignored)),
    };
    if shape == Shape::Text {
        // Keys a tool adds stand beside the result; the result is always the text, and only
        // the tool's own: a client comparing a value sees exactly the value.
        let mut structured = match output.structured.take() {
            Some(Value::Object(object)) => object,
            _ => JsonObject::new(),
        };
        structured.insert("result".into(), Value::String(text_of(&output.content)));
        output.structured = Some(Value::Object(structured));
    }
    if let Some(ignored) = ignored {
        // Never in the content, which clients join and compare as the value: a fact in `_meta`
        // and a log line, which reaches a client that asked for log notifications.
        tracing::warn!("{}", ignored.note);
        output
            .meta
            .insert(meta_key("ignored_arguments"), json!(ignored.names));
        output
            .meta
            .insert(meta_key("note"), json!(ignored.note.clone()));
    }
    Ok(output)
}

fn with_note(error: ToolError, ignored: Option<&Ignored>) -> ToolError {
    let Some(Ignored { note, .. }) = ignored else {
        return error;
    };
    match error {
        ToolError::InvalidArguments(message) => {
            ToolError::InvalidArguments(message.then(format!(". {note}")))
        }
        // Every other kind reads as its message; the note follows it.
        other => ToolError::Failed(other.message().clone().then(format!("\n{note}"))),
    }
}

#[cfg(test)]
mod tests;

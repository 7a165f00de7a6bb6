//! Every core tool's input and output schema, checked byte for byte against the snapshot in
//! `runtime/server/tests/tool-schemas.json`: clients (and model vendors' function calling) cache and
//! validate these, so they change only when a tool does, and then on purpose.

use serde_json::{Value, json};

const SNAPSHOT: &str = "tests/tool-schemas.json";

fn current() -> String {
    let tools: serde_json::Map<String, Value> = super::builtin()
        .iter()
        .map(|tool| {
            let spec = tool.spec();
            let schemas = json!({
                "inputSchema": *spec.input_schema,
                "outputSchema": spec.output_schema.as_deref(),
            });
            (spec.name.clone(), schemas)
        })
        .collect();
    let mut text = serde_json::to_string_pretty(&Value::Object(tools)).expect("JSON");
    text.push('\n');
    text
}

#[test]
fn tool_schemas_match_their_snapshot() {
    let path = std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join(SNAPSHOT);
    let now = current();
    if std::env::var_os("UPDATE_TOOL_SCHEMAS").is_some() {
        std::fs::write(&path, &now).expect("write the snapshot");
    }
    let kept = std::fs::read_to_string(&path).unwrap_or_default();
    assert!(
        kept == now,
        "a core tool's schema differs from {SNAPSHOT}. If the tool changed on purpose, regenerate \
         it with `UPDATE_TOOL_SCHEMAS=1 cargo test -p jupyter-mcp-server --lib tool_schemas` and \
         commit the file; otherwise the change is an accident a client would see"
    );
}

/// The rule the MCP Inspector's `--strict` check and single-`type` dialects apply: no `type`
/// list anywhere, no schema that constrains nothing.
#[test]
fn tool_schemas_are_portable() {
    fn check(tool: &str, path: &str, schema: &Value, under_not: bool) {
        let Value::Object(node) = schema else {
            panic!("{tool}: {path} is a bare {schema} where a schema object is expected");
        };
        assert!(
            !node.get("type").is_some_and(Value::is_array),
            "{tool}: {path} has a type list: {schema}"
        );
        assert!(
            under_not || node.keys().any(|k| CONSTRAINING.contains(&k.as_str())),
            "{tool}: {path} constrains nothing: {schema}"
        );
        for (key, child) in node {
            let at = format!("{path}.{key}");
            match (key.as_str(), child) {
                ("properties" | "$defs" | "definitions", Value::Object(map)) => {
                    for (name, sub) in map {
                        check(tool, &format!("{at}.{name}"), sub, false);
                    }
                }
                ("anyOf" | "oneOf" | "allOf" | "prefixItems", Value::Array(list)) => {
                    for (i, sub) in list.iter().enumerate() {
                        check(tool, &format!("{at}[{i}]"), sub, false);
                    }
                }
                ("items" | "not", sub) => check(tool, &at, sub, key == "not"),
                ("additionalProperties", sub @ Value::Object(_)) => check(tool, &at, sub, false),
                _ => {}
            }
        }
    }
    for tool in super::builtin() {
        let spec = tool.spec();
        check(
            &spec.name,
            "inputSchema",
            &Value::Object((*spec.input_schema).clone()),
            false,
        );
        if let Some(output) = &spec.output_schema {
            check(
                &spec.name,
                "outputSchema",
                &Value::Object((**output).clone()),
                false,
            );
        }
    }
}

/// What makes a schema constrain a value (the Inspector's list, JSON Schema 2020-12's).
const CONSTRAINING: &[&str] = &[
    "type",
    "enum",
    "const",
    "multipleOf",
    "maximum",
    "exclusiveMaximum",
    "minimum",
    "exclusiveMinimum",
    "maxLength",
    "minLength",
    "pattern",
    "format",
    "maxItems",
    "minItems",
    "uniqueItems",
    "maxProperties",
    "minProperties",
    "required",
    "allOf",
    "anyOf",
    "oneOf",
    "not",
    "items",
    "prefixItems",
    "contains",
    "properties",
    "patternProperties",
    "additionalProperties",
    "propertyNames",
    "$ref",
];

//! The wire shapes against the Python server's: schemas, argument names, result shapes.

use super::*;
use crate::tools::ToolOutput;

#[test]
fn nullable_types_become_anyof_branches() {
    let mut schema = json!({"type": "object", "properties": {
        "timeout": {"description": "Seconds.", "type": ["integer", "null"], "format": "uint32",
                    "minimum": 0, "default": null},
        "kind": {"type": ["string", "null"], "enum": ["code", "markdown", null]},
        "either": {"type": ["integer", "string"], "minimum": 1, "maxLength": 3},
        "list": {"type": "array", "items": {"type": ["number", "null"]}},
    }});
    let Value::Object(object) = &mut schema else {
        unreachable!()
    };
    portable(object);
    let properties = &schema["properties"];
    assert_eq!(
        properties["timeout"],
        json!({"description": "Seconds.", "default": null, "anyOf": [
            {"type": "integer", "format": "uint32", "minimum": 0}, {"type": "null"}]})
    );
    assert_eq!(
        properties["kind"],
        json!({"anyOf": [{"type": "string", "enum": ["code", "markdown"]}, {"type": "null"}]})
    );
    assert_eq!(
        properties["either"],
        json!({"anyOf": [{"type": "integer", "minimum": 1}, {"type": "string", "maxLength": 3}]})
    );
    assert_eq!(
        properties["list"]["items"],
        json!({"anyOf": [{"type": "number"}, {"type": "null"}]})
    );
    // Arguments are still read the same way: the types of every branch.
    let declared = declared_arguments(schema.as_object().unwrap());
    let timeout = declared.iter().find(|d| d.name == "timeout").unwrap();
    assert!(timeout.takes(&Value::Null) && timeout.takes(&json!(3)));
}

#[test]
fn only_optional_nullable_arguments_default_to_null() {
    #[derive(schemars::JsonSchema, serde::Deserialize)]
    #[allow(dead_code)]
    enum Mode {
        Fast,
    }
    #[derive(schemars::JsonSchema, serde::Deserialize)]
    #[allow(dead_code)]
    struct Args {
        path: String,
        cell_id: Option<String>,
        mode: Option<Mode>,
        #[serde(default = "three")]
        limit: u32,
        #[serde(default)]
        since: Option<u32>,
    }
    fn three() -> u32 {
        3
    }
    let mut schema = (*rmcp::handler::server::common::schema_for_type::<Args>()).clone();
    optional_arguments_default_to_null(&mut schema);
    let properties = schema["properties"].as_object().unwrap();
    let default_of = |name: &str| properties[name].get("default").cloned();
    assert_eq!(
        default_of("path"),
        None,
        "a required argument has no default"
    );
    assert_eq!(default_of("cell_id"), Some(Value::Null));
    assert_eq!(default_of("mode"), Some(Value::Null));
    assert_eq!(default_of("limit"), Some(serde_json::json!(3)));
    assert_eq!(default_of("since"), Some(Value::Null));
}

#[test]
fn unknown_arguments_are_named_with_the_closest_real_one() {
    let schema = json!({"properties": {
        "cell_index": {"type": ["integer", "null"]}, "cell_id": {"type": ["string", "null"]},
        "timeout": {"type": "number"}, "stream": {"type": "boolean"},
        "progress_interval": {"type": "number"}}});
    let declared = declared_arguments(schema.as_object().unwrap());
    let mut arguments = JsonObject::new();
    arguments.insert("cell_index".into(), json!(0));
    arguments.insert("timeout_secs".into(), json!(5));
    arguments.insert("cel_id".into(), json!("x"));
    arguments.insert("cell_idx".into(), json!(3));
    let (kept, note) = split_unknown(&declared, arguments);
    assert_eq!(kept.keys().collect::<Vec<_>>(), ["cell_index"]);
    let ignored = note.unwrap();
    assert_eq!(ignored.names, ["cel_id", "cell_idx", "timeout_secs"]);
    assert!(
        ignored
            .note
            .contains("ignored 'cell_idx'; did you mean 'cell_index'?"),
        "the value's type decides between cell_id and cell_index: {}",
        ignored.note
    );
    let note = ignored.note;
    assert!(
        note.contains("ignored 'timeout_secs'; did you mean 'timeout'?"),
        "{note}"
    );
    assert!(
        note.contains("ignored 'cel_id'; did you mean 'cell_id'?"),
        "{note}"
    );
    let (_, none) = split_unknown(&declared, JsonObject::new());
    assert!(none.is_none());
    let mut stray = JsonObject::new();
    stray.insert("x".into(), json!(1));
    let (_, note) = split_unknown(&[], stray);
    assert!(note.unwrap().note.contains("takes no arguments"));
}

#[test]
fn an_argument_renamed_since_the_python_servers_1x_is_read_as_its_new_name() {
    let schema = json!({"properties": {"timeout": {"type": "number"}}});
    let declared = declared_arguments(schema.as_object().unwrap());
    let mut arguments = JsonObject::new();
    arguments.insert("timeout_seconds".into(), json!(5));
    let (kept, ignored) = split_unknown(&declared, arguments);
    assert_eq!(kept.get("timeout"), Some(&json!(5)));
    assert!(ignored.is_none());
    // Both given: the current name wins and the old one is reported as ignored.
    let mut both = JsonObject::new();
    both.insert("timeout".into(), json!(1));
    both.insert("timeout_seconds".into(), json!(5));
    let (kept, ignored) = split_unknown(&declared, both);
    assert_eq!(kept.get("timeout"), Some(&json!(1)));
    assert_eq!(ignored.unwrap().names, ["timeout_seconds"]);
}

#[test]
fn text_results_carry_the_text_as_result() {
    let mut output = ToolOutput::text("done");
    output.structured = Some(json!({ "extra": 1 }));
    let shaped = finish(Ok(output), Shape::Text, None).unwrap();
    assert_eq!(
        shaped.structured,
        Some(json!({ "extra": 1, "result": "done" }))
    );
    // An outputs tool's structured answer is made once the client is known (`apps`).
    let listed = finish(
        Ok(ToolOutput::text("x")),
        Shape::Outputs("code.execute"),
        None,
    )
    .unwrap();
    assert_eq!(listed.structured, None);
}

#[test]
fn outputs_are_listed_in_the_python_servers_shape() {
    let content = vec![
        Content::text("42"),
        Content::image("iVBORw0KGgo=", "image/png"),
    ];
    let answer = outputs_answer("cell.execute", &content);
    assert_eq!(answer["kind"], "cell.execute");
    assert_eq!(answer["count"], 2);
    assert_eq!(answer["images"], 1);
    assert_eq!(answer["result"][0], "42");
    assert_eq!(answer["result"], answer["outputs"]);
    let image = &answer["result"][1];
    assert_eq!(image["mimeType"], "image/png");
    let data = image["data"].as_str().unwrap();
    assert!(
        data.starts_with("[omitted: see image content block; sha256:") && !data.contains("iVBOR")
    );
}

#[test]
fn every_core_tool_of_the_python_server_has_its_shape() {
    // Tools the Python server lacks keep the structured content they make themselves.
    const OURS_ALONE: [&str; 9] = [
        "get_notebook_changes",
        "interrupt_kernel",
        "get_execution",
        "list_executions",
        "run_all_cells",
        "inspect_variables",
        "list_kernelspecs",
        "read_file",
        "write_file",
    ];
    for tool in crate::tools::builtin().iter() {
        let name = tool.spec().name.as_str();
        assert_eq!(
            tool.spec().shape == Shape::Own,
            OURS_ALONE.contains(&name),
            "{name}"
        );
    }
}

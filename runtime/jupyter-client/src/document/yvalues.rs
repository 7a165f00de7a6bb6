//! JSON values to and from Yjs values, as the collaboration room stores them: stream text as
//! Text, other fields as plain values; counts read back as integers (pycrdt and JavaScript store
//! them as floats).

use serde_json::{Map as JsonMap, Value};
use yrs::types::ToJson;
use yrs::{Any, GetString, In, MapPrelim, Out, ReadTxn, TextPrelim};

pub(super) fn output_prelim(output: &Value) -> In {
    let Value::Object(fields) = output else {
        return In::Any(json_to_any(output));
    };
    let stream = fields.get("output_type").and_then(Value::as_str) == Some("stream");
    let map: MapPrelim = fields
        .iter()
        .filter(|(key, _)| key.as_str() != "transient")
        .map(|(key, value)| {
            let value = match value {
                Value::String(text) if stream && key == "text" => {
                    TextPrelim::new(text.as_str()).into()
                }
                other => In::Any(json_to_any(other)),
            };
            (key.as_str(), value)
        })
        .collect();
    map.into()
}

pub(super) fn object_prelim(object: &JsonMap<String, Value>) -> MapPrelim {
    object
        .iter()
        .map(|(key, value)| (key.as_str(), In::Any(json_to_any(value))))
        .collect()
}

pub(super) fn is_empty(value: &Value) -> bool {
    match value {
        Value::Object(map) => map.is_empty(),
        Value::Null => true,
        _ => false,
    }
}

pub(super) fn json_to_any(value: &Value) -> Any {
    serde_json::from_value(value.clone()).unwrap_or(Any::Null)
}

pub(super) fn any_to_json(any: Any) -> Value {
    serde_json::to_value(&any).unwrap_or(Value::Null)
}

pub(super) fn out_to_json<T: ReadTxn>(out: Out, txn: &T) -> Value {
    match out {
        Out::Any(any) => any_to_json(any),
        Out::YText(text) => Value::String(text.get_string(txn)),
        Out::YArray(array) => any_to_json(array.to_json(txn)),
        Out::YMap(map) => any_to_json(map.to_json(txn)),
        other => any_to_json(other.to_json(txn)),
    }
}

/// pycrdt and JavaScript store counts as floats; nbformat wants integers.
fn integral(value: &mut Value) {
    if let Some(n) = value
        .as_f64()
        .filter(|n| n.fract() == 0.0 && !value.is_i64())
    {
        *value = Value::from(n as i64);
    }
}

pub(super) fn normalize_cell(cell: &mut Value) {
    let Some(fields) = cell.as_object_mut() else {
        return;
    };
    fields.remove("execution_state");
    if let Some(count) = fields.get_mut("execution_count") {
        integral(count);
    }
    if let Some(Value::Array(outputs)) = fields.get_mut("outputs") {
        outputs.iter_mut().for_each(normalize_output);
    }
}

pub(super) fn normalize_output(output: &mut Value) {
    if let Some(count) = output.get_mut("execution_count") {
        integral(count);
    }
}

//! The state of a kernel's Jupyter widgets (ipywidgets and the like), as their comm messages on
//! iopub tell it: what a frontend would hold, kept so a widget output can be shown in its current
//! state (a slider at its value) by a viewer that has no kernel connection of its own.
//!
//! The shape handed out is nbformat's widget state
//! (`application/vnd.jupyter.widget-state+json`), the one notebooks save under
//! `metadata.widgets`, limited to the models some outputs show and the models those refer to.

use std::collections::{BTreeMap, HashMap};

use serde_json::{Map, Value, json};

use notebook_format::outputs::Output;

/// The comm target of widget models.
const WIDGET_TARGET: &str = "jupyter.widget";
/// The MIME type of a widget's view in an output.
pub const VIEW_MIME: &str = "application/vnd.jupyter.widget-view+json";
/// The key notebooks keep widget state under, in `metadata.widgets`.
pub const STATE_MIME: &str = "application/vnd.jupyter.widget-state+json";
/// How prefixes a reference from one model's state to another.
const REFERENCE: &str = "IPY_MODEL_";
/// The most state kept for one kernel: a kernel making widgets without end cannot exhaust our
/// memory; models opened beyond it are not tracked (their outputs show their text form).
const MAX_STATE_BYTES: usize = 8 << 20;

#[derive(Debug, Default)]
pub struct WidgetStates {
    models: HashMap<String, Model>,
    bytes: usize,
}

#[derive(Debug)]
struct Model {
    state: Map<String, Value>,
    bytes: usize,
}

impl WidgetStates {
    /// Applies one iopub message; anything but widget comm traffic is ignored.
    pub fn observe(&mut self, msg_type: &str, content: &Value) {
        let Some(comm_id) = content.get("comm_id").and_then(Value::as_str) else {
            return;
        };
        let state = content
            .get("data")
            .and_then(|d| d.get("state"))
            .and_then(Value::as_object);
        match msg_type {
            "comm_open"
                if content.get("target_name").and_then(Value::as_str) == Some(WIDGET_TARGET) =>
            {
                self.forget(comm_id);
                let state = state.cloned().unwrap_or_default();
                let bytes = Value::Object(state.clone()).to_string().len();
                if self.bytes + bytes > MAX_STATE_BYTES {
                    tracing::debug!(
                        comm_id,
                        "widget state budget spent; not tracking this model"
                    );
                    return;
                }
                self.bytes += bytes;
                self.models
                    .insert(comm_id.to_owned(), Model { state, bytes });
            }
            "comm_msg" => {
                let method = content
                    .get("data")
                    .and_then(|d| d.get("method"))
                    .and_then(Value::as_str);
                let (Some("update" | "echo_update"), Some(update), Some(model)) =
                    (method, state, self.models.get_mut(comm_id))
                else {
                    return;
                };
                for (key, value) in update {
                    model.state.insert(key.clone(), value.clone());
                }
                let bytes = Value::Object(model.state.clone()).to_string().len();
                self.bytes = self.bytes - model.bytes + bytes;
                model.bytes = bytes;
                if self.bytes > MAX_STATE_BYTES {
                    self.forget(comm_id);
                }
            }
            "comm_close" => self.forget(comm_id),
            _ => {}
        }
    }

    /// The kernel restarted: its widgets are gone with it.
    pub fn clear(&mut self) {
        self.models.clear();
        self.bytes = 0;
    }

    fn forget(&mut self, comm_id: &str) {
        if let Some(model) = self.models.remove(comm_id) {
            self.bytes -= model.bytes;
        }
    }

    /// One model in nbformat's widget-state shape, if this kernel told us about it.
    fn model(&self, id: &str) -> Option<Value> {
        let model = self.models.get(id)?;
        let text = |key: &str| model.state.get(key).cloned().unwrap_or(Value::Null);
        Some(json!({
            "model_name": text("_model_name"),
            "model_module": text("_model_module"),
            "model_module_version": text("_model_module_version"),
            "state": model.state,
        }))
    }

    /// The widget state of the models `outputs` show, and of those they refer to: as the kernel
    /// holds them now, else as `saved` (a notebook's `metadata.widgets`, see `saved_models`)
    /// has them; `None` when they show no widget known either way.
    pub fn shown_in(
        &self,
        outputs: &[Output],
        saved: Option<&Map<String, Value>>,
    ) -> Option<Value> {
        select(outputs, |id| {
            self.model(id)
                .or_else(|| saved.and_then(|models| models.get(id)).cloned())
        })
    }
}

/// The models a notebook saved with its widget state (`metadata.widgets`), by model id.
pub fn saved_models(notebook_metadata: &Map<String, Value>) -> Option<&Map<String, Value>> {
    notebook_metadata
        .get("widgets")?
        .get(STATE_MIME)?
        .get("state")?
        .as_object()
}

/// The models `outputs` show and, transitively, the models their states refer to
/// (`IPY_MODEL_<id>`: layouts, styles, a box's children), found by `model`.
fn select(outputs: &[Output], model: impl Fn(&str) -> Option<Value>) -> Option<Value> {
    let mut pending: Vec<String> = outputs
        .iter()
        .filter_map(|o| o.data()?.json(VIEW_MIME)?.get("model_id")?.as_str())
        .map(str::to_owned)
        .collect();
    let mut found = BTreeMap::new();
    while let Some(id) = pending.pop() {
        if found.contains_key(&id) {
            continue;
        }
        let Some(entry) = model(&id) else { continue };
        references(&entry["state"], &mut pending);
        found.insert(id, entry);
    }
    if found.is_empty() {
        return None;
    }
    Some(json!({ "version_major": 2, "version_minor": 0, "state": found }))
}

fn references(value: &Value, into: &mut Vec<String>) {
    match value {
        Value::String(s) => {
            if let Some(id) = s.strip_prefix(REFERENCE) {
                into.push(id.to_owned());
            }
        }
        Value::Array(items) => items.iter().for_each(|v| references(v, into)),
        Value::Object(map) => map.values().for_each(|v| references(v, into)),
        _ => {}
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn open(states: &mut WidgetStates, id: &str, state: Value) {
        states.observe(
            "comm_open",
            &json!({"comm_id": id, "target_name": WIDGET_TARGET, "data": {"state": state, "buffer_paths": []}}),
        );
    }

    fn view(id: &str) -> Output {
        Output::from_json(
            &json!({"output_type": "display_data", "data": {VIEW_MIME: {"model_id": id, "version_major": 2}, "text/plain": "w"}, "metadata": {}}),
        )
    }

    #[test]
    fn updates_are_applied_and_references_followed() {
        let mut states = WidgetStates::default();
        open(
            &mut states,
            "layout",
            json!({"_model_name": "LayoutModel", "width": "auto"}),
        );
        open(&mut states, "other", json!({"_model_name": "LayoutModel"}));
        open(
            &mut states,
            "slider",
            json!({"_model_name": "IntSliderModel", "_model_module": "@jupyter-widgets/controls",
                   "value": 1, "layout": "IPY_MODEL_layout"}),
        );
        states.observe(
            "comm_msg",
            &json!({"comm_id": "slider", "data": {"method": "update", "state": {"value": 7}}}),
        );
        // Not a widget comm: ignored.
        states.observe(
            "comm_open",
            &json!({"comm_id": "x", "target_name": "other", "data": {}}),
        );
        let shown = states
            .shown_in(&[view("slider"), view("unknown")], None)
            .unwrap();
        let models = shown["state"].as_object().unwrap();
        assert_eq!(models.keys().collect::<Vec<_>>(), ["layout", "slider"]);
        assert_eq!(shown["state"]["slider"]["state"]["value"], 7);
        assert_eq!(shown["state"]["slider"]["model_name"], "IntSliderModel");
        states.observe("comm_close", &json!({"comm_id": "slider"}));
        assert_eq!(states.shown_in(&[view("slider")], None), None);
        states.clear();
        assert_eq!(states.bytes, 0);
    }

    #[test]
    fn state_beyond_the_budget_is_not_kept() {
        let mut states = WidgetStates::default();
        let big = "x".repeat(MAX_STATE_BYTES / 2 + 1);
        open(&mut states, "a", json!({"value": big}));
        open(&mut states, "b", json!({"value": big}));
        assert!(states.shown_in(&[view("a")], None).is_some());
        assert_eq!(states.shown_in(&[view("b")], None), None);
        states.observe(
            "comm_msg",
            &json!({"comm_id": "a", "data": {"method": "update", "state": {"more": big}}}),
        );
        assert_eq!(states.shown_in(&[view("a")], None), None);
        assert_eq!(states.bytes, 0);
    }

    #[test]
    fn a_notebooks_saved_state_fills_in_what_the_kernel_does_not_know() {
        let metadata = json!({"widgets": {STATE_MIME: {"state": {
            "s": {"model_name": "IntSliderModel", "state": {"value": 3, "layout": "IPY_MODEL_l"}},
            "l": {"model_name": "LayoutModel", "state": {}},
            "live": {"model_name": "IntSliderModel", "state": {"value": 0}}}}}});
        let saved = saved_models(metadata.as_object().unwrap());
        assert!(saved.is_some());
        let mut states = WidgetStates::default();
        open(
            &mut states,
            "live",
            json!({"_model_name": "IntSliderModel", "value": 5}),
        );
        let shown = states.shown_in(&[view("s"), view("live")], saved).unwrap();
        let models = shown["state"].as_object().unwrap();
        assert_eq!(models.keys().collect::<Vec<_>>(), ["l", "live", "s"]);
        assert_eq!(shown["state"]["s"]["state"]["value"], 3);
        // The kernel's current value wins over what was saved.
        assert_eq!(shown["state"]["live"]["state"]["value"], 5);
        assert_eq!(saved_models(&Map::new()), None);
    }
}

use super::*;
use serde_json::json;

/// The outputs as nbformat JSON, to index into.
fn json_of(c: &OutputCollector) -> Vec<Value> {
    Output::all_to_json(c.outputs())
}

#[test]
fn endless_stream_text_is_cut_once_with_a_notice() {
    let mut c = OutputCollector::default();
    let chunk = "x".repeat(1 << 20);
    for _ in 0..40 {
        c.apply("stream", &json!({"name": "stdout", "text": chunk}));
    }
    let outputs = json_of(&c);
    let text = outputs[0]["text"].as_str().unwrap();
    assert!(text.len() < MAX_OUTPUT_BYTES + 200);
    assert_eq!(text.matches("[output cut:").count(), 1);
    assert_eq!(c.outputs().len(), 1);
    // A cleared output starts a fresh budget (progress bars redraw without end).
    c.apply("clear_output", &json!({"wait": false}));
    c.apply("stream", &json!({"name": "stdout", "text": "again"}));
    assert_eq!(json_of(&c)[0]["text"], "again");
}

#[test]
fn rich_outputs_share_the_budget() {
    let mut c = OutputCollector::default();
    let image = json!({"data": {"image/png": "A".repeat(6 << 20)}, "metadata": {}});
    for _ in 0..20 {
        c.apply("display_data", &image);
        c.apply("stream", &json!({"name": "stdout", "text": "after\n"}));
    }
    let kept: usize = json_of(&c).iter().map(json_bytes).sum();
    assert!(kept <= MAX_OUTPUT_BYTES + 4096, "{kept}");
    let notices = json_of(&c)
        .iter()
        .filter(|o| {
            o["text"]
                .as_str()
                .is_some_and(|t| t.contains("[output cut:"))
        })
        .count();
    assert_eq!(notices, 1);
    assert_eq!(
        json_of(&c)
            .iter()
            .filter(|o| o["output_type"] == "display_data")
            .count(),
        2
    );
    c.apply(
        "error",
        &json!({"ename": "E", "evalue": "v", "traceback": ["t"]}),
    );
    assert!(json_of(&c).iter().all(|o| o["output_type"] != "error"));
}

#[test]
fn streams_merge_and_errors_keep_tracebacks() {
    let mut c = OutputCollector::default();
    c.apply("stream", &json!({"name": "stdout", "text": "a\n"}));
    c.apply("stream", &json!({"name": "stdout", "text": "b\n"}));
    c.apply("stream", &json!({"name": "stderr", "text": "warn\n"}));
    c.apply(
        "error",
        &json!({"ename": "E", "evalue": "v", "traceback": ["t1", "t2"]}),
    );
    let outputs = json_of(&c);
    assert_eq!(outputs.len(), 3);
    assert_eq!(outputs[0]["text"], "a\nb\n");
    assert_eq!(outputs[1]["name"], "stderr");
    assert_eq!(outputs[2]["traceback"], json!(["t1", "t2"]));
}

#[test]
fn results_carry_counts_and_drop_transient() {
    let mut c = OutputCollector::default();
    c.apply("execute_input", &json!({"execution_count": 3}));
    c.apply(
            "execute_result",
            &json!({"data": {"text/plain": "2"}, "metadata": {}, "execution_count": 3, "transient": {}}),
        );
    assert_eq!(c.execution_count, Some(3));
    assert_eq!(
        json_of(&c)[0],
        json!({"output_type": "execute_result", "data": {"text/plain": "2"}, "metadata": {}, "execution_count": 3})
    );
}

#[test]
fn clear_output_now_and_on_wait() {
    let mut c = OutputCollector::default();
    c.apply("stream", &json!({"name": "stdout", "text": "1"}));
    c.apply("clear_output", &json!({"wait": false}));
    assert!(c.outputs().is_empty());
    c.apply("stream", &json!({"name": "stdout", "text": "2"}));
    c.apply("clear_output", &json!({"wait": true}));
    assert_eq!(
        c.outputs().len(),
        1,
        "wait keeps outputs until the next one"
    );
    c.apply("stream", &json!({"name": "stdout", "text": "3"}));
    assert_eq!(json_of(&c)[0]["text"], "3");
}

#[test]
fn display_updates_replace_by_id() {
    let mut c = OutputCollector::default();
    let shown =
        json!({"data": {"text/plain": "old"}, "metadata": {}, "transient": {"display_id": "d"}});
    c.apply("display_data", &shown);
    c.apply("stream", &json!({"name": "stdout", "text": "x"}));
    let update =
        json!({"data": {"text/plain": "new"}, "metadata": {}, "transient": {"display_id": "d"}});
    assert!(c.apply("update_display_data", &update));
    assert_eq!(json_of(&c)[0]["data"]["text/plain"], "new");
    assert!(json_of(&c)[0].get("transient").is_none());
    let unknown = json!({"data": {}, "transient": {"display_id": "zzz"}});
    assert!(!c.apply("update_display_data", &unknown));
}

#[test]
fn the_epoch_moves_only_when_the_outputs_are_cleared() {
    let mut c = OutputCollector::default();
    let start = c.epoch();
    let mut kept = Vec::new();
    for text in ["a\n", "b\n", "c\n"] {
        c.apply("stream", &json!({"name": "stdout", "text": text}));
        c.apply(
            "display_data",
            &json!({"data": {"text/plain": text}, "metadata": {}}),
        );
        assert_eq!(c.epoch(), start, "growth keeps the epoch");
        // A copy brought up to date as grown is the collector's outputs.
        Output::sync_grown(&mut kept, c.outputs());
        assert_eq!(kept, c.outputs());
    }
    c.apply("clear_output", &json!({"wait": true}));
    assert_eq!(
        c.epoch(),
        start,
        "a waiting clear happens at the next output"
    );
    c.apply("stream", &json!({"name": "stdout", "text": "fresh\n"}));
    let cleared = c.epoch();
    assert_ne!(cleared, start);
    // Across epochs the copy is compared, not trusted.
    Output::sync_into(&mut kept, c.outputs());
    assert_eq!(kept, c.outputs());
    c.apply("clear_output", &json!({"wait": false}));
    assert_ne!(c.epoch(), cleared);
    // Another collector (a run resumed) never shares an epoch with this one.
    assert_ne!(OutputCollector::default().epoch(), c.epoch());
    assert_ne!(OutputCollector::resumed(kept).epoch(), c.epoch());
}

use super::*;

fn message(msg_type: &str, parent: Value, content: Value) -> WireMessage {
    WireMessage {
        channel: "iopub".into(),
        header: json!({"msg_id": "x", "msg_type": msg_type}),
        parent_header: parent,
        metadata: json!({}),
        content,
        buffers: vec![],
    }
}

#[test]
fn losses_are_recognised() {
    let ours = AtomicBool::new(false);
    let status = |state: &str| message("status", json!({}), json!({"execution_state": state}));
    assert_eq!(
        loss_signalled(&status("dead"), &ours),
        Some(GoneReason::Dead)
    );
    assert_eq!(
        loss_signalled(&status("restarting"), &ours),
        Some(GoneReason::Restarted)
    );
    assert_eq!(
        loss_signalled(&status("starting"), &ours),
        Some(GoneReason::Restarted)
    );
    assert_eq!(loss_signalled(&status("idle"), &ours), None);
    let deleted = message("shutdown_reply", json!({}), json!({"restart": false}));
    assert_eq!(loss_signalled(&deleted, &ours), Some(GoneReason::Deleted));
    let restarted = message("shutdown_reply", json!({}), json!({"restart": true}));
    assert_eq!(
        loss_signalled(&restarted, &ours),
        Some(GoneReason::Restarted)
    );
    // A status answering one of our requests is never a lifecycle event.
    let busy = message(
        "status",
        json!({"msg_id": "m"}),
        json!({"execution_state": "starting"}),
    );
    assert_eq!(loss_signalled(&busy, &ours), None);
}

#[test]
fn our_own_restart_is_not_a_loss() {
    let ours = AtomicBool::new(true);
    let restarted = message("shutdown_reply", json!({}), json!({"restart": true}));
    assert_eq!(loss_signalled(&restarted, &ours), None);
    let starting = message("status", json!({}), json!({"execution_state": "starting"}));
    assert_eq!(loss_signalled(&starting, &ours), None);
    // The expectation is used up by the restart it covered.
    assert_eq!(
        loss_signalled(&starting, &ours),
        Some(GoneReason::Restarted)
    );
}

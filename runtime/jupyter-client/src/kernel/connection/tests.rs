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

#[test]
fn a_kernels_birth_is_told_from_its_answers_and_deaths() {
    let status = |state: &str| message("status", json!({}), json!({"execution_state": state}));
    assert!(announces_birth(&status("starting")));
    assert!(announces_birth(&status("restarting")));
    assert!(!announces_birth(&status("dead")));
    assert!(!announces_birth(&status("idle")));
    let answer = message(
        "status",
        json!({"msg_id": "m"}),
        json!({"execution_state": "starting"}),
    );
    assert!(!announces_birth(&answer));
}

#[test]
fn a_socket_answers_once_iopub_does() {
    let handshake: HashSet<String> = ["hello".to_owned()].into();
    let mut reply = message("kernel_info_reply", json!({"msg_id": "hello"}), json!({}));
    reply.channel = "shell".into();
    // The shell's answer alone: iopub may not hear us yet.
    assert!(!shows_answering(&reply, &handshake));
    let idle = message(
        "status",
        json!({"msg_id": "hello", "msg_type": "kernel_info_request"}),
        json!({"execution_state": "idle"}),
    );
    assert!(shows_answering(&idle, &handshake));
    let someone_runs = message(
        "status",
        json!({"msg_id": "theirs", "msg_type": "execute_request"}),
        json!({"execution_state": "busy"}),
    );
    assert!(shows_answering(&someone_runs, &handshake));
    let someone_else = message(
        "status",
        json!({"msg_id": "theirs", "msg_type": "kernel_info_request"}),
        json!({"execution_state": "idle"}),
    );
    assert!(!shows_answering(&someone_else, &handshake));
}

//! What a message on a kernel's socket says about the socket and the kernel's life: whether the
//! kernel answers on it yet (the handshake), and whether its state is lost (deleted, dead,
//! restarted) or only being born.

use std::collections::HashSet;
use std::sync::atomic::{AtomicBool, Ordering};
use std::time::Duration;

use serde_json::Value;

use super::GoneReason;
use crate::kernel::codec::WireMessage;

/// How often the `kernel_info_request` that opens a socket is sent again until answered.
pub(super) const HANDSHAKE_RESEND: Duration = Duration::from_secs(1);

/// How soon a handshake request is sent again once the shell answered but iopub said nothing.
pub(super) const IOPUB_NUDGE: Duration = Duration::from_millis(50);
/// How long iopub may stay silent after the shell answered before the shell's word is taken.
pub(super) const IOPUB_GRACE: Duration = Duration::from_secs(2);

/// Whether `message` shows the kernel answering on a new socket, on iopub (where outputs come):
/// a status about one of our handshake requests, or the kernel busy running someone's code (a
/// kernel running a long cell answers `kernel_info` only after it; it is started, and our
/// requests wait their turn). A shell answer alone is not enough: where Jupyter hands the
/// kernel's channels straight through (jupyter-server-documents), iopub's subscription can
/// still be settling when the shell answers, and outputs sent meanwhile are lost.
pub(super) fn shows_answering(message: &WireMessage, handshake: &HashSet<String>) -> bool {
    if message.channel != "iopub" {
        return false;
    }
    if message
        .parent_msg_id()
        .is_some_and(|parent| handshake.contains(parent))
    {
        return true;
    }
    message.msg_type() == "status"
        && message
            .content
            .get("execution_state")
            .and_then(Value::as_str)
            == Some("busy")
        && message
            .parent_header
            .get("msg_type")
            .and_then(Value::as_str)
            == Some("execute_request")
}

/// A kernel's own "starting" or its restarter's "restarting" status, sent to nobody in particular.
pub(super) fn announces_birth(message: &WireMessage) -> bool {
    message.msg_type() == "status"
        && message.parent_msg_id().is_none()
        && matches!(
            message
                .content
                .get("execution_state")
                .and_then(Value::as_str),
            Some("starting" | "restarting")
        )
}

/// A kernel-lifecycle event seen on the socket, judged by whether the kernel's state survives.
pub(super) fn loss_signalled(
    message: &WireMessage,
    restart_expected: &AtomicBool,
) -> Option<GoneReason> {
    match message.msg_type() {
        "shutdown_reply" => {
            let restart = message.content.get("restart").and_then(Value::as_bool) == Some(true);
            if !restart {
                Some(GoneReason::Deleted)
            } else if restart_expected.load(Ordering::SeqCst) {
                None
            } else {
                Some(GoneReason::Restarted)
            }
        }
        "status" if message.parent_msg_id().is_none() => {
            match message
                .content
                .get("execution_state")
                .and_then(Value::as_str)
            {
                Some("dead") => Some(GoneReason::Dead),
                // Jupyter's restarter says so before the new process starts.
                Some("restarting") if restart_expected.load(Ordering::SeqCst) => None,
                Some("restarting") => Some(GoneReason::Restarted),
                Some("starting") if restart_expected.swap(false, Ordering::SeqCst) => None,
                Some("starting") => Some(GoneReason::Restarted),
                _ => None,
            }
        }
        _ => None,
    }
}

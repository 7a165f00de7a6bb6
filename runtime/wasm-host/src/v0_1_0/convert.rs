//! Conversions between the host's types and those of WIT v0.1.0, all in one place, so the rest
//! of the wasm host never names a binding type of this version. What every version converts alike is
//! in `common_convert.rs`; here, what 0.1.0 says its own way.

use serde_json::Value;

use super::types;
use crate::host::HostCallError;
use notebook_format::notebook::Cell;
use notebook_format::outputs::Output;
use server_core::hooks::HookEvent;

conversions! {
    // 0.1.0 has no words for these kinds; its guests get the message.
    host_error: {
        HostCallError::NotFound(m)
        | HostCallError::Conflict(m)
        | HostCallError::Kernel(m)
        | HostCallError::Invalid(m)
        | HostCallError::Failed(m)
        | HostCallError::UnsupportedByClient(m)
        | HostCallError::Refused(m) => types::HostError::Failed(m),
    }
    hook_event: {
        HookEvent::AfterToolCall { tool_name, arguments, result, error } => {
            types::HookEvent::AfterToolCall(types::AfterToolCall {
                tool_name: tool_name.clone(),
                arguments: arguments.to_string(),
                result: result.clone(),
                error: error.clone(),
            })
        }
        HookEvent::KernelLifecycle { event_type, kernel_id, kernel_name } => {
            types::HookEvent::KernelLifecycle(types::KernelLifecycle {
                event_type: event_type.clone(),
                kernel_id: kernel_id.clone(),
                kernel_name: kernel_name.clone(),
            })
        }
    }
    content: {}
    // 0.1.0 tools declare no output schema.
    output_schema: |spec| None,
}

pub fn to_wit(cell: &Cell) -> types::Cell {
    types::Cell {
        id: cell.id.clone(),
        kind: cell_kind(cell.cell_type),
        source: cell.source.clone(),
        metadata: Value::Object(cell.metadata.clone()).to_string(),
        outputs: Value::Array(Output::all_to_json(&cell.outputs)).to_string(),
    }
}

/// A 0.1.0 guest's errors are plain text already.
pub fn guest_error(message: String) -> String {
    message
}

/// This version's handlers answer only a context; they cannot ask for confirmation.
pub fn hook_reply(context: Option<String>) -> crate::answers::HookReply {
    crate::answers::HookReply::context(context)
}

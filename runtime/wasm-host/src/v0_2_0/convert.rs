//! Conversions between the host's types and those of WIT v0.2.0, all in one place, so the rest
//! of `wasm/` never names a binding type of this version. What every version converts alike is
//! in `common_convert.rs`; here, what 0.2.0 says its own way or added.

use serde_json::Value;

use super::types;
use crate::answers::AnswerContent;
use crate::answers::{PromptAnswer, ResourceAnswer, ResourceBody, Role};
use crate::distribution::manifest::{
    Listing, PromptArgumentDeclaration, PromptDeclaration, ResourceDeclaration, TemplateDeclaration,
};
use crate::host::CellAt;
use crate::host::HostCallError;
use notebook_format::notebook::Cell;
use server_core::hooks::HookEvent;

conversions! {
    host_error: {
        HostCallError::NotFound(m) => types::HostError::NotFound(m),
        HostCallError::Conflict(m) => types::HostError::Conflict(m),
        HostCallError::Kernel(m) => types::HostError::Kernel(m),
        HostCallError::Invalid(m) => types::HostError::Invalid(m),
        HostCallError::Failed(m) => types::HostError::Failed(m),
        // 0.2.0 guests never call what answers these (the client and secrets came with 0.3.0).
        HostCallError::UnsupportedByClient(m) => types::HostError::NotAvailable(m),
        HostCallError::Refused(m) => types::HostError::Failed(m),
    }
    // An outcome instead of two options, and the kernel's change as a case.
    hook_event: {
        HookEvent::AfterToolCall { tool_name, arguments, result, error } => {
            types::HookEvent::AfterToolCall(types::AfterToolCall {
                tool_name: tool_name.clone(),
                arguments: arguments.to_string(),
                outcome: match error {
                    Some(error) => Err(error.clone()),
                    None => Ok(result.clone().unwrap_or_default()),
                },
            })
        }
        HookEvent::KernelLifecycle { event_type, kernel_id, kernel_name } => {
            types::HookEvent::KernelLifecycle(types::KernelLifecycle {
                change: match event_type.as_str() {
                    "started" => types::KernelChange::Started,
                    "restarted" => types::KernelChange::Restarted,
                    "stopped" => types::KernelChange::Stopped,
                    other => types::KernelChange::Other(other.to_owned()),
                },
                kernel_id: kernel_id.clone(),
                kernel_name: kernel_name.clone(),
            })
        }
    }
    content: {
        types::Content::ResourceLink(uri) => AnswerContent::ResourceLink(uri),
    }
    output_schema: |spec| spec.output_schema,
}

pub fn cell_at(cell: types::CellRef) -> CellAt {
    match cell {
        types::CellRef::Id(id) => CellAt::Id(id),
        types::CellRef::Index(index) => CellAt::Index(index),
    }
}

pub fn to_wit(index: usize, cell: &Cell) -> types::Cell {
    types::Cell {
        id: cell.id.clone(),
        index: u32::try_from(index).unwrap_or(u32::MAX),
        kind: cell_kind(cell.cell_type),
        source: cell.source.clone(),
        metadata: Value::Object(cell.metadata.clone()).to_string(),
        outputs: Value::Array(cell.outputs.clone()).to_string(),
        execution_count: cell
            .execution_count
            .and_then(|count| u32::try_from(count).ok()),
    }
}

/// A guest's error, in the words that reach the caller.
pub fn guest_error(error: types::GuestError) -> String {
    match error {
        types::GuestError::InvalidArguments(m) => format!("invalid arguments: {m}"),
        types::GuestError::NotFound(m) | types::GuestError::Failed(m) => m,
        types::GuestError::Host(host) => match host {
            types::HostError::NotGranted(m)
            | types::HostError::NotAvailable(m)
            | types::HostError::NotFound(m)
            | types::HostError::Conflict(m)
            | types::HostError::Kernel(m)
            | types::HostError::Invalid(m)
            | types::HostError::Failed(m) => m,
        },
    }
}

// Resources and prompts, the same since 0.2.0.
resources_and_prompts!();

/// This version's handlers answer only a context; they cannot ask for confirmation.
pub fn hook_reply(context: Option<String>) -> crate::answers::HookReply {
    crate::answers::HookReply::context(context)
}

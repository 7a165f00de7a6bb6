//! Conversions between the host's types and those of WIT v0.1.0, all in one place, so the rest
//! of `wasm/` never names a binding type of this version.

use serde_json::Value;

use super::types;
use crate::hooks::HookEvent;
use crate::jupyter::notebook::{Cell, CellType};
use crate::wasm::manifest::{CapabilityDeclaration, ToolDeclaration};
use crate::wasm::sandbox::HostCallError;

pub fn cell_type(kind: types::CellKind) -> CellType {
    match kind {
        types::CellKind::Code => CellType::Code,
        types::CellKind::Markdown => CellType::Markdown,
        types::CellKind::Raw => CellType::Raw,
    }
}

pub fn to_wit(cell: &Cell) -> types::Cell {
    types::Cell {
        id: cell.id.clone(),
        kind: match cell.cell_type {
            CellType::Code => types::CellKind::Code,
            CellType::Markdown => types::CellKind::Markdown,
            CellType::Raw => types::CellKind::Raw,
        },
        source: cell.source.clone(),
        metadata: Value::Object(cell.metadata.clone()).to_string(),
        outputs: Value::Array(cell.outputs.clone()).to_string(),
    }
}

pub fn host_error(error: HostCallError) -> types::HostError {
    match error {
        HostCallError::NotGranted(m) => types::HostError::NotGranted(m),
        HostCallError::NotAvailable(m) => types::HostError::NotAvailable(m),
        // 0.1.0 has no words for these kinds; its guests get the message.
        HostCallError::NotFound(m)
        | HostCallError::Conflict(m)
        | HostCallError::Kernel(m)
        | HostCallError::Invalid(m)
        | HostCallError::Failed(m) => types::HostError::Failed(m),
        HostCallError::Stopped(why) => types::HostError::Failed(format!(
            "the host function did not finish: {}",
            why.describe_short()
        )),
    }
}

/// A hook event as the WIT carries it (JSON fields as strings).
pub fn hook_event(event: &HookEvent) -> types::HookEvent {
    match event {
        HookEvent::BeforeToolCall {
            tool_name,
            arguments,
        } => types::HookEvent::BeforeToolCall(types::BeforeToolCall {
            tool_name: tool_name.clone(),
            arguments: arguments.to_string(),
        }),
        HookEvent::AfterToolCall {
            tool_name,
            arguments,
            result,
            error,
        } => types::HookEvent::AfterToolCall(types::AfterToolCall {
            tool_name: tool_name.clone(),
            arguments: arguments.to_string(),
            result: result.clone(),
            error: error.clone(),
        }),
        HookEvent::BeforeExecute { kernel_id, code } => {
            types::HookEvent::BeforeExecute(types::BeforeExecute {
                kernel_id: kernel_id.clone(),
                code: code.clone(),
            })
        }
        HookEvent::AfterExecute {
            kernel_id,
            outputs,
            error,
        } => types::HookEvent::AfterExecute(types::AfterExecute {
            kernel_id: kernel_id.clone(),
            outputs: serde_json::to_string(outputs).expect("JSON values serialize"),
            error: error.clone(),
        }),
        HookEvent::KernelLifecycle {
            event_type,
            kernel_id,
            kernel_name,
        } => types::HookEvent::KernelLifecycle(types::KernelLifecycle {
            event_type: event_type.clone(),
            kernel_id: kernel_id.clone(),
            kernel_name: kernel_name.clone(),
        }),
    }
}

pub fn capability_declaration(capability: types::Capability) -> CapabilityDeclaration {
    CapabilityDeclaration {
        name: capability.name,
        description: capability.description,
        enabled: capability.enabled,
    }
}

pub fn tool_declaration(spec: types::ToolSpec) -> ToolDeclaration {
    ToolDeclaration {
        name: spec.name,
        description: spec.description,
        input_schema: spec.input_schema,
        read_only: spec.annotations.read_only_hint.unwrap_or(false),
        capability: spec.capability,
        output_schema: None,
    }
}

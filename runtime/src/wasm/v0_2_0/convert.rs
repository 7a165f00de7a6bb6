//! Conversions between the host's types and those of WIT v0.2.0, all in one place, so the rest
//! of `wasm/` never names a binding type of this version.

use serde_json::Value;

use super::types;
use crate::hooks::HookEvent;
use crate::jupyter::notebook::{Cell, CellType};
use crate::wasm::manifest::{
    CapabilityDeclaration, PromptArgumentDeclaration, PromptDeclaration, ResourceDeclaration,
    TemplateDeclaration, ToolDeclaration,
};
use crate::wasm::notebook::CellAt;
use crate::wasm::sandbox::HostCallError;
use crate::wasm::served::{PromptAnswer, ResourceAnswer, ResourceBody, Role};
use crate::wasm::tool::{AnswerContent, ToolAnswer};

pub fn cell_at(cell: types::CellRef) -> CellAt {
    match cell {
        types::CellRef::Id(id) => CellAt::Id(id),
        types::CellRef::Index(index) => CellAt::Index(index),
    }
}

pub fn cell_type(kind: types::CellKind) -> CellType {
    match kind {
        types::CellKind::Code => CellType::Code,
        types::CellKind::Markdown => CellType::Markdown,
        types::CellKind::Raw => CellType::Raw,
    }
}

pub fn to_wit(index: usize, cell: &Cell) -> types::Cell {
    types::Cell {
        id: cell.id.clone(),
        index: u32::try_from(index).unwrap_or(u32::MAX),
        kind: match cell.cell_type {
            CellType::Code => types::CellKind::Code,
            CellType::Markdown => types::CellKind::Markdown,
            CellType::Raw => types::CellKind::Raw,
        },
        source: cell.source.clone(),
        metadata: Value::Object(cell.metadata.clone()).to_string(),
        outputs: Value::Array(cell.outputs.clone()).to_string(),
        execution_count: cell
            .execution_count
            .and_then(|count| u32::try_from(count).ok()),
    }
}

pub fn host_error(error: HostCallError) -> types::HostError {
    match error {
        HostCallError::NotGranted(m) => types::HostError::NotGranted(m),
        HostCallError::NotAvailable(m) => types::HostError::NotAvailable(m),
        HostCallError::NotFound(m) => types::HostError::NotFound(m),
        HostCallError::Conflict(m) => types::HostError::Conflict(m),
        HostCallError::Kernel(m) => types::HostError::Kernel(m),
        HostCallError::Invalid(m) => types::HostError::Invalid(m),
        HostCallError::Failed(m) => types::HostError::Failed(m),
        HostCallError::Stopped(why) => types::HostError::Failed(format!(
            "the host function did not finish: {}",
            why.describe_short()
        )),
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

/// A hook event as the WIT carries it (JSON fields as strings, typed cases).
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
            outcome: match error {
                Some(error) => Err(error.clone()),
                None => Ok(result.clone().unwrap_or_default()),
            },
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
            change: match event_type.as_str() {
                "started" => types::KernelChange::Started,
                "restarted" => types::KernelChange::Restarted,
                "stopped" => types::KernelChange::Stopped,
                other => types::KernelChange::Other(other.to_owned()),
            },
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
        output_schema: spec.output_schema,
    }
}

pub fn resource_declaration(spec: types::ResourceSpec) -> ResourceDeclaration {
    ResourceDeclaration {
        uri: spec.uri,
        name: spec.name,
        title: spec.title,
        description: spec.description,
        mime_type: spec.mime_type,
    }
}

pub fn template_declaration(spec: types::ResourceTemplate) -> TemplateDeclaration {
    TemplateDeclaration {
        uri_template: spec.uri_template,
        name: spec.name,
        title: spec.title,
        description: spec.description,
        mime_type: spec.mime_type,
    }
}

pub fn prompt_declaration(prompt: types::Prompt) -> PromptDeclaration {
    PromptDeclaration {
        name: prompt.name,
        title: prompt.title,
        description: prompt.description,
        arguments: prompt
            .arguments
            .into_iter()
            .map(|a| PromptArgumentDeclaration {
                name: a.name,
                description: a.description,
                required: a.required,
            })
            .collect(),
    }
}

fn content(content: types::Content) -> AnswerContent {
    match content {
        types::Content::Text(text) => AnswerContent::Text(text),
        types::Content::Image(image) => AnswerContent::Image {
            data: image.data,
            mime_type: image.mime_type,
        },
        types::Content::ResourceLink(uri) => AnswerContent::ResourceLink(uri),
    }
}

pub fn tool_answer(result: types::ToolResult) -> ToolAnswer {
    ToolAnswer {
        content: result.content.into_iter().map(content).collect(),
        structured: result.structured,
        is_error: result.is_error,
    }
}

pub fn resource_answer(contents: types::ResourceContents) -> ResourceAnswer {
    ResourceAnswer {
        uri: contents.uri,
        mime_type: contents.mime_type,
        body: match contents.body {
            types::ResourceBody::Text(text) => ResourceBody::Text(text),
            types::ResourceBody::Blob(bytes) => ResourceBody::Blob(bytes),
        },
    }
}

pub fn prompt_answer(result: types::PromptResult) -> PromptAnswer {
    PromptAnswer {
        description: result.description,
        messages: result
            .messages
            .into_iter()
            .map(|m| {
                let role = match m.role {
                    types::Role::User => Role::User,
                    types::Role::Assistant => Role::Assistant,
                };
                (role, content(m.content))
            })
            .collect(),
    }
}

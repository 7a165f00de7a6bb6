//! The conversions between host and binding types that every WIT version has in the same shape,
//! written once: each version's `convert.rs` invokes `conversions!` over its own `types`.

/// Defines, over the `types` module in scope, the conversions every version shares — cell kinds,
/// host errors, hook events, capability and tool declarations, a tool's answer — with this
/// version's differences spliced in: `host_error`, the match arms for the `HostCallError` kinds
/// beyond not-granted, not-available and stopped; `hook_event`, the arms for the `HookEvent`s
/// other than before-tool-call, before-execute and after-execute; `content`, the arms for the
/// `types::Content` cases beyond text and image; `output_schema`, a tool's output schema from
/// its `types::ToolSpec` (named by the closure's parameter). `HostCallError` and `HookEvent`,
/// which every version's arms name, are the invoking module's imports.
macro_rules! conversions {
    (
        host_error: { $($host_error:tt)* }
        hook_event: { $($hook_event:tt)* }
        content: { $($content:tt)* }
        output_schema: |$spec:ident| $output_schema:expr $(,)?
    ) => {
        pub fn cell_type(kind: types::CellKind) -> notebook_format::notebook::CellType {
            use notebook_format::notebook::CellType;
            match kind {
                types::CellKind::Code => CellType::Code,
                types::CellKind::Markdown => CellType::Markdown,
                types::CellKind::Raw => CellType::Raw,
            }
        }

        fn cell_kind(cell_type: notebook_format::notebook::CellType) -> types::CellKind {
            use notebook_format::notebook::CellType;
            match cell_type {
                CellType::Code => types::CellKind::Code,
                CellType::Markdown => types::CellKind::Markdown,
                CellType::Raw => types::CellKind::Raw,
            }
        }

        pub fn host_error(error: HostCallError) -> types::HostError {
            match error {
                HostCallError::NotGranted(m) => types::HostError::NotGranted(m),
                HostCallError::NotAvailable(m) => types::HostError::NotAvailable(m),
                $($host_error)*
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
                $($hook_event)*
            }
        }

        pub fn capability_declaration(
            capability: types::Capability,
        ) -> crate::distribution::manifest::CapabilityDeclaration {
            crate::distribution::manifest::CapabilityDeclaration {
                name: capability.name,
                description: capability.description,
                enabled: capability.enabled,
            }
        }

        pub fn tool_declaration($spec: types::ToolSpec) -> crate::distribution::manifest::ToolDeclaration {
            crate::distribution::manifest::ToolDeclaration {
                name: $spec.name,
                description: $spec.description,
                input_schema: $spec.input_schema,
                read_only: $spec.annotations.read_only_hint.unwrap_or(false),
                capability: $spec.capability,
                output_schema: $output_schema,
            }
        }

        fn content(content: types::Content) -> crate::answers::AnswerContent {
            use crate::answers::AnswerContent as Content;
            match content {
                types::Content::Text(text) => Content::Text(text),
                types::Content::Image(image) => Content::Image {
                    data: image.data,
                    mime_type: image.mime_type,
                },
                $($content)*
            }
        }

        pub fn tool_answer(result: types::ToolResult) -> crate::answers::ToolAnswer {
            crate::answers::ToolAnswer {
                content: result.content.into_iter().map(content).collect(),
                structured: result.structured,
                is_error: result.is_error,
            }
        }
    };
}

/// Defines, over the `types` module in scope, the conversions of resources and prompts, which
/// came with 0.2.0 and have kept their shape since. The declaration and answer types are the
/// invoking module's imports.
macro_rules! resources_and_prompts {
    () => {
        pub fn resource_declaration(spec: types::ResourceSpec) -> ResourceDeclaration {
            ResourceDeclaration {
                uri: spec.uri,
                listing: Listing {
                    name: spec.name,
                    title: spec.title,
                    description: spec.description,
                },
                mime_type: spec.mime_type,
            }
        }

        pub fn template_declaration(spec: types::ResourceTemplate) -> TemplateDeclaration {
            TemplateDeclaration {
                uri_template: spec.uri_template,
                listing: Listing {
                    name: spec.name,
                    title: spec.title,
                    description: spec.description,
                },
                mime_type: spec.mime_type,
            }
        }

        pub fn prompt_declaration(prompt: types::Prompt) -> PromptDeclaration {
            PromptDeclaration {
                listing: Listing {
                    name: prompt.name,
                    title: prompt.title,
                    description: prompt.description,
                },
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

        /// What a guest read at a resource's URI: one or more contents.
        pub fn resource_answers(contents: Vec<types::ResourceContents>) -> Vec<ResourceAnswer> {
            contents.into_iter().map(resource_answer).collect()
        }

        fn resource_answer(contents: types::ResourceContents) -> ResourceAnswer {
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
    };
}

/// The conversions of 0.2.0 and every later version: `conversions!` with cells by `cell-ref`,
/// errors as variants, typed hook events (an outcome instead of two options, the kernel's change
/// as a case), resource links and output schemas, then resources and prompts. A version gives
/// only what it says its own way: the arms of `host_error` past the five every such version has,
/// the `HostError` cases a guest's error may carry past those seven, and the fields of a WIT
/// cell past those of 0.2.0 (written over `$cell`, the host cell's name).
macro_rules! conversions_since_0_2 {
    (
        host_error: { $($host_error:tt)* }
        guest_error_hosts: [ $($host_case:ident),* ]
        cell_fields($cell:ident): { $($field:ident: $value:expr,)* }
    ) => {
        conversions! {
            host_error: {
                HostCallError::NotFound(m) => types::HostError::NotFound(m),
                HostCallError::Conflict(m) => types::HostError::Conflict(m),
                HostCallError::Kernel(m) => types::HostError::Kernel(m),
                HostCallError::Invalid(m) => types::HostError::Invalid(m),
                HostCallError::Failed(m) => types::HostError::Failed(m),
                $($host_error)*
            }
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

        pub fn to_wit(index: usize, $cell: &Cell) -> types::Cell {
            types::Cell {
                id: $cell.id.clone(),
                index: u32::try_from(index).unwrap_or(u32::MAX),
                kind: cell_kind($cell.cell_type),
                source: $cell.source.clone(),
                metadata: Value::Object($cell.metadata.clone()).to_string(),
                outputs: Value::Array(
                    notebook_format::outputs::Output::all_to_json(&$cell.outputs),
                )
                .to_string(),
                execution_count: $cell
                    .execution_count
                    .and_then(|count| u32::try_from(count).ok()),
                $($field: $value,)*
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
                    | types::HostError::Failed(m)
                    $(| types::HostError::$host_case(m))* => m,
                },
            }
        }

        resources_and_prompts!();
    };
}

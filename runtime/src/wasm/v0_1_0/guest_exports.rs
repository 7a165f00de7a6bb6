//! What a guest built against this version exports, called through host types only: the rest of
//! `wasm/` asks a guest for its identity, tools or a hook's answer without knowing the version.

use wasmtime::Store;
use wasmtime::component::{Instance, InstancePre};

use super::{EXTENSION_EXPORT, HOOKS_EXPORT, convert, extension_export, hooks_export};
use crate::hooks::HookEvent;
use crate::wasm::manifest::{CapabilityDeclaration, ToolDeclaration};
use crate::wasm::sandbox::GuestState;
use crate::wasm::tool::{AnswerContent, ToolAnswer};

/// Where this version's exports are in a component, found once per guest.
pub struct Indices {
    hooks: Option<hooks_export::GuestIndices>,
    extension: Option<extension_export::GuestIndices>,
}

impl Indices {
    /// `None` when the component exports neither interface of this version.
    pub fn of(pre: &InstancePre<GuestState>, exports: &[String]) -> Result<Option<Self>, String> {
        let has = |name: &str| exports.iter().any(|e| e == name);
        if !has(HOOKS_EXPORT) && !has(EXTENSION_EXPORT) {
            return Ok(None);
        }
        let hooks = if has(HOOKS_EXPORT) {
            Some(
                hooks_export::GuestIndices::new(pre)
                    .map_err(|e| format!("its hooks export does not match the WIT: {e}"))?,
            )
        } else {
            None
        };
        let extension = if has(EXTENSION_EXPORT) {
            Some(
                extension_export::GuestIndices::new(pre)
                    .map_err(|e| format!("its extension-api export does not match the WIT: {e}"))?,
            )
        } else {
            None
        };
        Ok(Some(Indices { hooks, extension }))
    }

    pub fn handles_hooks(&self) -> bool {
        self.hooks.is_some()
    }

    pub fn is_extension(&self) -> bool {
        self.extension.is_some()
    }

    pub fn load(
        &self,
        store: &mut Store<GuestState>,
        instance: &Instance,
    ) -> wasmtime::Result<Exports> {
        Ok(Exports {
            hooks: match &self.hooks {
                Some(indices) => Some(indices.load(&mut *store, instance)?),
                None => None,
            },
            extension: match &self.extension {
                Some(indices) => Some(indices.load(&mut *store, instance)?),
                None => None,
            },
        })
    }
}

/// One instance's exports.
pub struct Exports {
    hooks: Option<hooks_export::Guest>,
    extension: Option<extension_export::Guest>,
}

impl Exports {
    fn hooks(&self) -> wasmtime::Result<hooks_export::Guest> {
        self.hooks
            .clone()
            .ok_or_else(|| wasmtime::format_err!("the guest does not export hooks"))
    }

    fn extension(&self) -> wasmtime::Result<extension_export::Guest> {
        self.extension
            .clone()
            .ok_or_else(|| wasmtime::format_err!("the guest does not export extension-api"))
    }

    pub fn propagate_errors(&self, store: &mut Store<GuestState>) -> wasmtime::Result<bool> {
        self.hooks()?.call_propagate_errors(store)
    }

    pub fn on_event(
        &self,
        store: &mut Store<GuestState>,
        event: &HookEvent,
        context: &str,
    ) -> wasmtime::Result<Result<Option<String>, String>> {
        let event = convert::hook_event(event);
        self.hooks()?.call_on_event(store, &event, context)
    }

    /// The name it declares.
    pub fn identity(&self, store: &mut Store<GuestState>) -> wasmtime::Result<String> {
        Ok(self.extension()?.call_identity(store)?.name)
    }

    pub fn capabilities(
        &self,
        store: &mut Store<GuestState>,
    ) -> wasmtime::Result<Vec<CapabilityDeclaration>> {
        Ok(self
            .extension()?
            .call_capabilities(store)?
            .into_iter()
            .map(convert::capability_declaration)
            .collect())
    }

    pub fn tools(&self, store: &mut Store<GuestState>) -> wasmtime::Result<Vec<ToolDeclaration>> {
        Ok(self
            .extension()?
            .call_tools(store)?
            .into_iter()
            .map(convert::tool_declaration)
            .collect())
    }

    pub fn call_tool(
        &self,
        store: &mut Store<GuestState>,
        name: &str,
        arguments: &str,
    ) -> wasmtime::Result<Result<ToolAnswer, String>> {
        let answer = self.extension()?.call_call_tool(store, name, arguments)?;
        Ok(answer.map(|result| ToolAnswer {
            content: result
                .content
                .into_iter()
                .map(|c| match c {
                    super::types::Content::Text(text) => AnswerContent::Text(text),
                    super::types::Content::Image(image) => AnswerContent::Image {
                        data: image.data,
                        mime_type: image.mime_type,
                    },
                })
                .collect(),
            structured: result.structured,
            is_error: result.is_error,
        }))
    }
}

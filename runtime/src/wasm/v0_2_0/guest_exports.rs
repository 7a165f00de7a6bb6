//! What a guest built against this version exports, called through host types only (see
//! `wasm::api`, which picks the version).

use wasmtime::Store;
use wasmtime::component::{Instance, InstancePre};

use super::{EXTENSION_EXPORT, HOOKS_EXPORT, convert, extension_export, hooks_export};
use crate::hooks::HookEvent;
use crate::wasm::manifest::{
    CapabilityDeclaration, PromptDeclaration, ResourceDeclaration, TemplateDeclaration,
    ToolDeclaration,
};
use crate::wasm::sandbox::GuestState;
use crate::wasm::served::{PromptAnswer, ResourceAnswer};
use crate::wasm::tool::ToolAnswer;

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
        let mismatch = |what: &str, e: wasmtime::Error| {
            format!("its {what} export does not match wit/v0.2.0: {e}")
        };
        Ok(Some(Indices {
            hooks: has(HOOKS_EXPORT)
                .then(|| hooks_export::GuestIndices::new(pre))
                .transpose()
                .map_err(|e| mismatch("hooks", e))?,
            extension: has(EXTENSION_EXPORT)
                .then(|| extension_export::GuestIndices::new(pre))
                .transpose()
                .map_err(|e| mismatch("extension-api", e))?,
        }))
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
            hooks: self
                .hooks
                .as_ref()
                .map(|i| i.load(&mut *store, instance))
                .transpose()?,
            extension: self
                .extension
                .as_ref()
                .map(|i| i.load(&mut *store, instance))
                .transpose()?,
        })
    }
}

/// One instance's exports.
pub struct Exports {
    hooks: Option<hooks_export::Guest>,
    extension: Option<extension_export::Guest>,
}

impl Exports {
    fn hooks(&self) -> wasmtime::Result<&hooks_export::Guest> {
        self.hooks
            .as_ref()
            .ok_or_else(|| wasmtime::format_err!("the guest does not export hooks"))
    }

    fn extension(&self) -> wasmtime::Result<&extension_export::Guest> {
        self.extension
            .as_ref()
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
        Ok(self
            .hooks()?
            .call_on_event(store, &event, context)?
            .map_err(convert::guest_error))
    }

    /// The name it declares.
    pub fn identity(&self, store: &mut Store<GuestState>) -> wasmtime::Result<String> {
        Ok(self.extension()?.call_identity(store)?.name)
    }

    pub fn capabilities(
        &self,
        store: &mut Store<GuestState>,
    ) -> wasmtime::Result<Vec<CapabilityDeclaration>> {
        let list = self.extension()?.call_capabilities(store)?;
        Ok(list
            .into_iter()
            .map(convert::capability_declaration)
            .collect())
    }

    pub fn tools(&self, store: &mut Store<GuestState>) -> wasmtime::Result<Vec<ToolDeclaration>> {
        let list = self.extension()?.call_tools(store)?;
        Ok(list.into_iter().map(convert::tool_declaration).collect())
    }

    pub fn call_tool(
        &self,
        store: &mut Store<GuestState>,
        name: &str,
        arguments: &str,
    ) -> wasmtime::Result<Result<ToolAnswer, String>> {
        let answer = self.extension()?.call_call_tool(store, name, arguments)?;
        Ok(answer
            .map(convert::tool_answer)
            .map_err(convert::guest_error))
    }

    pub fn resources(
        &self,
        store: &mut Store<GuestState>,
    ) -> wasmtime::Result<Vec<ResourceDeclaration>> {
        let list = self.extension()?.call_resources(store)?;
        Ok(list
            .into_iter()
            .map(convert::resource_declaration)
            .collect())
    }

    pub fn resource_templates(
        &self,
        store: &mut Store<GuestState>,
    ) -> wasmtime::Result<Vec<TemplateDeclaration>> {
        let list = self.extension()?.call_resource_templates(store)?;
        Ok(list
            .into_iter()
            .map(convert::template_declaration)
            .collect())
    }

    pub fn prompts(
        &self,
        store: &mut Store<GuestState>,
    ) -> wasmtime::Result<Vec<PromptDeclaration>> {
        let list = self.extension()?.call_prompts(store)?;
        Ok(list.into_iter().map(convert::prompt_declaration).collect())
    }

    pub fn read_resource(
        &self,
        store: &mut Store<GuestState>,
        uri: &str,
    ) -> wasmtime::Result<Result<Vec<ResourceAnswer>, String>> {
        let answer = self.extension()?.call_read_resource(store, uri)?;
        Ok(answer
            .map(|list| list.into_iter().map(convert::resource_answer).collect())
            .map_err(convert::guest_error))
    }

    pub fn get_prompt(
        &self,
        store: &mut Store<GuestState>,
        name: &str,
        arguments: &str,
    ) -> wasmtime::Result<Result<PromptAnswer, String>> {
        let answer = self.extension()?.call_get_prompt(store, name, arguments)?;
        Ok(answer
            .map(convert::prompt_answer)
            .map_err(convert::guest_error))
    }
}

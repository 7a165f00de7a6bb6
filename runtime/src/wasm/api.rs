//! Which WIT version a guest speaks. A component's exports name their package version, so the
//! version is found once per guest (`Indices::of`) and every call goes through the matching
//! version's module; the rest of `wasm/` sees host types only. What a version lacks (a 0.1.0
//! guest's resources and prompts) answers empty.

use wasmtime::Store;
use wasmtime::component::{Instance, InstancePre};

use super::manifest::{
    CapabilityDeclaration, PromptDeclaration, ResourceDeclaration, TemplateDeclaration,
    ToolDeclaration,
};
use super::sandbox::GuestState;
use super::served::{PromptAnswer, ResourceAnswer};
use super::tool::ToolAnswer;
use super::{v0_1_0, v0_2_0};
use crate::hooks::HookEvent;

/// The newest WIT version this host implements (`host-info.api-version`).
pub const API_VERSION: &str = v0_2_0::API_VERSION;

/// The export names of each version, newest first: what a guest may export.
pub const EXPORTS: [(&str, &str); 2] = [
    (v0_2_0::HOOKS_EXPORT, v0_2_0::EXTENSION_EXPORT),
    (v0_1_0::HOOKS_EXPORT, v0_1_0::EXTENSION_EXPORT),
];

/// Whether `exports` include a hook-handler export of any version.
pub fn handles_hooks(exports: &[String]) -> bool {
    EXPORTS
        .iter()
        .any(|(hooks, _)| exports.iter().any(|e| e == hooks))
}

/// Where a guest's exports are, in the version it was built against.
pub enum Indices {
    V0_1(v0_1_0::Indices),
    V0_2(v0_2_0::Indices),
}

impl Indices {
    /// `None` when the component exports nothing of any version this host knows.
    pub fn of(pre: &InstancePre<GuestState>, exports: &[String]) -> Result<Option<Self>, String> {
        if let Some(indices) = v0_2_0::Indices::of(pre, exports)? {
            return Ok(Some(Indices::V0_2(indices)));
        }
        Ok(v0_1_0::Indices::of(pre, exports)?.map(Indices::V0_1))
    }

    pub fn handles_hooks(&self) -> bool {
        match self {
            Indices::V0_1(i) => i.handles_hooks(),
            Indices::V0_2(i) => i.handles_hooks(),
        }
    }

    pub fn is_extension(&self) -> bool {
        match self {
            Indices::V0_1(i) => i.is_extension(),
            Indices::V0_2(i) => i.is_extension(),
        }
    }

    pub fn load(
        &self,
        store: &mut Store<GuestState>,
        instance: &Instance,
    ) -> wasmtime::Result<Exports> {
        Ok(match self {
            Indices::V0_1(i) => Exports::V0_1(i.load(store, instance)?),
            Indices::V0_2(i) => Exports::V0_2(i.load(store, instance)?),
        })
    }
}

/// One instance's exports, in its version.
pub enum Exports {
    V0_1(v0_1_0::Exports),
    V0_2(v0_2_0::Exports),
}

/// Calls `$method` on whichever version's exports this is.
macro_rules! either {
    ($self:ident . $method:ident ( $($arg:expr),* )) => {
        match $self {
            Exports::V0_1(e) => e.$method($($arg),*),
            Exports::V0_2(e) => e.$method($($arg),*),
        }
    };
}

impl Exports {
    pub fn propagate_errors(&self, store: &mut Store<GuestState>) -> wasmtime::Result<bool> {
        either!(self.propagate_errors(store))
    }

    pub fn on_event(
        &self,
        store: &mut Store<GuestState>,
        event: &HookEvent,
        context: &str,
    ) -> wasmtime::Result<Result<Option<String>, String>> {
        either!(self.on_event(store, event, context))
    }

    pub fn identity(&self, store: &mut Store<GuestState>) -> wasmtime::Result<String> {
        either!(self.identity(store))
    }

    pub fn capabilities(
        &self,
        store: &mut Store<GuestState>,
    ) -> wasmtime::Result<Vec<CapabilityDeclaration>> {
        either!(self.capabilities(store))
    }

    pub fn tools(&self, store: &mut Store<GuestState>) -> wasmtime::Result<Vec<ToolDeclaration>> {
        either!(self.tools(store))
    }

    pub fn call_tool(
        &self,
        store: &mut Store<GuestState>,
        name: &str,
        arguments: &str,
    ) -> wasmtime::Result<Result<ToolAnswer, String>> {
        either!(self.call_tool(store, name, arguments))
    }

    pub fn resources(
        &self,
        store: &mut Store<GuestState>,
    ) -> wasmtime::Result<Vec<ResourceDeclaration>> {
        match self {
            Exports::V0_1(_) => Ok(Vec::new()),
            Exports::V0_2(e) => e.resources(store),
        }
    }

    pub fn resource_templates(
        &self,
        store: &mut Store<GuestState>,
    ) -> wasmtime::Result<Vec<TemplateDeclaration>> {
        match self {
            Exports::V0_1(_) => Ok(Vec::new()),
            Exports::V0_2(e) => e.resource_templates(store),
        }
    }

    pub fn prompts(
        &self,
        store: &mut Store<GuestState>,
    ) -> wasmtime::Result<Vec<PromptDeclaration>> {
        match self {
            Exports::V0_1(_) => Ok(Vec::new()),
            Exports::V0_2(e) => e.prompts(store),
        }
    }

    pub fn read_resource(
        &self,
        store: &mut Store<GuestState>,
        uri: &str,
    ) -> wasmtime::Result<Result<Vec<ResourceAnswer>, String>> {
        match self {
            Exports::V0_1(_) => Ok(Err(format!("no resource at '{uri}' in this extension"))),
            Exports::V0_2(e) => e.read_resource(store, uri),
        }
    }

    pub fn get_prompt(
        &self,
        store: &mut Store<GuestState>,
        name: &str,
        arguments: &str,
    ) -> wasmtime::Result<Result<PromptAnswer, String>> {
        match self {
            Exports::V0_1(_) => Ok(Err(format!("no prompt '{name}' in this extension"))),
            Exports::V0_2(e) => e.get_prompt(store, name, arguments),
        }
    }
}

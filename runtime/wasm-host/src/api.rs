//! Which WIT version a guest speaks. A component's exports name their package version, so the
//! version is found once per guest (`Indices::of`) and every call goes through that version's
//! `GuestApi`; the rest of the wasm host sees host types only. What a version lacks (a 0.1.0 guest's
//! resources and prompts) answers as an extension that serves none.

use wasmtime::Store;
use wasmtime::component::{Instance, InstancePre};

use super::answers::{HookReply, PromptAnswer, ResourceAnswer, ToolAnswer};
use super::distribution::manifest::{
    CapabilityDeclaration, PromptDeclaration, ResourceDeclaration, TemplateDeclaration,
    ToolDeclaration,
};
use super::host::GuestState;
use super::{v0_1_0, v0_2_0, v0_3_0};
use server_core::hooks::HookEvent;

/// The newest WIT version this host implements (`host-info.api-version`).
pub const API_VERSION: &str = v0_3_0::API_VERSION;

/// The export names of each version, newest first: what a guest may export.
pub const EXPORTS: [(&str, &str); 3] = [
    (v0_3_0::HOOKS_EXPORT, v0_3_0::EXTENSION_EXPORT),
    (v0_2_0::HOOKS_EXPORT, v0_2_0::EXTENSION_EXPORT),
    (v0_1_0::HOOKS_EXPORT, v0_1_0::EXTENSION_EXPORT),
];

/// How a version finds its exports in a component (`None`: it has none of that version).
type IndicesOf =
    fn(&InstancePre<GuestState>, &[String]) -> Result<Option<Box<dyn VersionIndices>>, String>;

/// Each version's `IndicesOf`, in the order of `EXPORTS`.
const INDICES_OF: [IndicesOf; 3] = [
    v0_3_0::Indices::of,
    v0_2_0::Indices::of,
    v0_1_0::Indices::of,
];

/// Whether `exports` include a hook-handler export of any version.
pub fn handles_hooks(exports: &[String]) -> bool {
    EXPORTS
        .iter()
        .any(|(hooks, _)| exports.iter().any(|e| e == hooks))
}

/// A guest's exports called with host types, whatever its version. Each version's `Exports`
/// implements it (see `common_exports.rs`); what a version's WIT lacks keeps the default.
pub trait GuestApi: Send {
    fn propagate_errors(&self, store: &mut Store<GuestState>) -> wasmtime::Result<bool>;

    fn on_event(
        &self,
        store: &mut Store<GuestState>,
        event: &HookEvent,
        context: &str,
    ) -> wasmtime::Result<Result<HookReply, String>>;

    /// The name it declares.
    fn identity(&self, store: &mut Store<GuestState>) -> wasmtime::Result<String>;

    fn capabilities(
        &self,
        store: &mut Store<GuestState>,
    ) -> wasmtime::Result<Vec<CapabilityDeclaration>>;

    fn tools(&self, store: &mut Store<GuestState>) -> wasmtime::Result<Vec<ToolDeclaration>>;

    fn call_tool(
        &self,
        store: &mut Store<GuestState>,
        name: &str,
        arguments: &str,
    ) -> wasmtime::Result<Result<ToolAnswer, String>>;

    /// Resources, templates and prompts came with 0.2.0: an older guest serves none.
    fn resources(&self, _: &mut Store<GuestState>) -> wasmtime::Result<Vec<ResourceDeclaration>> {
        Ok(Vec::new())
    }

    fn resource_templates(
        &self,
        _: &mut Store<GuestState>,
    ) -> wasmtime::Result<Vec<TemplateDeclaration>> {
        Ok(Vec::new())
    }

    fn prompts(&self, _: &mut Store<GuestState>) -> wasmtime::Result<Vec<PromptDeclaration>> {
        Ok(Vec::new())
    }

    fn read_resource(
        &self,
        _: &mut Store<GuestState>,
        uri: &str,
    ) -> wasmtime::Result<Result<Vec<ResourceAnswer>, String>> {
        Ok(Err(format!("no resource at '{uri}' in this extension")))
    }

    fn get_prompt(
        &self,
        _: &mut Store<GuestState>,
        name: &str,
        _arguments: &str,
    ) -> wasmtime::Result<Result<PromptAnswer, String>> {
        Ok(Err(format!("no prompt '{name}' in this extension")))
    }
}

/// One instance's exports, in its version.
pub type Exports = Box<dyn GuestApi>;

/// The exports as a call sees them. (The `'static` is that of the `Exports` box, which a method
/// path such as `GuestApi::tools` must name.)
pub type Api = dyn GuestApi + 'static;

/// A question a guest answers while it loads, named by its method: `GuestApi::tools`.
pub type LoadQuestion<R> = fn(&Api, &mut Store<GuestState>) -> wasmtime::Result<R>;

/// Where one version's exports are in a component, found once per guest.
pub trait VersionIndices: Send + Sync {
    fn handles_hooks(&self) -> bool;

    fn is_extension(&self) -> bool;

    fn load(&self, store: &mut Store<GuestState>, instance: &Instance)
    -> wasmtime::Result<Exports>;
}

/// Where a guest's exports are, in the version it was built against.
pub struct Indices(Box<dyn VersionIndices>);

impl Indices {
    /// `None` when the component exports nothing of any version this host knows.
    pub fn of(pre: &InstancePre<GuestState>, exports: &[String]) -> Result<Option<Self>, String> {
        for indices_of in INDICES_OF {
            if let Some(indices) = indices_of(pre, exports)? {
                return Ok(Some(Indices(indices)));
            }
        }
        Ok(None)
    }
}

impl std::ops::Deref for Indices {
    type Target = dyn VersionIndices;

    fn deref(&self) -> &Self::Target {
        self.0.as_ref()
    }
}

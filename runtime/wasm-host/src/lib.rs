//! WebAssembly guests: hook handlers and extensions built as components against the WIT in
//! `wit/`, run sandboxed on wasmtime.
//!
//! - `v0_1_0/`, `v0_2_0/`, `v0_3_0/`: one WIT version each: its bindings, its host functions and every
//!   conversion between its types and ours; `api` picks a guest's version, so nothing else names
//!   a binding type;
//! - `host/`: the host capabilities a guest may be granted (notebook, outgoing HTTP, storage,
//!   env, the call's client, secrets), one unit each, and `GuestState`, the store data that is
//!   their sum;
//! - `served`: an extension's resources and prompts in the server's catalog;
//! - `cache`: compiled components on disk, so nothing is compiled on a request path;
//! - `component_file`: a guest file read and checked (a component, importing nothing we lack);
//! - `imports`: what a guest may import, checked before it is compiled;
//! - `limits`: the memory cap and the per-call CPU clock;
//! - `grants`: the operator's grants, parsed once into a typed set;
//! - `policy`: a guest's grants, hosts, directories and variables, changeable while it runs;
//! - `asking`: grant prompts, a use not granted put to the person (`extensions.grant-prompts`);
//! - `settings`: what the instances of one guest share, and the link to the server;
//! - `wait`: every host wait of a guest (WASI poll, host functions) bounded by its deadline;
//! - `output`: a guest's stdout and stderr, into the log and the errors of its traps;
//! - `loading`: guests compiled and started off the handshake path, names claimed in order;
//! - `batch`: every guest loaded at once and waited for (`load_all`, `compile_all`);
//! - `guest`: a guest's instances and calls into them, failure counting, rebuild from
//!   `InstancePre`;
//! - `hook`: a hook-handler guest on the hooks bus;
//! - `answers`: what a guest answers, in host types;
//! - `tool`: an extension's tool in host terms, and what it needs of the tool table;
//! - `lifecycle`: extensions added, reloaded and removed while the server runs;
//! - `watch`: the watched folder (`--extensions-dir`);
//! - `oci`: components pulled from OCI registries, pinned by digest;
//! - `signatures`: cosign-compatible signatures checked against the trusted keys.

mod answers;
mod api;
mod asking;
mod distribution;
mod guest;
mod hook;
mod host;
mod lifecycle;
mod limits;
mod output;
pub mod policy;
mod served;
mod settings;
mod slot;
#[cfg(test)]
mod tests;
mod tool;
#[macro_use]
mod common_convert;
#[macro_use]
mod common_exports;
#[macro_use]
mod common_host;
mod v0_1_0;
mod v0_2_0;
mod v0_3_0;
mod wait;

use std::path::{Path, PathBuf};
use std::sync::Arc;
use std::time::Duration;

use wasmtime::Engine;
use wasmtime::component::{Component, Linker};

pub use answers::{AnswerContent, HookReply, ToolAnswer};
pub use api::API_VERSION;
use api::{GuestApi, LoadQuestion};
pub use distribution::cache::CompileCache;
use distribution::component_file::{check_bytes, file_stem, read_checked};
pub use distribution::manifest::Manifest;
pub use distribution::oci::{OciError, Registries};
pub use distribution::signatures::{Trust, TrustError};
pub use guest::{CallKind, Guest, GuestError, GuestInstance, Template};
pub use hook::WasmHookHandler;
pub use host::GuestState;
pub use lifecycle::batch::{compile_all, load_all};
pub use lifecycle::extensions::{Extensions, LifecycleError, PulledAtStart};
pub use lifecycle::loading::register_tools;
pub use lifecycle::loading::{Loader, Loading};
pub use lifecycle::watch::watch_folder;
pub use policy::PromptRules;
pub use policy::grants::{Grants, HostFunction};
pub use policy::{Policies, Policy, PolicyError};
pub use settings::{GuestSettings, HostLink, SecretSource};
pub use slot::{GuestSlot, SlotError};
use tool::extension_tools;
pub use tool::{GuestTool, ToolTable};

use server_core::capabilities::Declaration;
use server_core::extensions::ExtensionConfig;

/// How often the epoch advances: the granularity of the CPU-time check.
const TICK: Duration = Duration::from_millis(10);
/// Wasm stack per call; the host's own stack keeps the rest of the thread's.
const MAX_WASM_STACK: usize = 512 * 1024;

/// A guest file that was not loaded; the server goes on without it.
#[derive(Debug, thiserror::Error)]
#[error("refused wasm guest {path}: {reason}")]
pub struct LoadError {
    pub path: PathBuf,
    pub reason: String,
}

/// A guest that loaded, and what it offers.
pub struct Loaded {
    pub guest: Arc<Guest>,
    /// Set when it exports `hooks`: whether its failures fail the calls it guards (the
    /// operator's `critical` when set, else the guest's `propagate-errors`).
    pub hook_critical: Option<bool>,
    /// The tools it adds (when it is an extension whose `tools` answered).
    pub tools: Vec<Arc<GuestTool>>,
    /// What it declared, to be cached for the next start.
    pub manifest: Manifest,
}

impl Loaded {
    /// Set when it exports `extension-api`: its name (from `identity`, the `source` of its
    /// capabilities) and its capability declarations (or why they failed).
    pub fn extension(&self) -> Option<(String, Result<Vec<Declaration>, String>)> {
        self.manifest.extension.as_ref().map(|e| e.declarations())
    }

    /// The hook handler to register, when the guest exports `hooks`.
    pub fn hook_handler(&self) -> Option<Arc<WasmHookHandler>> {
        self.hook_critical
            .map(|critical| Arc::new(WasmHookHandler::new(self.guest.clone(), critical)))
    }
}

/// The engine, the linker with every host function, and the compile cache. One per process.
pub struct WasmHost {
    engine: Engine,
    linker: Linker<GuestState>,
    cache: CompileCache,
    link: Arc<HostLink>,
}

impl WasmHost {
    pub fn new(cache_dir: Option<PathBuf>) -> wasmtime::Result<Self> {
        Self::with_link(cache_dir, Arc::default())
    }

    /// A host whose guests reach the server through `link` once it is connected.
    /// `cache_dir`: where compiled guests are kept (`None`: the per-user default, if any).
    pub fn with_link(cache_dir: Option<PathBuf>, link: Arc<HostLink>) -> wasmtime::Result<Self> {
        let mut config = wasmtime::Config::new();
        config
            .epoch_interruption(true)
            .max_wasm_stack(MAX_WASM_STACK)
            // Synchronous calls on the guest's own thread; component-model async would triple
            // the cost of a call and is not a stable wasmtime feature.
            .concurrency_support(false)
            // Backtraces cost time on every trap and are not shown to anyone.
            .wasm_backtrace_max_frames(None);
        compile_in_the_background();
        let engine = Engine::new(&config)?;
        let mut linker = Linker::new(&engine);
        host::link(&mut linker)?;
        start_ticker(&engine)?;
        Ok(WasmHost {
            engine,
            linker,
            cache: CompileCache::new(cache_dir),
            link,
        })
    }

    pub fn engine(&self) -> &Engine {
        &self.engine
    }

    /// Compiles (or loads from cache) and checks a component: that it is a component, that it
    /// imports nothing the host lacks, and what it exports.
    pub fn template(&self, path: &Path, settings: Arc<GuestSettings>) -> Result<Template, String> {
        self.checked_template(&read_checked(path)?, settings)
    }

    /// [`WasmHost::template`] of bytes [`read_checked`] returned.
    fn checked_template(
        &self,
        bytes: &[u8],
        settings: Arc<GuestSettings>,
    ) -> Result<Template, String> {
        let component = self
            .cache
            .load(&self.engine, bytes)
            .map_err(|e| format!("not a valid component: {}", e.root_cause()))?;
        self.template_of(&component, settings)
    }

    fn template_of(
        &self,
        component: &Component,
        settings: Arc<GuestSettings>,
    ) -> Result<Template, String> {
        let exports: Vec<String> = component
            .component_type()
            .exports(&self.engine)
            .map(|(name, _)| name.to_owned())
            .collect();
        let pre = self.linker.instantiate_pre(component).map_err(|e| {
            format!(
                "it imports something this host does not offer ({e:#}); guests may import only \
                 WASI 0.2 and the interfaces of jupyter-mcp:extension"
            )
        })?;
        let Some(indices) = api::Indices::of(&pre, &exports)? else {
            let (hooks, extension) = api::EXPORTS[0];
            return Err(format!(
                "it exports neither {hooks} nor {extension} (it exports: {}); build it against a \
                 world of wit/v{API_VERSION} (guests of wit/v0.2.0 and wit/v0.1.0 load too)",
                if exports.is_empty() {
                    "nothing".into()
                } else {
                    exports.join(", ")
                }
            ));
        };
        Ok(Template {
            pre,
            exports: indices,
            settings,
        })
    }

    /// Loads one guest: compiled (or from cache), checked, instantiated on its own thread and
    /// asked what it is.
    pub fn load(&self, entry: &ExtensionConfig) -> Result<Loaded, LoadError> {
        let refuse = |reason: String| LoadError {
            path: entry.path.clone(),
            reason,
        };
        // A mistyped grant is named even when the file is missing too.
        Policy::of(entry).map_err(refuse)?;
        let bytes = read_checked(&entry.path).map_err(refuse)?;
        self.load_checked(entry, &bytes)
    }

    /// [`WasmHost::load`] of the guest's bytes, read by [`read_checked`].
    pub fn load_checked(&self, entry: &ExtensionConfig, bytes: &[u8]) -> Result<Loaded, LoadError> {
        let refuse = |reason: String| LoadError {
            path: entry.path.clone(),
            reason,
        };
        let policy = Policy::of(entry).map_err(refuse)?;
        let settings = Arc::new(GuestSettings::new(
            file_stem(&entry.path),
            entry.config.to_string(),
            policy,
            entry.limits,
            self.link.clone(),
        ));
        self.link.policies.register(settings.clone());
        let template = self.checked_template(bytes, settings).map_err(refuse)?;
        let first = template
            .instantiate()
            .map_err(|e| refuse(format!("it failed to start: {}", e.root_cause())))?;
        let (exports_hooks, exports_extension) = (
            template.exports.handles_hooks(),
            template.exports.is_extension(),
        );
        let guest = Arc::new(Guest::new(entry.path.clone(), template, first));
        // A guest refused from here on is stopped, so no instance outlives the refusal.
        let refuse = |reason: String| {
            guest.stop();
            refuse(reason)
        };
        // Its name first, so everything after (logs, errors) names it as it calls itself.
        let extension_name = if exports_extension {
            let name = ask(&guest, GuestApi::identity).map_err(refuse)?;
            if name.trim().is_empty() {
                return Err(refuse("its identity has an empty name".into()));
            }
            guest.declare(&name);
            Some(name)
        } else {
            None
        };
        let mut asked_critical = None;
        let hook_critical = if exports_hooks {
            let asked = ask(&guest, GuestApi::propagate_errors).map_err(refuse)?;
            asked_critical = Some(asked);
            let applied = entry.critical.unwrap_or(asked);
            let kind = |critical: bool| if critical { "critical" } else { "optional" };
            match entry.critical {
                Some(set) => tracing::info!(
                    guest = guest.name(),
                    "hook handler is {}: critical = {set} in its [[extension]] entry (the guest \
                     asks to be {})",
                    kind(set),
                    kind(asked)
                ),
                None => tracing::info!(
                    guest = guest.name(),
                    "hook handler is {}, as the guest asks (set critical = true|false in its \
                     [[extension]] entry to decide)",
                    kind(asked)
                ),
            }
            Some(applied)
        } else {
            None
        };
        let extension = match extension_name {
            Some(name) => {
                let capabilities = ask(&guest, GuestApi::capabilities);
                let tools = ask(&guest, GuestApi::tools).map_err(refuse)?;
                // Empty for a guest of a version without them.
                let served = distribution::manifest::Served {
                    resources: ask(&guest, GuestApi::resources).map_err(refuse)?,
                    resource_templates: ask(&guest, GuestApi::resource_templates)
                        .map_err(refuse)?,
                    prompts: ask(&guest, GuestApi::prompts).map_err(refuse)?,
                };
                Some(distribution::manifest::ExtensionManifest {
                    name,
                    capabilities,
                    tools,
                    served,
                })
            }
            None => None,
        };
        let manifest = Manifest {
            hooks: asked_critical,
            extension,
        };
        let slot = GuestSlot::ready(guest.clone());
        let tools = extension_tools(&manifest, &slot, entry).map_err(refuse)?;
        Ok(Loaded {
            guest,
            hook_critical,
            tools,
            manifest,
        })
    }
}

/// One question a guest answers while it loads; a failed call as the text of its refusal.
fn ask<R>(guest: &Guest, question: LoadQuestion<R>) -> Result<R, String> {
    guest
        .call_blocking(CallKind::Load, question)
        .map_err(|e| e.to_string())
}

/// Cranelift compiles on rayon's global pool. Ours has a thread per core (no more: compiling
/// two guests at once shares them) at a lower priority, so a guest compiling for a minute
/// takes only the CPU that answering calls leaves (a pool a core smaller doubles a compile's
/// time on 2 cores, and a busy server still waits for its share).
fn compile_in_the_background() {
    static POOL: std::sync::Once = std::sync::Once::new();
    POOL.call_once(|| {
        let cores = std::thread::available_parallelism().map_or(1, |n| n.get());
        let built = rayon::ThreadPoolBuilder::new()
            .num_threads(cores)
            .thread_name(|i| format!("wasm-compile-{i}"))
            .start_handler(|_| lower_this_threads_priority())
            .build_global();
        if let Err(e) = built {
            tracing::debug!("compiling on the existing thread pool: {e}");
        }
    });
}

/// A lower priority (nice 5) for the calling thread only (Linux schedules threads by their own nice value).
#[allow(unsafe_code)]
pub(crate) fn lower_this_threads_priority() {
    let tid = nix::unistd::gettid().as_raw() as nix::libc::id_t;
    // SAFETY: a system call on this thread's own id with integer arguments; no memory is passed.
    let result = unsafe { nix::libc::setpriority(nix::libc::PRIO_PROCESS, tid, 5) };
    if result != 0 {
        tracing::debug!("could not lower a compile thread's priority");
    }
}

/// Advances the epoch while the engine lives; each guest's deadline callback checks its clock.
/// Without it there would be no CPU cap, so failing to start it fails the host.
fn start_ticker(engine: &Engine) -> std::io::Result<()> {
    let weak = engine.weak();
    std::thread::Builder::new()
        .name("wasm-epoch".into())
        .spawn(move || {
            while let Some(engine) = weak.upgrade() {
                engine.increment_epoch();
                drop(engine);
                std::thread::sleep(TICK);
            }
        })
        .map(drop)
}

//! Guests loaded off the handshake path. A start reads each guest's file and what it declared
//! at an earlier start (its manifest, kept with its compiled code) in milliseconds, registers
//! that at once, and serves; compiling and instantiating happen on threads of their own. When a
//! guest is ready, what it declared that was not known yet joins the registries (whose watchers
//! tell clients: `tools/list_changed`, an update of `capabilities://`), and calls waiting for it
//! go on.

use std::collections::HashMap;
use std::path::PathBuf;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Mutex, Weak};

use super::extensions::Extensions;
use crate::distribution::manifest::Manifest;
use crate::distribution::signatures::Trust;
use crate::served::register_served;
use crate::slot::GuestSlot;
use crate::tool::{ToolTable, extension_tools};
use crate::{
    CallKind, Guest, GuestTool, HostLink, LoadError, Loaded, WasmHookHandler, WasmHost, api,
    distribution::imports, file_stem, read_checked,
};
use server_core::capabilities::{Capabilities, CapabilityError, Declaration};
use server_core::catalog::Catalog;
use server_core::domain::Domain;
use server_core::extensions::{ExtensionConfig, WasmConfig};
use server_core::hooks::{HandlerId, Hooks};

/// Logged once every guest has loaded or been refused (operators and tests wait for it).
pub const GUESTS_READY: &str = "every wasm guest has loaded";

/// A guest to load: its file read and checked, its slot, and what is known of it already.
struct Pending {
    entry: ExtensionConfig,
    bytes: Vec<u8>,
    slot: Arc<GuestSlot>,
    manifest: Option<Manifest>,
    hook: Option<Arc<WasmHookHandler>>,
    /// Where its hook handler is on the bus, once registered.
    hook_id: Option<HandlerId>,
}

/// Every configured guest before it is compiled.
pub struct Loader {
    host: Option<Arc<WasmHost>>,
    pending: Vec<Pending>,
}

/// Why the server cannot go on once every guest has loaded: a setting names something no
/// guest declared.
#[derive(Debug, thiserror::Error)]
pub enum LoadedSettingsError {
    #[error(transparent)]
    Capability(#[from] CapabilityError),
    #[error(transparent)]
    Toolset(Box<dyn std::error::Error + Send + Sync>),
}

impl Loader {
    /// Reads and checks each guest's file (header and imports: a guest needing something we
    /// lack is refused here, in milliseconds; its signature, when `trust` has keys, except for
    /// the `verified` files a registry's signature vouched for) and finds what it declared at
    /// an earlier start. Compiles nothing. A refused guest is logged; the others go on.
    pub fn prepare(
        config: &WasmConfig,
        link: Arc<HostLink>,
        trust: &Trust,
        verified: &[std::path::PathBuf],
    ) -> Loader {
        if config.extensions.is_empty() {
            return Loader {
                host: None,
                pending: Vec::new(),
            };
        }
        let host = match WasmHost::with_link(config.cache_dir.clone(), link) {
            Ok(host) => Arc::new(host),
            Err(e) => {
                tracing::error!("cannot start the WebAssembly runtime, so no guest is loaded: {e}");
                return Loader {
                    host: None,
                    pending: Vec::new(),
                };
            }
        };
        let mut pending = Vec::new();
        for entry in &config.extensions {
            let checked = read_checked(&entry.path).and_then(|bytes| {
                if !verified.contains(&entry.path) {
                    trust.check_file(&entry.path, &bytes)?;
                }
                Ok(bytes)
            });
            let bytes = match checked {
                Ok(bytes) => bytes,
                Err(reason) => {
                    let refused = LoadError {
                        path: entry.path.clone(),
                        reason,
                    };
                    tracing::error!("{refused}; the server goes on without it");
                    continue;
                }
            };
            let manifest = host.cache.manifest(&bytes, &entry.config.to_string());
            let name = manifest
                .as_ref()
                .and_then(|m| m.extension.as_ref().map(|e| e.name.clone()))
                .unwrap_or_else(|| file_stem(&entry.path));
            let slot = GuestSlot::loading(&name);
            let handles_hooks = match &manifest {
                Some(manifest) => manifest.hooks.is_some(),
                None => api::handles_hooks(&imports::exports(&bytes).unwrap_or_default()),
            };
            let hook = handles_hooks.then(|| {
                let handler = WasmHookHandler::pending(
                    slot.clone(),
                    CallKind::Hook.wall_limit(&entry.limits),
                );
                // Known before the guest is ready: the operator's word, else what it asked
                // for last time.
                if let Some(critical) = entry
                    .critical
                    .or_else(|| manifest.as_ref().and_then(|m| m.hooks))
                {
                    handler.decide(critical);
                }
                Arc::new(handler)
            });
            pending.push(Pending {
                entry: entry.clone(),
                bytes,
                slot,
                manifest,
                hook,
                hook_id: None,
            });
        }
        Loader {
            host: Some(host),
            pending,
        }
    }

    /// Whether everything the guests declare is known now (each has a manifest).
    pub fn complete(&self) -> bool {
        self.pending.iter().all(|p| p.manifest.is_some())
    }

    /// The capability declarations known now, in the operator's order.
    pub fn declarations(&self) -> Vec<(String, Result<Vec<Declaration>, String>)> {
        self.pending
            .iter()
            .filter_map(|p| p.manifest.as_ref()?.extension.as_ref())
            .map(|e| e.declarations())
            .collect()
    }

    /// Registers one hook handler per guest that handles hooks, in the operator's order.
    pub fn register_hooks(&mut self, hooks: &Hooks) {
        for pending in &mut self.pending {
            if let Some(handler) = &pending.hook {
                pending.hook_id = Some(hooks.register(handler.clone()));
            }
        }
    }

    /// The runtime the guests load on (none when no guest is configured).
    pub fn host(&self) -> Option<Arc<WasmHost>> {
        self.host.clone()
    }

    /// Registers the tools, resources and prompts known now (from manifests), in the
    /// operator's order.
    pub fn register_known(
        &self,
        tools: &dyn ToolTable,
        catalog: &Catalog,
        domain_capabilities: &server_core::capabilities::Capabilities,
    ) {
        let mut claimed: HashMap<String, PathBuf> = HashMap::new();
        for pending in &self.pending {
            let Some(manifest) = &pending.manifest else {
                continue;
            };
            if let Some(extension) = &manifest.extension
                && claimed
                    .insert(extension.name.clone(), pending.entry.path.clone())
                    .is_some()
            {
                // The later one is refused when it loads; its tools are not listed.
                continue;
            }
            if let Some(extension) = &manifest.extension {
                let wait = CallKind::Tool.wall_limit(&pending.entry.limits);
                register_served(catalog, extension, &pending.slot, wait);
            }
            match extension_tools(manifest, &pending.slot, &pending.entry) {
                Ok(list) => {
                    for tool in list {
                        register(tools, tool, domain_capabilities);
                    }
                }
                Err(reason) => tracing::warn!(
                    "the cached declarations of {} are unusable ({reason}); its tools appear \
                     when it has loaded",
                    pending.entry.path.display()
                ),
            }
        }
    }

    /// Compiles and starts every guest on threads of their own; returns at once. Each one
    /// loaded joins `extensions`, to be reloaded or removed later.
    pub fn start(
        self,
        tools: Arc<dyn ToolTable>,
        catalog: Arc<Catalog>,
        domain: Arc<Domain>,
        extensions: Arc<Extensions>,
    ) -> Loading {
        let shared = Arc::new(Shared {
            running: Mutex::new(Vec::new()),
            stopping: AtomicBool::new(false),
            claimed: Mutex::new(HashMap::new()),
            // A name known from a manifest is claimed below already: nothing to wait for.
            through: Mutex::new(self.pending.iter().map(|p| p.manifest.is_some()).collect()),
            turn: std::sync::Condvar::new(),
        });
        // Names known from manifests are claimed in the operator's order.
        for pending in &self.pending {
            if let Some(extension) = pending.manifest.as_ref().and_then(|m| m.extension.as_ref()) {
                lock(&shared.claimed)
                    .entry(extension.name.clone())
                    .or_insert_with(|| pending.entry.path.clone());
            }
        }
        let (done_tx, done) = tokio::sync::watch::channel(None);
        let Some(host) = self.host else {
            done_tx.send_replace(Some(Ok(())));
            return Loading { shared, done };
        };
        let remaining = Arc::new(std::sync::atomic::AtomicUsize::new(self.pending.len()));
        let done_tx = Arc::new(done_tx);
        let started = std::time::Instant::now();
        let all_done = move |tools: &dyn ToolTable, domain: &Domain, shared: &Shared| {
            tracing::info!(
                "{GUESTS_READY}: {} ready, in {:.1?}",
                lock(&shared.running).len(),
                started.elapsed()
            );
            check_settings(tools, domain)
        };
        if self.pending.is_empty() {
            done_tx.send_replace(Some(all_done(tools.as_ref(), &domain, &shared)));
        }
        for (order, pending) in self.pending.into_iter().enumerate() {
            let (host, tools, catalog, domain, shared, extensions) = (
                host.clone(),
                tools.clone(),
                catalog.clone(),
                domain.clone(),
                shared.clone(),
                extensions.clone(),
            );
            let (remaining, done_tx) = (remaining.clone(), done_tx.clone());
            let shared_for_failure = shared.clone();
            let spawned = std::thread::Builder::new()
                .name(format!("load {}", file_stem(&pending.entry.path)))
                .spawn(move || {
                    // Compiling and starting a guest yields to serving calls.
                    crate::lower_this_threads_priority();
                    let path = pending.entry.path.clone();
                    let outcome = std::panic::catch_unwind(std::panic::AssertUnwindSafe(|| {
                        let registries = Registries {
                            tools: tools.as_ref(),
                            catalog: &catalog,
                        };
                        let turn = Turn {
                            order,
                            shared: &shared,
                        };
                        finish(&host, pending, registries, &domain, turn, &extensions)
                    }));
                    shared.pass(order);
                    if outcome.is_err() {
                        tracing::error!(
                            "loading {} failed (a bug in the server: please report it)",
                            path.display()
                        );
                    }
                    if remaining.fetch_sub(1, Ordering::AcqRel) == 1 {
                        done_tx.send_replace(Some(all_done(tools.as_ref(), &domain, &shared)));
                    }
                });
            if let Err(e) = spawned {
                tracing::error!("cannot start a thread to load a guest: {e}");
                shared_for_failure.pass(order);
            }
        }
        Loading { shared, done }
    }
}

/// Once every guest has declared: the operator's names must all exist.
fn check_settings(tools: &dyn ToolTable, domain: &Domain) -> Result<(), Arc<LoadedSettingsError>> {
    domain
        .capabilities
        .check_settings()
        .map_err(LoadedSettingsError::from)
        .and_then(|()| {
            tools
                .check_selection()
                .map_err(LoadedSettingsError::Toolset)
        })
        .map_err(Arc::new)
}

struct Shared {
    /// Held weakly: a guest removed later goes when its last call ends.
    running: Mutex<Vec<Weak<Guest>>>,
    stopping: AtomicBool,
    /// Extension names, each to one guest file.
    claimed: Mutex<HashMap<String, PathBuf>>,
    /// Per guest in the operator's order: whether it may no longer claim a name (it has claimed,
    /// been refused, or its name was known from its manifest). A guest claims only once every
    /// earlier one is through, so the first listed wins a name whichever compiles first.
    through: Mutex<Vec<bool>>,
    turn: std::sync::Condvar,
}

impl Shared {
    fn pass(&self, order: usize) {
        lock(&self.through)[order] = true;
        self.turn.notify_all();
    }

    fn wait_turn(&self, order: usize) {
        let mut through = lock(&self.through);
        while !through[..order].iter().all(|done| *done) {
            through = self.turn.wait(through).unwrap_or_else(|e| e.into_inner());
        }
    }
}

fn lock<T>(mutex: &Mutex<T>) -> std::sync::MutexGuard<'_, T> {
    mutex.lock().unwrap_or_else(|e| e.into_inner())
}

/// A guest's place in the operator's order, for claiming its extension name.
struct Turn<'a> {
    order: usize,
    shared: &'a Shared,
}

/// Where what guests declare is listed.
struct Registries<'a> {
    tools: &'a dyn ToolTable,
    catalog: &'a Catalog,
}

/// Loads one guest and makes what it declared known; on a refusal its slot says why and the
/// tools, resources and prompts listed for it from an earlier start are withdrawn.
fn finish(
    host: &WasmHost,
    pending: Pending,
    registries: Registries<'_>,
    domain: &Domain,
    turn: Turn<'_>,
    extensions: &Extensions,
) {
    let shared = turn.shared;
    let Registries { tools, catalog } = registries;
    let Pending {
        entry,
        bytes,
        slot,
        manifest,
        hook,
        hook_id,
    } = pending;
    // The tools listed from its manifest are withdrawn only if they were its own (another
    // file with the same extension name holds them otherwise).
    let withdraw = |reason: String| {
        if let Some(extension) = manifest.as_ref().and_then(|m| m.extension.as_ref())
            && lock(&shared.claimed).get(&extension.name) == Some(&entry.path)
        {
            let names: Vec<String> = extension.tools.iter().map(|t| t.name.clone()).collect();
            tools.remove_extension(&extension.name, &names);
            catalog.remove_owner(&extension.name);
        }
        slot.refuse(reason);
    };
    let loaded: Loaded = match host.load_checked(&entry, &bytes) {
        Ok(loaded) => loaded,
        Err(e) => {
            tracing::error!("{e}; the server goes on without it");
            withdraw(e.reason);
            return;
        }
    };
    let guest = loaded.guest.clone();
    if let Some(name) = loaded.manifest.extension.as_ref().map(|e| &e.name) {
        // Compiled in parallel, claimed in order.
        shared.wait_turn(turn.order);
        let mut claimed = lock(&shared.claimed);
        let holder = claimed
            .entry(name.clone())
            .or_insert_with(|| entry.path.clone());
        if *holder != entry.path {
            let reason = format!("extension name '{name}' is taken by {}", holder.display());
            drop(claimed);
            tracing::error!(
                "refused wasm guest {}: {reason}; the server goes on without it",
                entry.path.display()
            );
            guest.stop();
            withdraw(reason);
            return;
        }
    }
    let known = manifest.as_ref() == Some(&loaded.manifest);
    if !known {
        if let Some((name, declarations)) = &loaded.extension() {
            domain.capabilities.declare_all(name, declarations);
        }
        if let Some(extension) = &loaded.manifest.extension {
            let wait = CallKind::Tool.wall_limit(&entry.limits);
            register_served(catalog, extension, &slot, wait);
        }
        for tool in &loaded.tools {
            // Listed already from its manifest: keep that one. Any other holder of the name is
            // reported by `register`.
            let listed = tools.holder(&tool.name).flatten().as_deref() == Some(&tool.extension);
            if !listed {
                register(tools, tool.clone(), &domain.capabilities);
            }
        }
    }
    if let (Some(handler), Some(critical)) = (&hook, loaded.hook_critical) {
        handler.decide(critical);
    }
    lock(&shared.running).push(Arc::downgrade(&guest));
    extensions.adopt(
        entry.clone(),
        guest.clone(),
        hook_id,
        loaded.manifest.extension.is_some(),
    );
    slot.fill(guest.clone());
    if shared.stopping.load(Ordering::Acquire) {
        guest.stop();
    }
    if !known {
        host.cache
            .store_manifest(&bytes, &entry.config.to_string(), &loaded.manifest);
    }
    log_loaded(&entry, &loaded);
}

/// The guests being loaded: stopped together at exit, and a way to learn when all are done.
pub struct Loading {
    shared: Arc<Shared>,
    done: tokio::sync::watch::Receiver<Option<Result<(), Arc<LoadedSettingsError>>>>,
}

impl Loading {
    /// Stops every guest (a call parked in one ends now), and any that finishes loading later.
    pub fn stop(&self) {
        self.shared.stopping.store(true, Ordering::Release);
        for guest in lock(&self.shared.running).iter().filter_map(Weak::upgrade) {
            guest.stop();
        }
    }

    /// Resolves once every guest has loaded or been refused: `Err` when the operator's settings
    /// name a capability or tool that none declared.
    pub async fn finished(&self) -> Result<(), Arc<LoadedSettingsError>> {
        let mut done = self.done.clone();
        match done.wait_for(Option::is_some).await {
            Ok(outcome) => outcome.clone().expect("waited for Some"),
            // Never sent: nothing to wait for.
            Err(_) => std::future::pending().await,
        }
    }

    /// The guests loaded so far (benchmarks and tests).
    pub fn guests(&self) -> Vec<Arc<Guest>> {
        lock(&self.shared.running)
            .iter()
            .filter_map(Weak::upgrade)
            .collect()
    }
}

/// The line that says a guest is ready, and what it is.
pub(crate) fn log_loaded(entry: &ExtensionConfig, loaded: &Loaded) {
    tracing::info!(
        guest = loaded.guest.name(),
        "loaded wasm guest {}{}{}",
        entry.path.display(),
        match loaded.hook_critical {
            Some(true) => " (critical hook handler)",
            Some(false) => " (optional hook handler)",
            None => "",
        },
        match &loaded.manifest.extension {
            Some(extension) => format!(
                " (extension '{}', {} tool{})",
                extension.name,
                loaded.tools.len(),
                if loaded.tools.len() == 1 { "" } else { "s" }
            ),
            None => String::new(),
        }
    );
}

/// Adds the extensions' tools to the table, in load order. A name already taken (by a core
/// tool or an earlier extension) is refused and logged; the tool that has it keeps it.
pub fn register_tools(table: &dyn ToolTable, loaded: &[Loaded], capabilities: &Capabilities) {
    for tool in loaded.iter().flat_map(|l| l.tools.iter()) {
        register(table, tool.clone(), capabilities);
    }
}

/// Adds one extension tool to the table, or logs why not.
pub fn register(table: &dyn ToolTable, tool: Arc<GuestTool>, capabilities: &Capabilities) {
    let name = tool.name.clone();
    let extension = tool.extension.clone();
    if let Some(needed) = &tool.capability
        && capabilities.get(needed).is_none()
    {
        tracing::warn!(
            extension,
            "tool '{name}' needs capability '{needed}', which nothing declares; it stays hidden \
             until an extension declares it"
        );
    }
    if let Err(taken) = table.add(tool) {
        tracing::error!(
            extension,
            "refused tool '{name}' of extension '{extension}': {taken}; rename the extension's \
             tool"
        );
    }
}

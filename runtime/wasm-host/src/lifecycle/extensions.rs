//! Extensions joining, leaving and being replaced while the server runs: `extension add`,
//! `remove`, `reload` and `list` (the management routes), and the watched folder.
//!
//! What a guest offers lives in shared registries that clients already watch: tools in the
//! `ToolRegistry`, capabilities in `Capabilities`, hook handlers on the `Hooks` bus. A change here
//! is a change there (clients hear `tools/list_changed` and an update of `capabilities://`), made
//! in one step per registry: a reload puts the new version's tools where the old ones were, so no
//! call finds them missing. A call already running holds its guest (`Arc<Guest>`) and finishes on
//! it; the old instance goes when its last call ends. Nothing is stopped under a caller.
//!
//! A registry of guest resources or prompts joins in [`Extensions::install`] and
//! [`Extensions::uninstall`], the two places every add, reload and remove passes.

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Mutex};

use serde_json::{Value, json};

use crate::distribution::oci::{OciError, Registries};
use crate::distribution::signatures::{Trust, TrustError};
use crate::served::register_served;
use crate::slot::GuestSlot;
use crate::tool::ToolTable;
use crate::{CallKind, Guest, HostLink, Loaded, WasmHookHandler, WasmHost, check_bytes};
use server_core::catalog::Catalog;
use server_core::domain::Domain;
use server_core::extensions::{ExtensionConfig, WasmConfig, is_oci};
use server_core::hooks::{HandlerId, HookHandler};

/// Why a management request failed; the server goes on as it was.
#[derive(Debug, thiserror::Error)]
pub enum LifecycleError {
    #[error("no extension '{name}' is loaded (loaded: {loaded}); `extension list` shows them")]
    Unknown { name: String, loaded: String },
    #[error(
        "extension '{name}' is loaded already (from {origin}); use `extension reload {name}` to \
         load it anew, or `extension remove {name}` first"
    )]
    Loaded { name: String, origin: String },
    #[error("refused {origin}: {reason}")]
    Refused { origin: String, reason: String },
    #[error(transparent)]
    Oci(#[from] OciError),
    #[error(transparent)]
    Trust(#[from] TrustError),
    #[error("the server is shutting down")]
    Stopping,
}

impl LifecycleError {
    /// Whether the request named something that is not there (HTTP 404) rather than something
    /// that cannot be loaded (422).
    pub fn is_unknown(&self) -> bool {
        matches!(self, LifecycleError::Unknown { .. })
    }
}

/// One loaded guest and how it got here.
struct Running {
    /// Its entry; `path` is where it comes from (a file or an `oci://` reference).
    entry: ExtensionConfig,
    guest: Arc<Guest>,
    hook: Option<HandlerId>,
    /// The manifest digest it was pulled at, for one from a registry.
    digest: Option<String>,
    signed_by: Option<String>,
    /// Whether it exports the extension API (its name is its identity, its capabilities and
    /// tools are its own); a hook handler alone is named after its file.
    extension: bool,
}

/// The guest bytes a source gave, checked, and what is known of their origin.
struct Fetched {
    bytes: Vec<u8>,
    digest: Option<String>,
    signed_by: Option<String>,
}

/// A guest loaded and not yet installed.
struct Candidate {
    /// Its declared name (its file's, for a hook handler alone).
    name: String,
    entry: ExtensionConfig,
    loaded: Loaded,
    digest: Option<String>,
    signed_by: Option<String>,
}

/// The extensions of a running server, by name.
pub struct Extensions {
    config: WasmConfig,
    link: Arc<HostLink>,
    host: Mutex<Option<Arc<WasmHost>>>,
    tools: Arc<dyn ToolTable>,
    /// Where its resources, resource templates and prompts are listed.
    catalog: Arc<Catalog>,
    domain: Arc<Domain>,
    running: Mutex<BTreeMap<String, Running>>,
    /// Changes are made one at a time (an add, a reload, a remove, the watched folder).
    turn: tokio::sync::Mutex<()>,
    stopping: AtomicBool,
    /// OCI references the start pulled, by the cached file the loader read.
    pulled_at_start: Mutex<BTreeMap<PathBuf, PulledAtStart>>,
}

/// A component a start pulled from a registry: its reference, digest and signer.
pub struct PulledAtStart {
    pub reference: String,
    pub digest: String,
    pub signed_by: Option<String>,
}

fn lock<T>(mutex: &Mutex<T>) -> std::sync::MutexGuard<'_, T> {
    mutex.lock().unwrap_or_else(|e| e.into_inner())
}

impl Extensions {
    pub fn new(
        config: WasmConfig,
        link: Arc<HostLink>,
        host: Option<Arc<WasmHost>>,
        tools: Arc<dyn ToolTable>,
        catalog: Arc<Catalog>,
        domain: Arc<Domain>,
    ) -> Arc<Self> {
        Arc::new(Extensions {
            config,
            link,
            host: Mutex::new(host),
            tools,
            catalog,
            domain,
            running: Mutex::new(BTreeMap::new()),
            turn: tokio::sync::Mutex::new(()),
            stopping: AtomicBool::new(false),
            pulled_at_start: Mutex::new(BTreeMap::new()),
        })
    }

    /// The pulled components of a start, so they are listed (and reloaded) by reference.
    pub fn note_pulled(&self, pulled: Vec<(PathBuf, PulledAtStart)>) {
        lock(&self.pulled_at_start).extend(pulled);
    }

    /// Takes in a guest the start loaded, so it can be reloaded and removed like any other.
    pub(crate) fn adopt(
        &self,
        mut entry: ExtensionConfig,
        guest: Arc<Guest>,
        hook: Option<HandlerId>,
        extension: bool,
    ) {
        let (mut digest, mut signed_by) = (None, None);
        if let Some(pulled) = lock(&self.pulled_at_start).get(&entry.path) {
            entry.path = PathBuf::from(&pulled.reference);
            digest = Some(pulled.digest.clone());
            signed_by = pulled.signed_by.clone();
        }
        let name = guest.name().to_owned();
        let mut running = lock(&self.running);
        if let Some(other) = running.get(&name) {
            // Added at run time while its configured copy was still compiling: the one added
            // holds the name, its tools and capabilities; the configured one goes.
            tracing::warn!(
                "extension '{name}' from {} finished loading after `extension add` loaded it \
                 from {}; keeping the added one",
                entry.path.display(),
                other.entry.path.display()
            );
            if let Some(id) = hook {
                self.domain.hooks.unregister(id);
            }
            guest.stop();
            return;
        }
        running.insert(
            name,
            Running {
                entry,
                guest,
                hook,
                digest,
                signed_by,
                extension,
            },
        );
    }

    fn host(&self) -> Result<Arc<WasmHost>, LifecycleError> {
        let mut host = lock(&self.host);
        if let Some(host) = host.as_ref() {
            return Ok(host.clone());
        }
        let made = WasmHost::with_link(self.config.cache_dir.clone(), self.link.clone())
            .map(Arc::new)
            .map_err(|e| LifecycleError::Refused {
                origin: "the WebAssembly runtime".into(),
                reason: format!("it cannot start: {e}"),
            })?;
        *host = Some(made.clone());
        Ok(made)
    }

    fn registries(&self) -> Registries {
        Registries::new(&self.config.sources, self.config.cache_dir.clone())
    }

    /// The bytes of an entry's component, from its file or its registry, checked (a component,
    /// its imports, its signature). `resolve`: an OCI tag is asked for anew.
    async fn fetch(
        &self,
        entry: &ExtensionConfig,
        resolve: bool,
    ) -> Result<Fetched, LifecycleError> {
        // Read each time: a key file replaced on disk applies to the next add.
        let trust = Trust::load(&self.config.sources)?;
        let source = entry.path.display().to_string();
        let refuse = |reason: String| LifecycleError::Refused {
            origin: source.clone(),
            reason,
        };
        if is_oci(&entry.path) {
            let pulled = self.registries().pull(&source, &trust, resolve).await?;
            check_bytes(&pulled.bytes).map_err(refuse)?;
            return Ok(Fetched {
                bytes: pulled.bytes,
                digest: Some(pulled.digest),
                signed_by: pulled.signed_by,
            });
        }
        let path = entry.path.clone();
        let read = tokio::task::spawn_blocking(move || {
            let bytes = std::fs::read(&path).map_err(|e| format!("cannot read it: {e}"))?;
            check_bytes(&bytes)?;
            let signed_by = trust.check_file(&path, &bytes)?;
            Ok::<_, String>((bytes, signed_by))
        })
        .await
        .map_err(|e| refuse(format!("reading it failed: {e}")))?;
        let (bytes, signed_by) = read.map_err(refuse)?;
        Ok(Fetched {
            bytes,
            digest: None,
            signed_by,
        })
    }

    /// Compiles and starts a guest off the async workers (it can take seconds).
    async fn load(
        &self,
        entry: &ExtensionConfig,
        bytes: Vec<u8>,
    ) -> Result<(Loaded, Vec<u8>), LifecycleError> {
        let host = self.host()?;
        let entry = entry.clone();
        let source = entry.path.display().to_string();
        let loaded = tokio::task::spawn_blocking(move || {
            crate::lower_this_threads_priority();
            let loaded = host.load_checked(&entry, &bytes);
            if let Ok(loaded) = &loaded {
                host.cache
                    .store_manifest(&bytes, &entry.config.to_string(), &loaded.manifest);
            }
            loaded.map(|loaded| (loaded, bytes))
        })
        .await
        .map_err(|e| LifecycleError::Refused {
            origin: source.clone(),
            reason: format!("loading it failed (a bug in the server: please report it): {e}"),
        })?;
        let (loaded, bytes) = loaded.map_err(|e| LifecycleError::Refused {
            origin: source,
            reason: e.reason,
        })?;
        if self.stopping.load(Ordering::Acquire) {
            loaded.guest.stop();
            return Err(LifecycleError::Stopping);
        }
        Ok((loaded, bytes))
    }

    /// Fetches and loads an entry's component, refused when its name is loaded already (by
    /// another than `replacing`).
    async fn candidate(
        &self,
        entry: &ExtensionConfig,
        replacing: Option<&str>,
    ) -> Result<Candidate, LifecycleError> {
        let fetched = self.fetch(entry, true).await?;
        let (loaded, _) = self.load(entry, fetched.bytes).await?;
        let name = loaded.guest.name().to_owned();
        if replacing != Some(name.as_str())
            && let Some(other) = lock(&self.running).get(&name)
        {
            loaded.guest.stop();
            return Err(LifecycleError::Loaded {
                name,
                origin: other.entry.path.display().to_string(),
            });
        }
        Ok(Candidate {
            name,
            entry: entry.clone(),
            loaded,
            digest: fetched.digest,
            signed_by: fetched.signed_by,
        })
    }

    /// Loads a component into the running server: `extension add`.
    pub async fn add(&self, entry: ExtensionConfig) -> Result<Value, LifecycleError> {
        let _turn = self.turn.lock().await;
        let candidate = self.candidate(&entry, None).await?;
        let source = entry.path.display().to_string();
        // Nothing is half-added: a tool name another holds refuses the whole component.
        if let Some((tool, holder)) = candidate.loaded.tools.iter().find_map(|tool| {
            let holder = self.tools.holder(&tool.name)?;
            Some((tool.name.clone(), holder))
        }) {
            candidate.loaded.guest.stop();
            return Err(LifecycleError::Refused {
                origin: source,
                reason: format!(
                    "its tool '{tool}' is taken by {}; rename the extension's tool",
                    holder.map_or("a core tool".into(), |h| format!("extension '{h}'"))
                ),
            });
        }
        let name = candidate.name.clone();
        self.install(None, candidate);
        tracing::info!("added extension '{name}' from {source}");
        Ok(self.describe(&name))
    }

    /// Loads an extension's component anew and puts it in the old one's place:
    /// `extension reload`. New calls go to the new instance; calls in flight finish on the old.
    pub async fn reload(&self, name: &str) -> Result<Value, LifecycleError> {
        let _turn = self.turn.lock().await;
        let entry = self.entry_of(name)?;
        let candidate = self.candidate(&entry, Some(name)).await?;
        let new_name = candidate.name.clone();
        self.install(Some(name), candidate);
        tracing::info!("reloaded extension '{name}'");
        Ok(self.describe(&new_name))
    }

    /// Unloads an extension: `extension remove`. Calls in flight finish first, on their own.
    pub async fn remove(&self, name: &str) -> Result<Value, LifecycleError> {
        let _turn = self.turn.lock().await;
        let summary = self.describe(name);
        // The guard is let go before `unknown` takes the lock again.
        let removed = lock(&self.running).remove(name);
        let running = removed.ok_or_else(|| self.unknown(name))?;
        self.uninstall(name, &running);
        if let Some(id) = running.hook {
            self.domain.hooks.unregister(id);
        }
        tracing::info!(
            "removed extension '{name}' (from {})",
            running.entry.path.display()
        );
        Ok(summary)
    }

    /// What each extension is: `extension list`.
    pub fn list(&self) -> Value {
        let names: Vec<String> = lock(&self.running).keys().cloned().collect();
        Value::Array(names.iter().map(|n| self.describe(n)).collect())
    }

    /// The name of the extension loaded from `path` (the watched folder), if any.
    pub fn loaded_from(&self, path: &Path) -> Option<String> {
        lock(&self.running)
            .iter()
            .find(|(_, r)| r.entry.path == path)
            .map(|(name, _)| name.clone())
    }

    /// Stops every guest (at exit), and any an add or reload in progress loads.
    pub fn stop(&self) {
        self.stopping.store(true, Ordering::Release);
        for running in lock(&self.running).values() {
            running.guest.stop();
        }
    }

    fn entry_of(&self, name: &str) -> Result<ExtensionConfig, LifecycleError> {
        let entry = lock(&self.running).get(name).map(|r| r.entry.clone());
        entry.ok_or_else(|| self.unknown(name))
    }

    fn unknown(&self, name: &str) -> LifecycleError {
        let loaded: Vec<String> = lock(&self.running).keys().cloned().collect();
        LifecycleError::Unknown {
            name: name.to_owned(),
            loaded: if loaded.is_empty() {
                "none".into()
            } else {
                loaded.join(", ")
            },
        }
    }

    /// Makes a loaded guest's offer known, in place of `replacing`'s when it is a reload: its
    /// capabilities (the operator's settings apply to them again), its tools (one change of
    /// the tool list), its hook handler (in the old one's place in the order).
    fn install(&self, replacing: Option<&str>, candidate: Candidate) {
        let Candidate {
            name,
            entry,
            loaded,
            digest,
            signed_by,
        } = candidate;
        let name = name.as_str();
        let old = replacing.and_then(|old| lock(&self.running).remove(old));
        let extension = loaded.manifest.extension.is_some();
        let capabilities = &self.domain.capabilities;
        if let (Some(old_name), Some(old)) = (replacing, &old)
            && (old_name != name || !extension)
        {
            self.uninstall(old_name, old);
        }
        if let Some((_, declarations)) = loaded.extension() {
            capabilities.redeclare(name, &declarations);
        }
        for tool in &loaded.tools {
            if let Some(needed) = &tool.capability
                && capabilities.get(needed).is_none()
            {
                tracing::warn!(
                    extension = name,
                    "tool '{}' needs capability '{needed}', which nothing declares; it stays \
                     hidden until an extension declares it",
                    tool.name
                );
            }
        }
        for (tool, taken) in self.tools.replace_extension(name, loaded.tools.clone()) {
            tracing::error!(
                extension = name,
                "refused tool '{tool}' of extension '{name}': {taken}; rename the extension's tool"
            );
        }
        // Resources and prompts: the new instance's offer in place of the old one's.
        self.catalog.remove_owner(name);
        if let Some(served) = &loaded.manifest.extension {
            let wait = CallKind::Tool.wall_limit(&entry.limits);
            register_served(
                &self.catalog,
                served,
                &GuestSlot::ready(loaded.guest.clone()),
                wait,
            );
        }
        let handler: Option<Arc<dyn HookHandler>> = loaded
            .hook_handler()
            .map(|h: Arc<WasmHookHandler>| h as Arc<dyn HookHandler>);
        let hooks = &self.domain.hooks;
        let hook = match (old.as_ref().and_then(|o| o.hook), handler) {
            (Some(id), Some(handler)) => {
                hooks.replace(id, handler);
                Some(id)
            }
            (Some(id), None) => {
                hooks.unregister(id);
                None
            }
            (None, Some(handler)) => Some(hooks.register(handler)),
            (None, None) => None,
        };
        lock(&self.running).insert(
            name.to_owned(),
            Running {
                entry,
                guest: loaded.guest.clone(),
                hook,
                digest,
                signed_by,
                extension,
            },
        );
        if self.stopping.load(Ordering::Acquire) {
            loaded.guest.stop();
        }
    }

    /// Withdraws what an extension offers (tools, capabilities, resources, prompts); its hook handler is the
    /// caller's to unregister.
    fn uninstall(&self, name: &str, running: &Running) {
        if running.extension {
            self.domain.capabilities.withdraw(name);
        }
        self.tools.replace_extension(name, Vec::new());
        self.catalog.remove_owner(name);
    }

    fn describe(&self, name: &str) -> Value {
        let running = lock(&self.running);
        let Some(running) = running.get(name) else {
            return json!({ "name": name });
        };
        let capabilities: Vec<Value> = if running.extension {
            let block = self.domain.capabilities.block();
            let prefix = format!("{name}.");
            block["declared"]
                .as_array()
                .into_iter()
                .flatten()
                .filter(|c| c["name"].as_str().is_some_and(|n| n.starts_with(&prefix)))
                .cloned()
                .collect()
        } else {
            Vec::new()
        };
        json!({
            "name": name,
            "source": running.entry.path.display().to_string(),
            "digest": running.digest,
            "signed_by": running.signed_by,
            "tools": self.tools.names_of(name),
            "capabilities": capabilities,
            "hook_handler": running.hook.is_some(),
        })
    }
}

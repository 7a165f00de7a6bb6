//! Capabilities: what the server does behind a client's back, made visible and switchable.
//!
//! Each capability has a name, a description, whether it is on, and the source that decided it.
//! Sources apply in this order, later ones winning: the defaults, extensions' declarations, the
//! config file, `JUPYTER_MCP_CAPABILITIES`, `--capability`. An extension declares what it adds and
//! its default state, but never undoes an operator's explicit setting.
//!
//! Extensions may declare after the server started (a guest still compiling when the first
//! client connected): their capabilities join the registry then, the operator's settings apply to
//! them as they would have at start, and watchers of [`Capabilities::changes`] hear of it.

use std::collections::BTreeMap;
use std::sync::RwLock;

use serde_json::{Value, json};

pub const AUTO_RESTART: &str = "kernel.auto-restart";
pub const ADOPT_SESSION: &str = "kernel.adopt-session";
pub const PREWARM: &str = "kernel.prewarm";
pub const COMPACT_OUTPUT: &str = "output.compact";
pub const EXECUTION_CONFIRM: &str = "execution.confirm";
pub const GRANT_PROMPTS: &str = "extensions.grant-prompts";
pub const KERNEL_SANDBOX: &str = "kernel.sandbox";
pub const EGRESS_PROMPTS: &str = "kernel.egress-prompts";

/// Name prefixes an extension may not use: they belong to the core.
const RESERVED_PREFIXES: [&str; 3] = ["kernel", "server", "notebook"];

#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Source {
    Default,
    Config,
    Env,
    Cli,
    Extension(String),
}

impl Source {
    pub fn as_str(&self) -> &str {
        match self {
            Source::Default => "default",
            Source::Config => "config",
            Source::Env => "env",
            Source::Cli => "cli",
            Source::Extension(name) => name,
        }
    }
}

#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Capability {
    pub name: String,
    pub description: String,
    pub enabled: bool,
    pub source: Source,
}

/// A capability an extension says it adds.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Declaration {
    pub name: String,
    pub description: String,
    pub enabled: bool,
}

#[derive(Debug, thiserror::Error, PartialEq, Eq)]
pub enum CapabilityError {
    #[error(
        "unknown capability '{name}' (from {origin}): this server has no such capability. Known capabilities: {known}"
    )]
    Unknown {
        name: String,
        origin: String,
        known: String,
    },
    #[error("extension '{extension}' cannot declare '{name}': {reason}")]
    Refused {
        extension: String,
        name: String,
        reason: String,
    },
}

/// Parses `name` or `name=value` entries (comma separated in the environment). A bare name is on;
/// `off`, `false`, `0`, `no`, `disabled` (any case) are off; any other value is on.
pub fn parse_setting(entry: &str) -> Option<(String, bool)> {
    let entry = entry.trim();
    if entry.is_empty() {
        return None;
    }
    Some(match entry.split_once('=') {
        None => (entry.to_owned(), true),
        Some((name, value)) => {
            let off = matches!(
                value.trim().to_ascii_lowercase().as_str(),
                "off" | "false" | "0" | "no" | "disabled"
            );
            (name.trim().to_owned(), !off)
        }
    })
}

/// The registry: shared by the whole server, read on every call, written when an extension
/// declares.
#[derive(Debug)]
pub struct Capabilities {
    table: RwLock<Table>,
    /// The operator's settings, kept to apply to what extensions declare later.
    settings: Settings,
    /// Bumped on every change of the table.
    changed: tokio::sync::watch::Sender<u64>,
}

#[derive(Debug, Clone)]
struct Table {
    declared: BTreeMap<String, Capability>,
}

impl Default for Capabilities {
    fn default() -> Self {
        Capabilities {
            table: RwLock::new(Table::default()),
            settings: Settings::default(),
            changed: tokio::sync::watch::Sender::new(0),
        }
    }
}

impl Default for Table {
    fn default() -> Self {
        let mut declared = BTreeMap::new();
        for (name, enabled, description) in [
            (
                AUTO_RESTART,
                false,
                "Start a replacement kernel when a notebook's kernel is gone (deleted, dead, or \
                 restarted elsewhere) and carry on. Off: the call fails and says the kernel's state \
                 was lost, until restart_notebook is called.",
            ),
            (
                ADOPT_SESSION,
                false,
                "When use_notebook opens a notebook that already has a Jupyter session (a person \
                 has it open), attach to that session's kernel instead of starting our own.",
            ),
            (
                PREWARM,
                false,
                "Keep a started, idle spare kernel per recently used kernelspec, so use_notebook and \
                 execute_code's default kernel start in a fraction of a second. A spare is fresh \
                 (never used before it is handed out), is marked as a spare in list_kernels, costs \
                 the memory of one idle kernel, and is stopped at exit.",
            ),
            (
                COMPACT_OUTPUT,
                true,
                "Shorten the outputs tools return to what a model can use, saying in one line \
                 what was left out and where the whole output is: long streams keep their first \
                 and last lines, repeated lines and traceback frames are collapsed with their \
                 count (the exception itself always kept), tables keep head and tail rows and \
                 their shape, images are scaled to --max-image-px and --max-image-megapixels and \
                 re-encoded, at most --max-images per result. Off: outputs whole, cut only at \
                 --max-output-chars.",
            ),
            (
                EXECUTION_CONFIRM,
                false,
                "Ask the person through MCP elicitation before code runs (execute_code, \
                 execute_cell, insert_execute_code_cell, run_all_cells, an extension's \
                 execute-code), showing the code and where it runs; declined or cancelled, \
                 nothing runs and the result says so. Which code is asked follows the config's \
                 [execution_confirm] (ask = \"always\" or \"matching\" with patterns). A client \
                 without elicitation is refused. A person's judgement, not a sandbox.",
            ),
            (
                GRANT_PROMPTS,
                false,
                "When an extension uses a host function, client function (elicit, sample) or \
                 secret it was not granted, ask the person through MCP elicitation whether to \
                 grant it, for this call or for this session, naming the extension, the grant \
                 and the tool call it came up in; declined, it stays refused. What the person \
                 grants is logged, shown by `policy EXTENSION`, taken back by `revoke`, and never \
                 written to the config file unless the operator's [grant_prompts] allow_always \
                 lets them answer \"always\"; [grant_prompts] never lists grants never asked for.",
            ),
            (
                KERNEL_SANDBOX,
                false,
                "Confine every kernel this server starts (execute_code's, each notebook's, \
                 replacements, spares): it reads everything but a deny list (~/.ssh, ~/.aws, \
                 cloud and registry credentials, this server's secrets, state and config, the \
                 config's [kernel_sandbox] deny_read), writes only beneath the root directory, \
                 its own TMPDIR and [kernel_sandbox] write, reaches the network only through an \
                 egress proxy that allows the hosts in [kernel_sandbox] hosts (never the Jupyter \
                 Server), and cannot signal, trace or read other processes. Subprocesses inherit \
                 it. Linux namespaces, Landlock and seccomp; the server refuses to start with it \
                 on where they are missing, and with a Jupyter it did not start itself.",
            ),
            (
                EGRESS_PROMPTS,
                false,
                "With kernel.sandbox: when a sandboxed kernel connects to a host not in \
                 [kernel_sandbox] hosts, hold the connection and ask the person through the MCP \
                 client whose call runs the code (host, port, notebook, the code's first line): \
                 for this run, for this session, or always when [grant_prompts] allow_always \
                 (written to hosts). No answer before the call's deadline, a decline, a client \
                 without elicitation or no call running (a background run): refused, saying \
                 which. `sandbox hosts` lists what was allowed, `sandbox revoke HOST` takes it \
                 back.",
            ),
        ] {
            declared.insert(
                name.to_owned(),
                Capability {
                    name: name.to_owned(),
                    description: description.to_owned(),
                    enabled,
                    source: Source::Default,
                },
            );
        }
        Table { declared }
    }
}

/// Operator settings, by source.
#[derive(Debug, Clone, Default)]
pub struct Settings {
    pub config: Vec<(String, bool)>,
    pub env: Option<String>,
    pub cli: Vec<String>,
}

impl Settings {
    /// Every setting with its source, in the order they apply (later ones win).
    fn entries(&self) -> Vec<(String, bool, Source)> {
        let mut entries: Vec<(String, bool, Source)> = self
            .config
            .iter()
            .map(|(name, enabled)| (name.clone(), *enabled, Source::Config))
            .collect();
        if let Some(env) = &self.env {
            entries.extend(
                env.split(',')
                    .filter_map(parse_setting)
                    .map(|(name, enabled)| (name, enabled, Source::Env)),
            );
        }
        entries.extend(
            self.cli
                .iter()
                .filter_map(|entry| parse_setting(entry))
                .map(|(name, enabled)| (name, enabled, Source::Cli)),
        );
        entries
    }
}

impl Capabilities {
    /// Builds the registry: core defaults, then each extension's declarations (in load order),
    /// then the operator's settings. Names are checked after extensions declared theirs.
    pub fn build(
        extensions: &[(String, Result<Vec<Declaration>, String>)],
        settings: &Settings,
    ) -> Result<Self, CapabilityError> {
        let registry = Self::build_pending(extensions, settings);
        registry.check_settings()?;
        Ok(registry)
    }

    /// Like [`Capabilities::build`] while extensions may still declare: a setting naming no
    /// capability yet waits for [`Capabilities::check_settings`], called once every extension
    /// has declared.
    pub fn build_pending(
        extensions: &[(String, Result<Vec<Declaration>, String>)],
        settings: &Settings,
    ) -> Self {
        let registry = Capabilities {
            settings: settings.clone(),
            ..Capabilities::default()
        };
        {
            let mut table = registry.table.write().unwrap_or_else(|e| e.into_inner());
            for (name, enabled, source) in settings.entries() {
                if let Some(capability) = table.declared.get_mut(&name) {
                    capability.enabled = enabled;
                    capability.source = source;
                }
            }
        }
        for (extension, declarations) in extensions {
            registry.declare_all(extension, declarations);
        }
        registry
    }

    /// Adds what one extension declares (each refusal, or its failure to declare, is logged;
    /// it costs only its own declarations), then applies the operator's settings to them.
    pub fn declare_all(&self, extension: &str, declarations: &Result<Vec<Declaration>, String>) {
        match declarations {
            Ok(declarations) => {
                for declaration in declarations {
                    if let Err(e) = self.declare(extension, declaration.clone()) {
                        tracing::warn!("{e}");
                    }
                }
            }
            Err(reason) => {
                tracing::warn!(
                    "extension '{extension}' failed to declare its capabilities: {reason}"
                );
            }
        }
    }

    /// Errs on the first operator setting that names no capability; the error lists those that
    /// exist.
    pub fn check_settings(&self) -> Result<(), CapabilityError> {
        let table = self.read();
        for (name, _, source) in self.settings.entries() {
            if !table.declared.contains_key(&name) {
                return Err(CapabilityError::Unknown {
                    name,
                    origin: match source {
                        Source::Cli => "--capability".into(),
                        Source::Env => "JUPYTER_MCP_CAPABILITIES".into(),
                        Source::Config => "the config file".into(),
                        other => other.as_str().to_owned(),
                    },
                    known: table.known_names(),
                });
            }
        }
        Ok(())
    }

    /// A receiver that sees a new value after every change (a late declaration).
    pub fn changes(&self) -> tokio::sync::watch::Receiver<u64> {
        self.changed.subscribe()
    }

    fn read(&self) -> std::sync::RwLockReadGuard<'_, Table> {
        self.table.read().unwrap_or_else(|e| e.into_inner())
    }

    /// Adds an extension's capability (namespaced, not the core's, first declaration wins).
    pub fn declare(
        &self,
        extension: &str,
        declaration: Declaration,
    ) -> Result<(), CapabilityError> {
        self.check_name(extension, &declaration.name)?;
        let mut table = self.table.write().unwrap_or_else(|e| e.into_inner());
        self.declare_in(&mut table, extension, declaration)?;
        drop(table);
        self.changed.send_modify(|version| *version += 1);
        Ok(())
    }

    /// An extension declares under its own namespace only, never the core's.
    fn check_name(&self, extension: &str, name: &str) -> Result<(), CapabilityError> {
        let refuse = |reason: &str| CapabilityError::Refused {
            extension: extension.to_owned(),
            name: name.to_owned(),
            reason: reason.to_owned(),
        };
        let Some((prefix, _)) = name.split_once('.') else {
            return Err(refuse(
                "names must be namespaced with a dot, e.g. 'myext.feature'",
            ));
        };
        if RESERVED_PREFIXES.contains(&prefix) {
            return Err(refuse(
                "the 'kernel', 'server' and 'notebook' namespaces belong to the core",
            ));
        }
        // The WIT promises each extension its own namespace: no squatting on another's names.
        if prefix != extension {
            return Err(refuse(&format!(
                "an extension declares names under its own identity only ('{extension}.…'), \
                 not under '{prefix}.'"
            )));
        }
        Ok(())
    }

    /// [`Capabilities::declare`] under the table's lock, its name already checked; watchers are
    /// the caller's to tell.
    fn declare_in(
        &self,
        table: &mut Table,
        extension: &str,
        declaration: Declaration,
    ) -> Result<(), CapabilityError> {
        let refuse = |reason: &str| CapabilityError::Refused {
            extension: extension.to_owned(),
            name: declaration.name.clone(),
            reason: reason.to_owned(),
        };
        if let Some(existing) = table.declared.get(&declaration.name) {
            return Err(refuse(&format!(
                "already declared by {}",
                existing.source.as_str()
            )));
        }
        let name = declaration.name.clone();
        let mut capability = Capability {
            name: declaration.name,
            description: declaration.description,
            enabled: declaration.enabled,
            source: Source::Extension(extension.to_owned()),
        };
        // The operator's word wins over the extension's default, whenever it declares.
        for (set, enabled, source) in self.settings.entries() {
            if set == name {
                capability.enabled = enabled;
                capability.source = source;
            }
        }
        table.declared.insert(name, capability);
        Ok(())
    }

    /// Puts what an extension declares now in place of what it declared before, in one change
    /// (a reload: its gated tools never see their capability missing). The operator's settings
    /// apply to the new declarations as to the old.
    pub fn redeclare(&self, extension: &str, declarations: &Result<Vec<Declaration>, String>) {
        let mut table = self.table.write().unwrap_or_else(|e| e.into_inner());
        table.withdraw(extension);
        match declarations {
            Ok(declarations) => {
                for declaration in declarations {
                    let checked = self
                        .check_name(extension, &declaration.name)
                        .and_then(|()| self.declare_in(&mut table, extension, declaration.clone()));
                    if let Err(e) = checked {
                        tracing::warn!("{e}");
                    }
                }
            }
            Err(reason) => tracing::warn!(
                "extension '{extension}' failed to declare its capabilities: {reason}"
            ),
        }
        drop(table);
        self.changed.send_modify(|version| *version += 1);
    }

    /// Withdraws every capability an extension declared (its namespace, `NAME.…`: an extension
    /// declares nowhere else), whatever the operator set them to; the settings stay, so they
    /// apply again when it declares anew (a reload). Watchers hear of it.
    pub fn withdraw(&self, extension: &str) {
        let mut table = self.table.write().unwrap_or_else(|e| e.into_inner());
        let changed = table.withdraw(extension);
        drop(table);
        if changed {
            self.changed.send_modify(|version| *version += 1);
        }
    }

    /// Whether a capability is on (an unknown name reads as off).
    pub fn enabled(&self, name: &str) -> bool {
        self.read().declared.get(name).is_some_and(|c| c.enabled)
    }

    pub fn get(&self, name: &str) -> Option<Capability> {
        self.read().declared.get(name).cloned()
    }

    /// The block shown in `server/discover`, `initialize` and the `capabilities://` resource.
    pub fn block(&self) -> Value {
        self.read().block()
    }
}

impl Table {
    /// Drops what an extension declared (its namespace); whether anything went.
    fn withdraw(&mut self, extension: &str) -> bool {
        let prefix = format!("{extension}.");
        let before = self.declared.len();
        self.declared.retain(|name, capability| {
            !(name.starts_with(&prefix) && capability.source != Source::Default)
        });
        self.declared.len() != before
    }

    fn known_names(&self) -> String {
        if self.declared.is_empty() {
            "(none)".into()
        } else {
            self.declared.keys().cloned().collect::<Vec<_>>().join(", ")
        }
    }

    fn block(&self) -> Value {
        let on: Vec<&str> = self
            .declared
            .values()
            .filter(|c| c.enabled)
            .map(|c| c.name.as_str())
            .collect();
        let declared: Vec<Value> = self
            .declared
            .values()
            .map(|c| {
                json!({
                    "name": c.name,
                    "description": c.description,
                    "enabled": c.enabled,
                    "source": c.source.as_str(),
                })
            })
            .collect();
        json!({ "version": "1", "capabilities": on, "declared": declared })
    }
}

#[cfg(test)]
mod tests;

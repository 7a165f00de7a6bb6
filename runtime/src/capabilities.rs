//! Capabilities: what the server does behind a client's back, made visible and switchable.
//!
//! Each capability has a name, a description, whether it is on, and the source that decided it.
//! Sources apply in this order, later ones winning: the defaults, extensions' declarations, the
//! config file, `JUPYTER_MCP_CAPABILITIES`, `--capability`. An extension declares what it adds and
//! its default state, but never undoes an operator's explicit setting.

use std::collections::BTreeMap;

use serde_json::{Value, json};

pub const AUTO_RESTART: &str = "kernel.auto-restart";
pub const ADOPT_SESSION: &str = "kernel.adopt-session";
pub const PREWARM: &str = "kernel.prewarm";

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

#[derive(Debug, Clone)]
pub struct Capabilities {
    declared: BTreeMap<String, Capability>,
}

impl Default for Capabilities {
    fn default() -> Self {
        let mut declared = BTreeMap::new();
        for (name, description) in [
            (
                AUTO_RESTART,
                "Start a replacement kernel when a notebook's kernel is gone (deleted, dead, or \
                 restarted elsewhere) and carry on. Off: the call fails and says the kernel's state \
                 was lost, until restart_notebook is called.",
            ),
            (
                ADOPT_SESSION,
                "When use_notebook opens a notebook that already has a Jupyter session (a person \
                 has it open), attach to that session's kernel instead of starting our own.",
            ),
            (
                PREWARM,
                "Keep a started, idle spare kernel per recently used kernelspec, so use_notebook and \
                 execute_code's default kernel start in a fraction of a second. A spare is fresh \
                 (never used before it is handed out), is marked as a spare in list_kernels, costs \
                 the memory of one idle kernel, and is stopped at exit.",
            ),
        ] {
            declared.insert(
                name.to_owned(),
                Capability {
                    name: name.to_owned(),
                    description: description.to_owned(),
                    enabled: false,
                    source: Source::Default,
                },
            );
        }
        Capabilities { declared }
    }
}

/// Operator settings, by source.
#[derive(Debug, Clone, Default)]
pub struct Settings {
    pub config: Vec<(String, bool)>,
    pub env: Option<String>,
    pub cli: Vec<String>,
}

impl Capabilities {
    /// Builds the registry: core defaults, then each extension's declarations (in load order),
    /// then the operator's settings. Names are checked after extensions declared theirs.
    pub fn build(
        extensions: &[(String, Result<Vec<Declaration>, String>)],
        settings: &Settings,
    ) -> Result<Self, CapabilityError> {
        let mut registry = Capabilities::default();
        for (extension, declarations) in extensions {
            match declarations {
                Ok(declarations) => {
                    for declaration in declarations {
                        if let Err(e) = registry.declare(extension, declaration.clone()) {
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
        for (name, enabled) in &settings.config {
            registry.set(name, *enabled, Source::Config)?;
        }
        if let Some(env) = &settings.env {
            for (name, enabled) in env.split(',').filter_map(parse_setting) {
                registry.set(&name, enabled, Source::Env)?;
            }
        }
        for entry in &settings.cli {
            if let Some((name, enabled)) = parse_setting(entry) {
                registry.set(&name, enabled, Source::Cli)?;
            }
        }
        Ok(registry)
    }

    /// Adds an extension's capability (namespaced, not the core's, first declaration wins).
    pub fn declare(
        &mut self,
        extension: &str,
        declaration: Declaration,
    ) -> Result<(), CapabilityError> {
        let refuse = |reason: &str| CapabilityError::Refused {
            extension: extension.to_owned(),
            name: declaration.name.clone(),
            reason: reason.to_owned(),
        };
        let Some((prefix, _)) = declaration.name.split_once('.') else {
            return Err(refuse(
                "names must be namespaced with a dot, e.g. 'myext.feature'",
            ));
        };
        if RESERVED_PREFIXES.contains(&prefix) {
            return Err(refuse(
                "the 'kernel', 'server' and 'notebook' namespaces belong to the core",
            ));
        }
        if let Some(existing) = self.declared.get(&declaration.name) {
            return Err(refuse(&format!(
                "already declared by {}",
                existing.source.as_str()
            )));
        }
        self.declared.insert(
            declaration.name.clone(),
            Capability {
                name: declaration.name,
                description: declaration.description,
                enabled: declaration.enabled,
                source: Source::Extension(extension.to_owned()),
            },
        );
        Ok(())
    }

    fn set(&mut self, name: &str, enabled: bool, source: Source) -> Result<(), CapabilityError> {
        let known = self.known_names();
        match self.declared.get_mut(name) {
            Some(capability) => {
                capability.enabled = enabled;
                capability.source = source;
                Ok(())
            }
            None => Err(CapabilityError::Unknown {
                name: name.to_owned(),
                origin: match source {
                    Source::Cli => "--capability".into(),
                    Source::Env => "JUPYTER_MCP_CAPABILITIES".into(),
                    Source::Config => "the config file".into(),
                    other => other.as_str().to_owned(),
                },
                known,
            }),
        }
    }

    fn known_names(&self) -> String {
        if self.declared.is_empty() {
            "(none)".into()
        } else {
            self.declared.keys().cloned().collect::<Vec<_>>().join(", ")
        }
    }

    /// Whether a capability is on (an unknown name reads as off).
    pub fn enabled(&self, name: &str) -> bool {
        self.declared.get(name).is_some_and(|c| c.enabled)
    }

    pub fn get(&self, name: &str) -> Option<&Capability> {
        self.declared.get(name)
    }

    /// The block shown in `server/discover`, `initialize` and the `capabilities://` resource.
    pub fn block(&self) -> Value {
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
mod tests {
    use super::*;

    fn settings(config: &[(&str, bool)], env: Option<&str>, cli: &[&str]) -> Settings {
        Settings {
            config: config.iter().map(|(n, e)| (n.to_string(), *e)).collect(),
            env: env.map(str::to_owned),
            cli: cli.iter().map(|s| s.to_string()).collect(),
        }
    }

    fn extension(name: &str, caps: &[(&str, bool)]) -> (String, Result<Vec<Declaration>, String>) {
        let declarations = caps
            .iter()
            .map(|(n, e)| Declaration {
                name: n.to_string(),
                description: "test".into(),
                enabled: *e,
            })
            .collect();
        (name.to_owned(), Ok(declarations))
    }

    #[test]
    fn values_parse_like_the_spec() {
        assert_eq!(parse_setting("a.b"), Some(("a.b".into(), true)));
        for off in ["off", "FALSE", "0", "No", " disabled "] {
            assert_eq!(
                parse_setting(&format!("a.b={off}")),
                Some(("a.b".into(), false)),
                "{off}"
            );
        }
        assert_eq!(parse_setting("a.b=whatever"), Some(("a.b".into(), true)));
        assert_eq!(parse_setting("  "), None);
    }

    #[test]
    fn defaults_are_off() {
        let registry = Capabilities::build(&[], &Settings::default()).unwrap();
        assert!(!registry.enabled(AUTO_RESTART));
        assert_eq!(registry.get(ADOPT_SESSION).unwrap().source, Source::Default);
        assert_eq!(registry.block()["capabilities"], json!([]));
        assert_eq!(registry.block()["version"], "1");
    }

    #[test]
    fn precedence_later_wins_and_operators_beat_extensions() {
        let ext = [extension("snap", &[("snap.snapshots", true)])];
        let r = Capabilities::build(&ext, &settings(&[(AUTO_RESTART, true)], None, &[])).unwrap();
        assert_eq!(r.get(AUTO_RESTART).unwrap().source, Source::Config);
        assert!(r.enabled("snap.snapshots"));
        assert_eq!(
            r.get("snap.snapshots").unwrap().source,
            Source::Extension("snap".into())
        );
        let r = Capabilities::build(
            &ext,
            &settings(
                &[(AUTO_RESTART, true)],
                Some("kernel.auto-restart=off, ,snap.snapshots=off"),
                &["kernel.auto-restart"],
            ),
        )
        .unwrap();
        assert!(r.enabled(AUTO_RESTART));
        assert_eq!(r.get(AUTO_RESTART).unwrap().source, Source::Cli);
        assert!(
            !r.enabled("snap.snapshots"),
            "an operator turns off what an extension turned on"
        );
        assert_eq!(r.get("snap.snapshots").unwrap().source, Source::Env);
        assert_eq!(r.block()["capabilities"], json!(["kernel.auto-restart"]));
    }

    #[test]
    fn unknown_names_list_what_exists() {
        let err =
            Capabilities::build(&[], &settings(&[], None, &["kernel.autorestart"])).unwrap_err();
        let text = err.to_string();
        assert!(text.contains("'kernel.autorestart'") && text.contains("--capability"));
        assert!(text.contains("kernel.adopt-session, kernel.auto-restart"));
        assert!(Capabilities::build(&[], &settings(&[], Some("nope.x"), &[])).is_err());
    }

    #[test]
    fn extension_declarations_follow_the_rules() {
        let mut r = Capabilities::default();
        let decl = |n: &str| Declaration {
            name: n.into(),
            description: "d".into(),
            enabled: true,
        };
        assert!(r.declare("e1", decl("nodot")).is_err());
        assert!(r.declare("e1", decl("kernel.mine")).is_err());
        assert!(r.declare("e1", decl("server.x")).is_err());
        assert!(r.declare("e1", decl("e1.feature")).is_ok());
        let second = r.declare("e2", decl("e1.feature")).unwrap_err();
        assert!(second.to_string().contains("already declared by e1"));
        // One extension failing costs only its own declarations.
        let exts = [
            ("bad".to_string(), Err("trap".to_string())),
            extension("good", &[("good.x", false)]),
        ];
        let built = Capabilities::build(&exts, &Settings::default()).unwrap();
        assert!(built.get("good.x").is_some());
    }
}

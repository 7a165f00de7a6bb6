//! What one guest may reach beyond the WIT: host functions (`grants`), HTTP hosts
//! (`allowed_hosts`), directories (`storage`) and environment variables (`env`), checked once
//! into a [`Policy`]; the [`PolicyCell`] that holds a guest's current policy while the operator
//! changes it (`grant`, `revoke`); and the [`Policies`] of every guest, by name.
//!
//! A change takes effect from the next call: host functions and HTTP requests read the current
//! policy at each use (an HTTP request in flight to a host just revoked is cut), and instances
//! built under an older policy (their directories and environment are fixed at instantiation)
//! are replaced before their next call; a call using a directory revoked meanwhile is stopped.

use std::path::PathBuf;
use std::sync::{Arc, RwLock, Weak};

use serde_json::{Value, json};
use tokio::sync::watch;

mod grant;
pub(crate) mod grants;
pub(crate) mod prompts;

pub use egress::{HostRule, default_port, is_internal};
pub use grant::PolicyGrant;
pub use prompts::PromptRules;

use self::grants::Grants;
use server_core::extensions::ExtensionConfig;
use server_core::extensions::policy::{self as entry, Access, PolicyEntry, StorageEntry};

/// A directory a guest may use.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Mount {
    /// Where it is on the server.
    pub host: PathBuf,
    /// Where the guest sees it: the path as written in `storage`.
    pub guest: String,
    pub access: Access,
}

/// A guest's policy, checked.
#[derive(Debug, Clone)]
pub struct Policy {
    /// The lists as written, for showing and writing back.
    pub entry: PolicyEntry,
    pub grant_list: Vec<String>,
    pub grants: Grants,
    pub hosts: Vec<HostRule>,
    pub mounts: Vec<Mount>,
}

impl Default for Policy {
    /// Nothing granted.
    fn default() -> Self {
        Policy::check(Vec::new(), PolicyEntry::empty()).expect("an empty policy is valid")
    }
}

impl Policy {
    pub fn of(config: &ExtensionConfig) -> Result<Self, String> {
        Self::check(config.grants.clone(), config.policy.clone())
    }

    pub(crate) fn check(grant_list: Vec<String>, entry: PolicyEntry) -> Result<Self, String> {
        let grants = Grants::parse(&grant_list)?;
        let hosts = entry
            .allowed_hosts
            .iter()
            .map(|h| HostRule::parse(h))
            .collect::<Result<_, _>>()?;
        let mut mounts = Vec::new();
        for storage in &entry.storage {
            let path = std::path::Path::new(&storage.path);
            let plain = path
                .components()
                .all(|c| matches!(c, std::path::Component::Normal(_)));
            if storage.path.trim().is_empty() || !plain {
                return Err(format!(
                    "its storage path '{}' must be a relative path inside the config file's \
                     folder (no leading '/', no '..')",
                    storage.path
                ));
            }
            mounts.push(Mount {
                host: entry.base_dir.join(path),
                guest: storage.path.clone(),
                access: storage.access,
            });
        }
        for name in &entry.env {
            if name.is_empty() || name.contains('=') {
                return Err(format!("its env entry '{name}' is not a variable name"));
            }
        }
        Ok(Policy {
            entry,
            grant_list,
            grants,
            hosts,
            mounts,
        })
    }

    /// The policy with `grant` added (`Ok(None)`: it was already granted).
    pub fn granting(&self, grant: &PolicyGrant) -> Result<Option<Policy>, String> {
        let (mut grants, mut entry) = (self.grant_list.clone(), self.entry.clone());
        let changed = match grant {
            PolicyGrant::Function(text) => add(&mut grants, text),
            PolicyGrant::Host(host) => add(&mut entry.allowed_hosts, host),
            PolicyGrant::Env(name) => add(&mut entry.env, name),
            PolicyGrant::Storage { path, access } => {
                let access = access.unwrap_or(Access::Read);
                match entry.storage.iter_mut().find(|s| &s.path == path) {
                    Some(s) if s.access == access => false,
                    Some(s) => {
                        s.access = access;
                        true
                    }
                    None => {
                        entry.storage.push(StorageEntry {
                            path: path.clone(),
                            access,
                        });
                        true
                    }
                }
            }
        };
        if !changed {
            return Ok(None);
        }
        Policy::check(grants, entry).map(Some)
    }

    /// The policy without `grant`; an error when it was not granted.
    pub fn revoking(&self, grant: &PolicyGrant, guest: &str) -> Result<Policy, String> {
        let (mut grants, mut entry) = (self.grant_list.clone(), self.entry.clone());
        let removed = match grant {
            PolicyGrant::Function(text) => remove(&mut grants, |g| g == text),
            PolicyGrant::Host(host) => remove(&mut entry.allowed_hosts, |h| h == host),
            PolicyGrant::Env(name) => remove(&mut entry.env, |n| n == name),
            PolicyGrant::Storage { path, access } => remove(&mut entry.storage, |s| {
                &s.path == path && access.is_none_or(|a| a == s.access)
            }),
        };
        if !removed {
            return Err(format!(
                "'{guest}' has no grant {grant}; see `jupyter-mcp-server policy {guest}` for what \
                 it has"
            ));
        }
        Policy::check(grants, entry)
    }

    /// The policy as JSON: what `policy EXTENSION` shows.
    pub fn describe(&self) -> Value {
        json!({
            "grants": self.grant_list,
            "allowed_hosts": self.entry.allowed_hosts,
            "storage": self.entry.storage.iter().map(|s| json!({
                "path": s.path,
                "access": s.access.as_str(),
            })).collect::<Vec<_>>(),
            "env": self.entry.env,
            "redact": self.entry.redact,
            "persisted_in": self.entry.origin.as_ref().map(|o| o.file.display().to_string()),
        })
    }

    /// A URL with the values of its query parameters named in `redact` replaced (any other
    /// text unchanged).
    pub fn redact_url(&self, text: &str) -> String {
        let Some((head, query)) = text.split_once('?').filter(|_| text.contains("://")) else {
            return text.to_owned();
        };
        let (query, fragment) = match query.split_once('#') {
            Some((query, fragment)) => (query, Some(fragment)),
            None => (query, None),
        };
        let shown: Vec<String> = query
            .split('&')
            .map(|pair| match pair.split_once('=') {
                Some((name, _)) if self.redacts(name) => format!("{name}=[redacted]"),
                _ => pair.to_owned(),
            })
            .collect();
        let mut out = format!("{head}?{}", shown.join("&"));
        if let Some(fragment) = fragment {
            out.push('#');
            out.push_str(fragment);
        }
        out
    }

    /// The environment variables granted, by name.
    pub fn env(&self) -> &[String] {
        &self.entry.env
    }

    /// Whether `name` (an argument, header or query name) is listed in `redact`.
    pub fn redacts(&self, name: &str) -> bool {
        self.entry
            .redact
            .iter()
            .any(|r| r.eq_ignore_ascii_case(name))
    }
}

/// The secret values a guest obtained (WIT 0.3.0's `secrets`), redacted from what it writes to
/// the log and from its errors, as `redact` hides the arguments and query values it names.
/// Shared by the guest's instances; kept while the guest is loaded.
#[derive(Default)]
pub struct Revealed {
    values: RwLock<Vec<String>>,
}

impl std::fmt::Debug for Revealed {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        let count = self.values.read().map(|v| v.len()).unwrap_or(0);
        write!(f, "Revealed({count} values)")
    }
}

/// Shorter values are not redacted: they would cut every word that holds them.
const SHORTEST_REDACTED: usize = 4;

impl Revealed {
    pub fn add(&self, value: &str) {
        if value.len() < SHORTEST_REDACTED {
            return;
        }
        let mut values = self
            .values
            .write()
            .unwrap_or_else(std::sync::PoisonError::into_inner);
        if !values.iter().any(|v| v == value) {
            values.push(value.to_owned());
            // Longest first, so a value containing another is redacted whole.
            values.sort_by_key(|v| std::cmp::Reverse(v.len()));
        }
    }

    /// `text` with every revealed value replaced by `[redacted]`.
    pub fn redact(&self, text: &str) -> String {
        let values = self
            .values
            .read()
            .unwrap_or_else(std::sync::PoisonError::into_inner);
        let mut out = text.to_owned();
        for value in values.iter() {
            if out.contains(value.as_str()) {
                out = out.replace(value.as_str(), "[redacted]");
            }
        }
        out
    }
}

fn add(list: &mut Vec<String>, value: &str) -> bool {
    if list.iter().any(|v| v == value) {
        return false;
    }
    list.push(value.to_owned());
    true
}

fn remove<T>(list: &mut Vec<T>, hit: impl Fn(&T) -> bool) -> bool {
    let before = list.len();
    list.retain(|item| !hit(item));
    list.len() != before
}

/// A policy as an instance is built under it.
#[derive(Debug, Clone)]
pub struct Snapshot {
    pub current: Arc<Policy>,
    pub generation: u64,
}

/// A guest's current policy. Readers take a snapshot (an `Arc`); a change replaces it and
/// bumps the generation, which every in-flight use watches.
#[derive(Debug)]
pub struct PolicyCell {
    current: RwLock<Arc<Policy>>,
    generation: watch::Sender<u64>,
}

impl PolicyCell {
    pub fn new(policy: Policy) -> Self {
        PolicyCell {
            current: RwLock::new(Arc::new(policy)),
            generation: watch::Sender::new(0),
        }
    }

    pub fn get(&self) -> Arc<Policy> {
        self.current
            .read()
            .unwrap_or_else(std::sync::PoisonError::into_inner)
            .clone()
    }

    pub fn generation(&self) -> u64 {
        *self.generation.borrow()
    }

    /// The policy and its generation, read so that the policy is never older than the
    /// generation (a change between the two reads is seen as one more change).
    pub fn snapshot(&self) -> Snapshot {
        let generation = self.generation();
        Snapshot {
            current: self.get(),
            generation,
        }
    }

    /// A receiver that wakes at each change.
    pub fn watch(&self) -> watch::Receiver<u64> {
        self.generation.subscribe()
    }

    fn set(&self, policy: Policy) {
        *self
            .current
            .write()
            .unwrap_or_else(std::sync::PoisonError::into_inner) = Arc::new(policy);
        self.generation.send_modify(|g| *g += 1);
    }
}

/// A management request that could not be done.
#[derive(Debug, thiserror::Error)]
pub enum PolicyError {
    #[error(
        "no extension named '{0}' is loaded; extensions are named by their identity (hook-only \
         guests by their file name)"
    )]
    Unknown(String),
    #[error("{0}")]
    Refused(String),
    #[error("{0}")]
    NotSaved(String),
}

/// A guest as the policy registry sees it: its name and its policy cell.
pub trait Governed: Send + Sync {
    fn name(&self) -> &str;
    fn policy(&self) -> &PolicyCell;
    /// Switched off, or the server stops: no longer governed.
    fn stopped(&self) -> bool;
    /// What the person granted it when asked (`extensions.grant-prompts`), for as long as it
    /// holds.
    fn prompted(&self) -> &prompts::Prompted;
}

/// Every guest's policy, by the guest's name. Guests register when they load; the registry
/// holds them weakly, so a guest that is dropped leaves it.
#[derive(Debug, Default)]
pub struct Policies {
    guests: RwLock<Vec<Weak<dyn Governed>>>,
    /// One change at a time, so two writers never interleave file writes.
    writing: std::sync::Mutex<()>,
}

impl Policies {
    pub fn register(&self, guest: Arc<dyn Governed>) {
        let mut guests = self
            .guests
            .write()
            .unwrap_or_else(std::sync::PoisonError::into_inner);
        guests.retain(|g| g.strong_count() > 0);
        guests.push(Arc::downgrade(&guest));
    }

    fn find(&self, name: &str) -> Result<Arc<dyn Governed>, PolicyError> {
        let guests = self
            .guests
            .read()
            .unwrap_or_else(std::sync::PoisonError::into_inner);
        guests
            .iter()
            .rev()
            .filter_map(Weak::upgrade)
            .find(|g| g.name() == name && !g.stopped())
            .ok_or_else(|| PolicyError::Unknown(name.to_owned()))
    }

    /// The extension's current policy.
    pub fn show(&self, name: &str) -> Result<Value, PolicyError> {
        let guest = self.find(name)?;
        let mut shown = guest.policy().get().describe();
        shown["extension"] = json!(name);
        shown["granted_when_asked"] = guest.prompted().describe();
        Ok(shown)
    }

    /// Adds or removes one grant, writes the entry back to its config file, then applies it.
    /// In Hub mode, grants that would cross users are refused.
    pub fn change(
        &self,
        name: &str,
        grant: &str,
        add: bool,
        hub_mode: bool,
    ) -> Result<Value, PolicyError> {
        let grant = PolicyGrant::parse(grant).map_err(PolicyError::Refused)?;
        if add && hub_mode && grant.crosses_users() {
            return Err(PolicyError::Refused(format!(
                "{grant} is refused in Hub mode: every user's calls share an extension, so a \
                 host function would not know whose notebooks to use and a read-write directory \
                 would carry one user's data to another"
            )));
        }
        let _one = self
            .writing
            .lock()
            .unwrap_or_else(std::sync::PoisonError::into_inner);
        let guest = self.find(name)?;
        let current = guest.policy().get();
        // A revoke also takes back what the person granted when asked, in every session.
        let forgotten = if add {
            0
        } else {
            guest.prompted().forget(&grant.to_string())
        };
        let next = if add {
            current.granting(&grant).map_err(PolicyError::Refused)?
        } else {
            match current.revoking(&grant, name) {
                Ok(next) => Some(next),
                Err(_) if forgotten > 0 => {
                    tracing::info!(
                        guest = name,
                        "revoked {grant}, which the person had granted when asked"
                    );
                    let mut shown = current.describe();
                    shown["extension"] = json!(name);
                    shown["changed"] = json!(true);
                    shown["revoked"] = json!(grant.to_string());
                    shown["granted_when_asked"] = guest.prompted().describe();
                    return Ok(shown);
                }
                Err(e) => return Err(PolicyError::Refused(e)),
            }
        };
        let verb = if add { "granted" } else { "revoked" };
        let Some(next) = next else {
            let mut shown = current.describe();
            shown["extension"] = json!(name);
            shown["changed"] = json!(false);
            return Ok(shown);
        };
        // Saved first: a change that cannot last is not made at all.
        let persisted = match &next.entry.origin {
            Some(origin) => {
                entry::write_back(origin, &next.grant_list, &next.entry)
                    .map_err(|e| PolicyError::NotSaved(format!("{e}; nothing was changed")))?;
                true
            }
            None => false,
        };
        tracing::info!(
            guest = name,
            "{verb} {grant}{}",
            if persisted {
                " (written to the config file)"
            } else {
                " (until the server stops: the guest was not loaded from a config file)"
            }
        );
        let mut shown = next.describe();
        guest.policy().set(next);
        shown["extension"] = json!(name);
        shown["changed"] = json!(true);
        shown[verb] = json!(grant.to_string());
        shown["granted_when_asked"] = guest.prompted().describe();
        Ok(shown)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn grants_parse_and_apply() {
        assert_eq!(
            PolicyGrant::parse("storage:data:read-write").unwrap(),
            PolicyGrant::Storage {
                path: "data".into(),
                access: Some(Access::ReadWrite)
            }
        );
        assert_eq!(
            PolicyGrant::parse("host:api.example.org").unwrap(),
            PolicyGrant::Host("api.example.org".into())
        );
        assert_eq!(
            PolicyGrant::parse("env:KEY").unwrap(),
            PolicyGrant::Env("KEY".into())
        );
        assert_eq!(
            PolicyGrant::parse("read-cells:nb1").unwrap(),
            PolicyGrant::Function("read-cells:nb1".into())
        );
        assert!(
            PolicyGrant::parse("format-disk")
                .unwrap_err()
                .contains("host:HOST")
        );
        assert!(PolicyGrant::parse("storage:data:write").is_err());
        // What Hub mode refuses at run time, as at start.
        let crosses = |g: &str| PolicyGrant::parse(g).unwrap().crosses_users();
        assert!(crosses("read-cells") && crosses("storage:data:read-write"));
        assert!(!crosses("storage:data:read") && !crosses("host:a.org") && !crosses("env:K"));
        assert!(!crosses("elicit") && !crosses("secret:API_KEY"));
        let p = Policy::default();
        let granted = p
            .granting(&PolicyGrant::parse("env:KEY").unwrap())
            .unwrap()
            .unwrap();
        assert_eq!(granted.entry.env, ["KEY"]);
        assert!(
            granted
                .granting(&PolicyGrant::Env("KEY".into()))
                .unwrap()
                .is_none()
        );
        let revoked = granted
            .revoking(&PolicyGrant::Env("KEY".into()), "g")
            .unwrap();
        assert!(revoked.entry.env.is_empty());
        assert!(
            revoked
                .revoking(&PolicyGrant::Env("KEY".into()), "g")
                .unwrap_err()
                .contains("has no grant env:KEY")
        );
        let stored = p
            .granting(&PolicyGrant::parse("storage:../up").unwrap())
            .unwrap_err();
        assert!(stored.contains("no '..'"), "{stored}");
        assert_eq!(
            PolicyGrant::parse("secret:API_KEY").unwrap(),
            PolicyGrant::Function("secret:API_KEY".into())
        );
    }

    #[test]
    fn revealed_values_are_redacted_and_short_ones_left() {
        let revealed = Revealed::default();
        revealed.add("s3cr3t-token");
        revealed.add("s3cr3t");
        revealed.add("ab");
        assert_eq!(
            revealed.redact("key s3cr3t-token and s3cr3t, ab"),
            "key [redacted] and [redacted], ab"
        );
    }
}

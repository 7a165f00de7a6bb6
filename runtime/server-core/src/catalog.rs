//! Resources, resource templates and prompts that extensions provide, beside the core ones:
//! listed and served through the same MCP paths (`mcp` asks here after its own). Watched like
//! the tool table: extensions join as their guests load, after the server serves, and
//! `mcp::changes` turns each change into `notifications/resources/list_changed` or
//! `notifications/prompts/list_changed`.
//!
//! A URI or prompt name belongs to one provider: the core's (its URI schemes and prompt names
//! are reserved) or the first extension that declared it; a later claim is refused, never
//! shadowing.
//!
//! Entries and answers are MCP's JSON, as the protocol names their fields: the catalog names no
//! MCP library. The server gives it a check that an entry fits the protocol (`Fits`) and turns
//! entries and answers into its protocol types where it serves them.

use std::collections::BTreeMap;
use std::future::Future;
use std::pin::Pin;
use std::sync::{Arc, RwLock};

use regex::Regex;
use serde_json::{Map, Value};

/// An entry as MCP lists it: a resource (`uri`, `name`, …), a resource template (`uriTemplate`,
/// `name`, …) or a prompt (`name`, `arguments`, …).
pub type Listed = Map<String, Value>;

pub type CatalogFuture<'a, T> = Pin<Box<dyn Future<Output = Result<T, ServeError>> + Send + 'a>>;

/// Who serves an entry: an extension, reached however its runtime reaches it.
pub trait Provider: Send + Sync {
    /// The extension's name (the owner of what it declared).
    fn owner(&self) -> &str;
    /// Reads a resource it listed or one matching its templates: a `resources/read` result
    /// (`{"contents": [...]}`).
    fn read(&self, uri: String) -> CatalogFuture<'_, Value>;
    /// Renders one of its prompts: a `prompts/get` result (`{"messages": [...]}`).
    fn prompt(&self, name: String, arguments: Map<String, Value>) -> CatalogFuture<'_, Value>;
}

/// Why a provider did not serve a read or a prompt; the message says who and why.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum ServeError {
    /// The provider has no such resource.
    #[error("{message}")]
    NotFound { message: String, uri: String },
    /// The provider refused the arguments it was given.
    #[error("{0}")]
    Refused(String),
    /// The provider failed.
    #[error("{0}")]
    Failed(String),
}

/// Which kind of entry a [`Fits`] check looks at.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Kind {
    Resource,
    Template,
    Prompt,
}

/// Whether an entry fits the protocol the server speaks; `Err` says why not.
pub type Fits = fn(Kind, &Listed) -> Result<(), String>;

/// Why an entry was not added.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum Refused {
    #[error(
        "the URI scheme '{scheme}://' is the server's own; use a scheme of the extension's own"
    )]
    CoreScheme { scheme: String },
    #[error("the prompt name '{name}' is the server's own; choose another")]
    CorePrompt { name: String },
    #[error("it is taken by extension '{owner}'")]
    Taken { owner: String },
    #[error("the URI template '{template}' cannot be read as an RFC 6570 template")]
    BadTemplate { template: String },
    #[error("'{uri}' is not a URI (scheme:rest)")]
    NotAUri { uri: String },
    #[error("it does not fit MCP ({reason})")]
    Unfit { reason: String },
}

struct Held {
    item: Listed,
    provider: Arc<dyn Provider>,
}

#[derive(Default)]
struct Entries {
    resources: BTreeMap<String, Held>,
    /// In the order they joined; a URI is served by the first template it matches.
    templates: Vec<(Regex, String, Held)>,
    prompts: BTreeMap<String, Held>,
}

pub struct Catalog {
    core_schemes: Vec<String>,
    core_prompts: Vec<String>,
    fits: Fits,
    entries: RwLock<Entries>,
    /// Bumped on every change of the resources or templates.
    resources_changed: tokio::sync::watch::Sender<u64>,
    /// Bumped on every change of the prompts.
    prompts_changed: tokio::sync::watch::Sender<u64>,
}

impl Catalog {
    /// An empty catalog that refuses the core's URI schemes and prompt names, and entries that
    /// do not `fit` the protocol.
    pub fn new(core_schemes: &[&str], core_prompts: &[&str], fits: Fits) -> Self {
        Catalog {
            core_schemes: core_schemes.iter().map(|s| s.to_string()).collect(),
            core_prompts: core_prompts.iter().map(|s| s.to_string()).collect(),
            fits,
            entries: RwLock::default(),
            resources_changed: tokio::sync::watch::Sender::new(0),
            prompts_changed: tokio::sync::watch::Sender::new(0),
        }
    }

    fn read(&self) -> std::sync::RwLockReadGuard<'_, Entries> {
        self.entries.read().unwrap_or_else(|e| e.into_inner())
    }

    fn write(&self) -> std::sync::RwLockWriteGuard<'_, Entries> {
        self.entries.write().unwrap_or_else(|e| e.into_inner())
    }

    fn check_scheme(&self, uri: &str) -> Result<(), Refused> {
        let scheme = scheme(uri).ok_or_else(|| Refused::NotAUri { uri: uri.into() })?;
        if self
            .core_schemes
            .iter()
            .any(|s| s.eq_ignore_ascii_case(scheme))
        {
            return Err(Refused::CoreScheme {
                scheme: scheme.into(),
            });
        }
        Ok(())
    }

    /// The entry's `field`, once the entry is known to fit the protocol.
    fn key(&self, kind: Kind, item: &Listed, field: &str) -> Result<String, Refused> {
        (self.fits)(kind, item).map_err(|reason| Refused::Unfit { reason })?;
        item.get(field)
            .and_then(Value::as_str)
            .map(str::to_owned)
            .ok_or_else(|| Refused::Unfit {
                reason: format!("missing field `{field}`"),
            })
    }

    /// Adds a resource at a fixed URI. The same owner declaring it again replaces its entry.
    pub fn add_resource(&self, item: Listed, provider: Arc<dyn Provider>) -> Result<(), Refused> {
        let uri = self.key(Kind::Resource, &item, "uri")?;
        self.check_scheme(&uri)?;
        hold(&mut self.write().resources, uri, item, provider)?;
        self.resources_changed.send_modify(|v| *v += 1);
        Ok(())
    }

    /// Adds a resource template.
    pub fn add_template(&self, item: Listed, provider: Arc<dyn Provider>) -> Result<(), Refused> {
        let template = self.key(Kind::Template, &item, "uriTemplate")?;
        self.check_scheme(&template)?;
        let pattern = template_regex(&template).ok_or_else(|| Refused::BadTemplate {
            template: template.clone(),
        })?;
        let mut entries = self.write();
        let held = entries
            .templates
            .iter()
            .position(|(_, held_template, _)| *held_template == template);
        claim(held.map(|i| &entries.templates[i].2), &provider)?;
        let entry = (pattern, template, Held { item, provider });
        match held {
            Some(i) => entries.templates[i] = entry,
            None => entries.templates.push(entry),
        }
        drop(entries);
        self.resources_changed.send_modify(|v| *v += 1);
        Ok(())
    }

    /// Adds a prompt.
    pub fn add_prompt(&self, item: Listed, provider: Arc<dyn Provider>) -> Result<(), Refused> {
        let name = self.key(Kind::Prompt, &item, "name")?;
        if self.core_prompts.contains(&name) {
            return Err(Refused::CorePrompt { name });
        }
        hold(&mut self.write().prompts, name, item, provider)?;
        self.prompts_changed.send_modify(|v| *v += 1);
        Ok(())
    }

    /// Withdraws everything an extension declared; watchers hear of what changed.
    pub fn remove_owner(&self, owner: &str) {
        let mut entries = self.write();
        let (resources, prompts) = (
            entries.resources.len() + entries.templates.len(),
            entries.prompts.len(),
        );
        entries.resources.retain(|_, h| h.provider.owner() != owner);
        entries
            .templates
            .retain(|(_, _, h)| h.provider.owner() != owner);
        entries.prompts.retain(|_, h| h.provider.owner() != owner);
        let resources_changed = resources != entries.resources.len() + entries.templates.len();
        let prompts_changed = prompts != entries.prompts.len();
        drop(entries);
        if resources_changed {
            self.resources_changed.send_modify(|v| *v += 1);
        }
        if prompts_changed {
            self.prompts_changed.send_modify(|v| *v += 1);
        }
    }

    pub fn resources(&self) -> Vec<Listed> {
        self.read()
            .resources
            .values()
            .map(|h| h.item.clone())
            .collect()
    }

    pub fn templates(&self) -> Vec<Listed> {
        self.read()
            .templates
            .iter()
            .map(|(_, _, h)| h.item.clone())
            .collect()
    }

    pub fn prompts(&self) -> Vec<Listed> {
        self.read()
            .prompts
            .values()
            .map(|h| h.item.clone())
            .collect()
    }

    /// Who serves `uri`: the extension that listed it, else the first whose template matches.
    pub fn resource_provider(&self, uri: &str) -> Option<Arc<dyn Provider>> {
        let entries = self.read();
        if let Some(held) = entries.resources.get(uri) {
            return Some(held.provider.clone());
        }
        entries
            .templates
            .iter()
            .find(|(pattern, _, _)| pattern.is_match(uri))
            .map(|(_, _, held)| held.provider.clone())
    }

    pub fn prompt_provider(&self, name: &str) -> Option<Arc<dyn Provider>> {
        self.read().prompts.get(name).map(|h| h.provider.clone())
    }

    /// A receiver that sees a new value after every change of the resources or templates.
    pub fn resource_changes(&self) -> tokio::sync::watch::Receiver<u64> {
        self.resources_changed.subscribe()
    }

    /// A receiver that sees a new value after every change of the prompts.
    pub fn prompt_changes(&self) -> tokio::sync::watch::Receiver<u64> {
        self.prompts_changed.subscribe()
    }
}

/// Whether `provider` may take an entry `held` holds now: when no one holds it, or it does.
fn claim(held: Option<&Held>, provider: &Arc<dyn Provider>) -> Result<(), Refused> {
    match held {
        Some(held) if held.provider.owner() != provider.owner() => Err(Refused::Taken {
            owner: held.provider.owner().to_owned(),
        }),
        _ => Ok(()),
    }
}

/// Puts `item` under `key`, unless another owner holds the key.
fn hold(
    entries: &mut BTreeMap<String, Held>,
    key: String,
    item: Listed,
    provider: Arc<dyn Provider>,
) -> Result<(), Refused> {
    claim(entries.get(&key), &provider)?;
    entries.insert(key, Held { item, provider });
    Ok(())
}

/// The scheme of a URI (`wordcount` of `wordcount://summary`).
fn scheme(uri: &str) -> Option<&str> {
    let (scheme, _) = uri.split_once(':')?;
    let valid = scheme.starts_with(|c: char| c.is_ascii_alphabetic())
        && scheme
            .chars()
            .all(|c| c.is_ascii_alphanumeric() || matches!(c, '+' | '-' | '.'));
    valid.then_some(scheme)
}

/// A pattern matching the URIs of an RFC 6570 template: `{var}` is one path segment, `{+var}`,
/// `{#var}` and the query forms anything; the rest is literal.
fn template_regex(template: &str) -> Option<Regex> {
    let mut pattern = String::from("^");
    let mut rest = template;
    while let Some(open) = rest.find('{') {
        pattern += &regex::escape(&rest[..open]);
        let close = rest[open..].find('}')? + open;
        let expression = &rest[open + 1..close];
        pattern += match expression.chars().next()? {
            '+' | '#' | '?' | '&' | '/' | ';' | '.' => ".*",
            _ => "[^/?#]*",
        };
        rest = &rest[close + 1..];
    }
    if rest.contains('}') {
        return None;
    }
    pattern += &regex::escape(rest);
    pattern.push('$');
    Regex::new(&pattern).ok()
}

#[cfg(test)]
mod tests {
    use super::*;

    struct Named(&'static str);

    impl Provider for Named {
        fn owner(&self) -> &str {
            self.0
        }
        fn read(&self, _uri: String) -> CatalogFuture<'_, Value> {
            Box::pin(async { Ok(serde_json::json!({ "contents": [] })) })
        }
        fn prompt(&self, _n: String, _a: Map<String, Value>) -> CatalogFuture<'_, Value> {
            Box::pin(async { Err(ServeError::Failed("none".into())) })
        }
    }

    fn listed(value: Value) -> Listed {
        value.as_object().cloned().unwrap()
    }

    fn resource(uri: &str) -> Listed {
        listed(serde_json::json!({ "uri": uri, "name": "r" }))
    }

    fn fits_all(_: Kind, _: &Listed) -> Result<(), String> {
        Ok(())
    }

    #[test]
    fn entries_belong_to_their_first_claimant_and_core_names_are_refused() {
        let catalog = Catalog::new(&["notebook", "capabilities"], &["jupyter_cite"], fits_all);
        let (a, b): (Arc<dyn Provider>, Arc<dyn Provider>) =
            (Arc::new(Named("a")), Arc::new(Named("b")));
        let mut changes = catalog.resource_changes();
        catalog
            .add_resource(resource("wc://total"), a.clone())
            .unwrap();
        assert!(changes.has_changed().unwrap());
        changes.borrow_and_update();
        assert_eq!(
            catalog.add_resource(resource("wc://total"), b.clone()),
            Err(Refused::Taken { owner: "a".into() })
        );
        assert!(!changes.has_changed().unwrap(), "a refusal changes nothing");
        // Its owner declaring it again (a newer manifest) is no clash.
        catalog
            .add_resource(resource("wc://total"), a.clone())
            .unwrap();
        assert_eq!(
            catalog.add_resource(resource("Notebook://x"), b.clone()),
            Err(Refused::CoreScheme {
                scheme: "Notebook".into()
            })
        );
        let prompt = |name: &str| listed(serde_json::json!({ "name": name }));
        assert_eq!(
            catalog.add_prompt(prompt("jupyter_cite"), b.clone()),
            Err(Refused::CorePrompt {
                name: "jupyter_cite".into()
            })
        );
        catalog.add_prompt(prompt("count"), b.clone()).unwrap();
        assert_eq!(catalog.prompt_provider("count").unwrap().owner(), "b");
        catalog.remove_owner("b");
        assert!(catalog.prompts().is_empty());
        assert_eq!(catalog.resources().len(), 1);
    }

    #[test]
    fn templates_match_their_uris() {
        let catalog = Catalog::new(&[], &[], fits_all);
        let a: Arc<dyn Provider> = Arc::new(Named("a"));
        let template = listed(
            serde_json::json!({ "uriTemplate": "wc://notebooks/{name}/words", "name": "words" }),
        );
        catalog.add_template(template, a).unwrap();
        assert!(
            catalog
                .resource_provider("wc://notebooks/nb1/words")
                .is_some()
        );
        assert!(
            catalog
                .resource_provider("wc://notebooks/a/b/words")
                .is_none()
        );
        assert!(catalog.resource_provider("wc://other").is_none());
        let unfit = |_: Kind, _: &Listed| Err("no".to_owned());
        let strict = Catalog::new(&[], &[], unfit);
        assert_eq!(
            strict.add_resource(resource("wc://x"), Arc::new(Named("a"))),
            Err(Refused::Unfit {
                reason: "no".into()
            })
        );
        assert!(template_regex("x://{unclosed").is_none());
        assert!(template_regex("x://{+path}").unwrap().is_match("x://a/b/c"));
    }
}

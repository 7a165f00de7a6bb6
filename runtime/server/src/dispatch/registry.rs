//! `ToolRegistry`: every tool the server offers, by name, as tools join and leave while it runs.

use std::collections::BTreeMap;
use std::sync::{Arc, RwLock};

use super::refusal;
use super::selection::Selection;
use crate::tools::Tool;
use server_core::capabilities::Capabilities;

/// Every tool the server offers, by name (so listing order is stable). Extension tools may join
/// after the server started (a guest still compiling when the first client connected); watchers
/// of [`ToolRegistry::changes`] hear of it.
#[derive(Default)]
pub struct ToolRegistry {
    pub(super) tools: RwLock<BTreeMap<String, Arc<dyn Tool>>>,
    /// The operator's `--tools`/`--exclude-tools`, kept to apply to tools that join later.
    pub(super) selection: Selection,
    /// Tools the selection left out, by name: still names the operator may use.
    pub(super) dropped: RwLock<Vec<String>>,
    /// Bumped on every change of the set.
    changed: tokio::sync::watch::Sender<u64>,
}

/// A copy of the set and selection, watched by no one yet.
impl Clone for ToolRegistry {
    fn clone(&self) -> Self {
        ToolRegistry {
            tools: RwLock::new(self.read().clone()),
            selection: self.selection.clone(),
            dropped: RwLock::new(self.dropped_names()),
            changed: tokio::sync::watch::Sender::new(0),
        }
    }
}

/// Why an extension's tool did not join: the name is taken.
#[derive(Debug, thiserror::Error)]
#[error("the name is taken by {owner}")]
pub struct NameTaken {
    pub owner: String,
}

impl NameTaken {
    fn of(holder: &dyn Tool) -> Self {
        NameTaken {
            owner: match holder.extension_name() {
                Some(other) => format!("extension '{other}'"),
                None => "a core tool".to_owned(),
            },
        }
    }
}

impl ToolRegistry {
    /// The built-in tools of this server.
    pub fn builtin() -> Self {
        let mut registry = ToolRegistry::default();
        for tool in crate::tools::builtin() {
            registry.insert(tool);
        }
        registry
    }

    /// Adds a tool while the registry is being built (no one watches yet).
    pub fn insert(&mut self, tool: Arc<dyn Tool>) {
        self.tools
            .get_mut()
            .unwrap_or_else(|e| e.into_inner())
            .insert(tool.spec().name.clone(), tool);
    }

    /// Adds a tool to a registry in use, unless its name is taken; a tool the operator's
    /// selection leaves out is not added (and that is no error). Watchers hear of an addition.
    pub fn add(&self, tool: Arc<dyn Tool>) -> Result<(), NameTaken> {
        let name = tool.spec().name.clone();
        let mut tools = self.write();
        if let Some(holder) = tools.get(&name) {
            return Err(NameTaken::of(holder.as_ref()));
        }
        if !self.selection.keeps(&name, tool.extension_name().is_none()) {
            self.dropped
                .write()
                .unwrap_or_else(|e| e.into_inner())
                .push(name);
            return Ok(());
        }
        tools.insert(name, tool);
        drop(tools);
        self.changed.send_modify(|version| *version += 1);
        Ok(())
    }

    /// Withdraws a tool by name; `false` when there is none. Watchers hear of it.
    pub fn remove(&self, name: &str) -> bool {
        let removed = self.write().remove(name).is_some();
        if removed {
            self.changed.send_modify(|version| *version += 1);
        }
        removed
    }

    /// Withdraws an extension's tools (those of `names` it holds); watchers hear of it.
    pub fn remove_extension(&self, extension: &str, names: &[String]) {
        let mut tools = self.write();
        let before = tools.len();
        tools.retain(|name, tool| {
            !(names.contains(name) && tool.extension_name() == Some(extension))
        });
        let removed = tools.len() != before;
        drop(tools);
        if removed {
            self.changed.send_modify(|version| *version += 1);
        }
    }

    /// Puts `tools` in place of every tool the extension holds, in one change (a reload: a call
    /// never finds the extension's tools missing). A tool whose name another holds is left
    /// out and returned with that holder.
    pub fn replace_extension(
        &self,
        extension: &str,
        tools: Vec<Arc<dyn Tool>>,
    ) -> Vec<(String, NameTaken)> {
        let mut refused = Vec::new();
        let mut table = self.write();
        let before: Vec<String> = table
            .iter()
            .filter(|(_, tool)| tool.extension_name() == Some(extension))
            .map(|(name, _)| name.clone())
            .collect();
        for name in &before {
            table.remove(name);
        }
        let mut changed = !before.is_empty();
        for tool in tools {
            let name = tool.spec().name.clone();
            if let Some(holder) = table.get(&name) {
                refused.push((name, NameTaken::of(holder.as_ref())));
                continue;
            }
            if !self.selection.keeps(&name, tool.extension_name().is_none()) {
                continue;
            }
            table.insert(name, tool);
            changed = true;
        }
        drop(table);
        if changed {
            self.changed.send_modify(|version| *version += 1);
        }
        refused
    }

    /// The names of the tools an extension holds now.
    pub fn names_of(&self, extension: &str) -> Vec<String> {
        self.read()
            .iter()
            .filter(|(_, tool)| tool.extension_name() == Some(extension))
            .map(|(name, _)| name.clone())
            .collect()
    }

    /// A receiver that sees a new value after every change of the set.
    pub fn changes(&self) -> tokio::sync::watch::Receiver<u64> {
        self.changed.subscribe()
    }

    pub(super) fn read(&self) -> std::sync::RwLockReadGuard<'_, BTreeMap<String, Arc<dyn Tool>>> {
        self.tools.read().unwrap_or_else(|e| e.into_inner())
    }

    fn write(&self) -> std::sync::RwLockWriteGuard<'_, BTreeMap<String, Arc<dyn Tool>>> {
        self.tools.write().unwrap_or_else(|e| e.into_inner())
    }

    pub fn get(&self, name: &str) -> Option<Arc<dyn Tool>> {
        self.read().get(name).cloned()
    }

    /// Every tool, in name order.
    pub fn all(&self) -> Vec<Arc<dyn Tool>> {
        self.read().values().cloned().collect()
    }

    pub fn names(&self) -> Vec<String> {
        self.read().keys().cloned().collect()
    }

    /// The tools a client sees: those whose capability (if any) is on.
    pub fn visible(&self, capabilities: &Capabilities) -> Vec<Arc<dyn Tool>> {
        self.read()
            .values()
            .filter(|t| refusal(t.spec(), capabilities).is_none())
            .cloned()
            .collect()
    }
}

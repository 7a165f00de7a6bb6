//! Which tools are served: the operator's `--tools`/`--exclude-tools` (toolsets expanded, unknown
//! names refused) and a client's narrower `?only=` view.

use std::sync::Arc;

use super::ToolRegistry;
use crate::tools::ToolSpec;
use crate::tools::scope::{Grant, Scope};

/// The operator's `--tools`/`--exclude-tools`, kept to apply to tools that join later.
#[derive(Default, Clone)]
pub(super) struct Selection {
    only: Vec<String>,
    exclude: Vec<String>,
}

impl Selection {
    fn names(names: &[String], name: &str, core: bool) -> bool {
        names
            .iter()
            .any(|n| n == name || (core && n == CORE_TOOLSET))
    }

    pub(super) fn keeps(&self, name: &str, core: bool) -> bool {
        (self.only.is_empty() || Self::names(&self.only, name, core))
            && !Self::names(&self.exclude, name, core)
    }
}

/// The toolset of every core tool (the Python server's name for its core tools).
pub const CORE_TOOLSET: &str = "notebooks";

/// A `--tools`/`--exclude-tools` list or an `?only=` query that cannot be served.
#[derive(Debug, thiserror::Error)]
pub enum UnknownToolNames {
    #[error(
        "{place} names no tool {unknown}. This server's tools are: {known}; the toolset \
         '{CORE_TOOLSET}' stands for every core tool."
    )]
    Unknown {
        place: String,
        unknown: String,
        known: String,
    },
    #[error(
        "--tools and --exclude-tools together leave no tool to serve. This server's tools are: \
         {known}."
    )]
    NoneLeft { known: String },
}

/// One client's narrower view of the tools: the names of its `/mcp?only=...` and, in OAuth
/// mode, the scopes of its token.
#[derive(Debug, Clone, Default)]
pub struct ToolView {
    names: Option<Arc<std::collections::BTreeSet<String>>>,
    grant: Option<Grant>,
}

impl ToolView {
    /// Whether the view's names include `name` (all do when it names none).
    pub fn allows(&self, name: &str) -> bool {
        self.names.as_ref().is_none_or(|names| names.contains(name))
    }

    /// The same view limited to what a token's scopes allow.
    pub fn with_grant(mut self, grant: Grant) -> ToolView {
        self.grant = Some(grant);
        self
    }

    /// The scope the view's token lacks to call this tool, if it lacks one.
    pub fn missing_scope(&self, spec: &ToolSpec) -> Option<Scope> {
        let scope = spec.scope;
        self.grant
            .as_ref()
            .is_some_and(|grant| !grant.allows(scope))
            .then_some(scope)
    }

    /// Whether this client sees and may call the tool.
    pub fn admits(&self, spec: &ToolSpec) -> bool {
        self.allows(&spec.name) && self.missing_scope(spec).is_none()
    }
}

const ONLY_PLACE: &str = "--tools (JUPYTER_MCP_TOOLS)";
const EXCLUDE_PLACE: &str = "--exclude-tools (JUPYTER_MCP_EXCLUDE_TOOLS)";

impl ToolRegistry {
    /// Tool names and toolsets, expanded to the tools they name.
    fn expand(
        &self,
        names: &[String],
        place: &str,
    ) -> Result<std::collections::BTreeSet<String>, UnknownToolNames> {
        let tools = self.read();
        let mut expanded = std::collections::BTreeSet::new();
        let mut unknown = Vec::new();
        for name in names {
            if name == CORE_TOOLSET {
                expanded.extend(
                    tools
                        .values()
                        .filter(|t| t.extension_name().is_none())
                        .map(|t| t.spec().name.clone()),
                );
            } else if tools.contains_key(name) {
                expanded.insert(name.clone());
            } else {
                unknown.push(format!("'{name}'"));
            }
        }
        if unknown.is_empty() {
            Ok(expanded)
        } else {
            Err(UnknownToolNames::Unknown {
                place: place.to_owned(),
                unknown: unknown.join(", "),
                known: tools.keys().cloned().collect::<Vec<_>>().join(", "),
            })
        }
    }

    /// Keeps the tools the operator chose: `only` (all when empty) minus `exclude`. Every name
    /// must be a tool (extension tools included) or a toolset; keeping none is refused too.
    pub fn select(&mut self, only: &[String], exclude: &[String]) -> Result<(), UnknownToolNames> {
        self.select_pending(only, exclude);
        self.check_selection()
    }

    /// Like [`ToolRegistry::select`] while extension tools may still join: names that are no
    /// tool yet wait for [`ToolRegistry::check_selection`], called once every extension has
    /// registered its tools.
    pub fn select_pending(&mut self, only: &[String], exclude: &[String]) {
        self.selection = Selection {
            only: only.to_vec(),
            exclude: exclude.to_vec(),
        };
        let selection = &self.selection;
        let dropped = self.dropped.get_mut().unwrap_or_else(|e| e.into_inner());
        self.tools
            .get_mut()
            .unwrap_or_else(|e| e.into_inner())
            .retain(|name, tool| {
                let keep = selection.keeps(name, tool.extension_name().is_none());
                if !keep {
                    dropped.push(name.clone());
                }
                keep
            });
    }

    /// Errs when the operator's selection names something that is no tool, or keeps none.
    /// Names of tools the selection dropped count as known.
    pub fn check_selection(&self) -> Result<(), UnknownToolNames> {
        let Selection { only, exclude } = &self.selection;
        if only.is_empty() && exclude.is_empty() {
            return Ok(());
        }
        let mut known: std::collections::BTreeSet<String> = self.names().into_iter().collect();
        known.extend(self.dropped_names());
        for (names, place) in [(only, ONLY_PLACE), (exclude, EXCLUDE_PLACE)] {
            let unknown: Vec<String> = names
                .iter()
                .filter(|n| *n != CORE_TOOLSET && !known.contains(*n))
                .map(|n| format!("'{n}'"))
                .collect();
            if !unknown.is_empty() {
                return Err(UnknownToolNames::Unknown {
                    place: place.to_owned(),
                    unknown: unknown.join(", "),
                    known: known.into_iter().collect::<Vec<_>>().join(", "),
                });
            }
        }
        if self.read().is_empty() {
            return Err(UnknownToolNames::NoneLeft {
                known: known.into_iter().collect::<Vec<_>>().join(", "),
            });
        }
        Ok(())
    }

    /// Extension tools that joined but that the selection left out, by name.
    pub(super) fn dropped_names(&self) -> Vec<String> {
        self.dropped
            .read()
            .unwrap_or_else(|e| e.into_inner())
            .clone()
    }

    /// A narrower view for one client: names and toolsets among the tools served.
    pub fn view(&self, names: &[String]) -> Result<ToolView, UnknownToolNames> {
        Ok(ToolView {
            names: Some(Arc::new(self.expand(names, "?only=")?)),
            grant: None,
        })
    }
}

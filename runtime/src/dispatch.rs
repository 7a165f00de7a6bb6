//! The single path every tool call takes: lookup, capability gate, the tool-call hooks, failure
//! containment, timing. The table of tools lives here; tools themselves never see it.
//!
//! A failure the agent can act on becomes a tool result with `isError: true`; only an unknown
//! tool is a protocol error (JSON-RPC -32602), because then there is no tool to answer.

use std::collections::BTreeMap;
use std::panic::AssertUnwindSafe;
use std::sync::{Arc, RwLock};
use std::time::Instant;

use futures_util::FutureExt;
use rmcp::ErrorData as McpError;
use rmcp::model::{CallToolResult, ContentBlock as Content, JsonObject};
use serde_json::Value;

use crate::capabilities::Capabilities;
use crate::hooks::{CALL_SCOPE, CallScope, HookEvent};
use crate::tools::{Tool, ToolContext, ToolError, ToolOutput, ToolSpec};

/// Every tool the server offers, by name (so listing order is stable). Extension tools may join
/// after the server started (a guest still compiling when the first client connected); watchers
/// of [`ToolRegistry::changes`] hear of it.
#[derive(Default)]
pub struct ToolRegistry {
    tools: RwLock<BTreeMap<String, Arc<dyn Tool>>>,
    /// The operator's `--tools`/`--exclude-tools`, kept to apply to tools that join later.
    selection: Selection,
    /// Tools the selection left out, by name: still names the operator may use.
    dropped: RwLock<Vec<String>>,
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

#[derive(Default, Clone)]
struct Selection {
    only: Vec<String>,
    exclude: Vec<String>,
}

impl Selection {
    fn names(names: &[String], name: &str, core: bool) -> bool {
        names
            .iter()
            .any(|n| n == name || (core && n == CORE_TOOLSET))
    }

    fn keeps(&self, name: &str, core: bool) -> bool {
        (self.only.is_empty() || Self::names(&self.only, name, core))
            && !Self::names(&self.exclude, name, core)
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

    fn read(&self) -> std::sync::RwLockReadGuard<'_, BTreeMap<String, Arc<dyn Tool>>> {
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

/// One client's narrower view of the tools (`/mcp?only=...`).
#[derive(Debug, Clone)]
pub struct ToolView {
    names: Arc<std::collections::BTreeSet<String>>,
}

impl ToolView {
    pub fn allows(&self, name: &str) -> bool {
        self.names.contains(name)
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
    fn dropped_names(&self) -> Vec<String> {
        self.dropped
            .read()
            .unwrap_or_else(|e| e.into_inner())
            .clone()
    }

    /// A narrower view for one client: names and toolsets among the tools served.
    pub fn view(&self, names: &[String]) -> Result<ToolView, UnknownToolNames> {
        Ok(ToolView {
            names: Arc::new(self.expand(names, "?only=")?),
        })
    }
}

/// Why a tool may not run now: the capability it needs is off.
pub fn refusal(spec: &ToolSpec, capabilities: &Capabilities) -> Option<String> {
    let needed = spec.capability.as_deref()?;
    (!capabilities.enabled(needed)).then(|| {
        format!(
            "it needs the '{needed}' capability, which is off. An operator can turn it on with \
             --capability {needed}."
        )
    })
}

/// A call to a tool this server does not have.
#[derive(Debug, thiserror::Error)]
#[error("Unknown tool '{name}'. This server's tools are: {known}.")]
pub struct UnknownTool {
    pub name: String,
    pub known: String,
}

/// Runs a tool call as every caller (MCP, the management routes) gets it: refused while its
/// capability is off, observed by the tool-call hooks, a panic contained.
pub async fn run(
    tools: &ToolRegistry,
    name: &str,
    arguments: Option<JsonObject>,
    context: ToolContext,
    traceparent: Option<String>,
) -> Result<Result<ToolOutput, ToolError>, UnknownTool> {
    let Some(tool) = tools.get(name) else {
        return Err(UnknownTool {
            name: name.to_owned(),
            known: tools.names().join(", "),
        });
    };
    if let Some(reason) = refusal(tool.spec(), &context.domain.capabilities) {
        return Ok(Err(ToolError::Failed(reason)));
    }
    let started = Instant::now();
    let arguments = arguments.unwrap_or_default();
    let hooks = context.domain.hooks.clone();
    let scope = Arc::new(CallScope {
        traceparent,
        ..Default::default()
    });
    let outcome = CALL_SCOPE
        .scope(scope, async {
            if hooks.is_empty() {
                return run_contained(tool.as_ref(), name, context, arguments).await;
            }
            let arguments_value = observed_arguments(&arguments);
            let before = HookEvent::before_tool_call(name, &arguments_value);
            let work = run_contained(tool.as_ref(), name, context, arguments);
            // after_tool_call fires on every path, refusals and failures included.
            hooks
                .around(&before, work, |outcome| {
                    let (result, error) = match outcome {
                        Ok(output) => (Some(output.joined_text()), None),
                        Err(e) => (None, Some(e.to_string())),
                    };
                    HookEvent::after_tool_call(name, &arguments_value, result, error)
                })
                .await
        })
        .await;
    tracing::debug!(tool = name, elapsed = ?started.elapsed(), ok = outcome.is_ok(), "tool call");
    Ok(outcome)
}

/// Arguments that carry credentials: hook handlers (guests among them, which may log what they
/// see) get a placeholder instead of the value.
const SECRET_ARGUMENTS: [&str; 2] = ["jupyter_token", "jupyter_password"];

/// The arguments as hook handlers see them: secrets replaced.
fn observed_arguments(arguments: &JsonObject) -> Value {
    let mut observed = arguments.clone();
    for key in SECRET_ARGUMENTS {
        if let Some(value) = observed.get_mut(key)
            && !value.is_null()
        {
            *value = Value::from("[redacted]");
        }
    }
    Value::Object(observed)
}

/// A tool call from MCP, answered as MCP wants it.
pub async fn call_tool(
    tools: &ToolRegistry,
    view: Option<&ToolView>,
    name: &str,
    arguments: Option<JsonObject>,
    context: ToolContext,
    traceparent: Option<String>,
) -> Result<CallToolResult, McpError> {
    let outcome = match view {
        // Outside this client's view a tool does not exist for it.
        Some(view) if !view.allows(name) => Err(UnknownTool {
            name: name.to_owned(),
            known: tools
                .names()
                .into_iter()
                .filter(|n| view.allows(n))
                .collect::<Vec<_>>()
                .join(", "),
        }),
        _ => run(tools, name, arguments, context, traceparent).await,
    };
    let outcome = outcome.map_err(|unknown| {
        McpError::invalid_params(
            unknown.to_string(),
            Some(serde_json::json!({ "tool": name })),
        )
    })?;
    Ok(match outcome {
        Ok(output) => {
            let mut result = CallToolResult::success(output.content);
            result.structured_content = output.structured;
            if !output.meta.is_empty() {
                result.meta = Some(rmcp::model::MetaObject(output.meta));
            }
            result
        }
        Err(error) => CallToolResult::error(vec![Content::text(format!(
            "Error executing tool {name}: {error}"
        ))]),
    })
}

/// Runs a tool so that a panic costs only its own call.
async fn run_contained(
    tool: &dyn Tool,
    name: &str,
    context: ToolContext,
    arguments: JsonObject,
) -> Result<ToolOutput, ToolError> {
    AssertUnwindSafe(tool.call(context, arguments))
        .catch_unwind()
        .await
        .unwrap_or_else(|panic| {
            let what = panic
                .downcast_ref::<&str>()
                .map(|s| s.to_string())
                .or_else(|| panic.downcast_ref::<String>().cloned())
                .unwrap_or_else(|| "unknown panic".into());
            tracing::error!(tool = name, "tool panicked: {what}");
            Err(ToolError::Failed(format!(
                "internal error ({what}); the server is still running, please report this"
            )))
        })
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::capabilities::{ADOPT_SESSION, Settings};
    use crate::tools::{ToolFuture, native};
    use schemars::JsonSchema;

    #[derive(serde::Deserialize, JsonSchema)]
    struct NoArgs {}

    #[test]
    fn gated_tools_are_hidden_and_refused_while_their_capability_is_off() {
        let mut registry = ToolRegistry::default();
        let gated = native("adopt_things", "test", true, |_c, _a: NoArgs| async {
            Ok(ToolOutput::text("ok"))
        });
        registry.insert(native("open_tool", "test", true, |_c, _a: NoArgs| async {
            Ok(ToolOutput::text("ok"))
        }));
        let spec = ToolSpec {
            capability: Some(ADOPT_SESSION.into()),
            ..gated.spec().clone()
        };
        struct Gated(ToolSpec);
        impl Tool for Gated {
            fn spec(&self) -> &ToolSpec {
                &self.0
            }
            fn call(&self, _c: ToolContext, _a: JsonObject) -> ToolFuture<'_> {
                Box::pin(async { Ok(ToolOutput::text("ran")) })
            }
        }
        registry.insert(Arc::new(Gated(spec.clone())));
        let off = Capabilities::build(&[], &Settings::default()).unwrap();
        let names: Vec<_> = registry
            .visible(&off)
            .iter()
            .map(|t| t.spec().name.clone())
            .collect();
        assert_eq!(names, vec!["open_tool"]);
        assert!(
            refusal(&spec, &off)
                .unwrap()
                .contains("'kernel.adopt-session'")
        );
        let on = Capabilities::build(
            &[],
            &Settings {
                cli: vec![ADOPT_SESSION.into()],
                ..Default::default()
            },
        )
        .unwrap();
        assert_eq!(registry.visible(&on).len(), 2);
        assert!(refusal(&spec, &on).is_none());
    }

    struct Owned(ToolSpec, &'static str);
    impl Tool for Owned {
        fn spec(&self) -> &ToolSpec {
            &self.0
        }
        fn extension_name(&self) -> Option<&str> {
            Some(self.1)
        }
        fn call(&self, _c: ToolContext, _a: JsonObject) -> ToolFuture<'_> {
            Box::pin(async { Ok(ToolOutput::text("ran")) })
        }
    }

    #[test]
    fn an_extensions_tools_are_replaced_in_one_change_and_core_names_stay_refused() {
        let registry = ToolRegistry::builtin();
        let spec = |name: &str| ToolSpec {
            name: name.into(),
            ..registry.get("list_files").unwrap().spec().clone()
        };
        let tool =
            |name: &str, owner: &'static str| Arc::new(Owned(spec(name), owner)) as Arc<dyn Tool>;
        registry.add(tool("x_old", "x")).unwrap();
        registry.add(tool("x_kept", "x")).unwrap();
        let mut changes = registry.changes();
        let before = *changes.borrow_and_update();
        let refused = registry.replace_extension(
            "x",
            vec![
                tool("x_kept", "x"),
                tool("x_new", "x"),
                tool("list_files", "x"),
            ],
        );
        assert_eq!(refused.len(), 1);
        assert_eq!(refused[0].0, "list_files");
        assert_eq!(
            *changes.borrow_and_update(),
            before + 1,
            "one change for the whole replacement"
        );
        assert_eq!(registry.names_of("x"), ["x_kept", "x_new"]);
        assert_eq!(registry.get("list_files").unwrap().extension_name(), None);
        registry.replace_extension("x", Vec::new());
        assert!(registry.names_of("x").is_empty());
    }

    #[test]
    fn toolsets_select_and_view_by_name_and_refuse_unknown_names() {
        let names = |r: &ToolRegistry| r.names().join(",");
        let mut registry = ToolRegistry::builtin();
        let all = registry.names().len();
        let view = registry
            .view(&["notebooks".into(), "list_files".into()])
            .unwrap();
        assert!(view.allows("use_notebook") && view.allows("read_file"));
        let unknown = registry.view(&["nope".into()]).unwrap_err().to_string();
        assert!(unknown.contains("'nope'") && unknown.contains("list_files, list_kernels"));
        registry.select(&[], &[]).unwrap();
        assert_eq!(registry.names().len(), all);
        let error = registry
            .clone()
            .select(&["list_files".into()], &["list_files".into()])
            .unwrap_err();
        assert!(matches!(error, UnknownToolNames::NoneLeft { .. }));
        assert!(registry.clone().select(&["x".into()], &[]).is_err());
        let mut narrowed = registry.clone();
        narrowed
            .select(&["notebooks".into()], &["execute_code".into()])
            .unwrap();
        assert_eq!(narrowed.names().len(), all - 1);
        registry
            .select(&["read_file".into(), "write_file".into()], &[])
            .unwrap();
        assert_eq!(names(&registry), "read_file,write_file");
    }
}

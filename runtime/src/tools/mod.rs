//! Tools: what an agent can call. One file per family; each tool is a typed argument struct plus
//! an async function, wrapped so native and extension tools (`wasm::ExtensionTool`) look the same
//! to dispatch.

pub mod cells;
pub mod connect;
pub mod execute;
pub mod files;
pub mod kernels;
pub mod notebooks;
pub mod outputs;
pub mod wire;

use std::collections::BTreeMap;
use std::future::Future;
use std::pin::Pin;
use std::sync::Arc;
use std::time::Duration;

use rmcp::model::{ContentBlock as Content, JsonObject, ToolAnnotations};
use schemars::JsonSchema;
use serde::de::DeserializeOwned;
use serde_json::Value;
use tokio_util::sync::CancellationToken;

use crate::capabilities::Registry;
use crate::state::ServerState;

/// What a tool declares about itself.
#[derive(Debug, Clone)]
pub struct ToolSpec {
    pub name: String,
    pub description: String,
    pub input_schema: Arc<JsonObject>,
    pub read_only: bool,
    /// The capability that must be on for the tool to be listed and callable.
    pub capability: Option<String>,
    /// The schema its `structuredContent` follows, when it has one.
    pub output_schema: Option<Arc<JsonObject>>,
}

impl ToolSpec {
    pub fn to_mcp(&self) -> rmcp::model::Tool {
        let annotations = if self.read_only {
            ToolAnnotations::new().read_only(true)
        } else {
            ToolAnnotations::new().destructive(true)
        };
        let tool = rmcp::model::Tool::new(
            self.name.clone(),
            self.description.clone(),
            self.input_schema.clone(),
        )
        .with_annotations(annotations);
        match &self.output_schema {
            Some(schema) => tool.with_raw_output_schema(schema.clone()),
            None => tool,
        }
    }
}

/// A successful tool result.
#[derive(Debug, Default)]
pub struct ToolOutput {
    pub content: Vec<Content>,
    pub structured: Option<Value>,
    /// Facts for programs (e.g. the cell ids acted on), sent as the result's `_meta` under
    /// namespaced keys (`wire::meta_key`).
    pub meta: JsonObject,
}

impl ToolOutput {
    pub fn text(text: impl Into<String>) -> Self {
        Self::content(vec![Content::text(text.into())])
    }

    pub fn content(content: Vec<Content>) -> Self {
        ToolOutput {
            content,
            ..Default::default()
        }
    }

    /// Adds a fact under this server's `_meta` namespace.
    pub fn with_meta(mut self, name: &str, value: Value) -> Self {
        self.meta.insert(wire::meta_key(name), value);
        self
    }
}

/// A failure the agent can act on; its message says what to do next.
#[derive(Debug, thiserror::Error)]
pub enum ToolError {
    #[error("invalid arguments: {0}")]
    InvalidArguments(String),
    #[error("{0}")]
    Failed(String),
}

impl ToolError {
    pub fn failed(error: impl std::fmt::Display) -> Self {
        ToolError::Failed(error.to_string())
    }
}

/// Reports progress of a long call to the client, if it asked for progress.
pub type ProgressReporter = Arc<dyn Fn(f64, Option<f64>, String) + Send + Sync>;

/// What a tool call gets besides its arguments.
#[derive(Clone)]
pub struct ToolContext {
    pub state: Arc<ServerState>,
    pub cancel: CancellationToken,
    pub progress: Option<ProgressReporter>,
}

pub type ToolFuture<'a> = Pin<Box<dyn Future<Output = Result<ToolOutput, ToolError>> + Send + 'a>>;

pub trait Tool: Send + Sync {
    fn spec(&self) -> &ToolSpec;
    fn call(&self, context: ToolContext, arguments: JsonObject) -> ToolFuture<'_>;
    /// Decodes the arguments without running anything (for fuzzing the decoders).
    fn check_arguments(&self, _arguments: JsonObject) -> Result<(), ToolError> {
        Ok(())
    }
    /// The extension that added the tool; `None` for a core tool.
    fn extension_name(&self) -> Option<&str> {
        None
    }
}

/// A tool written in Rust: arguments decoded into `A`, whose JSON Schema is the input schema.
struct NativeTool<A, F> {
    spec: ToolSpec,
    /// The result shape the Python server's clients expect of this tool.
    shape: wire::Shape,
    /// Argument names of the schema; others are ignored with a note (core tools only).
    lenient: Option<Vec<wire::Declared>>,
    run: F,
    _args: std::marker::PhantomData<fn() -> A>,
}

impl<A, F, Fut> Tool for NativeTool<A, F>
where
    A: DeserializeOwned + Send + 'static,
    F: Fn(ToolContext, A) -> Fut + Send + Sync,
    Fut: Future<Output = Result<ToolOutput, ToolError>> + Send + 'static,
{
    fn spec(&self) -> &ToolSpec {
        &self.spec
    }

    fn check_arguments(&self, arguments: JsonObject) -> Result<(), ToolError> {
        let (arguments, _) = self.split_unknown(arguments);
        decode_arguments::<A>(arguments).map(drop)
    }

    fn call(&self, context: ToolContext, arguments: JsonObject) -> ToolFuture<'_> {
        let (arguments, ignored) = self.split_unknown(arguments);
        let shape = self.shape;
        match decode_arguments::<A>(arguments) {
            Ok(args) => {
                let running = (self.run)(context, args);
                Box::pin(async move { wire::finish(running.await, shape, ignored.as_ref()) })
            }
            Err(e) => Box::pin(std::future::ready(wire::finish(
                Err(e),
                shape,
                ignored.as_ref(),
            ))),
        }
    }
}

impl<A, F> NativeTool<A, F> {
    fn split_unknown(&self, arguments: JsonObject) -> (JsonObject, Option<wire::Ignored>) {
        match &self.lenient {
            Some(declared) => wire::split_unknown(declared, arguments),
            None => (arguments, None),
        }
    }
}

/// Decodes arguments, naming the offending field when they do not fit.
pub fn decode_arguments<A: DeserializeOwned>(arguments: JsonObject) -> Result<A, ToolError> {
    let value = Value::Object(arguments);
    serde_path_to_error::deserialize::<_, A>(value).map_err(|e| {
        let path = e.path().to_string();
        let inner = e.into_inner();
        if path == "." {
            ToolError::InvalidArguments(inner.to_string())
        } else {
            ToolError::InvalidArguments(format!("'{path}': {inner}"))
        }
    })
}

pub fn native<A, F, Fut>(name: &str, description: &str, read_only: bool, run: F) -> Arc<dyn Tool>
where
    A: DeserializeOwned + JsonSchema + Send + 'static,
    F: Fn(ToolContext, A) -> Fut + Send + Sync + 'static,
    Fut: Future<Output = Result<ToolOutput, ToolError>> + Send + 'static,
{
    let mut schema = (*rmcp::handler::server::common::schema_for_type::<A>()).clone();
    // The struct's own doc comment would repeat the tool description; the title is noise.
    schema.remove("title");
    schema.remove("description");
    let shape = wire::shape_of(name);
    // The Python server's tools ignore arguments they do not know; ours say so in the result.
    let lenient = (shape != wire::Shape::Own).then(|| {
        wire::accept_unknown_arguments(&mut schema);
        wire::declared_arguments(&schema)
    });
    let output_schema = (shape == wire::Shape::Text).then(|| wire::text_output_schema(name));
    Arc::new(NativeTool {
        spec: ToolSpec {
            name: name.to_owned(),
            description: description.to_owned(),
            input_schema: Arc::new(schema),
            read_only,
            capability: None,
            output_schema,
        },
        shape,
        lenient,
        run,
        _args: std::marker::PhantomData,
    })
}

/// Every tool the server offers, by name (so listing order is stable).
#[derive(Default, Clone)]
pub struct ToolRegistry {
    tools: BTreeMap<String, Arc<dyn Tool>>,
}

impl ToolRegistry {
    /// The built-in tools of this server.
    pub fn builtin() -> Self {
        let mut registry = ToolRegistry::default();
        for tool in [
            execute::execute_code(),
            kernels::list_kernels(),
            files::list_files(),
            connect::connect_to_jupyter(),
        ]
        .into_iter()
        .chain(cells::tools())
        .chain(notebooks::tools())
        {
            registry.insert(tool);
        }
        registry
    }

    pub fn insert(&mut self, tool: Arc<dyn Tool>) {
        self.tools.insert(tool.spec().name.clone(), tool);
    }

    pub fn get(&self, name: &str) -> Option<&Arc<dyn Tool>> {
        self.tools.get(name)
    }

    pub fn iter(&self) -> impl Iterator<Item = &Arc<dyn Tool>> {
        self.tools.values()
    }

    pub fn names(&self) -> Vec<&str> {
        self.tools.keys().map(String::as_str).collect()
    }

    /// The tools a client sees: those whose capability (if any) is on.
    pub fn visible<'a>(
        &'a self,
        capabilities: &'a Registry,
    ) -> impl Iterator<Item = &'a Arc<dyn Tool>> {
        self.iter()
            .filter(|t| refusal(t.spec(), capabilities).is_none())
    }
}

/// Why a tool may not run now: the capability it needs is off.
pub fn refusal(spec: &ToolSpec, capabilities: &Registry) -> Option<String> {
    let needed = spec.capability.as_deref()?;
    (!capabilities.enabled(needed)).then(|| {
        format!(
            "it needs the '{needed}' capability, which is off. An operator can turn it on with \
             --capability {needed}."
        )
    })
}

/// Seconds as the tools take them (floats, as the Python server's schema allows).
pub fn seconds(value: f64) -> Duration {
    // Absurd values (1e300) mean "forever": capped at ~31 years, so adding them to an instant
    // cannot overflow.
    const FOREVER: f64 = 1e9;
    if value.is_finite() && value > 0.0 {
        Duration::from_secs_f64(value.min(FOREVER))
    } else {
        Duration::ZERO
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::capabilities::{ADOPT_SESSION, Settings};

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
        let off = Registry::build(&[], &Settings::default()).unwrap();
        let names: Vec<_> = registry
            .visible(&off)
            .map(|t| t.spec().name.clone())
            .collect();
        assert_eq!(names, vec!["open_tool"]);
        assert!(
            refusal(&spec, &off)
                .unwrap()
                .contains("'kernel.adopt-session'")
        );
        let on = Registry::build(
            &[],
            &Settings {
                cli: vec![ADOPT_SESSION.into()],
                ..Default::default()
            },
        )
        .unwrap();
        assert_eq!(registry.visible(&on).count(), 2);
        assert!(refusal(&spec, &on).is_none());
    }
}

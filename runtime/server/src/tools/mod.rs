//! Tools: what an agent can call. One file per family; each tool is a typed argument struct plus
//! an async function, wrapped so native and extension tools (`extensions::ExtensionTool`) look the same
//! to dispatch.

pub mod cells;
pub mod changes;
pub mod compact;
pub mod connect;
pub mod execute;
pub mod executions;
pub mod extensions;
pub mod file_io;
pub mod files;
pub mod format;
pub mod guidance;
pub mod interrupt;
pub mod kernels;
pub mod kernelspecs;
pub mod notebooks;
pub mod outputs;
pub mod run_all;
#[cfg(test)]
mod schema_snapshot;
pub mod scope;
pub mod steps;
pub mod variables;
pub mod wire;

use std::future::Future;
use std::pin::Pin;
use std::sync::Arc;
use std::time::Duration;

use rmcp::model::{ContentBlock as Content, JsonObject, ToolAnnotations};
use schemars::JsonSchema;
use serde::de::DeserializeOwned;
use serde_json::Value;
use tokio_util::sync::CancellationToken;

use server_core::domain::Domain;

/// What a tool declares about itself: every fact the layers above ask of it, in one place, so
/// nothing elsewhere keeps a table keyed by its name.
#[derive(Debug, Clone, Default)]
pub struct ToolSpec {
    pub name: String,
    pub description: String,
    pub input_schema: Arc<JsonObject>,
    pub read_only: bool,
    /// The OAuth scope a caller needs to see and call it.
    pub scope: scope::Scope,
    /// Arguments that carry secrets: hook handlers and spans see them redacted.
    pub secret_arguments: &'static [&'static str],
    /// The capability that must be on for the tool to be listed and callable.
    pub capability: Option<String>,
    /// The schema its `structuredContent` follows, when it has one.
    pub output_schema: Option<Arc<JsonObject>>,
    /// How its result is shaped on the wire (`wire::finish`).
    pub shape: wire::Shape,
    /// Its results carry notebook outputs, which the MCP Apps output viewer draws.
    pub shows_outputs: bool,
    /// Whether its calls may become tasks (for a client that declared the extension).
    pub tasks: TaskSupport,
}

/// Argument names that carry Jupyter credentials wherever a tool takes them: hook handlers see
/// them redacted, for core and extension tools alike.
pub const CREDENTIAL_ARGUMENTS: &[&str] = &["jupyter_token", "jupyter_password"];

/// Whether a tool's calls may become tasks: a fact of the tool. Which requests of a session do
/// become tasks is the MCP layer's rule (`mcp::tasks`).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub enum TaskSupport {
    /// Always answered in the request.
    #[default]
    Forbidden,
    /// A task when the client declared the extension, an ordinary result otherwise.
    Optional,
    /// Only as a task; a client that did not declare the extension is refused (-32021).
    Required,
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

/// What running a tool comes to: its output, or an error the agent is shown.
pub type ToolResult = Result<ToolOutput, ToolError>;

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

    /// The text pieces of the content, one per line (images left out).
    pub fn joined_text(&self) -> String {
        wire::text_of(&self.content)
    }
}

/// A failure the agent can act on: the domain's, since tools only present domain operations.
pub use server_core::domain::Error as ToolError;

/// Reports progress of a long call to the client, if it asked for progress.
pub type ProgressReporter = Arc<dyn Fn(f64, Option<f64>, String) + Send + Sync>;

/// What a tool call gets besides its arguments.
#[derive(Clone)]
pub struct ToolContext {
    pub domain: Arc<Domain>,
    pub cancel: CancellationToken,
    pub progress: Option<ProgressReporter>,
    /// The MCP task the call runs as, if it does (an execution records it for `tasks/get`).
    pub task_id: Option<String>,
}

impl ToolContext {
    /// A call no client made (a management route, a task answered from its record): nothing
    /// to report progress to, cancelled by nobody, no task.
    pub fn internal(domain: Arc<Domain>) -> ToolContext {
        ToolContext {
            domain,
            cancel: CancellationToken::new(),
            progress: None,
            task_id: None,
        }
    }
}

pub type ToolFuture<'a> = Pin<Box<dyn Future<Output = ToolResult> + Send + 'a>>;

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
    /// Argument names of the schema; others are ignored with a note (core tools only).
    lenient: Option<Vec<wire::Declared>>,
    run: F,
    _args: std::marker::PhantomData<fn() -> A>,
}

impl<A, F, Fut> Tool for NativeTool<A, F>
where
    A: DeserializeOwned + Send + 'static,
    F: Fn(ToolContext, A) -> Fut + Send + Sync,
    Fut: Future<Output = ToolResult> + Send + 'static,
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
        let shape = self.spec.shape;
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
            ToolError::InvalidArguments(inner.to_string().into())
        } else {
            ToolError::InvalidArguments(format!("'{path}': {inner}").into())
        }
    })
}

/// Starts a tool's declaration: its name and description. Every other fact of the tool is a
/// method of [`Declaration`]; [`Declaration::run`] finishes it.
pub fn declare(name: &str, description: &str) -> Declaration {
    Declaration(ToolSpec {
        name: name.to_owned(),
        description: description.to_owned(),
        scope: scope::Scope::NotebooksWrite,
        ..ToolSpec::default()
    })
}

/// A Rust tool's facts, gathered beside its declaration and finished by [`Declaration::run`],
/// which derives its input schema from the argument type.
pub struct Declaration(ToolSpec);

impl Declaration {
    /// It only reads (annotated read-only; `notebooks:read` suffices). Otherwise it is
    /// annotated destructive and needs `notebooks:write`.
    pub fn read_only(mut self) -> Self {
        self.0.read_only = true;
        // A stronger scope declared with `runs_code` or `administers` stays.
        if self.0.scope == scope::Scope::NotebooksWrite {
            self.0.scope = scope::Scope::NotebooksRead;
        }
        self
    }

    /// It runs code in a kernel, interrupts or restarts one: it needs `code:execute`.
    pub fn runs_code(mut self) -> Self {
        self.0.scope = scope::Scope::CodeExecute;
        self
    }

    /// It acts on the server itself: it needs `server:admin`.
    pub fn administers(mut self) -> Self {
        self.0.scope = scope::Scope::ServerAdmin;
        self
    }

    /// These arguments carry secrets, which hook handlers and spans see redacted.
    pub fn secret_arguments(mut self, names: &'static [&'static str]) -> Self {
        self.0.secret_arguments = names;
        self
    }

    /// Answers in one of the Python server's result shapes (`wire::Shape`).
    pub fn shape(mut self, shape: wire::Shape) -> Self {
        self.0.shape = shape;
        self
    }

    /// Its results carry notebook outputs for the MCP Apps output viewer.
    pub fn shows_outputs(mut self) -> Self {
        self.0.shows_outputs = true;
        self
    }

    /// Whether its calls may become tasks.
    pub fn tasks(mut self, tasks: TaskSupport) -> Self {
        self.0.tasks = tasks;
        self
    }

    /// The tool: `run` called with the arguments decoded into `A`, whose JSON Schema is the
    /// input schema.
    pub fn run<A, F, Fut>(self, run: F) -> Arc<dyn Tool>
    where
        A: DeserializeOwned + JsonSchema + Send + 'static,
        F: Fn(ToolContext, A) -> Fut + Send + Sync + 'static,
        Fut: Future<Output = ToolResult> + Send + 'static,
    {
        let mut spec = self.0;
        let mut schema = (*rmcp::handler::server::common::schema_for_type::<A>()).clone();
        // The struct's own doc comment would repeat the tool description; the title is noise.
        schema.remove("title");
        schema.remove("description");
        wire::optional_arguments_default_to_null(&mut schema);
        wire::portable(&mut schema);
        // The Python server's tools ignore arguments they do not know; ours say so in the result.
        let lenient = (spec.shape != wire::Shape::Own).then(|| {
            wire::accept_unknown_arguments(&mut schema);
            wire::declared_arguments(&schema)
        });
        wire::close_when_empty(&mut schema);
        spec.output_schema = match spec.shape {
            wire::Shape::Text => Some(wire::text_output_schema(&spec.name)),
            wire::Shape::Outputs(_) => Some(wire::outputs_output_schema(&spec.name)),
            wire::Shape::Own => None,
        };
        spec.input_schema = Arc::new(schema);
        Arc::new(NativeTool {
            spec,
            lenient,
            run,
            _args: std::marker::PhantomData,
        })
    }
}

/// The built-in tools of this server.
pub fn builtin() -> Vec<Arc<dyn Tool>> {
    [
        execute::execute_code(),
        kernels::list_kernels(),
        files::list_files(),
        connect::connect_to_jupyter(),
        interrupt::interrupt_kernel(),
        kernelspecs::list_kernelspecs(),
        variables::inspect_variables(),
        run_all::run_all_cells(),
    ]
    .into_iter()
    .chain(cells::tools())
    .chain(changes::tools())
    .chain(notebooks::tools())
    .chain(file_io::tools())
    .chain(executions::tools())
    .collect()
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

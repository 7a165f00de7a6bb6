//! The domain: the notebook and kernel operations every face of the server shares. Tools, the
//! host functions of wasm guests, MCP resources and the HTTP management routes all call these,
//! so a rule (the auto-restart policy, the gone-kernel message, the conflict check of an edit,
//! the hooks around an execution) is written once and holds for every caller.
//!
//! `Domain` holds the services an operation may need, and nothing of the transports (no HTTP
//! token, no tool table).

pub mod cells;
pub mod changes;
pub mod connect;
pub mod egress_asks;
pub mod execution;
pub mod executions;
pub mod files;
pub mod interrupt;
pub mod kernels;
pub mod kernelspecs;
pub mod message;
pub mod notebooks;
pub mod outputs;
pub mod run_all;
pub mod runs;
pub mod startup;
pub mod users;
pub mod variables;
pub mod versions;

use std::sync::{Arc, RwLock};

use url::Url;

use crate::capabilities::{Capabilities, PREWARM};
use crate::hooks::Hooks;
use crate::settings::{DocumentBackend, ExecutionLimits, OutputLimits};
use jupyter_client::Jupyter;
use jupyter_client::document::DocumentError;
use jupyter_client::rest::JupyterRest;
use jupyter_client::spares::SparePolicy;
pub use message::{Message, Step, StepNames};
use notebooks::{LookupError, NotebookInUse, Notebooks};

/// The settings operations read: a slice of the server's configuration.
#[derive(Debug, Clone)]
pub struct Settings {
    /// A separate server for notebooks (`--document-url`), with its credentials.
    pub documents: Option<(Url, jupyter_client::auth::Auth)>,
    pub document_backend: DocumentBackend,
    pub execution: ExecutionLimits,
    pub output: OutputLimits,
    /// Largest file read_file reads or write_file writes.
    pub max_file_bytes: u64,
    /// How many spare kernels `kernel.prewarm` keeps, and for how long.
    pub prewarm: SparePolicy,
    /// How kernels are started on every server this domain uses (`--kernel-env`, …).
    pub kernel_start: jupyter_client::rest::KernelStart,
    /// Which code needs a person's yes while `execution.confirm` is on.
    pub confirm: crate::confirm::Rules,
    /// Where execution records outlive the process (`--state-dir`), if anywhere.
    pub store: Option<executions::records::Scope>,
}

/// A failure a caller can act on; its message says what to do next. The kinds a tool shows
/// alike (as their message) stay apart so a guest's host function can say which it was.
/// Its `Display` names steps neutrally (`<open-notebook>`), for logs; a face shows it with
/// [`Error::worded`].
#[derive(Debug, Clone, thiserror::Error, serde::Serialize, serde::Deserialize)]
pub enum Error {
    #[error("invalid arguments: {0}")]
    InvalidArguments(Message),
    /// No such notebook in use, or no such cell.
    #[error("{0}")]
    NotFound(Message),
    /// The cell changed since the caller saw it (someone else edited it).
    #[error("{0}")]
    Conflict(Message),
    /// The kernel is gone or failed.
    #[error("{0}")]
    Kernel(Message),
    #[error("{0}")]
    Failed(Message),
}

impl Error {
    pub fn failed(error: impl std::fmt::Display) -> Self {
        Error::Failed(error.to_string().into())
    }

    pub fn message(&self) -> &Message {
        match self {
            Error::InvalidArguments(m)
            | Error::NotFound(m)
            | Error::Conflict(m)
            | Error::Kernel(m)
            | Error::Failed(m) => m,
        }
    }

    /// The error as a face shows it, each step it suggests named by `names`.
    pub fn worded(&self, names: StepNames) -> String {
        let text = self.message().worded(names);
        match self {
            Error::InvalidArguments(_) => format!("invalid arguments: {text}"),
            _ => text,
        }
    }
}

impl From<DocumentError> for Error {
    fn from(error: DocumentError) -> Self {
        match error {
            // The plan's own words, not wrapped.
            DocumentError::Refused(reason) => Error::Failed(reason.into()),
            conflict @ DocumentError::Conflict { .. } => {
                Error::Conflict(conflict.to_string().into())
            }
            other => Error::failed(other),
        }
    }
}

impl From<crate::hooks::HookError> for Error {
    fn from(refusal: crate::hooks::HookError) -> Self {
        Error::failed(refusal)
    }
}

impl From<LookupError> for Error {
    fn from(error: LookupError) -> Self {
        Error::NotFound(error.message())
    }
}

pub struct Domain {
    pub settings: Settings,
    /// Replaced as a whole by `connect`; calls in flight keep the one they started with.
    jupyter: RwLock<Arc<Jupyter>>,
    pub notebooks: Notebooks,
    /// Shared by every domain of the server (Hub mode: every user's), so what an extension
    /// declares late reaches them all.
    pub capabilities: Arc<Capabilities>,
    pub hooks: Arc<Hooks>,
    /// The runs of the execution tools, background ones included.
    pub executions: executions::Executions,
    /// Whether the Jupyter Server is up yet (the embedded one starts while we serve).
    pub startup: startup::JupyterStartup,
    /// How kernels ended, where their connection cannot say (a sandbox's memory cap).
    pub kernel_endings: kernels::KernelEndings,
    /// Runs on sandboxed kernels, and the hosts people allowed them (`kernel.egress-prompts`).
    pub egress_asks: egress_asks::EgressAsks,
    /// The `auto` backend settled once the embedded server's environment is known.
    settled_backend: std::sync::OnceLock<DocumentBackend>,
}

impl Domain {
    pub fn new(
        settings: Settings,
        jupyter: Jupyter,
        capabilities: Arc<Capabilities>,
        hooks: Arc<Hooks>,
    ) -> Arc<Self> {
        let domain = Self::detached(settings, jupyter, capabilities, hooks);
        domain.prepare(&domain.jupyter());
        domain
    }

    /// A domain whose server is never prepared (no spare kernels): in Hub mode the one the
    /// transports read capabilities and settings from; users' calls each get their own.
    pub fn detached(
        settings: Settings,
        jupyter: Jupyter,
        capabilities: Arc<Capabilities>,
        hooks: Arc<Hooks>,
    ) -> Arc<Self> {
        let jupyter = jupyter.with_kernel_start(settings.kernel_start.clone());
        let executions =
            executions::Executions::new(settings.store.clone(), settings.execution.memory_budget);
        Arc::new(Domain {
            settings,
            jupyter: RwLock::new(Arc::new(jupyter)),
            notebooks: Notebooks::default(),
            capabilities,
            hooks,
            kernel_endings: Default::default(),
            egress_asks: Default::default(),
            executions,
            startup: Default::default(),
            settled_backend: Default::default(),
        })
    }

    /// What the server keeps ready on a Jupyter Server it uses: spare kernels when
    /// `kernel.prewarm` is on.
    fn prepare(&self, jupyter: &Arc<Jupyter>) {
        if self.capabilities.enabled(PREWARM) {
            jupyter.keep_spares(self.settings.prewarm);
        }
    }

    pub fn jupyter(&self) -> Arc<Jupyter> {
        self.jupyter.read().expect("jupyter lock").clone()
    }

    /// The server holding notebooks: `--document-url` if given, else the kernels' server.
    pub fn documents_rest(&self) -> JupyterRest {
        match &self.settings.documents {
            Some((url, auth)) => JupyterRest::with_auth(url.clone(), auth.clone()),
            None => self.jupyter().rest().clone(),
        }
    }

    /// Points the server at another Jupyter Server; returns the previous one to be shut down.
    pub fn replace_jupyter(&self, jupyter: Jupyter) -> Arc<Jupyter> {
        let jupyter = Arc::new(jupyter.with_kernel_start(self.settings.kernel_start.clone()));
        self.prepare(&jupyter);
        // Whatever became of an embedded server, calls now go to this one.
        self.startup.set(startup::JupyterState::Up);
        std::mem::replace(&mut *self.jupyter.write().expect("jupyter lock"), jupyter)
    }

    /// The named notebook in use, or the current one.
    pub fn notebook(&self, name: Option<&str>) -> Result<Arc<NotebookInUse>, Error> {
        Ok(self.notebooks.resolve(name)?)
    }
}

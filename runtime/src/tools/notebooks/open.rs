//! use_notebook: a notebook opened with the chosen document backend and given a kernel.

use std::sync::Arc;

use schemars::JsonSchema;
use serde::Deserialize;

use crate::config::DocumentBackend;
use crate::domain::kernelspecs::ChosenSpec;
use crate::domain::notebooks::{self, KernelOrigin, NotebookInUse};
use crate::jupyter::Jupyter;
use crate::jupyter::document::file::FileDocument;
use crate::jupyter::document::live::LiveDocument;
use crate::jupyter::document::{Document, Edit};
use crate::jupyter::kernel::{ConnectError, Kernel, KernelError};
use crate::jupyter::notebook::Notebook;
use crate::jupyter::rest::JupyterRest;
use crate::jupyter::rest::{RestError, SessionModel};
use crate::tools::format::brief_table;
use crate::tools::{ToolContext, ToolError, ToolOutput, ToolResult};

#[derive(Debug, Deserialize, JsonSchema, Clone, Copy, PartialEq, Eq)]
#[serde(rename_all = "lowercase")]
pub enum UseMode {
    Connect,
    Create,
}

fn default_mode() -> UseMode {
    UseMode::Connect
}

#[derive(Debug, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct UseNotebookArgs {
    /// Unique identifier for the notebook.
    pub notebook_name: String,
    /// Path to the notebook file, relative to the Jupyter server root (e.g. 'notebook.ipynb').
    pub notebook_path: String,
    /// 'connect' to open an existing notebook, 'create' to create a new one.
    #[serde(default = "default_mode")]
    pub mode: UseMode,
    /// A running kernel to use (see list_kernels); without it a kernel is started.
    pub kernel_id: Option<String>,
    /// The kernelspec to start the notebook's kernel from (see list_kernelspecs), e.g. another
    /// Python environment or language; without it the server's default. Not with kernel_id.
    pub kernel_name: Option<String>,
}

/// An empty nbformat 4.5 notebook with the chosen kernelspec, else the default Python one.
fn new_notebook(spec: Option<&ChosenSpec>) -> Notebook {
    let mut notebook = Notebook::empty();
    let (kernelspec, language) = match spec {
        Some(spec) => (spec.metadata(), spec.language.as_str()),
        None => (
            serde_json::json!({"display_name": "Python 3 (ipykernel)", "language": "python", "name": "python3"}),
            "python",
        ),
    };
    notebook.metadata.insert("kernelspec".into(), kernelspec);
    notebook.metadata.insert(
        "language_info".into(),
        serde_json::json!({ "name": language }),
    );
    notebook
}

pub(super) async fn use_notebook(context: ToolContext, args: UseNotebookArgs) -> ToolResult {
    let domain = &context.domain;
    let started = std::time::Instant::now();
    let name = args.notebook_name.clone();
    let path = args.notebook_path.trim_start_matches('/').to_owned();
    if name.is_empty() || path.is_empty() {
        return Err(ToolError::InvalidArguments(
            "notebook_name and notebook_path must not be empty".into(),
        ));
    }
    if args.kernel_id.is_some() && args.kernel_name.is_some() {
        return Err(ToolError::InvalidArguments(
            "give kernel_id or kernel_name, not both: kernel_id attaches a running kernel, \
             kernel_name starts a new one from that kernelspec"
                .into(),
        ));
    }
    if let Some(existing) = domain.notebooks.get(&name) {
        return match (args.mode, existing.path == path) {
            (UseMode::Create, true) => Ok(ToolOutput::text(format!(
                "Notebook '{name}'(path: {path}) is already created. DO NOT CREATE AGAIN."
            ))),
            (UseMode::Create, false) => Err(ToolError::Failed(format!(
                "Notebook '{name}' is already used. Use different notebook_name to create a new notebook on {path}."
            ))),
            (UseMode::Connect, false) => Err(ToolError::Failed(format!(
                "The path '{path}' is not the correct path for notebook '{name}'. Do you mean connect to '{}'?",
                existing.path
            ))),
            (UseMode::Connect, true) => {
                let previous = domain.notebooks.make_current(&name);
                let kernel = existing.kernel();
                let mut text = format!(
                    "Notebook '{name}' is already connected — no need to call use_notebook again. \
                     It is in use on kernel '{}'.",
                    kernel.id()
                );
                if let Some(previous) = previous.filter(|p| *p != name) {
                    text.push_str(&format!(
                        " [INFO] Reactivating notebook '{name}' and deactivating '{previous}'."
                    ));
                }
                if args.kernel_name.is_some() {
                    text.push_str(
                        " The kernel_name you passed was not applied: call restart_notebook with \
                         kernel_name to move this notebook to another kernelspec.",
                    );
                }
                if args.kernel_id.as_deref().is_some_and(|k| k != kernel.id()) {
                    text.push_str(
                        " The kernel_id you passed was not applied: a notebook in use keeps its kernel \
                         (unuse_notebook first to attach another).",
                    );
                }
                Ok(ToolOutput::text(text))
            }
        };
    }

    // Checked before anything is created, so a misspelt name costs nothing.
    let spec = match &args.kernel_name {
        Some(kernel_name) => Some(domain.kernelspec(kernel_name).await?),
        None => None,
    };
    let documents = domain.documents_rest();
    step_done(started, "kernelspec");
    let exists = match documents.exists(&path).await {
        Ok(found) => found,
        Err(RestError::NotFound { .. }) => false,
        Err(e) => {
            return Err(ToolError::Failed(format!(
                "Failed to check the path '{path}': {e}"
            )));
        }
    };
    step_done(started, "exists");
    let mut created = None;
    match args.mode {
        UseMode::Connect if !exists => {
            return Err(ToolError::Failed(format!(
                "'{path}' not found in jupyter server, please check the notebook already exists. Call list_files to see the files, or use mode 'create'."
            )));
        }
        UseMode::Create if exists => {
            return Err(ToolError::Failed(format!(
                "'{path}' already exists in jupyter server, please use a different path or use_mode='connect' to open it."
            )));
        }
        UseMode::Create => {
            let parent = path.rsplit_once('/').map(|(dir, _)| dir).unwrap_or("");
            if !parent.is_empty() && documents.get_contents(parent, false).await.is_err() {
                return Err(ToolError::Failed(format!(
                    "'{parent}' not found in jupyter server, please check the directory path already exists."
                )));
            }
            let written = new_notebook(spec.as_ref());
            FileDocument::create(&documents, &path, &written)
                .await
                .map_err(ToolError::failed)?;
            created = Some(written);
            step_done(started, "file created");
        }
        UseMode::Connect => {}
    }
    let jupyter = domain.jupyter();
    // The next spare (kernel.prewarm) is started once this call is answered, not during it.
    let _hold = jupyter.hold_spares();
    let open = open_notebook(
        domain.settings.document_backend,
        documents,
        &path,
        created.as_ref(),
        started,
    );
    let acquire = acquire_kernel(
        &context,
        &jupyter,
        args.kernel_id.as_deref(),
        spec.as_ref(),
        &name,
        &path,
        started,
    );
    let ((document, notebook, backend_line), (kernel, origin, kernel_line)) = match args.mode {
        // A notebook we just created is known to be one: its room and its kernel are set up
        // at once, and when one of them fails the other is undone.
        UseMode::Create => match tokio::join!(open, acquire) {
            (Ok(opened), Ok(acquired)) => (opened, acquired),
            (Ok((document, ..)), Err(e)) => {
                let _ = document.close().await;
                return Err(e);
            }
            (Err(e), Ok((kernel, origin, _))) => {
                notebooks::release_kernel(&jupyter, &kernel, &origin).await;
                return Err(e);
            }
            (Err(e), Err(_)) => return Err(e),
        },
        // Read first: a file that is not a notebook is refused before a kernel is started.
        UseMode::Connect => {
            let opened = open.await?;
            match acquire.await {
                Ok(acquired) => (opened, acquired),
                Err(e) => {
                    let _ = opened.0.close().await;
                    return Err(e);
                }
            }
        }
    };
    if let Some(spec) = &spec {
        // Connecting on a chosen kernelspec records it in the notebook, as JupyterLab does.
        if notebook.metadata.get("kernelspec") != Some(&spec.metadata()) {
            let edit = Edit::SetNotebookMetadata {
                key: "kernelspec".into(),
                value: spec.metadata(),
            };
            document
                .update(Box::new(move |_| Ok(vec![edit])))
                .await
                .map_err(ToolError::failed)?;
        }
    }
    step_done(started, "ready");
    let kernel_line = match &spec {
        Some(spec) => format!(
            "{kernel_line}\n[INFO] The kernel runs kernelspec '{}' ({}).",
            spec.name, spec.display_name
        ),
        None => kernel_line,
    };
    finish_use(
        &context,
        name,
        path,
        document,
        &notebook,
        kernel,
        origin,
        format!("{kernel_line}\n{backend_line}"),
    )
}

/// Opens the notebook's document and reads it, or, for a notebook we just wrote (`created`),
/// takes that as read: its room may still be being joined (`LiveDocument::open_created`).
async fn open_notebook(
    choice: DocumentBackend,
    documents: JupyterRest,
    path: &str,
    created: Option<&Notebook>,
    started: std::time::Instant,
) -> Result<(Arc<dyn Document>, Notebook, String), ToolError> {
    let (document, backend_line) =
        open_document(choice, documents, path, created.is_some()).await?;
    step_done(started, "document opened");
    let notebook = match created {
        Some(written) => written.clone(),
        None => match document.read().await {
            Ok(notebook) => notebook,
            Err(e) => {
                let _ = document.close().await;
                return Err(ToolError::failed(e));
            }
        },
    };
    Ok((document, notebook, backend_line))
}

/// The notebook's kernel: `kernel_id`'s, the kernel of a session already open on the path
/// (`kernel.adopt-session`), or one we start (or take from the spares) with a session for the
/// path. Returns it, how it came, and the line that says so.
async fn acquire_kernel(
    context: &ToolContext,
    jupyter: &Jupyter,
    kernel_id: Option<&str>,
    spec: Option<&ChosenSpec>,
    name: &str,
    path: &str,
    started: std::time::Instant,
) -> Result<(Arc<Kernel>, KernelOrigin, String), ToolError> {
    if let Some(kernel_id) = kernel_id {
        let kernel = jupyter.kernel(kernel_id).await.map_err(|e| match e {
            KernelError::Connect(ConnectError::NotFound(_)) => ToolError::Failed(format!(
                "Kernel '{kernel_id}' not found in jupyter server, please check whether the kernel already exists using 'list_kernels' tool."
            )),
            other => ToolError::failed(other),
        })?;
        let line = format!(
            "[INFO] Connected to kernel '{kernel_id}' (given by kernel_id; it is left running when the notebook is released)."
        );
        return Ok((kernel, KernelOrigin::Given, line));
    }
    let existing = jupyter
        .rest()
        .list_sessions()
        .await
        .map_err(ToolError::failed)?
        .into_iter()
        .find(|s| s.path == path);
    step_done(started, "sessions listed");
    // A chosen kernelspec means a kernel of our own, never the session's.
    let adopt = spec.is_none()
        && context
            .domain
            .capabilities
            .enabled(crate::capabilities::ADOPT_SESSION);
    let their_kernel = existing
        .as_ref()
        .and_then(|s| s.kernel.as_ref())
        .map(|k| k.id.clone());
    if let (true, Some(session), Some(theirs)) = (adopt, &existing, their_kernel) {
        let kernel = jupyter.kernel(&theirs).await.map_err(ToolError::failed)?;
        let line = format!(
            "[INFO] Adopted kernel '{theirs}' of the Jupyter session already open on '{path}' (kernel.adopt-session is on); it is shared, and left running when the notebook is released."
        );
        let origin = KernelOrigin::Adopted {
            session_id: session.id.clone(),
        };
        return Ok((kernel, origin, line));
    }
    let kernel = start_kernel(jupyter, spec, name)
        .await
        .map_err(|e| ToolError::Failed(format!("Could not start a kernel for '{path}': {e}")))?;
    step_done(started, "kernel");
    let (origin, line) = attach_session(jupyter, path, &kernel, existing).await?;
    step_done(started, "session");
    Ok((kernel, origin, line))
}

/// Logs how far into use_notebook a step finished (`RUST_LOG=jupyter_mcp_server=debug`): where
/// the time of opening a notebook goes.
fn step_done(started: std::time::Instant, step: &str) {
    tracing::debug!(
        step,
        ms = format!("{:.1}", started.elapsed().as_secs_f64() * 1e3),
        "use_notebook"
    );
}

/// A kernel of the chosen kernelspec, or of the default one.
pub(super) async fn start_kernel(
    jupyter: &Jupyter,
    spec: Option<&ChosenSpec>,
    label: &str,
) -> Result<Arc<Kernel>, KernelError> {
    match spec {
        Some(spec) => jupyter.start_kernel_of(Some(&spec.name), label).await,
        None => jupyter.start_kernel(label).await,
    }
}

/// Gives a kernel we just started a Jupyter session for the path, so JupyterLab shares it,
/// unless a session (`existing`) already holds the path: that one is left alone.
pub(super) async fn attach_session(
    jupyter: &Jupyter,
    path: &str,
    kernel: &Arc<Kernel>,
    existing: Option<SessionModel>,
) -> Result<(KernelOrigin, String), ToolError> {
    if let Some(session) = existing {
        let theirs = session.kernel.map(|k| k.id);
        let line = format!(
            "[INFO] '{path}' is already open in a Jupyter session (kernel '{}'); it is left alone, and this notebook runs on its own new kernel '{}' (not shared).",
            theirs.as_deref().unwrap_or("none"),
            kernel.id()
        );
        return Ok((
            KernelOrigin::StartedBesideExistingSession {
                their_kernel: theirs,
            },
            line,
        ));
    }
    match jupyter.rest().create_session(path, kernel.id()).await {
        // A session that appeared meanwhile is returned instead of ours: leave it.
        Ok(session) if session.kernel.as_ref().is_some_and(|k| k.id == kernel.id()) => {
            let line = format!(
                "[INFO] Started kernel '{}' for this notebook; it is shared with anyone who opens '{path}' in JupyterLab.",
                kernel.id()
            );
            Ok((
                KernelOrigin::StartedWithSession {
                    session_id: session.id,
                },
                line,
            ))
        }
        Ok(session) => {
            let theirs = session.kernel.map(|k| k.id);
            let line = format!(
                "[INFO] '{path}' was opened in Jupyter meanwhile; this notebook runs on its own kernel '{}' (not shared).",
                kernel.id()
            );
            Ok((
                KernelOrigin::StartedBesideExistingSession {
                    their_kernel: theirs,
                },
                line,
            ))
        }
        Err(e) => {
            jupyter.stop_kernel(kernel.id()).await;
            Err(ToolError::Failed(format!(
                "Could not create a Jupyter session for '{path}': {e}"
            )))
        }
    }
}

/// Opens the notebook with the backend the operator chose; `auto` is live when the server offers
/// real-time collaboration. Returns the document and a line saying which backend it is.
async fn open_document(
    choice: DocumentBackend,
    rest: JupyterRest,
    path: &str,
    created: bool,
) -> Result<(Arc<dyn Document>, String), ToolError> {
    let file = |rest| -> (Arc<dyn Document>, String) {
        (
            Arc::new(FileDocument::new(rest, path)),
            "[INFO] Editing through the Jupyter contents API (file backend): each edit saves the file.".into(),
        )
    };
    if choice == DocumentBackend::File {
        return Ok(file(rest));
    }
    let live = if created {
        LiveDocument::open_created(rest.clone(), path)
            .await
            .map(|live| live as Arc<dyn Document>)
    } else {
        LiveDocument::open(rest.clone(), path)
            .await
            .map(|live| Arc::new(live) as Arc<dyn Document>)
    };
    match live {
        Ok(live) => Ok((
            live,
            "[INFO] Editing live through the notebook's collaboration room (live backend): people with it open see each change as it happens.".into(),
        )),
        Err(e) if choice == DocumentBackend::Auto && e.no_collaboration() => Ok(file(rest)),
        Err(e) => Err(ToolError::Failed(format!(
            "Could not open '{path}' live: {e}"
        ))),
    }
}

/// Registers the notebook, makes it current and writes use_notebook's answer.
#[allow(clippy::too_many_arguments)]
fn finish_use(
    context: &ToolContext,
    name: String,
    path: String,
    document: Arc<dyn Document>,
    notebook: &Notebook,
    kernel: Arc<crate::jupyter::kernel::Kernel>,
    origin: KernelOrigin,
    kernel_line: String,
) -> ToolResult {
    let domain = &context.domain;
    tracing::info!("notebook '{name}' ({path}) is in use");
    let in_use = Arc::new(NotebookInUse::new(
        name.clone(),
        path,
        document,
        kernel,
        origin,
        domain.notebooks.change_sender(),
    ));
    let previous = domain.notebooks.current_name();
    domain.notebooks.insert(in_use);
    let mut lines = vec![kernel_line];
    if let Some(previous) = previous {
        lines.push(format!("[INFO] Deactivating notebook '{previous}'."));
    }
    lines.push(format!("[INFO] Successfully activate notebook '{name}'."));
    let total = notebook.cells.len();
    lines.push(format!("\nNotebook has {total} cells."));
    lines.push(format!("Showing first {} cells:\n", total.min(20)));
    lines.push(brief_table(notebook, 0, 20));
    Ok(ToolOutput::text(lines.join("\n")))
}

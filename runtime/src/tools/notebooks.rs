//! Notebook binding: use_notebook, list_notebooks, restart_notebook, unuse_notebook.
//!
//! A notebook in use gets a kernel. Given `kernel_id`, that kernel. Otherwise, if no Jupyter
//! session holds the path, we start a kernel and create a session for the path, so a person who
//! opens the notebook in JupyterLab shares the agent's kernel. If a session already holds it (a
//! person has it open), we start our own kernel and leave theirs alone.

use std::sync::Arc;

use schemars::JsonSchema;
use serde::Deserialize;

use super::format::brief_table;
use super::{Tool, ToolContext, ToolError, ToolOutput, native};
use crate::config::DocumentBackend;
use crate::domain::notebooks::{KernelOrigin, NotebookInUse, Released};
use crate::jupyter::document::file::FileDocument;
use crate::jupyter::document::live::LiveDocument;
use crate::jupyter::document::{Document, Edit};
use crate::jupyter::kernel::{ConnectError, KernelError, Liveness};
use crate::jupyter::notebook::{CellType, Notebook};
use crate::jupyter::rest::JupyterRest;
use crate::jupyter::rest::RestError;

pub fn tools() -> Vec<Arc<dyn Tool>> {
    vec![
        native(
            "use_notebook",
            "Open (mode 'connect') or create (mode 'create') a notebook, give it a name, and make \
             it the current notebook. It gets a kernel: kernel_id if given, else one started for \
             it and shared with JupyterLab through a Jupyter session. Shows the first cells.",
            false,
            use_notebook,
        ),
        native(
            "list_notebooks",
            "List the notebooks in use with their paths, kernels, kernel status and which one is \
             current.",
            true,
            list_notebooks,
        ),
        native(
            "restart_notebook",
            "Restart a notebook's kernel: all variables, imports and definitions are cleared. \
             Also brings back a notebook whose kernel was lost.",
            false,
            restart_notebook,
        ),
        native(
            "unuse_notebook",
            "Stop using a notebook: release its name and stop the kernel this server started for \
             it, unless someone else uses that kernel.",
            false,
            unuse_notebook,
        ),
    ]
}

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
    #[serde(default)]
    pub kernel_id: Option<String>,
}

/// An empty nbformat 4.5 notebook with the default Python kernelspec.
fn new_notebook() -> Notebook {
    let mut notebook = Notebook::empty();
    notebook.metadata.insert(
        "kernelspec".into(),
        serde_json::json!({"display_name": "Python 3 (ipykernel)", "language": "python", "name": "python3"}),
    );
    notebook.metadata.insert(
        "language_info".into(),
        serde_json::json!({"name": "python"}),
    );
    notebook
}

async fn use_notebook(
    context: ToolContext,
    args: UseNotebookArgs,
) -> Result<ToolOutput, ToolError> {
    let domain = &context.domain;
    let name = args.notebook_name.clone();
    let path = args.notebook_path.trim_start_matches('/').to_owned();
    if name.is_empty() || path.is_empty() {
        return Err(ToolError::InvalidArguments(
            "notebook_name and notebook_path must not be empty".into(),
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
                    "Notebook '{name}' is already in use on kernel '{}'.",
                    kernel.id()
                );
                if let Some(previous) = previous.filter(|p| *p != name) {
                    text.push_str(&format!(
                        " [INFO] Reactivating notebook '{name}' and deactivating '{previous}'."
                    ));
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

    let documents = domain.documents_rest();
    let exists = match documents.get_file_hash(&path).await {
        Ok(_) => true,
        Err(RestError::NotFound { .. }) => false,
        Err(e) => {
            return Err(ToolError::Failed(format!(
                "Failed to check the path '{path}': {e}"
            )));
        }
    };
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
            FileDocument::create(&documents, &path, &new_notebook())
                .await
                .map_err(ToolError::failed)?;
        }
        UseMode::Connect => {}
    }
    let (document, backend_line) =
        open_document(domain.settings.document_backend, documents, &path).await?;
    // Read once up front: a file that is not a notebook is refused before a kernel is started.
    let mut notebook = document.read().await.map_err(ToolError::failed)?;
    if matches!(args.mode, UseMode::Create) {
        notebook = drop_placeholder_cell(document.as_ref(), notebook).await?;
    }

    let jupyter = domain.jupyter();
    let (kernel, origin, kernel_line) = match &args.kernel_id {
        Some(kernel_id) => {
            let kernel = jupyter.kernel(kernel_id).await.map_err(|e| match e {
                KernelError::Connect(ConnectError::NotFound(_)) => ToolError::Failed(format!(
                    "Kernel '{kernel_id}' not found in jupyter server, please check whether the kernel already exists using 'list_kernels' tool."
                )),
                other => ToolError::failed(other),
            })?;
            let line = format!(
                "[INFO] Connected to kernel '{kernel_id}' (given by kernel_id; it is left running when the notebook is released)."
            );
            (kernel, KernelOrigin::Given, line)
        }
        None => {
            let rest = jupyter.rest().clone();
            let existing = rest
                .list_sessions()
                .await
                .map_err(ToolError::failed)?
                .into_iter()
                .find(|s| s.path == path);
            let adopt = context
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
                (kernel, origin, line)
            } else {
                let kernel = jupyter.start_kernel(&name).await.map_err(|e| {
                    ToolError::Failed(format!("Could not start a kernel for '{path}': {e}"))
                })?;
                match existing {
                    Some(session) => {
                        let theirs = session.kernel.map(|k| k.id);
                        let line = format!(
                            "[INFO] '{path}' is already open in a Jupyter session (kernel '{}'); it is left alone, and this notebook runs on its own new kernel '{}' (not shared).",
                            theirs.as_deref().unwrap_or("none"),
                            kernel.id()
                        );
                        (
                            kernel,
                            KernelOrigin::StartedBesideExistingSession {
                                their_kernel: theirs,
                            },
                            line,
                        )
                    }
                    None => match rest.create_session(&path, kernel.id()).await {
                        // A session that appeared meanwhile is returned instead of ours: leave it.
                        Ok(session)
                            if session.kernel.as_ref().is_some_and(|k| k.id == kernel.id()) =>
                        {
                            let line = format!(
                                "[INFO] Started kernel '{}' for this notebook; it is shared with anyone who opens '{path}' in JupyterLab.",
                                kernel.id()
                            );
                            (
                                kernel,
                                KernelOrigin::StartedWithSession {
                                    session_id: session.id,
                                },
                                line,
                            )
                        }
                        Ok(session) => {
                            let theirs = session.kernel.map(|k| k.id);
                            let line = format!(
                                "[INFO] '{path}' was opened in Jupyter meanwhile; this notebook runs on its own kernel '{}' (not shared).",
                                kernel.id()
                            );
                            (
                                kernel,
                                KernelOrigin::StartedBesideExistingSession {
                                    their_kernel: theirs,
                                },
                                line,
                            )
                        }
                        Err(e) => {
                            jupyter.stop_kernel(kernel.id()).await;
                            return Err(ToolError::Failed(format!(
                                "Could not create a Jupyter session for '{path}': {e}"
                            )));
                        }
                    },
                }
            }
        }
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

/// A room opened on a notebook without cells shows one empty code cell (jupyter_ydoc adds it); a
/// notebook we just created is given back empty whichever the backend, so an agent inserts what it
/// needs and nothing else.
async fn drop_placeholder_cell(
    document: &dyn Document,
    notebook: Notebook,
) -> Result<Notebook, ToolError> {
    let placeholder = |nb: &Notebook| match nb.cells.as_slice() {
        [only]
            if only.cell_type == CellType::Code
                && only.source.is_empty()
                && only.outputs.is_empty() =>
        {
            Some(only.id.clone())
        }
        _ => None,
    };
    if placeholder(&notebook).is_none() {
        return Ok(notebook);
    }
    let (_, after) = document
        .update(Box::new(move |nb| {
            Ok(placeholder(nb)
                .map(|id| vec![Edit::Delete { cell_ids: vec![id] }])
                .unwrap_or_default())
        }))
        .await
        .map_err(ToolError::failed)?;
    Ok(after)
}

/// Opens the notebook with the backend the operator chose; `auto` is live when the server offers
/// real-time collaboration. Returns the document and a line saying which backend it is.
async fn open_document(
    choice: DocumentBackend,
    rest: JupyterRest,
    path: &str,
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
    match LiveDocument::open(rest.clone(), path).await {
        Ok(live) => Ok((
            Arc::new(live),
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
) -> Result<ToolOutput, ToolError> {
    let domain = &context.domain;
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

#[derive(Debug, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct NoArgs {}

async fn list_notebooks(context: ToolContext, _args: NoArgs) -> Result<ToolOutput, ToolError> {
    let domain = &context.domain;
    let all = domain.notebooks.all();
    if all.is_empty() {
        return Ok(ToolOutput::text(
            "No managed notebooks. Use the use_notebook tool to manage notebooks first.",
        ));
    }
    let current = domain.notebooks.current_name();
    let mut lines = vec!["Name\tPath\tKernel_ID\tKernel_Status\tActivate\tBackend".to_owned()];
    for notebook in all {
        let kernel = notebook.kernel();
        let status = match kernel.liveness() {
            Liveness::Gone(_) => "dead".to_owned(),
            Liveness::Alive => match kernel.connection().execution_state().as_str() {
                "unknown" => "alive".to_owned(),
                state => state.to_owned(),
            },
        };
        let active = if current.as_deref() == Some(notebook.name.as_str()) {
            "✓"
        } else {
            ""
        };
        lines.push(format!(
            "{}\t{}\t{}\t{status}\t{active}\t{}",
            notebook.name,
            notebook.path,
            kernel.id(),
            notebook.document.backend()
        ));
    }
    Ok(ToolOutput::text(lines.join("\n")))
}

#[derive(Debug, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct NotebookNameArgs {
    /// The notebook's use_notebook name.
    pub notebook_name: String,
}

async fn restart_notebook(
    context: ToolContext,
    args: NotebookNameArgs,
) -> Result<ToolOutput, ToolError> {
    let in_use = context
        .domain
        .notebooks
        .resolve(Some(&args.notebook_name))
        .map_err(ToolError::failed)?;
    let jupyter = context.domain.jupyter();
    let kernel = jupyter
        .restart_kernel(&in_use.kernel())
        .await
        .map_err(|e| {
            ToolError::Failed(format!(
                "Failed to restart notebook '{}': {e}",
                args.notebook_name
            ))
        })?;
    in_use.replace_kernel(kernel);
    Ok(ToolOutput::text(format!(
        "Notebook '{}' kernel restarted successfully. Memory state and imported packages have been cleared.",
        args.notebook_name
    )))
}

async fn unuse_notebook(
    context: ToolContext,
    args: NotebookNameArgs,
) -> Result<ToolOutput, ToolError> {
    let domain = &context.domain;
    let Some((in_use, switched)) = domain.notebooks.remove(&args.notebook_name) else {
        return Err(ToolError::failed(
            domain
                .notebooks
                .resolve(Some(&args.notebook_name))
                .err()
                .expect("not registered"),
        ));
    };
    if let Err(e) = in_use.document.close().await {
        tracing::warn!("closing '{}' failed: {e}", in_use.path);
    }
    let released = release_kernel(&context, &in_use).await;
    let mut text = format!(
        "Notebook '{}' unused successfully.{released}",
        args.notebook_name
    );
    match switched {
        Some(Some(new)) => text.push_str(&format!(" Current notebook switched to '{new}'.")),
        Some(None) => text.push_str(" No notebooks remaining."),
        None => {}
    }
    Ok(ToolOutput::text(text))
}

/// Stops the kernel we started for a notebook unless someone else uses it; says what happened.
async fn release_kernel(context: &ToolContext, in_use: &NotebookInUse) -> String {
    match in_use.release(&context.domain.jupyter()).await {
        Released::NotOurs(id) => format!(" Kernel '{id}' was not started here and keeps running."),
        Released::Shared(id) => {
            format!(" Kernel '{id}' is shared with someone else and keeps running.")
        }
        Released::ShutDown(id) => format!(" Its kernel '{id}' was shut down."),
    }
}

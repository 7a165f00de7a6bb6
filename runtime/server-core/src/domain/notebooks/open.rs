//! Opening a notebook (use_notebook, and `--document-id` at start): the path checked, the file
//! created when asked, its document opened with the operator's backend and a kernel attached,
//! then the notebook registered as current.

use std::sync::Arc;
use std::time::{Duration, Instant};

use super::{KernelOrigin, NotebookInUse, release_kernel};
use crate::capabilities::ADOPT_SESSION;
use crate::domain::kernels::reporting_start;
use crate::domain::kernelspecs::ChosenSpec;
use crate::domain::{Domain, Error, Step};
use crate::say;
use crate::settings::DocumentBackend;
use jupyter_client::Jupyter;
use jupyter_client::document::file::FileDocument;
use jupyter_client::document::live::LiveDocument;
use jupyter_client::document::{Document, Edit};
use jupyter_client::kernel::{ConnectError, Kernel, KernelError, ProgressSink};
use jupyter_client::rest::{JupyterRest, RestError, SessionModel};
use notebook_format::notebook::Notebook;
use notebook_format::outputs::Output;

/// Whether a notebook is opened or created.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum UseMode {
    Connect,
    Create,
}

/// A notebook to use, as a caller names it.
#[derive(Clone)]
pub struct UseRequest {
    pub name: String,
    /// Relative to the Jupyter Server's root (a leading `/` is dropped).
    pub path: String,
    pub mode: UseMode,
    /// A running kernel to attach instead of starting one.
    pub kernel_id: Option<String>,
    /// The kernelspec to start the kernel from, instead of the server's default.
    pub kernel_name: Option<String>,
    /// Told at each interval while a kernel is being started (on a cluster: tens of seconds).
    pub start_progress: Option<(Duration, ProgressSink)>,
    /// Opens the document only: the kernel is attached when a call first needs one
    /// (`--document-id` with `--start-new-code-sandbox false`). Ignored with `kernel_id`.
    pub defer_kernel: bool,
}

/// How a notebook's kernel came to it, as its answer tells it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Attached {
    /// The kernel the caller gave (`kernel_id`).
    Given,
    /// The kernel of the Jupyter session already open on the path (`kernel.adopt-session`).
    Adopted,
    /// Started by us, with a session for the path, so JupyterLab shares it.
    Shared,
    /// Started by us beside the session someone else has open on the path.
    BesideTheirs { their_kernel: Option<String> },
    /// Started by us, but a session for the path appeared meanwhile and was kept.
    OpenedMeanwhile,
    /// None yet: the first call that needs a kernel attaches one.
    Deferred,
}

/// A notebook just opened and made current.
pub struct Opened {
    pub notebook: Arc<NotebookInUse>,
    /// Its content as opened.
    pub read: Notebook,
    pub attached: Attached,
    /// The kernelspec asked for, which the kernel runs.
    pub spec: Option<ChosenSpec>,
    /// The notebook that was current before.
    pub previous: Option<String>,
}

/// What asking to use a notebook came to.
pub enum Used {
    /// `create` of a name already in use on that very path: nothing done.
    AlreadyCreated {
        name: String,
        path: String,
    },
    /// `connect` of a name already in use on that path: made current again, kernel kept.
    AlreadyInUse {
        notebook: Arc<NotebookInUse>,
        /// The notebook that was current before, when it was another one.
        previous: Option<String>,
    },
    Opened(Opened),
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

impl Domain {
    /// Opens (or creates) a notebook, gives it a kernel and makes it current; a name already in
    /// use is answered without opening anything again.
    pub async fn use_notebook(&self, request: UseRequest) -> Result<Used, Error> {
        let started = Instant::now();
        let UseRequest {
            name,
            path,
            mode,
            kernel_id,
            kernel_name,
            start_progress,
            defer_kernel,
        } = request;
        let path = path.trim_start_matches('/').to_owned();
        if name.is_empty() || path.is_empty() {
            return Err(Error::InvalidArguments(
                "notebook_name and notebook_path must not be empty".into(),
            ));
        }
        if kernel_id.is_some() && kernel_name.is_some() {
            return Err(Error::InvalidArguments(
                "give kernel_id or kernel_name, not both: kernel_id attaches a running kernel, \
                 kernel_name starts a new one from that kernelspec"
                    .into(),
            ));
        }
        if let Some(existing) = self.notebooks.get(&name) {
            return match (mode, existing.path == path) {
                (UseMode::Create, true) => Ok(Used::AlreadyCreated { name, path }),
                (UseMode::Create, false) => Err(Error::Failed(format!(
                    "Notebook '{name}' is already used. Use different notebook_name to create a new notebook on {path}."
                ).into())),
                (UseMode::Connect, false) => Err(Error::Failed(format!(
                    "The path '{path}' is not the correct path for notebook '{name}'. Do you mean connect to '{}'?",
                    existing.path
                ).into())),
                (UseMode::Connect, true) => {
                    let previous = self.notebooks.make_current(&name);
                    Ok(Used::AlreadyInUse {
                        notebook: existing,
                        previous: previous.filter(|p| *p != name),
                    })
                }
            };
        }

        // Checked before anything is created, so a misspelt name costs nothing.
        let spec = match &kernel_name {
            Some(kernel_name) => Some(self.kernelspec(kernel_name).await?),
            None => None,
        };
        let documents = self.documents_rest();
        step_done(started, "kernelspec");
        let exists = match documents.exists(&path).await {
            Ok(found) => found,
            Err(RestError::NotFound { .. }) => false,
            Err(e) => {
                return Err(Error::Failed(
                    format!("Failed to check the path '{path}': {e}").into(),
                ));
            }
        };
        step_done(started, "exists");
        let mut created = None;
        match mode {
            UseMode::Connect if !exists => {
                return Err(Error::Failed(say![
                    format!(
                        "'{path}' not found in jupyter server, please check the notebook already \
                         exists. Call "
                    ),
                    Step::ListFiles,
                    " to see the files, or use mode 'create'."
                ]));
            }
            UseMode::Create if exists => {
                return Err(Error::Failed(format!(
                    "'{path}' already exists in jupyter server, please use a different path or use_mode='connect' to open it."
                ).into()));
            }
            UseMode::Create => {
                let parent = path.rsplit_once('/').map(|(dir, _)| dir).unwrap_or("");
                if !parent.is_empty() && documents.get_contents(parent, false).await.is_err() {
                    return Err(Error::Failed(format!(
                        "'{parent}' not found in jupyter server, please check the directory path already exists."
                    ).into()));
                }
                let written = new_notebook(spec.as_ref());
                FileDocument::create(&documents, &path, &written)
                    .await
                    .map_err(Error::failed)?;
                created = Some(written);
                step_done(started, "file created");
            }
            UseMode::Connect => {}
        }
        if defer_kernel && kernel_id.is_none() && mode == UseMode::Connect {
            let (document, read) =
                open_notebook(self.document_backend(), documents, &path, None, started).await?;
            tracing::info!("notebook '{name}' ({path}) is in use; its kernel starts on first use");
            let notebook =
                NotebookInUse::new(name, path, document, None, self.notebooks.change_sender());
            return Ok(self.made_current(notebook, read, Attached::Deferred, spec));
        }
        let jupyter = self.jupyter();
        // The next spare (kernel.prewarm) is started once this call is answered, not during it.
        let _hold = jupyter.hold_spares();
        let open = open_notebook(
            self.document_backend(),
            documents,
            &path,
            created.as_ref(),
            started,
        );
        let acquire = reporting_start(
            start_progress.as_ref(),
            self.settings.kernel_start.timeout,
            self.acquire_kernel(
                &jupyter,
                kernel_id.as_deref(),
                spec.as_ref(),
                &name,
                &path,
                started,
            ),
        );
        let ((document, read), (kernel, origin, attached)) = match mode {
            // A notebook we just created is known to be one: its room and its kernel are set up
            // at once, and when one of them fails the other is undone.
            UseMode::Create => match tokio::join!(open, acquire) {
                (Ok(opened), Ok(acquired)) => (opened, acquired),
                (Ok((document, _)), Err(e)) => {
                    let _ = document.close().await;
                    return Err(e);
                }
                (Err(e), Ok((kernel, origin, _))) => {
                    release_kernel(&jupyter, &kernel, &origin).await;
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
            if read.metadata.get("kernelspec") != Some(&spec.metadata()) {
                let edit = Edit::SetNotebookMetadata {
                    key: "kernelspec".into(),
                    value: spec.metadata(),
                };
                document
                    .update(Box::new(move |_| Ok(vec![edit])))
                    .await
                    .map_err(Error::failed)?;
            }
        }
        step_done(started, "ready");
        tracing::info!("notebook '{name}' ({path}) is in use");
        let notebook = NotebookInUse::new(
            name,
            path,
            document,
            Some((kernel, origin)),
            self.notebooks.change_sender(),
        );
        Ok(self.made_current(notebook, read, attached, spec))
    }

    /// Registers a notebook just opened under its name, makes it current, and answers so.
    fn made_current(
        &self,
        notebook: NotebookInUse,
        read: Notebook,
        attached: Attached,
        spec: Option<ChosenSpec>,
    ) -> Used {
        let notebook = Arc::new(notebook);
        let previous = self.notebooks.current_name();
        self.notebooks.insert(notebook.clone());
        Used::Opened(Opened {
            notebook,
            read,
            attached,
            spec,
            previous,
        })
    }

    /// Attaches a kernel to a notebook opened without one (`UseRequest::defer_kernel`), as
    /// use_notebook would have; a second caller meanwhile waits and gets the same kernel.
    pub(crate) async fn attach_deferred_kernel(
        &self,
        in_use: &NotebookInUse,
        progress: Option<&(Duration, ProgressSink)>,
    ) -> Result<Arc<Kernel>, Error> {
        let _attaching = in_use.attaching.lock().await;
        if let Some(kernel) = in_use.kernel() {
            return Ok(kernel);
        }
        let jupyter = self.jupyter();
        let started = Instant::now();
        let (kernel, origin, _) = reporting_start(
            progress,
            self.settings.kernel_start.timeout,
            self.acquire_kernel(&jupyter, None, None, &in_use.name, &in_use.path, started),
        )
        .await?;
        tracing::info!(kernel = %kernel.id(), "attached the first kernel of notebook '{}'", in_use.name);
        in_use.attach_first_kernel(kernel.clone(), origin);
        Ok(kernel)
    }

    /// The notebook's kernel: `kernel_id`'s, the kernel of a session already open on the path
    /// (`kernel.adopt-session`), or one we start (or take from the spares) with a session for
    /// the path. Returns it, how it came, and how its answer tells that.
    async fn acquire_kernel(
        &self,
        jupyter: &Jupyter,
        kernel_id: Option<&str>,
        spec: Option<&ChosenSpec>,
        name: &str,
        path: &str,
        started: Instant,
    ) -> Result<(Arc<Kernel>, KernelOrigin, Attached), Error> {
        if let Some(kernel_id) = kernel_id {
            let kernel = jupyter.kernel(kernel_id).await.map_err(|e| match e {
                // The Python server's words.
                KernelError::Connect(ConnectError::NotFound(_)) => Error::Failed(say![
                    format!(
                        "Kernel '{kernel_id}' not found in jupyter server, please check whether \
                         the kernel already exists using '"
                    ),
                    Step::ListKernels,
                    "' tool."
                ]),
                other => Error::failed(other),
            })?;
            return Ok((kernel, KernelOrigin::Given, Attached::Given));
        }
        let existing = jupyter
            .rest()
            .list_sessions()
            .await
            .map_err(Error::failed)?
            .into_iter()
            .find(|s| s.path == path);
        step_done(started, "sessions listed");
        // A chosen kernelspec means a kernel of our own, never the session's.
        let adopt = spec.is_none() && self.capabilities.enabled(ADOPT_SESSION);
        let their_kernel = existing
            .as_ref()
            .and_then(|s| s.kernel.as_ref())
            .map(|k| k.id.clone());
        if let (true, Some(session), Some(theirs)) = (adopt, &existing, their_kernel) {
            let kernel = jupyter.kernel(&theirs).await.map_err(Error::failed)?;
            let origin = KernelOrigin::Adopted {
                session_id: session.id.clone(),
            };
            return Ok((kernel, origin, Attached::Adopted));
        }
        let kernel = start_kernel(jupyter, spec, name).await.map_err(|e| {
            Error::Failed(format!("Could not start a kernel for '{path}': {e}").into())
        })?;
        step_done(started, "kernel");
        let (origin, attached) = attach_session(jupyter, path, &kernel, existing).await?;
        step_done(started, "session");
        Ok((kernel, origin, attached))
    }
}

/// Opens the notebook's document and reads it, or, for a notebook we just wrote (`created`),
/// takes that as read: its room may still be being joined (`LiveDocument::open_created`).
async fn open_notebook(
    choice: DocumentBackend,
    documents: JupyterRest,
    path: &str,
    created: Option<&Notebook>,
    started: Instant,
) -> Result<(Arc<dyn Document>, Notebook), Error> {
    let document = open_document(choice, documents, path, created.is_some()).await?;
    step_done(started, "document opened");
    let notebook = match created {
        Some(written) => written.clone(),
        None => match document.read().await {
            Ok(notebook) => notebook,
            Err(e) => {
                let _ = document.close().await;
                return Err(Error::failed(e));
            }
        },
    };
    Ok((document, notebook))
}

/// Logs how far into use_notebook a step finished (`RUST_LOG=jupyter_mcp_server=debug`): where
/// the time of opening a notebook goes.
fn step_done(started: Instant, step: &str) {
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
) -> Result<(KernelOrigin, Attached), Error> {
    if let Some(session) = existing {
        let theirs = session.kernel.map(|k| k.id);
        return Ok((
            KernelOrigin::StartedBesideExistingSession {
                their_kernel: theirs.clone(),
            },
            Attached::BesideTheirs {
                their_kernel: theirs,
            },
        ));
    }
    match jupyter.rest().create_session(path, kernel.id()).await {
        // A session that appeared meanwhile is returned instead of ours: leave it.
        Ok(session) if session.kernel.as_ref().is_some_and(|k| k.id == kernel.id()) => Ok((
            KernelOrigin::StartedWithSession {
                session_id: session.id,
            },
            Attached::Shared,
        )),
        Ok(session) => Ok((
            KernelOrigin::StartedBesideExistingSession {
                their_kernel: session.kernel.map(|k| k.id),
            },
            Attached::OpenedMeanwhile,
        )),
        Err(e) => {
            jupyter.stop_kernel(kernel.id()).await;
            Err(Error::Failed(
                format!("Could not create a Jupyter session for '{path}': {e}").into(),
            ))
        }
    }
}

impl Domain {
    /// Writes a run's outputs into its cell, by the cell's id, as a run in the notebook does at
    /// its end: through the notebook in use on `path` when there is one (so subscribers hear
    /// of it), else through a document opened for this write alone (a run followed again after
    /// a restart, or after the replica that ran it stopped).
    pub async fn write_cell_outputs(
        &self,
        path: &str,
        cell_id: &str,
        outputs: Vec<Output>,
        execution_count: Option<i64>,
    ) -> Result<(), Error> {
        let edit = Edit::SetOutputs {
            cell_id: cell_id.to_owned(),
            outputs,
            execution_count,
        };
        if let Some(in_use) = self.notebooks.all().into_iter().find(|n| n.path == path) {
            in_use.apply(vec![edit]).await?;
            return Ok(());
        }
        let document =
            open_document(self.document_backend(), self.documents_rest(), path, false).await?;
        let written = document
            .update(Box::new(move |_| Ok(vec![edit])))
            .await
            .map(|_| ());
        // Our save proven (file) or our change confirmed by the room (live) before letting go.
        let closed = document.close().await;
        written?;
        closed?;
        Ok(())
    }
}

/// Opens the notebook with the backend the operator chose; `auto` is live when the server offers
/// real-time collaboration.
async fn open_document(
    choice: DocumentBackend,
    rest: JupyterRest,
    path: &str,
    created: bool,
) -> Result<Arc<dyn Document>, Error> {
    let file = |rest| -> Arc<dyn Document> { Arc::new(FileDocument::new(rest, path)) };
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
        Ok(live) => Ok(live),
        Err(e) if choice == DocumentBackend::Auto && e.no_collaboration() => Ok(file(rest)),
        Err(e) => Err(Error::Failed(
            format!("Could not open '{path}' live: {e}").into(),
        )),
    }
}

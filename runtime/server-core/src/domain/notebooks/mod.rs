//! The notebooks in use: each name bound to a document and a kernel, one of them current, and
//! their lifecycle — opened or created with a kernel attached (`open.rs`), restarted, moved to
//! another kernelspec and released (`release.rs`) — for every caller alike: tools, startup's
//! `--document-id`, the exit.
//!
//! Several notebooks can be in use at once; tools that take `notebook_name` can address any of
//! them, the others use the current one (one per server, as the Python server has it).

mod open;
mod release;
pub mod revisions;

pub use open::{Attached, Opened, UseMode, UseRequest, Used};
pub use release::{Switched, Unused};

use std::collections::{BTreeMap, HashSet};
use std::sync::{Arc, Mutex};

use serde_json::Value;
use tokio::sync::broadcast;

use super::versions::SeenSources;
use super::{Message, Step};
use crate::say;
use jupyter_client::Jupyter;
use jupyter_client::document::{CellAt, CellRead, Document, DocumentError, Edit, EditPlan, Page};
use jupyter_client::kernel::{Kernel, widgets};
use notebook_format::notebook::Notebook;
use notebook_format::outputs::Output;
use revisions::{Author, Revisions};

/// How the notebook's kernel came to be attached.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum KernelOrigin {
    /// Given by the caller (`kernel_id`): never stopped by us.
    Given,
    /// Started by us, with a Jupyter session for the path we created so JupyterLab shares it.
    StartedWithSession { session_id: String },
    /// The kernel of a session someone else opened for the path (`kernel.adopt-session`):
    /// shared, never stopped by us.
    Adopted { session_id: String },
    /// Started by us without a session: someone else's session already holds the path.
    StartedBesideExistingSession { their_kernel: Option<String> },
}

/// What became of a notebook's kernel when the notebook was released.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Released {
    /// Given to us or adopted: left running.
    NotOurs(String),
    /// Ours, but someone else uses it now: left running.
    Shared(String),
    ShutDown(String),
    /// The notebook never had a kernel (its start was deferred and no run came).
    NeverStarted,
}

pub struct NotebookInUse {
    pub name: String,
    pub path: String,
    pub document: Arc<dyn Document>,
    /// `None` while the kernel's start is deferred (`--start-new-code-sandbox false`): the
    /// first call that needs it attaches one (`Domain::ready_kernel`).
    kernel: Mutex<Option<(Arc<Kernel>, KernelOrigin)>>,
    /// Held while a deferred kernel is being attached, so two first runs start one kernel.
    attaching: tokio::sync::Mutex<()>,
    changes: broadcast::Sender<String>,
    /// The sources of cell versions read or written here, for the diff of a refused write.
    pub seen: SeenSources,
    /// Tells `changes` of the notebook's changes, ours and others', while it is in use.
    announcer: Option<Announcer>,
    /// The change cursor: its revisions and what this agent did to it.
    pub revisions: Revisions,
}

/// The fewest milliseconds between two announcements of one notebook's changes: a person
/// types a change per keystroke, a running cell's outputs are written every 25 ms.
const ANNOUNCE_EVERY: std::time::Duration = std::time::Duration::from_millis(500);

/// The task that announces a notebook's changes, and how we tell it of ours.
struct Announcer {
    ours: tokio::sync::watch::Sender<u64>,
    task: tokio::task::AbortHandle,
}

impl Drop for NotebookInUse {
    fn drop(&mut self) {
        if let Some(announcer) = &self.announcer {
            announcer.task.abort();
        }
    }
}

/// Announces the notebook named `name` on `changes` each time we (`ours`) or others (`others`,
/// when the document hears of them) change it, at most once per [`ANNOUNCE_EVERY`]; a change
/// made meanwhile is announced when that time is up.
async fn announce_changes(
    mut ours: tokio::sync::watch::Receiver<u64>,
    mut others: Option<tokio::sync::watch::Receiver<u64>>,
    changes: broadcast::Sender<String>,
    name: String,
) {
    loop {
        let others_changed = async {
            match others.as_mut() {
                Some(others) => others.changed().await,
                None => std::future::pending().await,
            }
        };
        tokio::select! {
            changed = ours.changed() => if changed.is_err() { return },
            changed = others_changed => if changed.is_err() { others = None; continue },
        }
        ours.borrow_and_update();
        if let Some(others) = others.as_mut() {
            others.borrow_and_update();
        }
        let _ = changes.send(name.clone());
        tokio::time::sleep(ANNOUNCE_EVERY).await;
    }
}

impl NotebookInUse {
    /// `kernel`: the kernel attached and how it came, or `None` while its start is deferred
    /// (the first call that needs one attaches it).
    pub fn new(
        name: String,
        path: String,
        document: Arc<dyn Document>,
        kernel: Option<(Arc<Kernel>, KernelOrigin)>,
        changes: broadcast::Sender<String>,
    ) -> Self {
        let announcer = tokio::runtime::Handle::try_current().ok().map(|runtime| {
            let (ours, heard) = tokio::sync::watch::channel(0);
            let others = document.changes_by_others();
            let announcing = announce_changes(heard, others, changes.clone(), name.clone());
            Announcer {
                ours,
                task: runtime.spawn(announcing).abort_handle(),
            }
        });
        // A room tells of others' changes for free; a file is looked at every second while
        // someone listens, so there only a waiting call listens.
        let revisions = Revisions::new(
            (document.backend() == "live")
                .then(|| document.changes_by_others())
                .flatten(),
        );
        NotebookInUse {
            name,
            path,
            document,
            revisions,
            kernel: Mutex::new(kernel),
            attaching: tokio::sync::Mutex::new(()),
            changes,
            seen: SeenSources::default(),
            announcer,
        }
    }

    /// Tells subscribers the notebook changed (through the announcer, which spaces them out).
    fn announce(&self) {
        match &self.announcer {
            Some(announcer) => announcer.ours.send_modify(|changes| *changes += 1),
            None => {
                let _ = self.changes.send(self.name.clone());
            }
        }
    }

    /// The notebook as it is now. No version is remembered: a caller remembers those it shows
    /// (`seen.record_cells`), so reading a page of a big notebook hashes that page.
    pub async fn read(&self) -> Result<Notebook, DocumentError> {
        self.document.read().await
    }

    /// A page of cells as they are now, and every cell's id (see `Document::read_page`); the
    /// page's versions are remembered.
    pub async fn read_page(&self, start: usize, limit: usize) -> Result<Page, DocumentError> {
        let page = self.document.read_page(start, limit).await?;
        self.seen.record_cells(&page.cells);
        Ok(page)
    }

    /// One cell as it is now, without the rest (see `Document::read_cell`); its version is
    /// remembered.
    pub async fn read_cell(&self, at: CellAt<'_>) -> Result<CellRead, DocumentError> {
        let read = self.document.read_cell(at).await?;
        if let Some((_, cell)) = &read.cell {
            self.seen.record_cells([cell]);
        }
        Ok(read)
    }

    /// Applies edits to the document and tells subscribers the notebook changed.
    pub async fn apply(&self, edits: Vec<Edit>) -> Result<Arc<Notebook>, DocumentError> {
        let (_, saved) = self.update(Box::new(move |_| Ok(edits))).await?;
        Ok(saved)
    }

    /// Writes a running cell's outputs as they stand, `done` once it ended (see
    /// `Document::write_outputs`), then tells subscribers. A cell's version does not cover its
    /// outputs: none is recorded.
    pub async fn write_outputs(
        &self,
        cell_id: &str,
        outputs: &[Output],
        execution_count: Option<i64>,
        done: bool,
    ) -> Result<(), DocumentError> {
        self.document
            .write_outputs(cell_id, outputs, execution_count, done)
            .await?;
        self.revisions.we_ran(cell_id);
        self.announce();
        Ok(())
    }

    /// Plans and saves edits against the newest version (see `Document::update`), then tells
    /// subscribers; returns the notebook before and after.
    /// The versions of the cells the edits touched are remembered, before and after.
    pub async fn update(
        &self,
        plan: EditPlan<'_>,
    ) -> Result<(Arc<Notebook>, Arc<Notebook>), DocumentError> {
        let touched = Mutex::new(Vec::new());
        let watched: EditPlan<'_> = Box::new(|notebook| {
            let edits = plan(notebook)?;
            *touched.lock().expect("touched lock") = edits
                .iter()
                .flat_map(Edit::cell_ids)
                .map(str::to_owned)
                .collect();
            Ok(edits)
        });
        let (before, after) = self.document.update(watched).await?;
        let touched = touched.into_inner().expect("touched lock");
        let touched: HashSet<&str> = touched.iter().map(String::as_str).collect();
        self.seen.record_cells(cells_named(&before, &touched));
        // The same notebook when nothing was written (and then no deep comparison).
        if !Arc::ptr_eq(&before, &after) && before != after {
            self.seen.record_cells(cells_named(&after, &touched));
            // The edit's answer hands out the revision of what it wrote, without a read; when
            // it was planned against the notebook of the newest revision, without a look at the
            // cells it did not touch.
            if self
                .revisions
                .we_edited_shared(&before, &after, &touched)
                .is_none()
            {
                self.revisions
                    .observe_shared(&after, &|id| self.others_author(id));
            }
            self.announce();
        }
        Ok((before, after))
    }

    /// Who other than this agent changed a cell (`None`: deleted cells): the room's name for
    /// them, else nobody the backend can name.
    pub fn others_author(&self, cell_id: Option<&str>) -> Author {
        let named = match cell_id {
            Some(id) => self.document.changed_by(id),
            None => self.document.structure_changed_by(),
        };
        match named {
            Some(name) => Author::Person(name),
            None => Author::Unnamed,
        }
    }

    /// The revision to hand out with `notebook`, which this agent just read or wrote whole.
    pub fn revision_of(&self, notebook: &Notebook) -> String {
        self.revisions
            .observe(notebook, &|id| self.others_author(id))
    }

    /// The revision to hand out now: the newest when nothing changed since, else after a look
    /// at the document.
    pub async fn revision(&self) -> Result<String, DocumentError> {
        if let Some(newest) = self.revisions.newest_if_fresh() {
            return Ok(newest);
        }
        self.revisions.looking();
        let notebook = self.document.read().await?;
        Ok(self.revision_of(&notebook))
    }

    /// The newest revision without a look at the document, even if stale (a run's answer: its
    /// own outputs then show once more, as this agent's, in the next changes answer; a
    /// notebook's run costs no extra read).
    pub async fn revision_without_read(&self) -> Result<String, DocumentError> {
        match self.revisions.newest() {
            Some(newest) => Ok(newest),
            None => self.revision().await,
        }
    }

    /// Lets go of the notebook's kernel (see `release_kernel`).
    pub async fn release(&self, jupyter: &Jupyter) -> Released {
        let attached = self.kernel.lock().expect("kernel lock").clone();
        match attached {
            Some((kernel, origin)) => release_kernel(jupyter, &kernel, &origin).await,
            None => Released::NeverStarted,
        }
    }

    /// The widget state of the widgets `outputs` show: as the notebook's kernel holds them now,
    /// else as the notebook saved them in its `metadata`.
    pub fn widget_state(
        &self,
        outputs: &[Output],
        metadata: &serde_json::Map<String, Value>,
    ) -> Option<Value> {
        let saved = widgets::saved_models(metadata);
        match self.kernel() {
            Some(kernel) => kernel.connection().widget_state(outputs, saved),
            None => widgets::WidgetStates::default().shown_in(outputs, saved),
        }
    }

    /// The kernel attached now; `None` while its start is deferred.
    pub fn kernel(&self) -> Option<Arc<Kernel>> {
        let attached = self.kernel.lock().expect("kernel lock");
        attached.as_ref().map(|(kernel, _)| kernel.clone())
    }

    /// Puts `kernel` in place of the one attached (a restart or a replacement keeps the origin).
    pub fn replace_kernel(&self, kernel: Arc<Kernel>) {
        if let Some((attached, _)) = self.kernel.lock().expect("kernel lock").as_mut() {
            *attached = kernel;
        }
    }

    /// Attaches the first kernel of a notebook whose kernel was deferred.
    fn attach_first_kernel(&self, kernel: Arc<Kernel>, origin: KernelOrigin) {
        *self.kernel.lock().expect("kernel lock") = Some((kernel, origin));
    }
}

/// The cells of `notebook` with these ids.
fn cells_named<'a>(
    notebook: &'a Notebook,
    ids: &'a HashSet<&str>,
) -> impl Iterator<Item = &'a notebook_format::notebook::Cell> {
    notebook
        .cells
        .iter()
        .filter(|cell| ids.contains(cell.id.as_str()))
}

/// Lets go of a kernel a notebook was given: one we started is shut down (with its Jupyter
/// session) unless someone else uses it; a kernel we were given or adopted keeps running.
pub async fn release_kernel(jupyter: &Jupyter, kernel: &Kernel, origin: &KernelOrigin) -> Released {
    let id = kernel.id().to_owned();
    if matches!(*origin, KernelOrigin::Given | KernelOrigin::Adopted { .. })
        || !jupyter.started_here(&id)
    {
        return Released::NotOurs(id);
    }
    let our_session = match origin {
        KernelOrigin::StartedWithSession { session_id } => Some(session_id.as_str()),
        _ => None,
    };
    if jupyter.is_shared(&id, our_session).await {
        return Released::Shared(id);
    }
    if let Some(session_id) = our_session {
        // Deleting the session ends the kernel too: that end is ours, not news.
        Jupyter::quiesce(kernel).await;
        kernel.connection().expect_shutdown();
        if jupyter.rest().delete_session(session_id).await.is_ok() {
            jupyter.kernel_stopped_with_session(&id).await;
            return Released::ShutDown(id);
        }
    }
    jupyter.stop_kernel(&id).await;
    Released::ShutDown(id)
}

#[derive(Default)]
/// The names bound by use_notebook, and which one is current.
struct Bound {
    by_name: BTreeMap<String, Arc<NotebookInUse>>,
    current: Option<String>,
}

pub struct Notebooks {
    bound: Mutex<Bound>,
    /// Names of notebooks a tool just changed, for resource subscriptions.
    changes: broadcast::Sender<String>,
}

impl Default for Notebooks {
    fn default() -> Self {
        Notebooks {
            bound: Mutex::default(),
            changes: broadcast::Sender::new(256),
        }
    }
}

#[derive(Debug, thiserror::Error, PartialEq)]
pub enum LookupError {
    #[error("{}", self.message())]
    Unknown { name: String, in_use: String },
    #[error("{}", self.message())]
    NoneCurrent,
}

impl LookupError {
    pub fn message(&self) -> Message {
        match self {
            // "is not connected" and "All currently connected notebooks" are the Python
            // server's words, which its clients match on.
            LookupError::Unknown { name, in_use } => say![
                format!(
                    "Notebook '{name}' is not connected: no notebook in use has that name, so it \
                     was not found. All currently connected notebooks: [{in_use}]. Call "
                ),
                Step::OpenNotebook,
                " to open it, or ",
                Step::ListNotebooks,
                " to see what is open."
            ],
            LookupError::NoneCurrent => say![
                "No notebook is in use. Call ",
                Step::OpenNotebook,
                " to open or create one first."
            ],
        }
    }
}

impl Notebooks {
    /// Where notebooks announce their changes (given to each notebook in use).
    pub fn change_sender(&self) -> broadcast::Sender<String> {
        self.changes.clone()
    }

    /// Names of notebooks as they change.
    pub fn watch_changes(&self) -> broadcast::Receiver<String> {
        self.changes.subscribe()
    }

    pub fn get(&self, name: &str) -> Option<Arc<NotebookInUse>> {
        self.bound
            .lock()
            .expect("notebooks lock")
            .by_name
            .get(name)
            .cloned()
    }

    /// The named notebook, or the current one when no name is given.
    pub fn resolve(&self, name: Option<&str>) -> Result<Arc<NotebookInUse>, LookupError> {
        let bound = self.bound.lock().expect("notebooks lock");
        let name = match name.filter(|n| !n.is_empty()) {
            Some(name) => name.to_owned(),
            None => bound.current.clone().ok_or(LookupError::NoneCurrent)?,
        };
        bound
            .by_name
            .get(&name)
            .cloned()
            .ok_or_else(|| LookupError::Unknown {
                in_use: describe_names(bound.by_name.keys()),
                name,
            })
    }

    pub fn current_name(&self) -> Option<String> {
        self.bound.lock().expect("notebooks lock").current.clone()
    }

    /// Registers a notebook and makes it current.
    pub fn insert(&self, notebook: Arc<NotebookInUse>) {
        let mut bound = self.bound.lock().expect("notebooks lock");
        bound.current = Some(notebook.name.clone());
        bound.by_name.insert(notebook.name.clone(), notebook);
    }

    pub fn make_current(&self, name: &str) -> Option<String> {
        let mut bound = self.bound.lock().expect("notebooks lock");
        bound.current.replace(name.to_owned())
    }

    /// Removes a notebook; returns it and the name of the new current notebook, if it changed.
    pub fn remove(&self, name: &str) -> Option<(Arc<NotebookInUse>, Option<Option<String>>)> {
        let mut bound = self.bound.lock().expect("notebooks lock");
        let removed = bound.by_name.remove(name)?;
        let switched = if bound.current.as_deref() == Some(name) {
            bound.current = bound.by_name.keys().next().cloned();
            Some(bound.current.clone())
        } else {
            None
        };
        Some((removed, switched))
    }

    /// The notebook in use whose kernel is `kernel_id`.
    pub fn running_on(&self, kernel_id: &str) -> Option<Arc<NotebookInUse>> {
        self.all()
            .into_iter()
            .find(|notebook| notebook.kernel().is_some_and(|k| k.id() == kernel_id))
    }

    pub fn all(&self) -> Vec<Arc<NotebookInUse>> {
        self.bound
            .lock()
            .expect("notebooks lock")
            .by_name
            .values()
            .cloned()
            .collect()
    }

    /// Forgets every notebook (the Jupyter Server was switched); returns them.
    pub fn clear(&self) -> Vec<Arc<NotebookInUse>> {
        let mut bound = self.bound.lock().expect("notebooks lock");
        bound.current = None;
        std::mem::take(&mut bound.by_name).into_values().collect()
    }
}

fn describe_names<'a>(names: impl Iterator<Item = &'a String>) -> String {
    let names: Vec<String> = names.map(|n| format!("'{n}'")).collect();
    names.join(", ")
}

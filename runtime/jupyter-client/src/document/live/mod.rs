//! The `live` backend: the notebook's real-time collaboration room, run by jupyter-collaboration
//! or by jupyter-server-documents (`RoomEngine`).
//!
//! We join the room as one more peer, as JupyterLab does: `PUT /api/collaboration/session` (or
//! jupyter-server-documents' `POST /api/fileid/index`) names the room, a websocket speaks
//! y-websocket (sync steps 1 and 2, updates, awareness), and every edit is a transaction on the
//! shared Y document. People with the notebook open see our cells and outputs as they happen, and
//! we read their unsaved edits; the server saves the room to disk.
//!
//! y-websocket has no acknowledgements, so after each update we also send our state vector (sync
//! step 1): the room answers every step 1 with a step 2, in order, so that answer proves the room
//! holds everything we sent before it. Edits not yet proven, and proven ones for a short while
//! after (the room saves to disk about a second later), stay in a journal. When the socket drops
//! or the Jupyter Server restarts, we join again with a *fresh* document (merging the old one into
//! the room would duplicate every cell) and re-apply each journal entry the room does not already
//! show — checked by cell id and content — but only where the room still shows what we changed,
//! so nothing is lost, nothing doubled, and a newer edit by someone else is never overwritten.

pub(super) mod journal;
mod landing;
mod people;
mod room;
mod save;
mod stored_outputs;

use std::sync::{Arc, Mutex};
use std::time::Duration;

use self::journal::Journal;
pub use self::people::Presence;
use self::people::SharedPeople;
use self::room::{Link, join, room_session};
use self::save::SharedSaveClock;
use super::ynotebook::YNotebook;
use super::{
    CellAt, CellRead, Document, DocumentError, DocumentFuture, Edit, EditPlan, Page, Persistence,
    apply_edits, fresh_insert_ids,
};
use crate::rest::{JupyterRest, RoomEngine};
use notebook_format::notebook::{CellType, Notebook, NotebookError};
use notebook_format::outputs::Output;

/// jupyter-collaboration's default `document_save_delay`: a room saves this long after its last
/// change.
const ROOM_SAVE_DELAY_SECS: f64 = 1.0;
/// jupyter-server-documents' shortest autosave interval (`min_poll_interval`); a slow save
/// stretches it.
const SERVER_DOCUMENTS_SAVE_DELAY_SECS: f64 = 0.5;
/// How long leaving a room may take to send what is still queued.
const LEAVE_TIMEOUT: Duration = Duration::from_secs(5);
/// How long, before leaving, we wait for the file on disk to hold our edits (the room's own
/// autosave follows a change by about a second; a save we ask for comes sooner).
const SAVE_TIMEOUT: Duration = Duration::from_secs(10);
/// How long the room may take to answer a save request before we just watch the file.
const SAVE_ANSWER_TIMEOUT: Duration = Duration::from_secs(3);
/// How often the file is read while waiting for it to hold our edits.
const SAVE_POLL: Duration = Duration::from_millis(100);
/// Attempts to rejoin a room after the connection was lost, with growing pauses between them.
const REJOIN_PAUSES: [Duration; 3] = [
    Duration::ZERO,
    Duration::from_millis(500),
    Duration::from_millis(1500),
];

pub struct LiveDocument {
    rest: JupyterRest,
    path: String,
    /// The current connection to the room; held across a whole edit, which serialises our own
    /// edits and rejoining (and, for a notebook just created, the first join).
    link: Arc<tokio::sync::Mutex<Option<Link>>>,
    journal: Arc<Mutex<Journal>>,
    /// Who else is in the room, and who changed each cell last.
    people: SharedPeople,
    /// When the room saves (its delay as seen), kept across rejoins.
    saves_clock: SharedSaveClock,
    /// Whether our changes reach the file.
    landing: landing::Landing,
    /// Counts the room's changes to the notebook made by others, kept across rejoins.
    room_changes: RoomChanges,
}

/// A counter of the changes others make in the room, watched by whoever wants to hear of them.
pub(super) type RoomChanges = Arc<tokio::sync::watch::Sender<u64>>;

/// Why the file at `path` is no notebook, read as the file backend reads it: its own parse
/// error, or the contents API's refusal (not UTF-8, say); `None` when it reads as one.
async fn unreadable_file(rest: &JupyterRest, path: &str) -> Option<DocumentError> {
    match rest.get_text_file(path).await {
        Ok((text, _)) => Notebook::parse(&text)
            .err()
            .map(|source| DocumentError::Invalid {
                path: path.to_owned(),
                source,
            }),
        Err(e) => Some(DocumentError::Rest(e)),
    }
}

impl LiveDocument {
    /// Joins the notebook's room. `NotFound` from the session call means the server has no
    /// real-time collaboration.
    pub async fn open(rest: JupyterRest, path: impl Into<String>) -> Result<Self, DocumentError> {
        let path = path.into();
        let people = SharedPeople::default();
        let saves_clock = SharedSaveClock::default();
        let room_changes = RoomChanges::default();
        let link = match join(&rest, &path, &people, &saves_clock, &room_changes).await {
            Ok(link) => link,
            // The room names no reason for a file it cannot load ("Error initializing"): the
            // file's own parse error does, as the file backend gives it.
            Err(DocumentError::Room(said)) => {
                return Err(unreadable_file(&rest, &path)
                    .await
                    .unwrap_or(DocumentError::Room(said)));
            }
            Err(e) => return Err(e),
        };
        let link = Arc::new(tokio::sync::Mutex::new(Some(link)));
        let journal = Arc::default();
        expire_journal(&journal, &link);
        Ok(LiveDocument {
            landing: landing::Landing::watch(rest.clone(), path.clone()),
            rest,
            path,
            link,
            journal,
            people,
            saves_clock,
            room_changes,
        })
    }

    /// Opens the room of a notebook we just wrote, without waiting for it: the room is joined in
    /// the background, and every read, edit or close waits for that join (it holds the link).
    /// The room loads the notebook with one empty code cell added (jupyter_ydoc does so for a
    /// notebook without cells); that cell is removed as soon as the room is joined, so the
    /// notebook is what we wrote. Only the session call is awaited, so a server without
    /// real-time collaboration is known before the caller answers.
    pub async fn open_created(
        rest: JupyterRest,
        path: impl Into<String>,
    ) -> Result<Arc<Self>, DocumentError> {
        let path = path.into();
        room_session(&rest, &path).await?;
        let link = Arc::default();
        let journal = Arc::default();
        expire_journal(&journal, &link);
        let document = Arc::new(LiveDocument {
            landing: landing::Landing::watch(rest.clone(), path.clone()),
            rest,
            path,
            link,
            journal,
            people: SharedPeople::default(),
            saves_clock: SharedSaveClock::default(),
            room_changes: RoomChanges::default(),
        });
        let mut slot = document
            .link
            .clone()
            .try_lock_owned()
            .expect("a document just made is not shared yet");
        let joining = document.clone();
        tokio::spawn(async move {
            let plan: EditPlan<'static> = Box::new(|notebook| Ok(placeholder_removal(notebook)));
            if let Err(e) = joining.update_link(&mut slot, plan).await {
                // The slot is left empty: the next read or edit joins again and says why not.
                tracing::warn!("joining the room of new notebook '{}': {e}", joining.path);
            }
        });
        Ok(document)
    }

    /// An open link, rejoining the room (and re-applying the journal) if the old one was lost.
    async fn open_link<'a>(
        &self,
        slot: &'a mut Option<Link>,
    ) -> Result<&'a mut Link, DocumentError> {
        if slot.as_ref().is_some_and(Link::is_open) {
            return Ok(slot.as_mut().expect("checked above"));
        }
        if let Some(old) = slot.take() {
            let reason = old.closed.borrow().clone().unwrap_or_default();
            tracing::info!(
                "rejoining the collaboration room of '{}' ({reason})",
                self.path
            );
            self.journal().settle(old.answered());
        }
        let mut last = None;
        for pause in REJOIN_PAUSES {
            tokio::time::sleep(pause).await;
            let joined = join(
                &self.rest,
                &self.path,
                &self.people,
                &self.saves_clock,
                &self.room_changes,
            );
            match joined.await {
                Ok(link) => {
                    if let Err(e) = self.catch_up(slot.insert(link)) {
                        *slot = None;
                        return Err(e);
                    }
                    return Ok(slot.as_mut().expect("inserted above"));
                }
                Err(e) => last = Some(e),
            }
        }
        Err(last.expect("at least one attempt"))
    }

    /// Re-applies the journal entries a freshly joined room lacks.
    fn catch_up(&self, link: &mut Link) -> Result<(), DocumentError> {
        let room = self.read_link(link)?;
        let mut journal = self.journal();
        let (edits, superseded) = journal.replay(&room);
        if superseded > 0 {
            tracing::warn!(
                "{superseded} of our edits to '{}' were changed by someone else while we were \
                 disconnected; their version is kept",
                self.path
            );
        }
        // Every entry is judged against the fresh room now; the re-applied ones are proven afresh.
        journal.entries.clear();
        if edits.is_empty() {
            return Ok(());
        }
        tracing::info!(
            "re-applied {} edits to '{}' after rejoining its room",
            edits.len(),
            self.path
        );
        let update = link
            .notebook
            .lock()
            .expect("the document lock is never poisoned")
            .write(&edits)
            .map_err(|e| self.damaged(&e))?;
        let proof = self.send_update(link, update);
        journal.record(&room, &edits, proof);
        Ok(())
    }

    /// Sends our update to the room (`Link::send_update`), and has its landing on disk checked.
    fn send_update(&self, link: &mut Link, update: Vec<u8>) -> u64 {
        let proof = link.send_update(update);
        self.landing.changed();
        proof
    }

    /// Plans, checks and writes edits on the locked link (see `Document::update`).
    async fn update_link(
        &self,
        slot: &mut Option<Link>,
        plan: EditPlan<'_>,
    ) -> Result<(Arc<Notebook>, Arc<Notebook>), DocumentError> {
        let link = self.open_link(slot).await?;
        // Read, plan, check and write under one lock, so no remote update lands in between.
        // The notebook planned against is the one our last edit left, unless someone else
        // wrote since: an edit costs the cells it touches, not a conversion of every cell.
        let (base, edits, written) = {
            let notebook = link
                .notebook
                .lock()
                .expect("the document lock is never poisoned");
            let base = notebook
                .read_shared()
                .map_err(|source| DocumentError::Invalid {
                    path: self.path.clone(),
                    source,
                })?;
            let mut edits = plan(&base).map_err(DocumentError::Refused)?;
            if edits.is_empty() {
                return Ok((base.clone(), base));
            }
            fresh_insert_ids(&mut edits, &base);
            let next = apply_edits(&base, &edits, &self.path)?;
            let written = notebook.write_planned(&base, &edits, next);
            (base, edits, written)
        };
        let (update, next) = match written {
            Ok(written) => written,
            Err(e) => {
                // Our copy of the room can no longer be trusted: the next call rejoins.
                *slot = None;
                return Err(self.damaged(&e));
            }
        };
        let proof = self.send_update(link, update);
        // The room's people see our cursor in the cell we just worked on.
        if let Some(cell_id) = worked_on(&edits, &next) {
            link.focus.send_if_modified(|focus| {
                let changed = focus.as_deref() != Some(cell_id);
                *focus = Some(cell_id.to_owned());
                changed
            });
        }
        let mut journal = self.journal();
        journal.settle(link.answered());
        journal.record_merging(&base, &edits, proof);
        Ok((base, next))
    }

    fn damaged(&self, reason: &str) -> DocumentError {
        DocumentError::Room(format!(
            "our copy of the collaboration room of '{}' broke ({reason}); it is reloaded on the \
             next call, so retry the edit",
            self.path
        ))
    }

    fn read_link(&self, link: &Link) -> Result<Notebook, DocumentError> {
        self.read_linked(link, YNotebook::read)
    }

    /// What `read` takes from the room's document (a cell, a page), joining the room first.
    async fn read_room<T>(
        &self,
        read: impl FnOnce(&YNotebook) -> Result<T, NotebookError>,
    ) -> Result<T, DocumentError> {
        let mut slot = self.link.lock().await;
        let link = self.open_link(&mut slot).await?;
        self.read_linked(link, read)
    }

    fn read_linked<T>(
        &self,
        link: &Link,
        read: impl FnOnce(&YNotebook) -> Result<T, NotebookError>,
    ) -> Result<T, DocumentError> {
        let notebook = link
            .notebook
            .lock()
            .expect("the document lock is never poisoned");
        read(&notebook).map_err(|source| DocumentError::Invalid {
            path: self.path.clone(),
            source,
        })
    }

    fn journal(&self) -> std::sync::MutexGuard<'_, Journal> {
        self.journal
            .lock()
            .expect("the journal lock is never poisoned")
    }
}

/// How often the journal lets go of proven entries past their keeping while no edit comes (an
/// edit does it too): a big cell's outputs are not held long after the run that wrote them.
const JOURNAL_EXPIRY_TICK: Duration = Duration::from_secs(5);

/// Settles the journal every [`JOURNAL_EXPIRY_TICK`] until the document is dropped (it holds
/// neither between ticks, so it ends within one tick of the document).
fn expire_journal(journal: &Arc<Mutex<Journal>>, link: &Arc<tokio::sync::Mutex<Option<Link>>>) {
    let journal = Arc::downgrade(journal);
    let link = Arc::downgrade(link);
    tokio::spawn(async move {
        loop {
            tokio::time::sleep(JOURNAL_EXPIRY_TICK).await;
            let (Some(journal), Some(link)) = (journal.upgrade(), link.upgrade()) else {
                return;
            };
            // Busy with an edit, which settles it anyway.
            let Ok(slot) = link.try_lock() else {
                continue;
            };
            if let Some(link) = slot.as_ref() {
                journal
                    .lock()
                    .expect("the journal lock is never poisoned")
                    .settle(link.answered());
            }
        }
    });
}

/// The cell a batch of edits worked on last, if it is still there (a deleted one is no place for
/// a cursor).
fn worked_on<'e>(edits: &'e [Edit], next: &Notebook) -> Option<&'e str> {
    edits.iter().rev().find_map(|edit| {
        let id = match edit {
            Edit::Insert { cell, .. } => cell.id.as_str(),
            Edit::SetSource { cell_id, .. }
            | Edit::Move { cell_id, .. }
            | Edit::SetOutputs { cell_id, .. }
            | Edit::SetRunning { cell_id, .. } => cell_id.as_str(),
            _ => return None,
        };
        next.cells.iter().any(|c| c.id == id).then_some(id)
    })
}

impl Document for LiveDocument {
    fn path(&self) -> &str {
        &self.path
    }

    fn backend(&self) -> &'static str {
        "live"
    }

    fn read(&self) -> DocumentFuture<'_, Notebook> {
        Box::pin(async move {
            let mut notebook = {
                let mut slot = self.link.lock().await;
                let link = self.open_link(&mut slot).await?;
                self.read_link(link)?
            };
            if stored_outputs::any_placeholder(notebook.cells.iter()) {
                stored_outputs::fetch_into(&self.rest, notebook.cells.iter_mut()).await;
            }
            Ok(notebook)
        })
    }

    fn read_cell<'a>(&'a self, at: CellAt<'a>) -> DocumentFuture<'a, CellRead> {
        Box::pin(async move {
            let mut read = self
                .read_room(move |notebook| notebook.read_cell(at))
                .await?;
            if stored_outputs::any_placeholder(read.cell.iter().map(|(_, cell)| cell)) {
                let cells = read.cell.iter_mut().map(|(_, cell)| cell);
                stored_outputs::fetch_into(&self.rest, cells).await;
            }
            Ok(read)
        })
    }

    fn read_page(&self, start: usize, limit: usize) -> DocumentFuture<'_, Page> {
        Box::pin(async move {
            let mut page = self
                .read_room(move |notebook| notebook.read_page(start, limit))
                .await?;
            if stored_outputs::any_placeholder(page.cells.iter()) {
                stored_outputs::fetch_into(&self.rest, page.cells.iter_mut()).await;
            }
            Ok(page)
        })
    }

    fn update<'a>(
        &'a self,
        plan: EditPlan<'a>,
    ) -> DocumentFuture<'a, (Arc<Notebook>, Arc<Notebook>)> {
        Box::pin(async move {
            let mut slot = self.link.lock().await;
            self.update_link(&mut slot, plan).await
        })
    }

    fn write_outputs<'a>(
        &'a self,
        cell_id: &'a str,
        outputs: &'a [Output],
        execution_count: Option<i64>,
        done: bool,
    ) -> DocumentFuture<'a, ()> {
        Box::pin(async move {
            let mut slot = self.link.lock().await;
            let link = self.open_link(&mut slot).await?;
            // What the cell showed is read only for the first write of a run: later writes
            // update the journal's entry for it, whose outputs are what we wrote last.
            let (before, update) = {
                let journal = self.journal();
                let written = journal.written_outputs(cell_id);
                let notebook = link
                    .notebook
                    .lock()
                    .expect("the document lock is never poisoned");
                let before = match written {
                    Some(_) => None,
                    None => notebook.cell_outputs(cell_id),
                };
                (
                    before,
                    notebook.write_outputs(cell_id, outputs, execution_count, done, written),
                )
            };
            let update = match update {
                Ok(Some(update)) => update,
                Ok(None) => {
                    return Err(DocumentError::Conflict {
                        path: self.path.clone(),
                        cell_id: cell_id.to_owned(),
                    });
                }
                Err(e) => {
                    *slot = None;
                    return Err(self.damaged(&e));
                }
            };
            let proof = self.send_update(link, update);
            let mut journal = self.journal();
            journal.settle(link.answered());
            journal.record_outputs(cell_id, outputs, execution_count, before, proof);
            Ok(())
        })
    }

    fn streams_outputs(&self) -> bool {
        true
    }

    fn changed_by(&self, cell_id: &str) -> Option<String> {
        self.people.lock().expect("people lock").changed_by(cell_id)
    }

    fn structure_changed_by(&self) -> Option<String> {
        self.people
            .lock()
            .expect("people lock")
            .structure_changed_by()
    }

    fn whereabouts(&self) -> Vec<Presence> {
        self.people.lock().expect("people lock").whereabouts()
    }

    fn changes_by_others(&self) -> Option<tokio::sync::watch::Receiver<u64>> {
        Some(self.room_changes.subscribe())
    }

    /// An edit is answered once the room holds it, before the room's save (its
    /// `document_save_delay` after the last change). The server publishes no setting, so the
    /// figure is the delay seen in this room once it has saved a change of ours, and until then
    /// the default of the extension that runs the room.
    fn persistence(&self) -> Persistence {
        let (seen, engine) = {
            let clock = self.saves_clock.lock().expect("save clock lock");
            (clock.delay(), clock.engine())
        };
        let default = match engine {
            RoomEngine::Collaboration => ROOM_SAVE_DELAY_SECS,
            RoomEngine::ServerDocuments => SERVER_DOCUMENTS_SAVE_DELAY_SECS,
        };
        Persistence::InRoom {
            save_delay_secs: seen.map_or(default, |d| d.as_secs_f64()),
            seen: seen.is_some(),
            engine: engine.to_string(),
            not_landing: self.landing.problem(),
        }
    }

    fn close(&self) -> DocumentFuture<'_, ()> {
        Box::pin(async move {
            let mut slot = self.link.lock().await;
            let Some(mut link) = slot.take() else {
                return Ok(());
            };
            let saved = match link.is_open() {
                true => self.save_before_leaving(&mut link).await,
                false => Ok(()),
            };
            // Dropping the sender lets the task send what is queued, say goodbye and close;
            // waiting for it means an edit made just before we exit still reaches the room.
            let Link {
                mut closed,
                outgoing,
                ..
            } = link;
            drop(outgoing);
            let _ = tokio::time::timeout(LEAVE_TIMEOUT, closed.wait_for(Option::is_some)).await;
            saved.map_err(|reason| DocumentError::NotSaved {
                path: self.path.clone(),
                reason,
            })
        })
    }
}

/// The edit removing the one empty code cell a room adds to a notebook without cells, if that
/// is all the notebook holds.
fn placeholder_removal(notebook: &Notebook) -> Vec<Edit> {
    match notebook.cells.as_slice() {
        [only]
            if only.cell_type == CellType::Code
                && only.source.is_empty()
                && only.outputs.is_empty() =>
        {
            vec![Edit::Delete {
                cell_ids: vec![only.id.clone()],
            }]
        }
        _ => Vec::new(),
    }
}

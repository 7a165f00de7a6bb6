//! The `live` backend: the notebook's real-time collaboration room (jupyter-collaboration).
//!
//! We join the room as one more peer, as JupyterLab does: `PUT /api/collaboration/session` names
//! the room, a websocket speaks y-websocket (sync steps 1 and 2, updates, awareness), and every
//! edit is a transaction on the shared Y document. People with the notebook open see our cells and
//! outputs as they happen, and we read their unsaved edits; the server saves the room to disk.
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
mod save;

use std::sync::{Arc, Mutex};
use std::time::Duration;

use futures_util::{SinkExt, StreamExt};
use serde_json::Value;
use tokio::sync::{mpsc, watch};
use tokio_tungstenite::tungstenite::Message as Frame;
use yrs::sync::{Awareness, Message, SyncMessage};
use yrs::updates::decoder::Decode;
use yrs::updates::encoder::Encode;

use self::journal::Journal;
use self::save::SaveReply;
use super::ynotebook::YNotebook;
use super::{
    Document, DocumentError, DocumentFuture, Edit, EditPlan, apply_edits, fresh_insert_ids,
};
use crate::jupyter::notebook::{CellType, Notebook};
use crate::jupyter::rest::{CollaborationSession, JupyterRest, RestError};
use crate::jupyter::websocket::{self, JupyterSocket};

/// How long joining a room (PUT, websocket, first sync) may take: a busy Jupyter Server (dozens
/// of kernels starting) has been seen to need over 20 s.
const JOIN_TIMEOUT: Duration = Duration::from_secs(60);
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

/// How often our awareness state is sent again (y-protocols peers drop states older than 30 s).
const AWARENESS_RENEWAL: Duration = Duration::from_secs(15);

/// Who we are in JupyterLab's list of collaborators.
fn agent_awareness() -> Value {
    serde_json::json!({
        "user": {
            "username": "jupyter-mcp-server",
            "name": "AI agent (jupyter-mcp-server)",
            "display_name": "AI agent (jupyter-mcp-server)",
            "initials": "AI",
            "color": "#7c4dff",
        }
    })
}

pub struct LiveDocument {
    rest: JupyterRest,
    path: String,
    /// The current connection to the room; held across a whole edit, which serialises our own
    /// edits and rejoining (and, for a notebook just created, the first join).
    link: Arc<tokio::sync::Mutex<Option<Link>>>,
    journal: Mutex<Journal>,
}

/// One connection to the room: its document and the task that owns the socket.
struct Link {
    notebook: Arc<Mutex<YNotebook>>,
    outgoing: mpsc::UnboundedSender<Vec<u8>>,
    /// Sync step 2 answers received (the first answers our opening step 1).
    answers: watch::Receiver<u64>,
    /// Sync step 1 messages sent, the opening one included.
    asked: u64,
    closed: watch::Receiver<Option<String>>,
    /// The room's latest answer to a save request, and how many we have sent.
    saves: watch::Receiver<Option<SaveReply>>,
    saves_asked: u64,
}

impl Link {
    fn is_open(&self) -> bool {
        self.closed.borrow().is_none() && !self.outgoing.is_closed()
    }

    /// Sends an update followed by our state vector; returns the answer number that proves it.
    fn send_update(&mut self, update: Vec<u8>) -> u64 {
        let step1 = {
            let notebook = self
                .notebook
                .lock()
                .expect("the document lock is never poisoned");
            Message::Sync(SyncMessage::SyncStep1(notebook.state_vector())).encode_v1()
        };
        let _ = self
            .outgoing
            .send(Message::Sync(SyncMessage::Update(update)).encode_v1());
        let _ = self.outgoing.send(step1);
        self.asked += 1;
        self.asked
    }

    fn answered(&self) -> u64 {
        *self.answers.borrow()
    }
}

impl LiveDocument {
    /// Joins the notebook's room. `NotFound` from the session call means the server has no
    /// real-time collaboration.
    pub async fn open(rest: JupyterRest, path: impl Into<String>) -> Result<Self, DocumentError> {
        let path = path.into();
        let link = join(&rest, &path).await?;
        Ok(LiveDocument {
            rest,
            path,
            link: Arc::new(tokio::sync::Mutex::new(Some(link))),
            journal: Mutex::new(Journal::default()),
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
        let document = Arc::new(LiveDocument {
            rest,
            path,
            link: Arc::default(),
            journal: Mutex::new(Journal::default()),
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
            match join(&self.rest, &self.path).await {
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
        let proof = link.send_update(update);
        journal.record(&room, &edits, proof);
        Ok(())
    }

    /// Plans, checks and writes edits on the locked link (see `Document::update`).
    async fn update_link(
        &self,
        slot: &mut Option<Link>,
        plan: EditPlan<'_>,
    ) -> Result<(Notebook, Notebook), DocumentError> {
        let link = self.open_link(slot).await?;
        // Read, plan, check and write under one lock, so no remote update lands in between.
        let (base, next, edits, update) = {
            let notebook = link
                .notebook
                .lock()
                .expect("the document lock is never poisoned");
            let base = notebook.read().map_err(|source| DocumentError::Invalid {
                path: self.path.clone(),
                source,
            })?;
            let mut edits = plan(&base).map_err(DocumentError::Refused)?;
            if edits.is_empty() {
                return Ok((base.clone(), base));
            }
            fresh_insert_ids(&mut edits, &base);
            let next = apply_edits(&base, &edits, &self.path)?;
            let update = notebook.write(&edits);
            (base, next, edits, update)
        };
        let update = match update {
            Ok(update) => update,
            Err(e) => {
                // Our copy of the room can no longer be trusted: the next call rejoins.
                *slot = None;
                return Err(self.damaged(&e));
            }
        };
        let proof = link.send_update(update);
        let mut journal = self.journal();
        journal.settle(link.answered());
        journal.record(&base, &edits, proof);
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
        link.notebook
            .lock()
            .expect("the document lock is never poisoned")
            .read()
            .map_err(|source| DocumentError::Invalid {
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

impl Document for LiveDocument {
    fn path(&self) -> &str {
        &self.path
    }

    fn backend(&self) -> &'static str {
        "live"
    }

    fn read(&self) -> DocumentFuture<'_, Notebook> {
        Box::pin(async move {
            let mut slot = self.link.lock().await;
            let link = self.open_link(&mut slot).await?;
            self.read_link(link)
        })
    }

    fn update<'a>(&'a self, plan: EditPlan<'a>) -> DocumentFuture<'a, (Notebook, Notebook)> {
        Box::pin(async move {
            let mut slot = self.link.lock().await;
            self.update_link(&mut slot, plan).await
        })
    }

    fn streams_outputs(&self) -> bool {
        true
    }

    fn close(&self) -> DocumentFuture<'_, ()> {
        Box::pin(async move {
            let mut slot = self.link.lock().await;
            let Some(mut link) = slot.take() else {
                return Ok(());
            };
            if link.is_open() {
                self.save_before_leaving(&mut link).await;
            }
            // Dropping the sender lets the task send what is queued, say goodbye and close;
            // waiting for it means an edit made just before we exit still reaches the room.
            let Link {
                mut closed,
                outgoing,
                ..
            } = link;
            drop(outgoing);
            let _ = tokio::time::timeout(LEAVE_TIMEOUT, closed.wait_for(Option::is_some)).await;
            Ok(())
        })
    }
}

/// Names the notebook's room (`NoCollaboration` when the server has no real-time collaboration).
async fn room_session(
    rest: &JupyterRest,
    path: &str,
) -> Result<CollaborationSession, DocumentError> {
    rest.collaboration_session(path).await.map_err(|e| match e {
        RestError::NotFound { .. } => DocumentError::NoCollaboration {
            url: rest.shown_url(),
            path: path.to_owned(),
        },
        other => other.into(),
    })
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

/// Opens a connection to the notebook's room and waits until the first sync is done.
async fn join(rest: &JupyterRest, path: &str) -> Result<Link, DocumentError> {
    let started = std::time::Instant::now();
    let elapsed = || format!("{:.1}", started.elapsed().as_secs_f64() * 1e3);
    let attempt = async {
        let session = room_session(rest, path).await?;
        tracing::debug!(ms = elapsed(), "room of '{path}': session");
        let url = rest.collaboration_room_url(&session)?;
        let (socket, _) = websocket::dial_server(rest, &url, None)
            .await
            .map_err(|e| {
                DocumentError::Room(format!(
                    "could not join the collaboration room of '{path}': {e}"
                ))
            })?;
        tracing::debug!(ms = elapsed(), "room of '{path}': socket open");
        let notebook = Arc::new(Mutex::new(YNotebook::new()));
        let (outgoing, queued) = mpsc::unbounded_channel();
        let (answers_tx, mut answers) = watch::channel(0u64);
        let (closed_tx, closed) = watch::channel(None);
        let (saves_tx, saves) = watch::channel(None);
        let room = Room {
            notebook: notebook.clone(),
            answers: answers_tx,
            closed: closed_tx,
            saves: saves_tx,
            path: path.to_owned(),
        };
        tokio::spawn(room.run(socket, queued));
        let mut closed_rx = closed.clone();
        tokio::select! {
            synced = answers.wait_for(|n| *n >= 1) => {
                synced.map_err(|_| closed_error(path, &closed))?;
            }
            _ = closed_rx.wait_for(Option::is_some) => return Err(closed_error(path, &closed)),
        }
        tracing::debug!(ms = elapsed(), "room of '{path}': synced");
        Ok(Link {
            notebook,
            outgoing,
            answers,
            asked: 1,
            closed,
            saves,
            saves_asked: 0,
        })
    };
    tokio::time::timeout(JOIN_TIMEOUT, attempt)
        .await
        .map_err(|_| {
            DocumentError::Room(format!(
                "the collaboration room of '{path}' did not sync within {}s; check the Jupyter \
                 Server's log",
                JOIN_TIMEOUT.as_secs()
            ))
        })?
}

fn closed_error(path: &str, closed: &watch::Receiver<Option<String>>) -> DocumentError {
    let reason = closed.borrow().clone().unwrap_or_default();
    DocumentError::Room(format!(
        "the collaboration room of '{path}' closed the connection: {reason}"
    ))
}

/// The task that owns one room socket.
struct Room {
    notebook: Arc<Mutex<YNotebook>>,
    answers: watch::Sender<u64>,
    closed: watch::Sender<Option<String>>,
    saves: watch::Sender<Option<SaveReply>>,
    path: String,
}

impl Room {
    async fn run(self, mut socket: JupyterSocket, mut queued: mpsc::UnboundedReceiver<Vec<u8>>) {
        let (hello, mut awareness) = {
            let notebook = self.lock();
            let step1 = Message::Sync(SyncMessage::SyncStep1(notebook.state_vector()));
            let awareness = Awareness::new(notebook.doc().clone());
            (step1.encode_v1(), awareness)
        };
        let _ = awareness.set_local_state(agent_awareness());
        let mut greeting = vec![hello];
        if let Ok(update) = awareness.update() {
            greeting.push(Message::Awareness(update).encode_v1());
        }
        let reason = match self.greet(&mut socket, greeting).await {
            Err(e) => e,
            Ok(()) => self.serve(&mut socket, &mut queued, &mut awareness).await,
        };
        tracing::debug!("left the collaboration room of '{}': {reason}", self.path);
        let _ = socket.close(None).await;
        self.closed.send_replace(Some(reason));
    }

    async fn greet(&self, socket: &mut JupyterSocket, frames: Vec<Vec<u8>>) -> Result<(), String> {
        for frame in frames {
            socket
                .send(Frame::Binary(frame.into()))
                .await
                .map_err(|e| e.to_string())?;
        }
        Ok(())
    }

    /// Relays until the socket ends (returns why) or we leave (all senders dropped).
    async fn serve(
        &self,
        socket: &mut JupyterSocket,
        queued: &mut mpsc::UnboundedReceiver<Vec<u8>>,
        awareness: &mut Awareness,
    ) -> String {
        let mut renew = tokio::time::interval_at(
            tokio::time::Instant::now() + AWARENESS_RENEWAL,
            AWARENESS_RENEWAL,
        );
        loop {
            tokio::select! {
                // Our own updates go first, so a read after a write never races our own edit.
                biased;
                _ = renew.tick() => {
                    // Peers forget a collaborator not heard from in 30 s.
                    let _ = awareness.set_local_state(agent_awareness());
                    if let Ok(update) = awareness.update() {
                        let frame = Message::Awareness(update).encode_v1();
                        if let Err(e) = socket.send(Frame::Binary(frame.into())).await {
                            return format!("sending failed: {e}");
                        }
                    }
                }
                out = queued.recv() => match out {
                    Some(frame) => {
                        if let Err(e) = socket.send(Frame::Binary(frame.into())).await {
                            return format!("sending failed: {e}");
                        }
                    }
                    None => {
                        // Leaving: tell the others we are gone so JupyterLab drops our cursor.
                        awareness.clean_local_state();
                        if let Ok(update) = awareness.update_with_clients([awareness.client_id()]) {
                            let goodbye = Message::Awareness(update).encode_v1();
                            let _ = socket.send(Frame::Binary(goodbye.into())).await;
                        }
                        return "the notebook was released".into();
                    }
                },
                frame = socket.next() => match frame {
                    Some(Ok(Frame::Binary(bytes))) => {
                        if let Err(e) = self.receive(socket, &bytes).await {
                            return e;
                        }
                    }
                    Some(Ok(Frame::Close(close))) => {
                        return format!(
                            "the server closed the room{}",
                            close.map(|c| format!(" ({} {})", c.code, c.reason)).unwrap_or_default()
                        );
                    }
                    Some(Ok(_)) => {}
                    Some(Err(e)) => return format!("the socket failed: {e}"),
                    None => return "the socket ended".into(),
                },
            }
        }
    }

    async fn receive(&self, socket: &mut JupyterSocket, bytes: &[u8]) -> Result<(), String> {
        if bytes.first() == Some(&save::RAW) {
            if let Some(reply) = save::reply(bytes) {
                self.saves.send_replace(Some(reply));
            }
            return Ok(());
        }
        let message = match Message::decode_v1(bytes) {
            Ok(message) => message,
            Err(e) => {
                tracing::debug!(
                    "ignoring an unreadable room message for '{}': {e}",
                    self.path
                );
                return Ok(());
            }
        };
        match message {
            Message::Sync(SyncMessage::SyncStep1(remote)) => {
                let diff = self.lock().diff(&remote);
                let reply = Message::Sync(SyncMessage::SyncStep2(diff)).encode_v1();
                socket
                    .send(Frame::Binary(reply.into()))
                    .await
                    .map_err(|e| format!("sending failed: {e}"))?;
            }
            Message::Sync(SyncMessage::SyncStep2(update)) => {
                self.apply(&update)?;
                self.answers.send_modify(|n| *n += 1);
            }
            Message::Sync(SyncMessage::Update(update)) => self.apply(&update)?,
            // Other peers' cursors and our own echo: nothing we act on.
            _ => {}
        }
        Ok(())
    }

    /// A bad update leaves our copy in doubt: the link ends, and the next call rejoins with a
    /// fresh document (and re-applies our journal).
    fn apply(&self, update: &[u8]) -> Result<(), String> {
        self.lock().apply_update(update).map_err(|e| {
            tracing::warn!(
                "a room update for '{}' could not be applied: {e}",
                self.path
            );
            format!("a room update could not be applied: {e}")
        })
    }

    fn lock(&self) -> std::sync::MutexGuard<'_, YNotebook> {
        self.notebook
            .lock()
            .expect("the document lock is never poisoned")
    }
}

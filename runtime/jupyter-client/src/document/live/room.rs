//! One connection to a notebook's collaboration room: joining it (session, websocket, first
//! sync) and the task that owns the socket, applying the room's updates to our copy and sending
//! ours, with awareness so JupyterLab lists us among the collaborators.

use std::sync::{Arc, Mutex};
use std::time::Duration;

use futures_util::{SinkExt, StreamExt};
use serde_json::Value;
use tokio::sync::{mpsc, watch};
use tokio_tungstenite::tungstenite::Message as Frame;
use yrs::sync::{Awareness, Message, SyncMessage};
use yrs::updates::decoder::Decode;
use yrs::updates::encoder::Encode;

use super::people::{self, SharedPeople};
use super::save::{self, SaveReply, SharedSaveClock};
use crate::document::DocumentError;
use crate::document::ynotebook::YNotebook;
use crate::rest::{CollaborationSession, JupyterRest, RestError, RoomEngine};
use crate::websocket::{self, JupyterSocket};

/// How long joining a room (PUT, websocket, first sync) may take: a busy Jupyter Server (dozens
/// of kernels starting) has been seen to need over 20 s.
const JOIN_TIMEOUT: Duration = Duration::from_secs(60);

/// How often our awareness state is sent again (y-protocols peers drop states older than 30 s).
const AWARENESS_RENEWAL: Duration = Duration::from_secs(15);

/// Who we are in JupyterLab's list of collaborators, and the cell we work on: JupyterLab draws a
/// peer's `cursors` in the cell editor they point into, in the peer's colour and with its name on
/// hover; `jupyter_mcp.cell_id` says the same to clients that read it.
fn agent_awareness(focus: Option<(&str, Value)>) -> Value {
    let mut state = serde_json::json!({
        "user": {
            "username": "jupyter-mcp-server",
            "name": "AI agent (jupyter-mcp-server)",
            "display_name": "AI agent (jupyter-mcp-server)",
            "initials": "AI",
            "color": "#7c4dff",
        }
    });
    if let Some((cell_id, cursor)) = focus {
        state["cursors"] = serde_json::json!([
            { "anchor": cursor, "head": cursor, "primary": true, "empty": true }
        ]);
        state["jupyter_mcp"] = serde_json::json!({ "cell_id": cell_id });
    }
    state
}

/// One connection to the room: its document and the task that owns the socket.
pub(super) struct Link {
    pub(super) notebook: Arc<Mutex<YNotebook>>,
    pub(super) outgoing: mpsc::UnboundedSender<Vec<u8>>,
    /// Sync step 2 answers received (the first answers our opening step 1).
    pub(super) answers: watch::Receiver<u64>,
    /// Sync step 1 messages sent, the opening one included.
    pub(super) asked: u64,
    pub(super) closed: watch::Receiver<Option<String>>,
    /// The room's latest answer to a save request, and how many we have sent.
    pub(super) saves: watch::Receiver<Option<SaveReply>>,
    pub(super) saves_asked: u64,
    /// The cell we last worked on, shown to the room's people as our cursor.
    pub(super) focus: watch::Sender<Option<String>>,
    /// When the room saves what we send.
    pub(super) saves_clock: SharedSaveClock,
    /// Which extension runs the room (whether it takes save requests).
    pub(super) engine: RoomEngine,
}

impl Link {
    pub(super) fn is_open(&self) -> bool {
        self.closed.borrow().is_none() && !self.outgoing.is_closed()
    }

    /// Sends an update followed by our state vector; returns the answer number that proves it.
    pub(super) fn send_update(&mut self, update: Vec<u8>) -> u64 {
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
        self.saves_clock.lock().expect("save clock lock").changed();
        let _ = self.outgoing.send(step1);
        self.asked += 1;
        self.asked
    }

    pub(super) fn answered(&self) -> u64 {
        *self.answers.borrow()
    }
}

/// Names the notebook's room (`NoCollaboration` when the server has no real-time collaboration).
pub(super) async fn room_session(
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

/// Opens a connection to the notebook's room and waits until the first sync is done.
pub(super) async fn join(
    rest: &JupyterRest,
    path: &str,
    people: &SharedPeople,
    saves_clock: &SharedSaveClock,
    room_changes: &super::RoomChanges,
) -> Result<Link, DocumentError> {
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
        let fresh = YNotebook::new();
        people::watch_cells(fresh.cells(), fresh.doc().client_id(), people.clone());
        let counter = room_changes.clone();
        fresh.on_room_changes(move || {
            counter.send_modify(|changes| *changes += 1);
        });
        let notebook = Arc::new(Mutex::new(fresh));
        let (outgoing, queued) = mpsc::unbounded_channel();
        let (answers_tx, mut answers) = watch::channel(0u64);
        let (closed_tx, closed) = watch::channel(None);
        let (saves_tx, saves) = watch::channel(None);
        let (focus, focus_rx) = watch::channel(None);
        saves_clock
            .lock()
            .expect("save clock lock")
            .joining(session.engine);
        let room = Room {
            notebook: notebook.clone(),
            answers: answers_tx,
            closed: closed_tx,
            saves: saves_tx,
            path: path.to_owned(),
            people: people.clone(),
            focus: focus_rx,
            saves_clock: saves_clock.clone(),
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
            focus,
            saves_clock: saves_clock.clone(),
            engine: session.engine,
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

pub(super) fn closed_error(path: &str, closed: &watch::Receiver<Option<String>>) -> DocumentError {
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
    people: SharedPeople,
    focus: watch::Receiver<Option<String>>,
    saves_clock: SharedSaveClock,
}

impl Room {
    async fn run(self, mut socket: JupyterSocket, mut queued: mpsc::UnboundedReceiver<Vec<u8>>) {
        let (hello, mut awareness) = {
            let notebook = self.lock();
            let step1 = Message::Sync(SyncMessage::SyncStep1(notebook.state_vector()));
            let awareness = Awareness::new(notebook.doc().clone());
            (step1.encode_v1(), awareness)
        };
        let _ = awareness.set_local_state(self.awareness_state());
        let mut greeting = vec![hello];
        if let Ok(update) = awareness.update() {
            greeting.push(Message::Awareness(update).encode_v1());
        }
        let reason = match self.greet(&mut socket, greeting).await {
            Err(e) => e,
            Ok(()) => {
                let mut focus = self.focus.clone();
                self.serve(&mut socket, &mut queued, &mut awareness, &mut focus)
                    .await
            }
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

    /// Our awareness state now: who we are and, when we have one, the cell we work on.
    fn awareness_state(&self) -> Value {
        let cell_id = self.focus.borrow().clone();
        let focus = cell_id.and_then(|id| {
            let cursor = self.lock().end_of_source(&id)?;
            Some((id, cursor))
        });
        agent_awareness(
            focus
                .as_ref()
                .map(|(id, cursor)| (id.as_str(), cursor.clone())),
        )
    }

    async fn send_awareness(
        &self,
        socket: &mut JupyterSocket,
        awareness: &mut Awareness,
    ) -> Result<(), String> {
        let _ = awareness.set_local_state(self.awareness_state());
        if let Ok(update) = awareness.update() {
            let frame = Message::Awareness(update).encode_v1();
            socket
                .send(Frame::Binary(frame.into()))
                .await
                .map_err(|e| format!("sending failed: {e}"))?;
        }
        Ok(())
    }

    /// Relays until the socket ends (returns why) or we leave (all senders dropped).
    async fn serve(
        &self,
        socket: &mut JupyterSocket,
        queued: &mut mpsc::UnboundedReceiver<Vec<u8>>,
        awareness: &mut Awareness,
        focus: &mut watch::Receiver<Option<String>>,
    ) -> String {
        let mut focus_open = true;
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
                    if let Err(e) = self.send_awareness(socket, awareness).await {
                        return e;
                    }
                }
                changed = focus.changed(), if focus_open => match changed {
                    Ok(()) => {
                        if let Err(e) = self.send_awareness(socket, awareness).await {
                            return e;
                        }
                    }
                    Err(_) => focus_open = false,
                },
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
                        if let Err(e) = self.receive(socket, &bytes, awareness).await {
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

    async fn receive(
        &self,
        socket: &mut JupyterSocket,
        bytes: &[u8],
        awareness: &mut Awareness,
    ) -> Result<(), String> {
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
            // Who is here, by name; our own echo changes nothing.
            Message::Awareness(update) => self.note_awareness(awareness, update),
            _ => {}
        }
        Ok(())
    }

    /// Takes who is here from an awareness update (a bad one is ignored: it only names people).
    fn note_awareness(&self, awareness: &mut Awareness, update: yrs::sync::AwarenessUpdate) {
        if awareness.apply_update(update).is_ok() {
            // The document before the people (the order the document's observers take them in).
            let notebook = self.lock();
            let cursor_cell = |state: &str| {
                let (client, clock) = people::cursor_text(state)?;
                notebook.cell_with_source(client, clock)
            };
            let mut people = self.people.lock().expect("people lock");
            people.read_awareness(awareness, cursor_cell);
        }
    }

    /// A bad update leaves our copy in doubt: the link ends, and the next call rejoins with a
    /// fresh document (and re-applies our journal).
    fn apply(&self, update: &[u8]) -> Result<(), String> {
        let hash = {
            let notebook = self.lock();
            notebook.apply_update(update).map_err(|e| {
                tracing::warn!(
                    "a room update for '{}' could not be applied: {e}",
                    self.path
                );
                format!("a room update could not be applied: {e}")
            })?;
            notebook.saved_hash()
        };
        self.saves_clock
            .lock()
            .expect("save clock lock")
            .saw_hash(hash);
        Ok(())
    }

    fn lock(&self) -> std::sync::MutexGuard<'_, YNotebook> {
        self.notebook
            .lock()
            .expect("the document lock is never poisoned")
    }
}

//! One websocket connection to a kernel's channels, kept for the kernel's whole use.
//!
//! A background task owns the socket: it sends what callers queue, routes every incoming message to
//! the request it answers (by the parent `msg_id`), reconnects with the same session id when the
//! socket drops (Jupyter replays what it buffered meanwhile), and watches for the kernel being
//! *gone* — deleted, dead, or restarted by someone else — because then its state is lost.
//!
//! Nothing a caller queues is sent on a socket before the kernel has answered a
//! `kernel_info_request` on it, on iopub (re-sent until it does), as Jupyter's own clients wait:
//! what sits between us and the kernel (a Jupyter Server's gateway proxy, a gateway, a Hub's
//! proxy, jupyter-server-documents' pass-through websocket) may accept the socket before its own
//! channels to the kernel are open, and drop what arrives meanwhile. And a socket is never
//! dialled twice under one session id: a gateway takes the second for a replacement of the first
//! and stalls it.

use std::collections::{HashMap, HashSet};
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Mutex};
use std::time::Duration;

use futures_util::{SinkExt, StreamExt};
use serde_json::{Value, json};
use tokio::sync::{mpsc, watch};

use self::signals::{
    HANDSHAKE_RESEND, IOPUB_GRACE, IOPUB_NUDGE, announces_birth, loss_signalled, shows_answering,
};
use super::codec::WireMessage;
use super::socket::Socket;
use crate::rest::JupyterRest;

/// Why a kernel's state is lost.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum GoneReason {
    /// Shut down or deleted (REST 404 or a `shutdown_reply` that is not a restart).
    Deleted,
    /// Jupyter gave up restarting it.
    Dead,
    /// Restarted by someone other than us, or by Jupyter after its process died.
    Restarted,
}

impl std::fmt::Display for GoneReason {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(match self {
            GoneReason::Deleted => "was shut down or deleted",
            GoneReason::Dead => "died and Jupyter could not restart it",
            GoneReason::Restarted => {
                "was restarted outside this server (or its process died and Jupyter restarted it)"
            }
        })
    }
}

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Liveness {
    Alive,
    Gone(GoneReason),
}

/// What a request's route receives.
#[derive(Debug)]
pub enum Routed {
    Message(WireMessage),
    Gone(GoneReason),
}

#[derive(Debug, thiserror::Error)]
pub enum ConnectError {
    #[error("kernel '{0}' was not found on the Jupyter Server")]
    NotFound(String),
    #[error("the Jupyter Server rejected the token when connecting to kernel '{0}'")]
    Forbidden(String),
    #[error("cannot open the websocket of kernel '{kernel_id}': {reason}")]
    Failed { kernel_id: String, reason: String },
    #[error(
        "kernel '{kernel_id}' did not answer within {seconds} s (--kernel-start-timeout) of being \
         connected to; on a cluster its pod may still be being scheduled or its image pulled: \
         try again later, or raise --kernel-start-timeout"
    )]
    NotAnswering { kernel_id: String, seconds: u64 },
}

type Routes = Arc<Mutex<HashMap<String, mpsc::UnboundedSender<Routed>>>>;

struct Shared {
    /// Set while we restart the kernel ourselves, so the restart is not taken for a loss.
    restart_expected: AtomicBool,
    /// Set when we shut the kernel down ourselves: its end is then no news.
    shutdown_expected: AtomicBool,
    /// The name the kernel serves under (a notebook's name, or "default"), for lifecycle events.
    label: std::sync::Mutex<String>,
    observer: Arc<dyn super::observer::KernelObserver>,
    liveness: watch::Sender<Liveness>,
    /// Whether the kernel has answered on the socket now open (see the module doc).
    answering: watch::Sender<bool>,
    execution_state: watch::Sender<String>,
    /// The kernel's widget models, from their comm messages (whoever's request they answer).
    widgets: Mutex<super::widgets::WidgetStates>,
}

pub struct KernelConnection {
    kernel_id: String,
    session_id: String,
    v1: bool,
    outgoing: mpsc::UnboundedSender<WireMessage>,
    routes: Routes,
    shared: Arc<Shared>,
    task: tokio::task::JoinHandle<()>,
}

impl Drop for KernelConnection {
    fn drop(&mut self) {
        self.task.abort();
    }
}

impl std::fmt::Debug for KernelConnection {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("KernelConnection")
            .field("kernel_id", &self.kernel_id)
            .field("session_id", &self.session_id)
            .finish()
    }
}

impl KernelConnection {
    /// Connects to a kernel; fails at once if the kernel does not exist or refuses us.
    /// `start_timeout` bounds the websocket upgrade, which a gateway answers only once the
    /// kernel does.
    /// `restarting`: Jupyter is restarting the kernel (or just did): the restart's statuses this
    /// connection meets first are that restart, not a new one (see `loss_signalled`).
    pub async fn open(
        rest: JupyterRest,
        kernel_id: &str,
        observer: Arc<dyn super::observer::KernelObserver>,
        start_timeout: Duration,
        restarting: bool,
    ) -> Result<Self, ConnectError> {
        let (socket, session_id) = Socket::open(&rest, kernel_id, start_timeout).await?;
        let v1 = socket.v1;
        let (outgoing, outgoing_rx) = mpsc::unbounded_channel();
        let routes: Routes = Arc::default();
        let shared = Arc::new(Shared {
            restart_expected: AtomicBool::new(restarting),
            shutdown_expected: AtomicBool::new(false),
            label: std::sync::Mutex::new(String::new()),
            observer,
            liveness: watch::Sender::new(Liveness::Alive),
            answering: watch::Sender::new(false),
            execution_state: watch::Sender::new("unknown".to_owned()),
            widgets: Mutex::default(),
        });
        let task = tokio::spawn(
            SocketTask {
                rest,
                kernel_id: kernel_id.to_owned(),
                session_id: session_id.clone(),
                v1: socket.v1,
                start_timeout,
                routes: routes.clone(),
                shared: shared.clone(),
            }
            .run(socket, outgoing_rx),
        );
        Ok(KernelConnection {
            kernel_id: kernel_id.to_owned(),
            session_id,
            v1,
            outgoing,
            routes,
            shared,
            task,
        })
    }

    pub fn kernel_id(&self) -> &str {
        &self.kernel_id
    }

    /// The session every socket of this connection is opened under (reconnects keep it).
    pub fn session_id(&self) -> &str {
        &self.session_id
    }

    pub fn v1(&self) -> bool {
        self.v1
    }

    pub fn liveness(&self) -> Liveness {
        *self.shared.liveness.borrow()
    }

    /// Waits until the kernel answers on our socket (what we queue is sent from then on), or
    /// is gone; returns whether it answers.
    pub async fn answering(&self) -> bool {
        let mut answering = self.shared.answering.subscribe();
        let mut liveness = self.shared.liveness.subscribe();
        tokio::select! {
            ready = answering.wait_for(|ready| *ready) => ready.is_ok(),
            _ = liveness.wait_for(|l| *l != Liveness::Alive) => false,
        }
    }

    /// Whether the kernel has answered on the socket open now.
    pub fn is_answering(&self) -> bool {
        *self.shared.answering.borrow()
    }

    /// The last `execution_state` the kernel reported (busy, idle, starting, …).
    pub fn execution_state(&self) -> String {
        self.shared.execution_state.borrow().clone()
    }

    /// The widget state of the models `outputs` show (see `widgets::WidgetStates::shown_in`).
    pub fn widget_state(
        &self,
        outputs: &[notebook_format::outputs::Output],
        saved: Option<&serde_json::Map<String, Value>>,
    ) -> Option<Value> {
        self.shared
            .widgets
            .lock()
            .expect("widgets lock")
            .shown_in(outputs, saved)
    }

    /// Marks the kernel's end as ours (we are shutting it down).
    pub fn expect_shutdown(&self) {
        self.shared.shutdown_expected.store(true, Ordering::SeqCst);
    }

    pub fn label(&self) -> String {
        self.shared.label.lock().expect("label lock").clone()
    }

    pub fn set_label(&self, label: &str) {
        *self.shared.label.lock().expect("label lock") = label.to_owned();
    }

    /// Marks the next restart as ours, so it does not count as the kernel being gone.
    pub fn expect_restart(&self, expected: bool) {
        self.shared
            .restart_expected
            .store(expected, Ordering::SeqCst);
    }

    /// Sends a request and returns its id and the stream of messages answering it.
    pub fn request(
        &self,
        channel: &str,
        msg_type: &str,
        content: Value,
    ) -> (String, mpsc::UnboundedReceiver<Routed>) {
        let message = self.new_message(
            channel,
            msg_type,
            content,
            Value::Object(Default::default()),
        );
        let msg_id = message.msg_id().to_owned();
        let (tx, rx) = mpsc::unbounded_channel();
        if let Liveness::Gone(reason) = self.liveness() {
            let _ = tx.send(Routed::Gone(reason));
            return (msg_id, rx);
        }
        self.routes
            .lock()
            .expect("routes lock")
            .insert(msg_id.clone(), tx);
        // If the task has ended the kernel is gone; the route then hears it from `liveness`.
        if self.outgoing.send(message).is_err()
            && let Some(tx) = self.routes.lock().expect("routes lock").remove(&msg_id)
        {
            let reason = match self.liveness() {
                Liveness::Gone(reason) => reason,
                Liveness::Alive => GoneReason::Deleted,
            };
            let _ = tx.send(Routed::Gone(reason));
        }
        (msg_id, rx)
    }

    /// Stops routing messages for a finished request.
    pub fn forget(&self, msg_id: &str) {
        self.routes.lock().expect("routes lock").remove(msg_id);
    }

    fn new_message(
        &self,
        channel: &str,
        msg_type: &str,
        content: Value,
        parent: Value,
    ) -> WireMessage {
        new_message(&self.session_id, channel, msg_type, content, parent)
    }
}

fn new_message(
    session_id: &str,
    channel: &str,
    msg_type: &str,
    content: Value,
    parent: Value,
) -> WireMessage {
    WireMessage {
        channel: channel.to_owned(),
        header: json!({
            "msg_id": uuid::Uuid::new_v4().simple().to_string(),
            "msg_type": msg_type,
            "username": "jupyter-mcp-server",
            "session": session_id,
            "date": chrono::Utc::now().to_rfc3339_opts(chrono::SecondsFormat::Micros, true),
            "version": "5.4",
        }),
        parent_header: parent,
        metadata: json!({}),
        content,
        buffers: Vec::new(),
    }
}

struct SocketTask {
    rest: JupyterRest,
    kernel_id: String,
    session_id: String,
    /// The protocol the first socket settled on, spoken by every reconnection.
    v1: bool,
    start_timeout: Duration,
    routes: Routes,
    shared: Arc<Shared>,
}

impl SocketTask {
    async fn run(self, mut socket: Socket, mut outgoing: mpsc::UnboundedReceiver<WireMessage>) {
        let mut unsent = None;
        let mut first_socket = true;
        loop {
            let pumped = self
                .pump(&mut socket, &mut outgoing, unsent.take(), first_socket)
                .await;
            first_socket = false;
            match pumped {
                Pumped::CallerGone => return,
                Pumped::KernelGone(reason) => {
                    self.declare_gone(reason).await;
                    return;
                }
                Pumped::SocketClosed(why, message) => {
                    unsent = message;
                    tracing::info!(kernel = %self.kernel_id, "kernel websocket dropped ({why}); reconnecting");
                    match self.reconnect(&mut outgoing).await {
                        Some(fresh) => socket = fresh,
                        None => return,
                    }
                }
            }
        }
    }

    async fn pump(
        &self,
        socket: &mut Socket,
        outgoing: &mut mpsc::UnboundedReceiver<WireMessage>,
        mut unsent: Option<WireMessage>,
        first_socket: bool,
    ) -> Pumped {
        // Callers' messages wait until the kernel answers on this socket (see the module doc).
        self.shared.answering.send_replace(false);
        let mut handshake = HashSet::new();
        let mut resend = tokio::time::interval(HANDSHAKE_RESEND);
        let mut answering = false;
        // When the shell first answered a handshake request (iopub may still be settling).
        let mut shell_answered: Option<tokio::time::Instant> = None;
        loop {
            tokio::select! {
                _ = resend.tick(), if !answering => {
                    // A kernel whose iopub never speaks of kernel_info is taken at its shell's word.
                    if shell_answered.is_some_and(|at| at.elapsed() >= IOPUB_GRACE) {
                        tracing::debug!(kernel = %self.kernel_id, "the kernel answers on shell only");
                        answering = true;
                        if let Err(closed) = self.now_answering(socket, &mut unsent).await {
                            return closed;
                        }
                        continue;
                    }
                    let hello = new_message(
                        &self.session_id, "shell", "kernel_info_request", json!({}), json!({}),
                    );
                    handshake.insert(hello.msg_id().to_owned());
                    if let Err(e) = socket.ws.send(socket.encode(&hello)).await {
                        return Pumped::SocketClosed(e.to_string(), unsent);
                    }
                }
                queued = outgoing.recv(), if answering => {
                    let Some(message) = queued else { return Pumped::CallerGone };
                    let frame = socket.encode(&message);
                    if let Err(e) = socket.ws.send(frame).await {
                        // The request stays routed and is sent again once the socket is back.
                        tracing::debug!(kernel = %self.kernel_id, "send failed: {e}");
                        return Pumped::SocketClosed(e.to_string(), Some(message));
                    }
                }
                frame = socket.ws.next() => {
                    let frame = match frame {
                        None => return Pumped::SocketClosed("closed by the server".into(), unsent),
                        Some(Err(e)) => return Pumped::SocketClosed(e.to_string(), unsent),
                        Some(Ok(frame)) => frame,
                    };
                    let message = match socket.decode(frame) {
                        Ok(Some(message)) => message,
                        Ok(None) => continue,
                        Err(e) => {
                            tracing::warn!(kernel = %self.kernel_id, "ignoring an unreadable kernel frame: {e}");
                            continue;
                        }
                    };
                    // Where Jupyter hands the kernel's own iopub straight through
                    // (jupyter-server-documents), a kernel still starting announces its birth on
                    // our first socket: no state of it was ours to lose yet.
                    // (A restart we asked for is still judged as one, which clears its flag.)
                    let birth = first_socket
                        && !answering
                        && !self.shared.restart_expected.load(Ordering::SeqCst)
                        && announces_birth(&message);
                    if !birth
                        && let Some(reason) = loss_signalled(&message, &self.shared.restart_expected)
                    {
                        return Pumped::KernelGone(reason);
                    }
                    if !answering
                        && message.channel == "shell"
                        && message.parent_msg_id().is_some_and(|p| handshake.contains(p))
                    {
                        // The shell answers: ask again soon, until iopub shows it hears us.
                        shell_answered.get_or_insert_with(tokio::time::Instant::now);
                        resend.reset_after(IOPUB_NUDGE);
                    }
                    if !answering && shows_answering(&message, &handshake) {
                        answering = true;
                        tracing::debug!(kernel = %self.kernel_id, "the kernel answers on its socket");
                        if let Err(closed) = self.now_answering(socket, &mut unsent).await {
                            return closed;
                        }
                    }
                    // The handshake's own answers are nobody's business.
                    if message.parent_msg_id().is_some_and(|p| handshake.contains(p)) {
                        continue;
                    }
                    self.route(message);
                }
            }
        }
    }

    /// The kernel answers on this socket: callers' messages may go, the one left unsent first.
    async fn now_answering(
        &self,
        socket: &mut Socket,
        unsent: &mut Option<WireMessage>,
    ) -> Result<(), Pumped> {
        self.shared.answering.send_replace(true);
        if let Some(message) = unsent.take()
            && let Err(e) = socket.ws.send(socket.encode(&message)).await
        {
            return Err(Pumped::SocketClosed(e.to_string(), Some(message)));
        }
        Ok(())
    }

    fn route(&self, message: WireMessage) {
        if message.msg_type() == "status"
            && let Some(state) = message
                .content
                .get("execution_state")
                .and_then(Value::as_str)
        {
            self.shared.execution_state.send_replace(state.to_owned());
            if state == "starting" {
                // A restarted kernel has no widgets left.
                self.shared.widgets.lock().expect("widgets lock").clear();
            }
        }
        if message.channel == "iopub" && message.msg_type().starts_with("comm_") {
            self.shared
                .widgets
                .lock()
                .expect("widgets lock")
                .observe(message.msg_type(), &message.content);
        }
        let Some(parent) = message.parent_msg_id().map(str::to_owned) else {
            return;
        };
        let mut routes = self.routes.lock().expect("routes lock");
        if let Some(route) = routes.get(&parent)
            && route.send(Routed::Message(message)).is_err()
        {
            routes.remove(&parent);
        }
    }

    async fn declare_gone(&self, reason: GoneReason) {
        self.shared.liveness.send_replace(Liveness::Gone(reason));
        self.shared.execution_state.send_replace("dead".to_owned());
        for (_, route) in self.routes.lock().expect("routes lock").drain() {
            let _ = route.send(Routed::Gone(reason));
        }
        if self.shared.shutdown_expected.load(Ordering::SeqCst) {
            return;
        }
        tracing::warn!(kernel = %self.kernel_id, "kernel {reason}; its state is lost");
        // A restart or end we did not cause is a lifecycle event too.
        if !self.shared.observer.is_idle() {
            let event_type = match reason {
                GoneReason::Restarted => "restarted",
                GoneReason::Deleted | GoneReason::Dead => "stopped",
            };
            let label = self.shared.label.lock().expect("label lock").clone();
            self.shared
                .observer
                .lifecycle(event_type, &self.kernel_id, &label)
                .await;
        }
    }

    /// Reconnects with backoff; gives up only when the kernel is gone or nobody holds the connection.
    async fn reconnect(
        &self,
        outgoing: &mut mpsc::UnboundedReceiver<WireMessage>,
    ) -> Option<Socket> {
        let mut delay = Duration::from_millis(100);
        loop {
            if outgoing.is_closed() {
                return None;
            }
            let dialled = Socket::connect(
                &self.rest,
                &self.kernel_id,
                &self.session_id,
                self.v1,
                self.start_timeout,
            );
            match dialled.await {
                Ok(socket) => {
                    tracing::info!(kernel = %self.kernel_id, "kernel websocket reconnected");
                    return Some(socket);
                }
                Err(ConnectError::NotFound(_)) => {
                    self.declare_gone(GoneReason::Deleted).await;
                    return None;
                }
                Err(e) => tracing::debug!(kernel = %self.kernel_id, "reconnect failed: {e}"),
            }
            tokio::time::sleep(delay).await;
            delay = (delay * 2).min(Duration::from_secs(5));
        }
    }
}

enum Pumped {
    CallerGone,
    KernelGone(GoneReason),
    SocketClosed(String, Option<WireMessage>),
}

mod signals;
#[cfg(test)]
mod tests;

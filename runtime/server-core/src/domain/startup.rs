//! Whether the Jupyter Server a domain talks to is up: the embedded one starts while the MCP
//! server already answers (`initialize` and `tools/list` never wait for it), and a call that
//! needs Jupyter waits here, hearing how long it has waited, or learns why it never came.

use std::time::Duration;

use tokio::sync::watch;

use super::{Domain, Error};
use crate::settings::DocumentBackend;

/// How often a waiting call hears that it is still waiting.
const WAIT_REPORT_EVERY: Duration = Duration::from_secs(1);

/// The Jupyter Server's state as far as this domain knows.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum JupyterState {
    Up,
    /// The embedded server was started and has not answered yet.
    Starting,
    /// The embedded server never came up; why, in the launcher's words.
    Failed(String),
}

/// The state, shared by every call of the domain.
#[derive(Debug)]
pub struct JupyterStartup(watch::Sender<JupyterState>);

impl Default for JupyterStartup {
    fn default() -> Self {
        JupyterStartup(watch::Sender::new(JupyterState::Up))
    }
}

impl JupyterStartup {
    pub fn state(&self) -> JupyterState {
        self.0.borrow().clone()
    }

    pub(crate) fn set(&self, state: JupyterState) {
        self.0.send_replace(state);
    }
}

impl Domain {
    /// The embedded Jupyter Server was just started (on a domain made `detached`): calls that
    /// need it wait (`wait_for_jupyter`) until `jupyter_is_up` or `jupyter_failed` says how it
    /// went.
    pub fn jupyter_starting(&self) {
        self.startup.set(JupyterState::Starting);
    }

    /// The embedded Jupyter Server answers: calls waiting for it go on, the `auto` notebook
    /// backend settles on what its environment has (`collaboration`), and what the server
    /// keeps ready on it (spare kernels) is started.
    pub fn jupyter_is_up(&self, collaboration: Option<bool>) {
        if collaboration == Some(false)
            && self.settings.document_backend == DocumentBackend::Auto
            && self.settings.documents.is_none()
        {
            let _ = self.settled_backend.set(DocumentBackend::File);
        }
        self.startup.set(JupyterState::Up);
        self.prepare(&self.jupyter());
    }

    /// The embedded Jupyter Server did not come up; every call that needs it says why.
    pub fn jupyter_failed(&self, reason: String) {
        self.startup.set(JupyterState::Failed(reason));
    }

    /// The notebook backend to open documents with: the operator's choice, with `auto` settled
    /// once the embedded server's environment is known.
    pub fn document_backend(&self) -> DocumentBackend {
        self.settled_backend
            .get()
            .copied()
            .unwrap_or(self.settings.document_backend)
    }

    /// Returns once Jupyter is up, telling `waiting` every second how long it has waited; an
    /// error saying what happened and what to do when it failed to start.
    pub async fn wait_for_jupyter(&self, waiting: impl Fn(Duration)) -> Result<(), Error> {
        // Every tool call passes here: once Jupyter is up, nothing more is set up.
        if *self.startup.0.borrow() == JupyterState::Up {
            return Ok(());
        }
        let mut state = self.startup.0.subscribe();
        let started = tokio::time::Instant::now();
        let mut ticker = tokio::time::interval_at(started + WAIT_REPORT_EVERY, WAIT_REPORT_EVERY);
        loop {
            let now = state.borrow_and_update().clone();
            match now {
                JupyterState::Up => return Ok(()),
                JupyterState::Failed(reason) => {
                    return Err(Error::Failed(
                        format!(
                            "The embedded Jupyter Server could not be started: {reason}. Its own \
                             messages are on this server's stderr: fix what they name and start \
                             this server again, or point it at a running Jupyter Server \
                             (--jupyter-url, or the connect_to_jupyter tool)."
                        )
                        .into(),
                    ));
                }
                JupyterState::Starting => {}
            }
            tokio::select! {
                changed = state.changed() => {
                    if changed.is_err() {
                        return Err(Error::Failed("the server is shutting down".into()));
                    }
                }
                _ = ticker.tick() => waiting(started.elapsed()),
            }
        }
    }
}

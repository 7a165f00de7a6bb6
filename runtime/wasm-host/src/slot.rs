//! A guest that may still be loading. Its tools and hook handler are registered before it is
//! compiled (from what it declared at an earlier start), so they hold this and wait for it.

use std::sync::Arc;
use std::time::Duration;

use tokio::sync::watch;

use super::guest::Guest;

#[derive(Clone)]
enum State {
    Loading,
    Ready(Arc<Guest>),
    /// It was refused; the reason was logged where it happened.
    Refused(String),
}

/// Where a loading guest will be once it is ready (or why it never will).
pub struct GuestSlot {
    /// Its file's name, for messages while its declared name is not known yet.
    name: String,
    state: watch::Sender<State>,
}

/// Why a guest could not be reached.
#[derive(Debug, Clone, thiserror::Error, PartialEq, Eq)]
pub enum SlotError {
    #[error(
        "wasm guest '{name}' is still loading (compiling it can take a minute on its first \
         start) and was not ready within this call's {} ms; try again shortly (`jupyter-mcp-server \
         extension compile` before a start avoids the wait)",
        waited.as_millis()
    )]
    StillLoading { name: String, waited: Duration },
    #[error("wasm guest '{name}' was not loaded: {reason}")]
    Refused { name: String, reason: String },
}

impl GuestSlot {
    pub fn loading(name: &str) -> Arc<Self> {
        Arc::new(GuestSlot {
            name: name.to_owned(),
            state: watch::Sender::new(State::Loading),
        })
    }

    /// A slot for a guest that is already loaded.
    pub fn ready(guest: Arc<Guest>) -> Arc<Self> {
        Arc::new(GuestSlot {
            name: guest.name().to_owned(),
            state: watch::Sender::new(State::Ready(guest)),
        })
    }

    pub fn fill(&self, guest: Arc<Guest>) {
        self.state.send_replace(State::Ready(guest));
    }

    pub fn refuse(&self, reason: String) {
        self.state.send_replace(State::Refused(reason));
    }

    /// The guest if it is ready now; `None` while it loads.
    pub fn now(&self) -> Option<Result<Arc<Guest>, SlotError>> {
        match &*self.state.borrow() {
            State::Loading => None,
            State::Ready(guest) => Some(Ok(guest.clone())),
            State::Refused(reason) => Some(Err(self.refused(reason))),
        }
    }

    /// The guest once it is ready, waiting at most `limit`.
    pub async fn wait(&self, limit: Duration) -> Result<Arc<Guest>, SlotError> {
        if let Some(now) = self.now() {
            return now;
        }
        let mut receiver = self.state.subscribe();
        let settled = tokio::time::timeout(
            limit,
            receiver.wait_for(|state| !matches!(state, State::Loading)),
        )
        .await;
        match settled {
            Ok(Ok(state)) => match &*state {
                State::Ready(guest) => Ok(guest.clone()),
                State::Refused(reason) => Err(self.refused(reason)),
                State::Loading => unreachable!("waited for a settled state"),
            },
            // The sender lives as long as the slot, so only the time can run out.
            Ok(Err(_)) | Err(_) => Err(SlotError::StillLoading {
                name: self.name(),
                waited: limit,
            }),
        }
    }

    /// Its declared name once loaded, else its file's.
    pub fn name(&self) -> String {
        match &*self.state.borrow() {
            State::Ready(guest) => guest.name().to_owned(),
            _ => self.name.clone(),
        }
    }

    fn refused(&self, reason: &str) -> SlotError {
        SlotError::Refused {
            name: self.name.clone(),
            reason: reason.to_owned(),
        }
    }
}

//! Hub mode's face on MCP: the caller a request was authenticated as (put into the request by
//! `mcp::http` after the Hub accepted its token), the MCP sessions each user opened (a session
//! id works only for the user who opened it), and each user's tasks. The per-user state itself
//! is the domain's (`domain::users`).

use std::collections::HashMap;
use std::sync::{Arc, Mutex};

use rmcp::task_manager::TaskManager;

use server_core::domain::users::{Caller, Users};

/// What the transports need in Hub mode.
pub struct HubFront {
    pub users: Arc<Users>,
    /// MCP session id → the user who opened it, and the digest of the token they opened it with.
    sessions: Mutex<HashMap<String, (String, [u8; 32])>>,
    /// Each user's tasks, so a task id names nothing of anyone else's.
    tasks: Mutex<HashMap<String, TaskManager>>,
}

/// A session is the token's that opened it: another token, even the same user's (say one with
/// fewer scopes), starts a session of its own.
fn token_digest(caller: &Caller) -> [u8; 32] {
    use sha2::{Digest, Sha256};
    Sha256::digest(caller.token.expose().as_bytes()).into()
}

/// Sessions remembered before some are forgotten (rmcp ends idle sessions on its own).
const MAX_SESSIONS: usize = 10_000;

impl HubFront {
    pub fn new(users: Users) -> Self {
        HubFront {
            users: Arc::new(users),
            sessions: Mutex::default(),
            tasks: Mutex::default(),
        }
    }

    /// Whether `caller` may use the session `id`: only one they opened (every session id is
    /// handed out through us, so an unknown one is refused too).
    pub fn session_allowed(&self, id: &str, caller: &Caller) -> bool {
        let sessions = self.sessions.lock().expect("sessions lock");
        sessions
            .get(id)
            .is_some_and(|(owner, token)| *owner == caller.user && *token == token_digest(caller))
    }

    /// Remembers who opened a session.
    pub fn session_opened(&self, id: &str, caller: &Caller) {
        let mut sessions = self.sessions.lock().expect("sessions lock");
        if sessions.len() >= MAX_SESSIONS {
            // Forget some (their clients get "session not found" and open a new one); never
            // let an unknown id through.
            let drop: Vec<String> = sessions.keys().take(MAX_SESSIONS / 10).cloned().collect();
            for id in drop {
                sessions.remove(&id);
            }
        }
        sessions.insert(id.to_owned(), (caller.user.clone(), token_digest(caller)));
    }

    pub fn session_closed(&self, id: &str) {
        self.sessions.lock().expect("sessions lock").remove(id);
    }

    /// The caller's own task manager.
    pub fn tasks_of(&self, caller: &Caller) -> TaskManager {
        self.tasks
            .lock()
            .expect("tasks lock")
            .entry(caller.user.clone())
            .or_default()
            .clone()
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use jupyter_client::auth::Secret;

    fn front() -> HubFront {
        let endpoints = jupyter_client::hub::HubEndpoints::new(
            url::Url::parse("http://127.0.0.1:1/").unwrap(),
            None,
        );
        HubFront::new(Users::new(
            jupyter_client::hub::HubClient::new(endpoints),
            server_core::domain::Settings {
                documents: None,
                document_backend: crate::config::DocumentBackend::File,
                execution: crate::config::ExecutionLimits {
                    default_timeout: std::time::Duration::from_secs(1),
                    max_timeout: std::time::Duration::from_secs(1),
                    keepalive: std::time::Duration::from_secs(1),
                },
                output: crate::config::OutputLimits::text(0, true),
                max_file_bytes: 1,
                prewarm: Default::default(),
                kernel_start: Default::default(),
                confirm: Default::default(),
                store: None,
            },
            Arc::default(),
            Arc::default(),
        ))
    }

    fn caller(user: &str) -> Caller {
        Caller {
            user: user.into(),
            token: Secret::new(format!("{user}-token")),
        }
    }

    #[test]
    fn a_session_is_only_its_openers() {
        let hub = front();
        let (alice, bob) = (caller("alice"), caller("bob"));
        assert!(
            !hub.session_allowed("s1", &alice),
            "an unknown id is refused"
        );
        hub.session_opened("s1", &alice);
        assert!(hub.session_allowed("s1", &alice));
        assert!(!hub.session_allowed("s1", &bob));
        // Forgetting sessions under pressure never lets an unknown id through.
        for i in 0..MAX_SESSIONS + 5 {
            hub.session_opened(&format!("x{i}"), &bob);
        }
        assert!(!hub.session_allowed("s1", &bob));
        hub.session_closed("s1");
        assert!(!hub.session_allowed("s1", &alice));
    }
}

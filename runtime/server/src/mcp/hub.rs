//! Hub mode's face on MCP: the caller a request was authenticated as (put into the request by
//! `mcp::http` after the Hub accepted its token), the MCP sessions each user opened (a session
//! id works only for the user who opened it), and each user's tasks. The per-user state itself
//! is the domain's (`domain::users`).

use std::collections::HashMap;
use std::sync::{Arc, Mutex};

use rmcp::task_manager::TaskManager;

use super::session_owners::SessionOwners;
use server_core::domain::users::{Caller, Users};

/// What the transports need in Hub mode.
pub struct HubFront {
    pub users: Arc<Users>,
    /// Each MCP session's opener: the user and the digest of the token they opened it with.
    sessions: SessionOwners,
    /// Each user's tasks, so a task id names nothing of anyone else's.
    tasks: Mutex<HashMap<String, TaskManager>>,
}

/// A session is the token's that opened it: another token, even the same user's (say one with
/// fewer scopes), starts a session of its own.
fn opener(caller: &Caller) -> String {
    use sha2::{Digest, Sha256};
    let token = Sha256::digest(caller.token.expose().as_bytes());
    format!(
        "{} {}",
        caller.user,
        notebook_format::hex::lower_hex(&token)
    )
}

impl HubFront {
    pub fn new(users: Users) -> Self {
        HubFront {
            users: Arc::new(users),
            sessions: SessionOwners::default(),
            tasks: Mutex::default(),
        }
    }

    /// Whether `caller` may use the session `id`: only one they opened with this token.
    pub fn session_allowed(&self, id: &str, caller: &Caller) -> bool {
        self.sessions.allowed(id, Some(&opener(caller)))
    }

    pub fn session_opened(&self, id: &str, caller: &Caller) {
        self.sessions.opened(id, opener(caller));
    }

    pub fn session_closed(&self, id: &str) {
        self.sessions.closed(id);
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
                    memory_budget: server_core::domain::executions::DEFAULT_MEMORY_BUDGET,
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
    fn a_session_is_only_its_openers_token() {
        let hub = front();
        let (alice, bob) = (caller("alice"), caller("bob"));
        assert!(
            !hub.session_allowed("s1", &alice),
            "an unknown id is refused"
        );
        hub.session_opened("s1", &alice);
        assert!(hub.session_allowed("s1", &alice));
        assert!(!hub.session_allowed("s1", &bob));
        let alices_other_token = Caller {
            user: "alice".into(),
            token: Secret::new("another".into()),
        };
        assert!(!hub.session_allowed("s1", &alices_other_token));
        hub.session_closed("s1");
        assert!(!hub.session_allowed("s1", &alice));
    }
}

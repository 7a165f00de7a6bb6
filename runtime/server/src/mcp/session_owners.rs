//! Who opened each MCP session, so a session id works only for its opener: a Hub token, or an
//! OAuth token's holder. Every session id is handed out through us, so one we do not know is
//! refused unless the request names no opener either.

use std::collections::HashMap;
use std::sync::{Mutex, PoisonError};
use std::time::Instant;

/// Sessions remembered before the oldest is forgotten (rmcp ends idle sessions on its own; a
/// forgotten one's client gets "session not found" and opens a new one).
pub const MAX_SESSIONS: usize = 10_000;

#[derive(Default)]
pub struct SessionOwners {
    /// Session id → its opener, and when it was opened.
    owners: Mutex<HashMap<String, (String, Instant)>>,
}

impl SessionOwners {
    /// Remembers that `opener` opened session `id`.
    pub fn opened(&self, id: &str, opener: String) {
        let mut owners = self.owners.lock().unwrap_or_else(PoisonError::into_inner);
        if owners.len() >= MAX_SESSIONS
            && let Some(oldest) = owners
                .iter()
                .min_by_key(|(_, (_, at))| *at)
                .map(|(id, _)| id.clone())
        {
            owners.remove(&oldest);
        }
        owners.insert(id.to_owned(), (opener, Instant::now()));
    }

    /// Whether a request from `presented` may use session `id`: only its opener. A request that
    /// names no opener may use only a session opened without one.
    pub fn allowed(&self, id: &str, presented: Option<&str>) -> bool {
        let owners = self.owners.lock().unwrap_or_else(PoisonError::into_inner);
        match (owners.get(id), presented) {
            (Some((opener, _)), Some(presented)) => opener == presented,
            (None, None) => true,
            _ => false,
        }
    }

    pub fn closed(&self, id: &str) {
        self.owners
            .lock()
            .unwrap_or_else(PoisonError::into_inner)
            .remove(id);
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_session_is_only_its_openers() {
        let owners = SessionOwners::default();
        assert!(
            !owners.allowed("s1", Some("alice")),
            "an unknown id is refused"
        );
        owners.opened("s1", "alice".into());
        assert!(owners.allowed("s1", Some("alice")));
        assert!(!owners.allowed("s1", Some("bob")));
        assert!(!owners.allowed("s1", None));
        // Forgetting sessions under pressure never lets an unknown id through.
        for i in 0..MAX_SESSIONS + 5 {
            owners.opened(&format!("x{i}"), "bob".into());
        }
        assert!(!owners.allowed("s1", Some("bob")));
        owners.closed("x9");
        assert!(!owners.allowed("x9", Some("bob")));
        assert!(
            owners.allowed("never-opened", None),
            "no opener on either side"
        );
    }
}

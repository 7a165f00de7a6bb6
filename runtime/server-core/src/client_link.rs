//! The MCP client of the current call, a shared service beside `confirm`: what a guest's host
//! functions (WIT 0.3.0's `client`) use to ask the person a question of their own, ask the
//! client's model, and report progress on the call.
//!
//! `mcp` puts a [`ClientLink`] around each tool call ([`linked`]), as it puts the confirmer;
//! guests' host functions run on the caller's thread, so they see it. Outside any call (no link)
//! every request is [`Unreached::Unsupported`]. Names no other module of ours.

use std::future::Future;
use std::pin::Pin;
use std::sync::Arc;

use serde_json::Value;

/// The person's answer to a question with a form.
#[derive(Debug, Clone, PartialEq)]
pub enum Elicitation {
    /// Their answer: a JSON object matching the requested schema.
    Accepted(Value),
    Declined,
    Cancelled,
}

/// Why a request did not reach the client, or was not answered.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Unreached {
    /// The client cannot do it: the text says what is missing (it did not declare elicitation
    /// or sampling, a stateless request, no client at all).
    Unsupported(String),
    /// What the request carried is not what MCP accepts (a schema, sampling params).
    Invalid(String),
    /// It was put and failed (the client's error, a lost connection).
    Failed(String),
}

impl std::fmt::Display for Unreached {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            Unreached::Unsupported(m) | Unreached::Invalid(m) | Unreached::Failed(m) => {
                f.write_str(m)
            }
        }
    }
}

pub type LinkFuture<'a, T> = Pin<Box<dyn Future<Output = Result<T, Unreached>> + Send + 'a>>;

/// The client behind a call, as the host functions reach it.
pub trait ClientLink: Send + Sync {
    /// Asks the person `message` with a form (`schema`: an MCP elicitation schema, JSON).
    fn elicit<'a>(&'a self, message: &'a str, schema: Value) -> LinkFuture<'a, Elicitation>;

    /// Asks the client's model: `params` are `sampling/createMessage`'s, the answer its result.
    fn sample(&self, params: Value) -> LinkFuture<'_, Value>;

    /// Progress on the call, for a client that asked for it (dropped otherwise).
    fn progress(&self, done: f64, total: Option<f64>, message: Option<String>);

    /// The MCP session the call belongs to, when it has one that outlives the call.
    fn session(&self) -> Option<Arc<Session>> {
        None
    }
}

/// One MCP session while it lasts: what a service remembers "for this session" (a person's
/// answer) it holds weakly, so it ends with the session.
#[derive(Debug)]
pub struct Session {
    id: u64,
}

impl Session {
    pub fn new() -> Arc<Self> {
        static NEXT: std::sync::atomic::AtomicU64 = std::sync::atomic::AtomicU64::new(1);
        Arc::new(Session {
            id: NEXT.fetch_add(1, std::sync::atomic::Ordering::Relaxed),
        })
    }

    /// A number no other session of this process has.
    pub fn id(&self) -> u64 {
        self.id
    }
}

tokio::task_local! {
    static LINK: Arc<dyn ClientLink>;
}

/// Runs `work` with `link` as the client of every request raised inside it.
pub async fn linked<F: Future>(link: Arc<dyn ClientLink>, work: F) -> F::Output {
    LINK.scope(link, work).await
}

/// The client of the current call, if there is one.
pub fn current() -> Option<Arc<dyn ClientLink>> {
    LINK.try_with(Arc::clone).ok()
}

/// Why there is no client to ask outside a call.
pub const NO_CLIENT: &str = "this call came from no MCP client (a hook event outside any \
                             request, or the server's own work), so there is nobody to ask";

#[cfg(test)]
mod tests {
    use super::*;

    struct Canned;

    impl ClientLink for Canned {
        fn elicit<'a>(&'a self, _: &'a str, _: Value) -> LinkFuture<'a, Elicitation> {
            Box::pin(async { Ok(Elicitation::Declined) })
        }
        fn sample(&self, _: Value) -> LinkFuture<'_, Value> {
            Box::pin(async { Err(Unreached::Unsupported("no sampling".into())) })
        }
        fn progress(&self, _: f64, _: Option<f64>, _: Option<String>) {}
    }

    #[tokio::test]
    async fn the_link_is_seen_only_inside_its_call() {
        assert!(current().is_none());
        let answer = linked(Arc::new(Canned), async {
            let link = current().expect("inside the call");
            link.elicit("?", Value::Null).await
        })
        .await;
        assert_eq!(answer, Ok(Elicitation::Declined));
    }
}

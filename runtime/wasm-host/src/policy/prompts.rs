//! Grant prompts (`extensions.grant-prompts`): what the operator allows to be asked
//! ([`PromptRules`], `[grant_prompts]` in the config file) and what the person answered
//! ([`Prompted`], one per guest), each answer held for the call or the session it was given for
//! and gone with it. The asking itself is the host units' (`crate::host::asking`).

use std::sync::{Arc, Mutex, Weak};
use std::time::SystemTime;

use serde_json::{Value, json};

use super::grants::{Grant, Grants, Wanted};
use server_core::client_link::{ClientLink, Session};

/// The operator's rules for grant prompts.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct PromptRules {
    /// Grants the person is never asked for: as `grants` writes them, a host function without
    /// a notebook covering it on every notebook, or a prefix ending in `*` (`secret:*`, `*`).
    never: Vec<String>,
    /// The person may also answer "always": the grant is then written to the guest's entry in
    /// the config file, as `jupyter-mcp-server grant` writes it.
    pub allow_always: bool,
    /// Hub mode: grants that would cross users (host functions) are never asked for.
    pub hub_mode: bool,
}

impl PromptRules {
    /// The rules, each `never` entry checked (a misspelt grant would silently ask).
    pub fn new(never: Vec<String>, allow_always: bool, hub_mode: bool) -> Result<Self, String> {
        for entry in &never {
            if entry.ends_with('*') {
                continue;
            }
            Grant::parse(entry).map_err(|e| {
                format!(
                    "grant_prompts.never: '{entry}' is no grant ({}); or end it with '*' to \
                     cover every grant it begins",
                    e.replacen("its grants name", "it names", 1)
                )
            })?;
        }
        Ok(PromptRules {
            never,
            allow_always,
            hub_mode,
        })
    }

    /// Whether the operator forbids asking for `grant`.
    pub fn forbids(&self, grant: &Grant) -> bool {
        let text = grant.to_string();
        self.never.iter().any(|entry| match entry.strip_suffix('*') {
            Some(prefix) => text.starts_with(prefix),
            None => {
                entry == &text
                    || matches!(grant, Grant::Function { function, .. } if entry == function.name())
            }
        })
    }
}

/// How long an answer holds.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Hold {
    /// The tool call it was asked in.
    Call,
    /// The MCP session it was asked in.
    Session,
}

impl Hold {
    pub fn as_str(self) -> &'static str {
        match self {
            Hold::Call => "call",
            Hold::Session => "session",
        }
    }
}

enum Holder {
    Call(Weak<dyn ClientLink>),
    Session(Weak<Session>, u64),
}

struct Answer {
    grant: Grant,
    holder: Holder,
    granted: bool,
    at: SystemTime,
}

impl Answer {
    fn alive(&self) -> bool {
        match &self.holder {
            Holder::Call(call) => call.strong_count() > 0,
            Holder::Session(session, _) => session.strong_count() > 0,
        }
    }

    fn holds_for(&self, call: &Arc<dyn ClientLink>, session: Option<&Arc<Session>>) -> bool {
        match &self.holder {
            Holder::Call(held) => std::ptr::addr_eq(held.as_ptr(), Arc::as_ptr(call)),
            Holder::Session(held, _) => {
                session.is_some_and(|s| std::ptr::eq(held.as_ptr(), Arc::as_ptr(s)))
            }
        }
    }
}

/// What the person answered one guest's grant prompts, while the calls and sessions they
/// answered for last. Never written anywhere.
#[derive(Default)]
pub struct Prompted {
    answers: Mutex<Vec<Answer>>,
}

impl std::fmt::Debug for Prompted {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "Prompted({} answers)", self.lock().len())
    }
}

impl Prompted {
    fn lock(&self) -> std::sync::MutexGuard<'_, Vec<Answer>> {
        let mut answers = self
            .answers
            .lock()
            .unwrap_or_else(std::sync::PoisonError::into_inner);
        answers.retain(Answer::alive);
        answers
    }

    /// What the person already said of `wanted` in this call or session: `Some(true)`
    /// granted, `Some(false)` declined in this call (not asked again in it), `None` not asked.
    pub fn decided(
        &self,
        wanted: &Wanted<'_>,
        call: &Arc<dyn ClientLink>,
        session: Option<&Arc<Session>>,
    ) -> Option<bool> {
        let answers = self.lock();
        let mut decided = None;
        for answer in answers.iter().filter(|a| a.holds_for(call, session)) {
            if Grants::of(vec![answer.grant.clone()]).permits(wanted) {
                if answer.granted {
                    return Some(true);
                }
                decided = Some(false);
            }
        }
        decided
    }

    /// Records an answer: granted for `hold`, or declined (held for the call).
    pub fn record(
        &self,
        grant: Grant,
        granted: bool,
        hold: Hold,
        call: &Arc<dyn ClientLink>,
        session: Option<&Arc<Session>>,
    ) {
        let holder = match (hold, session) {
            (Hold::Session, Some(session)) if granted => {
                Holder::Session(Arc::downgrade(session), session.id())
            }
            _ => Holder::Call(Arc::downgrade(call)),
        };
        self.lock().push(Answer {
            grant,
            holder,
            granted,
            at: SystemTime::now(),
        });
    }

    /// Whether some grant the person gave still holds.
    pub fn holds_any(&self) -> bool {
        self.lock().iter().any(|a| a.granted)
    }

    /// Forgets what was granted as `grant` (as `revoke` names it) in every call and session;
    /// how many answers it dropped.
    pub fn forget(&self, grant: &str) -> usize {
        let mut answers = self.lock();
        let before = answers.len();
        // Revoking a host function covers it on every notebook, as granting it does.
        let covered = |a: &Answer| {
            a.grant.to_string() == grant
                || matches!(&a.grant, Grant::Function { function, .. } if function.name() == grant)
        };
        answers.retain(|a| !(a.granted && covered(a)));
        before - answers.len()
    }

    /// The grants the person gave, as `policy EXTENSION` shows them.
    pub fn describe(&self) -> Value {
        let answers = self.lock();
        Value::Array(
            answers
                .iter()
                .filter(|a| a.granted)
                .map(|a| {
                    let seconds =
                        a.at.duration_since(SystemTime::UNIX_EPOCH)
                            .map_or(0, |d| d.as_secs());
                    let mut shown = json!({
                        "grant": a.grant.to_string(),
                        "granted_at_unix": seconds,
                    });
                    match &a.holder {
                        Holder::Call(_) => shown["for"] = json!("call"),
                        Holder::Session(_, id) => {
                            shown["for"] = json!("session");
                            shown["session"] = json!(id);
                        }
                    }
                    shown
                })
                .collect(),
        )
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::policy::grants::{ClientFunction, HostFunction};
    use server_core::client_link::{Elicitation, LinkFuture};

    struct Call;

    impl ClientLink for Call {
        fn elicit<'a>(&'a self, _: &'a str, _: Value) -> LinkFuture<'a, Elicitation> {
            Box::pin(async { Ok(Elicitation::Declined) })
        }
        fn sample(&self, _: Value) -> LinkFuture<'_, Value> {
            Box::pin(async { Ok(Value::Null) })
        }
        fn progress(&self, _: f64, _: Option<f64>, _: Option<String>) {}
    }

    fn call() -> Arc<dyn ClientLink> {
        Arc::new(Call)
    }

    #[test]
    fn the_operators_never_list_covers_grants_functions_and_prefixes() {
        let rules = PromptRules::new(
            vec!["execute-code".into(), "secret:*".into(), "sample".into()],
            false,
            false,
        )
        .unwrap();
        let grant = |g: &str| Grant::parse(g).unwrap();
        assert!(rules.forbids(&grant("execute-code:nb1")));
        assert!(rules.forbids(&grant("secret:API_KEY")));
        assert!(rules.forbids(&grant("sample")));
        assert!(!rules.forbids(&grant("elicit")));
        assert!(!rules.forbids(&grant("read-cells:nb1")));
        let wrong = PromptRules::new(vec!["read-cell".into()], false, false).unwrap_err();
        assert!(wrong.contains("'read-cell' is no grant"), "{wrong}");
    }

    #[test]
    fn answers_hold_for_their_call_or_session_and_end_with_it() {
        let prompted = Prompted::default();
        let sample = Wanted::Client(ClientFunction::Sample);
        let read = Wanted::Function {
            function: HostFunction::ReadCells,
            notebook: Some("nb"),
        };
        let (first, session) = (call(), Session::new());
        prompted.record(
            Grant::Client(ClientFunction::Sample),
            true,
            Hold::Call,
            &first,
            Some(&session),
        );
        assert_eq!(
            prompted.decided(&sample, &first, Some(&session)),
            Some(true)
        );
        let second = call();
        assert_eq!(prompted.decided(&sample, &second, Some(&session)), None);
        prompted.record(
            read.grant().unwrap(),
            true,
            Hold::Session,
            &second,
            Some(&session),
        );
        prompted.record(
            Grant::Secret("K".into()),
            false,
            Hold::Session,
            &second,
            Some(&session),
        );
        // A decline holds for its call only.
        assert_eq!(
            prompted.decided(&Wanted::Secret("K"), &second, Some(&session)),
            Some(false)
        );
        assert_eq!(
            prompted.decided(&Wanted::Secret("K"), &first, Some(&session)),
            None
        );
        drop(second);
        let third = call();
        assert_eq!(prompted.decided(&read, &third, Some(&session)), Some(true));
        assert_eq!(prompted.decided(&read, &third, Some(&Session::new())), None);
        let shown = prompted.describe();
        assert_eq!(shown.as_array().unwrap().len(), 2, "{shown}");
        assert_eq!(prompted.forget("read-cells"), 1);
        assert_eq!(prompted.decided(&read, &third, Some(&session)), None);
        drop(first);
        drop(session);
        assert_eq!(prompted.describe(), json!([]));
    }
}

//! Grant prompts (capability `extensions.grant-prompts`, off by default): a use the operator did
//! not grant may instead be put to the person, through the call's MCP client (elicitation),
//! naming the extension, the grant, what it lets the guest do and the tool call it came up in.
//! They grant it for this call or this session (or, when the operator allows it, for good:
//! written to the config as `jupyter-mcp-server grant` writes it), or decline and it stays
//! refused. Called by the host units whose uses are granted by name (host functions, client
//! functions, secrets) where they would refuse; not a unit itself, since it holds no slice of
//! the store.
//!
//! Never asked: while the capability is off, for a grant the operator lists in
//! `[grant_prompts] never`, in Hub mode for a grant that would cross users, outside a call from
//! a client, or again in a call where the person declined it. Every question is an
//! `extension.grant_prompt` use in the call's span and a line in the log.

use std::time::{Instant, SystemTime};

use opentelemetry::KeyValue;
use serde_json::{Value, json};

use crate::policy::Policy;
use crate::policy::grants::{Grant, Wanted};
use crate::policy::prompts::Hold;
use crate::settings::GuestSettings;
use crate::wait::time_boxed;
use server_core::capabilities::GRANT_PROMPTS;
use server_core::client_link::{self, Elicitation, Unreached};
use server_core::hooks::{CallScope, GuestUse};

/// Why a use that was not granted stays refused.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum NotAsked {
    /// `extensions.grant-prompts` is off.
    Off,
    /// The operator forbids asking for it (`[grant_prompts] never`).
    Forbidden(String),
    /// Hub mode: it would cross users.
    CrossesUsers(String),
    /// There is nobody to ask, or the client cannot be asked: why.
    CannotAsk(String),
    /// The person said no (or cancelled) now, or earlier in this call.
    Declined { earlier: bool },
}

impl NotAsked {
    /// What the guest's refusal adds after its own words ("…; {note}"), empty while prompts
    /// are off.
    pub fn note(&self) -> String {
        match self {
            NotAsked::Off => String::new(),
            NotAsked::Forbidden(grant) => format!(
                "; the operator forbids asking the person for \"{grant}\" ([grant_prompts] never)"
            ),
            NotAsked::CrossesUsers(grant) => format!(
                "; \"{grant}\" is never asked for in Hub mode (every user's calls share the \
                 extension)"
            ),
            NotAsked::CannotAsk(why) => format!("; the person could not be asked: {why}"),
            NotAsked::Declined { earlier: false } => {
                "; the person declined to grant it when asked".to_owned()
            }
            NotAsked::Declined { earlier: true } => {
                "; the person declined to grant it earlier in this call".to_owned()
            }
        }
    }

    /// What the operator's log line adds: how the person could be asked instead.
    pub fn hint(&self) -> &'static str {
        match self {
            NotAsked::Off => {
                ", or turn on the capability extensions.grant-prompts so the person is asked"
            }
            _ => "",
        }
    }
}

/// Whether prompts may grant anything now: the capability is on, or the person granted
/// something that still holds. A host function checks this before it knows the notebook.
pub fn open(settings: &GuestSettings) -> bool {
    prompts_on(settings) || settings.prompted.holds_any()
}

fn prompts_on(settings: &GuestSettings) -> bool {
    settings
        .link
        .get()
        .is_some_and(|(domain, _)| domain.capabilities.enabled(GRANT_PROMPTS))
}

/// Whether `wanted` may go ahead: granted by the operator (`policy`), by the person earlier in
/// this call or session, or by the person now, asked through the call's client and waited for
/// no longer than `deadline`. Runs on the guest's (blocking-permitted) thread, inside the
/// call's scope.
pub fn permit(
    settings: &GuestSettings,
    policy: &Policy,
    deadline: Instant,
    wanted: Wanted<'_>,
) -> Result<(), NotAsked> {
    if policy.grants.permits(&wanted) {
        return Ok(());
    }
    let link = client_link::current();
    let session = link.as_ref().and_then(|l| l.session());
    if let Some(link) = &link {
        match settings.prompted.decided(&wanted, link, session.as_ref()) {
            Some(true) => return Ok(()),
            Some(false) => return Err(NotAsked::Declined { earlier: true }),
            None => {}
        }
    }
    if !prompts_on(settings) {
        return Err(NotAsked::Off);
    }
    let Some(grant) = wanted.grant() else {
        return Err(NotAsked::Off);
    };
    let rules = settings.link.prompt_rules();
    if rules.forbids(&grant) {
        return Err(NotAsked::Forbidden(grant.to_string()));
    }
    if rules.hub_mode && matches!(grant, Grant::Function { .. }) {
        return Err(NotAsked::CrossesUsers(grant.to_string()));
    }
    let Some(link) = link else {
        return Err(NotAsked::CannotAsk(client_link::NO_CLIENT.to_owned()));
    };
    let started = SystemTime::now();
    let tool = CallScope::current().and_then(|scope| scope.tool.clone());
    let question = question(settings.name(), &grant, &wanted, tool.as_deref());
    let asked = time_boxed(
        deadline,
        &settings.stop,
        link.elicit(&question, schema(rules.allow_always)),
    )
    .unwrap_or_else(|why| {
        Err(Unreached::Failed(format!(
            "no answer came before {}",
            why.describe_short()
        )))
    });
    let (outcome, answer) = match asked {
        Ok(Elicitation::Accepted(content)) => {
            let hold = match content.get("grant").and_then(Value::as_str) {
                Some("session") => Some(Hold::Session),
                Some("always") if rules.allow_always => None,
                _ => Some(Hold::Call),
            };
            let hold = hold.or_else(|| always(settings, &grant, rules.hub_mode));
            if let Some(hold) = hold {
                settings
                    .prompted
                    .record(grant.clone(), true, hold, &link, session.as_ref());
            }
            let (answer, lasting) = match hold {
                Some(Hold::Call) => ("call", "this call"),
                Some(Hold::Session) => ("session", "this session"),
                None => ("always", "good, as the operator's `grant` would"),
            };
            tracing::info!(
                guest = settings.name(),
                "the person granted \"{grant}\" for {lasting} when asked{}",
                tool.as_deref()
                    .map(|t| format!(" (in a call of tool '{t}')"))
                    .unwrap_or_default()
            );
            (Ok(()), answer)
        }
        Ok(declined @ (Elicitation::Declined | Elicitation::Cancelled)) => {
            settings
                .prompted
                .record(grant.clone(), false, Hold::Call, &link, session.as_ref());
            tracing::info!(
                guest = settings.name(),
                "the person declined to grant \"{grant}\" when asked"
            );
            let answer = if declined == Elicitation::Declined {
                "decline"
            } else {
                "cancel"
            };
            (Err(NotAsked::Declined { earlier: false }), answer)
        }
        Err(Unreached::Unsupported(why) | Unreached::Invalid(why) | Unreached::Failed(why)) => {
            (Err(NotAsked::CannotAsk(why)), "unasked")
        }
    };
    GuestUse::ended(
        "extension.grant_prompt",
        started,
        vec![
            KeyValue::new("extension.name", settings.name().to_owned()),
            KeyValue::new("grant", grant.to_string()),
            KeyValue::new("grant_prompt.answer", answer),
        ],
    )
    .record(CallScope::current().as_ref());
    outcome
}

/// "Always": written to the guest's entry in the config file, as `grant` writes it (`None`);
/// when it cannot be (no file, a write error), held for the session instead and the log says
/// why.
fn always(settings: &GuestSettings, grant: &Grant, hub_mode: bool) -> Option<Hold> {
    let text = grant.to_string();
    let written = settings
        .link
        .policies
        .change(settings.name(), &text, true, hub_mode);
    match written {
        Ok(shown) if shown["persisted_in"].is_string() => None,
        Ok(_) => {
            tracing::warn!(
                guest = settings.name(),
                "\"{text}\" cannot be written to a config file (the guest was not loaded from \
                 one); it holds until the server stops"
            );
            None
        }
        Err(e) => {
            tracing::warn!(
                guest = settings.name(),
                "could not grant \"{text}\" for good ({e}); it holds for this session"
            );
            Some(Hold::Session)
        }
    }
}

/// The question: who asks, for what, what it would let them do, and where it came up.
fn question(guest: &str, grant: &Grant, wanted: &Wanted<'_>, tool: Option<&str>) -> String {
    let during = match tool {
        Some(tool) => format!(" during the call of tool '{tool}'"),
        None => String::new(),
    };
    format!(
        "The extension '{guest}' asked{during} for a permission the operator did not give it: \
         \"{grant}\", to {}. Grant it?",
        wanted.effect()
    )
}

/// The form: how long the grant holds ("always" only when the operator allows it).
fn schema(allow_always: bool) -> Value {
    let mut choices = vec![
        json!({"const": "call", "title": "For this call only"}),
        json!({"const": "session", "title": "For the rest of this session"}),
    ];
    if allow_always {
        choices
            .push(json!({"const": "always", "title": "Always (written to the server's config)"}));
    }
    json!({
        "type": "object",
        "properties": {
            "grant": {
                "type": "string",
                "title": "Grant it",
                "description": "How long the extension keeps this permission",
                "oneOf": choices,
                "default": "call",
            }
        },
        "required": ["grant"],
    })
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::policy::grants::{ClientFunction, HostFunction};

    #[test]
    fn the_question_names_the_extension_the_grant_and_the_call() {
        let wanted = Wanted::Function {
            function: HostFunction::ReadCells,
            notebook: Some("nb1"),
        };
        let asked = question(
            "audit",
            &wanted.grant().unwrap(),
            &wanted,
            Some("summarize"),
        );
        assert!(asked.contains("'audit'"), "{asked}");
        assert!(asked.contains("\"read-cells:nb1\""), "{asked}");
        assert!(
            asked.contains("read the cells of the notebook 'nb1'"),
            "{asked}"
        );
        assert!(asked.contains("call of tool 'summarize'"), "{asked}");
    }

    #[test]
    fn the_form_is_an_mcp_elicitation_schema_with_always_only_when_allowed() {
        for allow_always in [false, true] {
            let form = schema(allow_always);
            let parsed: Result<rmcp::model::ElicitationSchema, _> =
                serde_json::from_value(form.clone());
            assert!(parsed.is_ok(), "{form}: {parsed:?}");
            let choices = form["properties"]["grant"]["oneOf"].as_array().unwrap();
            assert_eq!(choices.len(), if allow_always { 3 } else { 2 });
        }
    }

    #[test]
    fn without_the_capability_nothing_is_asked() {
        let settings = GuestSettings::for_tests("g");
        let policy = settings.policy.get();
        let far = Instant::now() + std::time::Duration::from_secs(5);
        assert_eq!(
            permit(
                &settings,
                &policy,
                far,
                Wanted::Client(ClientFunction::Sample)
            ),
            Err(NotAsked::Off)
        );
        assert!(!open(&settings));
        assert_eq!(
            NotAsked::Forbidden("sample".into()).note(),
            "; the operator forbids asking the person for \"sample\" ([grant_prompts] never)"
        );
    }
}

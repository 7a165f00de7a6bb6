//! Talking back to the MCP client of the call a guest runs in (WIT 0.3.0's `client`): a question
//! with a form of the guest's own (`elicit`), the client's model (`sample`), progress.
//!
//! - **Slice** ([`ClientState`]): when this call last reported progress (progress is
//!   rate-limited), reached as a [`ClientHost`] that also borrows the call's clock.
//! - **Policy check**: `elicit` and `sample` need their grant (`grants`, typed in
//!   `policy::grants`); progress needs none. The client is the call's, found through the shared
//!   `client_link` service that `mcp` sets around each tool call (the guest runs on the caller's
//!   thread, so it sees it); a client that lacks the capability answers `unsupported-by-client`.
//!   Each wait is off the guest's CPU clock and no longer than the call's deadline.
//! - **Linker registration** ([`link`]): the `client` interface of WIT 0.3.0.
//! - **Spans**: one `extension.client` use per question or sampling request, allowed or refused,
//!   with a short summary (never the answer's content).

use std::sync::Arc;
use std::time::{Duration, Instant, SystemTime};

use opentelemetry::KeyValue;
use serde_json::Value;
use wasmtime::component::{HasSelf, Linker};
use wasmtime_wasi::WasiCtxBuilder;

use super::unit::{HostCallError, HostResult, HostUnit};
use crate::asking::{self, NotAsked};
use crate::limits::CallClock;
use crate::policy::Snapshot;
use crate::policy::grants::{ClientFunction, Wanted};
use crate::settings::GuestSettings;
use crate::v0_3_0;
use crate::wait::time_boxed;
use server_core::client_link::{self, Elicitation, Unreached};
use server_core::hooks::{CallScope, GuestUse};

/// The shortest gap between two progress reports of one call; reports in between are dropped,
/// except the one that says the work is done.
const PROGRESS_GAP: Duration = Duration::from_millis(100);

/// How much of a question a span shows.
const SUMMARY_CHARS: usize = 80;

/// The client functions' slice of a guest's store.
pub struct ClientState {
    settings: Arc<GuestSettings>,
    /// When this call last sent progress.
    last_progress: Option<Instant>,
}

impl HostUnit for ClientState {
    fn new(settings: &Arc<GuestSettings>, _: &Snapshot, _: &mut WasiCtxBuilder) -> Self {
        ClientState {
            settings: settings.clone(),
            last_progress: None,
        }
    }

    fn start_call(&mut self, _: Instant) {
        self.last_progress = None;
    }
}

/// The client functions of one store: its slice and the call's clock, borrowed together.
pub struct ClientHost<'a> {
    pub state: &'a mut ClientState,
    pub clock: &'a mut CallClock,
}

/// The `client` interface of WIT 0.3.0, for store data implementing it.
pub fn link<T>(linker: &mut Linker<T>) -> wasmtime::Result<()>
where
    T: v0_3_0::client::Host + 'static,
{
    v0_3_0::client::add_to_linker::<T, HasSelf<T>>(linker, |s| s)
}

/// What a question's answer was, in host terms.
#[derive(Debug, Clone, PartialEq)]
pub enum Elicited {
    /// Their answer, a JSON object as text.
    Accepted(String),
    Declined,
    Cancelled,
}

impl ClientHost<'_> {
    /// Asks the person `message` with the form `schema` (JSON text); needs `elicit`.
    pub fn elicit(&mut self, message: &str, schema: &str) -> HostResult<Elicited> {
        let summary = vec![
            KeyValue::new("client.message", summary(message)),
            KeyValue::new("client.message_chars", message.chars().count() as i64),
        ];
        let schema: Result<Value, _> = serde_json::from_str(schema);
        let message = message.to_owned();
        let outcome = self.talk(ClientFunction::Elicit, summary, |link| async move {
            let schema = schema.map_err(|e| {
                Unreached::Invalid(format!("the requested schema is not JSON: {e}"))
            })?;
            link.elicit(&message, schema).await
        });
        outcome.map(|answer| match answer {
            Elicitation::Accepted(content) => Elicited::Accepted(content.to_string()),
            Elicitation::Declined => Elicited::Declined,
            Elicitation::Cancelled => Elicited::Cancelled,
        })
    }

    /// Asks the client's model; `request` is the JSON of `sampling/createMessage`'s params, the
    /// answer the JSON of its result. Needs `sample`.
    pub fn sample(&mut self, request: &str) -> HostResult<String> {
        let params: Result<Value, _> = serde_json::from_str(request);
        let mut summary = Vec::new();
        if let Ok(params) = &params {
            let messages = params["messages"].as_array().map_or(0, Vec::len);
            summary.push(KeyValue::new("client.messages", messages as i64));
            if let Some(max) = params["maxTokens"].as_i64() {
                summary.push(KeyValue::new("client.max_tokens", max));
            }
        }
        let answer = self.talk(ClientFunction::Sample, summary, |link| async move {
            let params =
                params.map_err(|e| Unreached::Invalid(format!("the request is not JSON: {e}")))?;
            link.sample(params).await
        });
        answer.map(|result| result.to_string())
    }

    /// Reports progress to a client that asked for it; at most one report per
    /// [`PROGRESS_GAP`] (the last, `done == total`, always goes).
    pub fn progress(&mut self, done: f64, total: Option<f64>, message: Option<String>) {
        let finished = total.is_some_and(|t| done >= t);
        let now = Instant::now();
        if !finished
            && self
                .state
                .last_progress
                .is_some_and(|last| now.duration_since(last) < PROGRESS_GAP)
        {
            return;
        }
        if !done.is_finite() || total.is_some_and(|t| !t.is_finite()) {
            return;
        }
        self.state.last_progress = Some(now);
        if let Some(link) = client_link::current() {
            link.progress(done, total, message);
        }
    }

    /// Every question and sampling request passes here, off the guest's CPU clock: refused
    /// unless granted; otherwise `work` runs with the call's client while this (blocking-
    /// permitted) thread waits, no longer than the call's deadline.
    fn talk<R, F, Fut>(
        &mut self,
        function: ClientFunction,
        mut attributes: Vec<KeyValue>,
        work: F,
    ) -> HostResult<R>
    where
        F: FnOnce(Arc<dyn client_link::ClientLink>) -> Fut,
        Fut: std::future::Future<Output = Result<R, Unreached>>,
        R: Answered,
    {
        let settings = self.state.settings.clone();
        let deadline = self.clock.deadline;
        let started = SystemTime::now();
        let policy = settings.policy.get();
        // Read here, on the caller's thread, inside the call's task-local scope.
        let link = client_link::current();
        let outcome = self.clock.off_the_clock(|| {
            if let Err(why) = asking::permit(&settings, &policy, deadline, Wanted::Client(function))
            {
                return Err(refuse(&settings, function, &why));
            }
            let Some(link) = link else {
                return Err(HostCallError::UnsupportedByClient(
                    client_link::NO_CLIENT.to_owned(),
                ));
            };
            time_boxed(deadline, &settings.stop, work(link))
                .unwrap_or_else(|why| Err(Unreached::Failed(why.describe_short().to_owned())))
                .map_err(|e| match e {
                    Unreached::Unsupported(m) => HostCallError::UnsupportedByClient(m),
                    Unreached::Invalid(m) => HostCallError::Invalid(m),
                    Unreached::Failed(m) => HostCallError::Failed(m),
                })
        });
        attributes.extend([
            KeyValue::new("extension.name", settings.name().to_owned()),
            KeyValue::new("client.function", function.name()),
            KeyValue::new(
                "allowed",
                !matches!(outcome, Err(HostCallError::NotGranted(_))),
            ),
        ]);
        match &outcome {
            Ok(answer) => attributes.push(KeyValue::new("client.answer", answer.kind())),
            Err(e) => {
                attributes.push(KeyValue::new("error", true));
                attributes.push(KeyValue::new("error.message", format!("{e:?}")));
            }
        }
        GuestUse::ended("extension.client", started, attributes)
            .record(CallScope::current().as_ref());
        if Instant::now() >= deadline {
            // The guest gets the error back, and the epoch check ends it as soon as it runs on.
            self.clock.stopped = Some(crate::limits::Stopped::Wall);
        }
        outcome
    }
}

/// What a span says of an answer (never its content).
trait Answered {
    fn kind(&self) -> &'static str;
}

impl Answered for Elicitation {
    fn kind(&self) -> &'static str {
        match self {
            Elicitation::Accepted(_) => "accept",
            Elicitation::Declined => "decline",
            Elicitation::Cancelled => "cancel",
        }
    }
}

impl Answered for Value {
    fn kind(&self) -> &'static str {
        "sampled"
    }
}

/// The first characters of `text`, on one line.
fn summary(text: &str) -> String {
    let line: String = text
        .chars()
        .map(|c| if c.is_control() { ' ' } else { c })
        .take(SUMMARY_CHARS)
        .collect();
    if text.chars().count() > SUMMARY_CHARS {
        format!("{line}…")
    } else {
        line
    }
}

/// The refusal, with a line in the operator's log saying how to grant it.
fn refuse(settings: &GuestSettings, function: ClientFunction, why: &NotAsked) -> HostCallError {
    tracing::warn!(
        guest = settings.name(),
        "refused a call to client function '{function}': not granted{note}. To allow it, add \
         \"{function}\" to grants of this guest's [[extension]] entry in the config file{hint}",
        note = why.note(),
        hint = why.hint()
    );
    HostCallError::NotGranted(format!(
        "client function '{function}' is not granted to '{}'; the operator can add \"{function}\" \
         to this guest's grants{}",
        settings.name(),
        why.note()
    ))
}

#[cfg(test)]
mod tests {
    use super::*;
    use server_core::client_link::{ClientLink, LinkFuture};

    fn host_for(grants: &[&str]) -> (ClientState, CallClock) {
        let settings = Arc::new(GuestSettings::for_tests_with("g", grants));
        let state = ClientState::new(
            &settings,
            &settings.policy.snapshot(),
            &mut WasiCtxBuilder::new(),
        );
        let mut clock = CallClock::new(Duration::from_secs(1));
        clock.start(
            Instant::now() + Duration::from_secs(1),
            Duration::from_secs(1),
        );
        (state, clock)
    }

    struct Sees(std::sync::Mutex<Vec<f64>>);

    impl ClientLink for Sees {
        fn elicit<'a>(&'a self, _: &'a str, schema: Value) -> LinkFuture<'a, Elicitation> {
            Box::pin(async move { Ok(Elicitation::Accepted(schema)) })
        }
        fn sample(&self, _: Value) -> LinkFuture<'_, Value> {
            Box::pin(async {
                Err(Unreached::Unsupported(
                    "did not declare 'sampling'".to_owned(),
                ))
            })
        }
        fn progress(&self, done: f64, _: Option<f64>, _: Option<String>) {
            self.0.lock().unwrap().push(done);
        }
    }

    #[test]
    fn ungranted_is_refused_and_no_client_is_unsupported() {
        let (mut state, mut clock) = host_for(&[]);
        let mut host = ClientHost {
            state: &mut state,
            clock: &mut clock,
        };
        match host.elicit("?", "{}") {
            Err(HostCallError::NotGranted(m)) => {
                assert!(m.contains("'elicit' is not granted to 'g'"), "{m}")
            }
            other => panic!("{other:?}"),
        }
        let (mut state, mut clock) = host_for(&["sample"]);
        let mut host = ClientHost {
            state: &mut state,
            clock: &mut clock,
        };
        assert!(matches!(
            host.sample("{}"),
            Err(HostCallError::UnsupportedByClient(_))
        ));
    }

    #[tokio::test(flavor = "multi_thread", worker_threads = 1)]
    async fn a_linked_call_reaches_its_client_and_progress_is_rate_limited() {
        let seen = Arc::new(Sees(Default::default()));
        let link: Arc<dyn ClientLink> = seen.clone();
        client_link::linked(link, async {
            tokio::task::block_in_place(|| {
                let (mut state, mut clock) = host_for(&["elicit", "sample"]);
                let mut host = ClientHost {
                    state: &mut state,
                    clock: &mut clock,
                };
                let answer = host.elicit("Name?", r#"{"type":"object"}"#).unwrap();
                assert_eq!(answer, Elicited::Accepted(r#"{"type":"object"}"#.into()));
                match host.sample(r#"{"messages":[],"maxTokens":5}"#) {
                    Err(HostCallError::UnsupportedByClient(m)) => {
                        assert!(m.contains("sampling"), "{m}")
                    }
                    other => panic!("{other:?}"),
                }
                for i in 0..5 {
                    host.progress(f64::from(i), Some(10.0), None);
                }
                host.progress(10.0, Some(10.0), Some("done".into()));
            })
        })
        .await;
        assert_eq!(*seen.0.lock().unwrap(), [0.0, 10.0]);
    }
}

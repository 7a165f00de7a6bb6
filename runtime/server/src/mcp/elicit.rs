//! The person behind a tool call, asked through MCP elicitation (`elicitation/create`, form
//! mode, no fields: the message is the question, accept/decline/cancel the answer). It is the
//! [`Confirmer`] the confirm service asks while the call runs. Beside it, [`PeerClient`], the
//! [`ClientLink`] guests talk back through: questions with a form of their own, sampling
//! (`sampling/createMessage`), and progress into the call's queue.
//!
//! The question rides the stream of the request it belongs to (the request's id is put on it,
//! so Streamable HTTP sends it on that request's response stream even from a guest's host
//! function); a call running as a task after its request was answered falls back to the
//! session's standalone stream. A stateless 2026-07-28 request has no stream to ask on: its
//! question goes back with the call's answer (`input_required`, multi round-trip requests), keyed
//! by a nonce issued for that question, and the client's retry carries the person's answer under
//! that key, which counts once.

use std::collections::BTreeMap;
use std::sync::{Arc, Mutex, PoisonError};
use std::time::{Duration, Instant};

use rmcp::model::{
    ClientResult, ElicitRequest, ElicitRequestParams, ElicitationAction, ElicitationSchema,
    InputRequest, InputRequests, InputRequiredResult, InputResponses, RequestId, ServerRequest,
};
#[allow(deprecated)]
use rmcp::model::{CreateMessageRequest, CreateMessageRequestParams};
use rmcp::service::{OriginatingRequestId, RequestContext};
use rmcp::{Peer, RoleServer};
use serde_json::Value;

use crate::tools::ProgressReporter;
use server_core::client_link::{ClientLink, Elicitation, LinkFuture, Session, Unreached};
use server_core::confirm::{Answer, AnswerFuture, Confirmer};

/// Whether this request's client can be asked, and how.
enum Reach {
    Asks {
        peer: Peer<RoleServer>,
        origin: RequestId,
    },
    /// A stateless 2026-07-28 request: a question goes back with the call's answer as an input
    /// request, and the client calls again with the person's answer.
    RoundTrip {
        /// What the client answered on this retry, by input request key.
        answers: InputResponses,
        /// The questions this round defers to the client, by key.
        deferred: Mutex<BTreeMap<String, String>>,
    },
    /// Why not: the text completes "…, and {why}".
    Cannot(String),
}

pub(super) struct PeerConfirmer {
    reach: Reach,
}

impl PeerConfirmer {
    /// `answers`: the input responses the request carries (a retry); `round_trips`: whether a
    /// question may go back with the answer (not for a task, whose answer is its handle).
    pub(super) fn for_request(
        context: &RequestContext<RoleServer>,
        answers: Option<InputResponses>,
        round_trips: bool,
    ) -> Self {
        let stateless = context
            .meta
            .protocol_version()
            .is_some_and(|v| !v.has_initialize());
        let form = context
            .client_capabilities()
            .and_then(|c| c.elicitation)
            .is_some_and(|e| e.form.is_some() || e.url.is_none());
        let reach = if !form {
            Reach::Cannot(
                "this client did not declare the 'elicitation' capability (form mode), so it \
                 cannot be asked"
                    .to_owned(),
            )
        } else if stateless && round_trips {
            Reach::RoundTrip {
                answers: answers.unwrap_or_default(),
                deferred: Mutex::default(),
            }
        } else if stateless {
            Reach::Cannot(
                "this call runs as a task of a stateless 2026-07-28 request, whose answer is the \
                 task's handle, so no question can go back with it; call the tool without a task"
                    .to_owned(),
            )
        } else {
            Reach::Asks {
                peer: context.peer.clone(),
                origin: context.id.clone(),
            }
        };
        PeerConfirmer { reach }
    }

    /// The questions deferred to the client's retry, as the call's `input_required` answer
    /// (none when nothing was deferred).
    pub(super) fn input_required(&self) -> Option<InputRequiredResult> {
        let Reach::RoundTrip { deferred, .. } = &self.reach else {
            return None;
        };
        let deferred = deferred.lock().unwrap_or_else(PoisonError::into_inner);
        if deferred.is_empty() {
            return None;
        }
        let requests: InputRequests = deferred
            .iter()
            .map(|(key, message)| {
                (
                    key.clone(),
                    InputRequest::Elicitation(question(message.clone())),
                )
            })
            .collect();
        Some(InputRequiredResult::from_input_requests(requests))
    }
}

/// A yes-or-no question: form mode with no fields (the message is the question).
fn question(message: String) -> ElicitRequest {
    ElicitRequest::new(ElicitRequestParams::FormElicitationParams {
        meta: None,
        message,
        requested_schema: ElicitationSchema::new(BTreeMap::new()),
    })
}

/// Questions that went back with a call's answer (`input_required`) and wait for the client's
/// retry, by input request key. A key is a fresh random nonce, so no answer can be written before
/// its question was put, and a key is taken when its answer is read, so an answer counts once
/// (a retry sent again, or an old answer replayed into a new call, is asked again). Kept in this
/// process: a retry that reaches another replica is asked again there, never let through.
static OUTSTANDING: std::sync::LazyLock<Mutex<BTreeMap<String, Outstanding>>> =
    std::sync::LazyLock::new(Mutex::default);

/// How long a deferred question waits for its retry, and how many may wait at once (the oldest
/// go first).
const QUESTION_TTL: Duration = Duration::from_secs(15 * 60);
const MAX_OUTSTANDING: usize = 4096;

struct Outstanding {
    question: [u8; 32],
    asked: Instant,
}

fn digest(message: &str) -> [u8; 32] {
    use sha2::{Digest, Sha256};
    Sha256::digest(message.as_bytes()).into()
}

/// A new key for `message`, remembered until its answer comes back or it expires.
fn issue_key(message: &str) -> String {
    let key = format!("confirm-{}", uuid::Uuid::new_v4().simple());
    let mut outstanding = OUTSTANDING.lock().unwrap_or_else(PoisonError::into_inner);
    outstanding.retain(|_, waiting| waiting.asked.elapsed() < QUESTION_TTL);
    while outstanding.len() >= MAX_OUTSTANDING {
        let Some(oldest) = outstanding
            .iter()
            .min_by_key(|(_, waiting)| waiting.asked)
            .map(|(key, _)| key.clone())
        else {
            break;
        };
        outstanding.remove(&oldest);
    }
    outstanding.insert(
        key.clone(),
        Outstanding {
            question: digest(message),
            asked: Instant::now(),
        },
    );
    key
}

/// The answer in `answers` to `message`, if one was given under a key this server issued for
/// that very question; the key is spent.
fn take_answer<'a>(answers: &'a InputResponses, message: &str) -> Option<&'a Value> {
    let question = digest(message);
    let mut outstanding = OUTSTANDING.lock().unwrap_or_else(PoisonError::into_inner);
    let (key, response) = answers.iter().find(|(key, _)| {
        outstanding.get(key.as_str()).is_some_and(|waiting| {
            waiting.question == question && waiting.asked.elapsed() < QUESTION_TTL
        })
    })?;
    outstanding.remove(key.as_str());
    Some(response)
}

/// The person's answer, however it came (a session's reply, or a stateless retry's response).
fn answered(action: Option<ElicitationAction>) -> Answer {
    match action {
        Some(ElicitationAction::Accept) => Answer::Accepted,
        Some(ElicitationAction::Decline) => Answer::Declined,
        // Cancel, anything unreadable, and any action a later revision adds: no yes.
        _ => Answer::Cancelled,
    }
}

impl Confirmer for PeerConfirmer {
    fn ask<'a>(&'a self, message: &'a str) -> AnswerFuture<'a> {
        Box::pin(async move {
            let (peer, origin) = match &self.reach {
                Reach::Cannot(why) => return Answer::Unavailable(why.clone()),
                Reach::RoundTrip { answers, deferred } => {
                    if let Some(response) = take_answer(answers, message) {
                        let action = response
                            .get("action")
                            .and_then(|a| serde_json::from_value(a.clone()).ok());
                        return answered(action);
                    }
                    deferred
                        .lock()
                        .unwrap_or_else(PoisonError::into_inner)
                        .insert(issue_key(message), message.to_owned());
                    return Answer::Deferred;
                }
                Reach::Asks { peer, origin } => (peer, origin),
            };
            let mut request = question(message.to_owned());
            request
                .extensions
                .insert(OriginatingRequestId(origin.clone()));
            match peer
                .send_request(ServerRequest::ElicitRequest(request))
                .await
            {
                Ok(ClientResult::ElicitResult(result)) => answered(Some(result.action)),
                Ok(_) => Answer::Unavailable(
                    "the client answered the question with something other than an \
                     elicitation result"
                        .to_owned(),
                ),
                Err(e) => Answer::Unavailable(format!("the question could not be put ({e})")),
            }
        })
    }

    fn deferred(&self) -> bool {
        match &self.reach {
            Reach::RoundTrip { deferred, .. } => !deferred
                .lock()
                .unwrap_or_else(PoisonError::into_inner)
                .is_empty(),
            _ => false,
        }
    }
}

/// Why a stateless request cannot carry a request to its client.
const STATELESS: &str = "this request is a stateless 2026-07-28 one, on which a server may not \
                         send requests to its client; connect with a 2025-11-25 session \
                         (initialize)";

/// The request's client as guests reach it: what it declared, and the call's progress queue.
pub(super) struct PeerClient {
    peer: Peer<RoleServer>,
    origin: RequestId,
    stateless: bool,
    /// It declared form elicitation.
    form: bool,
    /// It declared sampling.
    sampling: bool,
    progress: Option<ProgressReporter>,
    session: Arc<Session>,
}

impl PeerClient {
    pub(super) fn for_request(
        context: &RequestContext<RoleServer>,
        progress: Option<ProgressReporter>,
        session: Arc<Session>,
    ) -> Self {
        let capabilities = context.client_capabilities();
        PeerClient {
            peer: context.peer.clone(),
            origin: context.id.clone(),
            stateless: context
                .meta
                .protocol_version()
                .is_some_and(|v| !v.has_initialize()),
            form: capabilities
                .as_ref()
                .and_then(|c| c.elicitation.as_ref())
                .is_some_and(|e| e.form.is_some() || e.url.is_none()),
            sampling: capabilities.as_ref().is_some_and(|c| c.sampling.is_some()),
            progress,
            session,
        }
    }

    /// `Err` when the client cannot be sent `what` (it lacks `declared`).
    fn reachable(&self, declared: bool, capability: &str) -> Result<(), Unreached> {
        if self.stateless {
            return Err(Unreached::Unsupported(STATELESS.to_owned()));
        }
        if !declared {
            return Err(Unreached::Unsupported(format!(
                "the MCP client of this call did not declare the '{capability}' capability at \
                 initialize, so it cannot be asked; connect with a client that supports MCP \
                 {capability}"
            )));
        }
        Ok(())
    }

    async fn send(&self, request: ServerRequest) -> Result<ClientResult, Unreached> {
        let mut request = request;
        let extensions = match &mut request {
            ServerRequest::ElicitRequest(r) => &mut r.extensions,
            ServerRequest::CreateMessageRequest(r) => &mut r.extensions,
            _ => unreachable!("only elicitation and sampling are sent"),
        };
        extensions.insert(OriginatingRequestId(self.origin.clone()));
        self.peer
            .send_request(request)
            .await
            .map_err(|e| Unreached::Failed(format!("the client did not answer the request ({e})")))
    }
}

impl ClientLink for PeerClient {
    fn elicit<'a>(&'a self, message: &'a str, schema: Value) -> LinkFuture<'a, Elicitation> {
        Box::pin(async move {
            self.reachable(self.form, "elicitation")?;
            let schema: ElicitationSchema = serde_json::from_value(schema).map_err(|e| {
                Unreached::Invalid(format!(
                    "the requested schema is not an MCP elicitation schema (an object of flat \
                     primitive properties): {e}"
                ))
            })?;
            let request = ElicitRequest::new(ElicitRequestParams::FormElicitationParams {
                meta: None,
                message: message.to_owned(),
                requested_schema: schema,
            });
            match self.send(ServerRequest::ElicitRequest(request)).await? {
                ClientResult::ElicitResult(result) => Ok(match result.action {
                    ElicitationAction::Accept => Elicitation::Accepted(
                        result
                            .content
                            .unwrap_or_else(|| Value::Object(Default::default())),
                    ),
                    ElicitationAction::Decline => Elicitation::Declined,
                    _ => Elicitation::Cancelled,
                }),
                _ => Err(Unreached::Failed(
                    "the client answered with something other than an elicitation result".into(),
                )),
            }
        })
    }

    #[allow(deprecated)] // Sampling: deprecated in 2026-07-28, still served to 2025-11-25 clients.
    fn sample(&self, params: Value) -> LinkFuture<'_, Value> {
        Box::pin(async move {
            self.reachable(self.sampling, "sampling")?;
            let params: CreateMessageRequestParams =
                serde_json::from_value(params).map_err(|e| {
                    Unreached::Invalid(format!(
                        "the request is not sampling/createMessage params (messages, maxTokens, \
                         ...): {e}"
                    ))
                })?;
            let request = CreateMessageRequest::new(params);
            match self
                .send(ServerRequest::CreateMessageRequest(request))
                .await?
            {
                ClientResult::CreateMessageResult(result) => serde_json::to_value(&*result)
                    .map_err(|e| Unreached::Failed(format!("the client's answer: {e}"))),
                _ => Err(Unreached::Failed(
                    "the client answered with something other than a sampling result".into(),
                )),
            }
        })
    }

    fn progress(&self, done: f64, total: Option<f64>, message: Option<String>) {
        if let Some(report) = &self.progress {
            report(done, total, message.unwrap_or_default());
        }
    }

    fn session(&self) -> Option<Arc<Session>> {
        // A stateless request's handler lives for that request only: nothing outlives it.
        (!self.stateless).then(|| self.session.clone())
    }
}

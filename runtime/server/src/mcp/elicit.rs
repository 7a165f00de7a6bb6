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
//! by the question, and the client's retry carries the person's answer under that key.

use std::collections::BTreeMap;
use std::sync::{Arc, Mutex, PoisonError};

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

/// The input request key of a question: the same question on a retry has the same key, so an
/// answer is only ever read for the question it answers.
fn question_key(message: &str) -> String {
    use sha2::{Digest, Sha256};
    let digest = Sha256::digest(message.as_bytes());
    format!("confirm-{}", notebook_format::hex::lower_hex(&digest[..8]))
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
                    let key = question_key(message);
                    if let Some(response) = answers.get(&key) {
                        let action = response
                            .get("action")
                            .and_then(|a| serde_json::from_value(a.clone()).ok());
                        return answered(action);
                    }
                    deferred
                        .lock()
                        .unwrap_or_else(PoisonError::into_inner)
                        .insert(key, message.to_owned());
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

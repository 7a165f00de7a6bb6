//! The person behind a tool call, asked through MCP elicitation (`elicitation/create`, form
//! mode, no fields: the message is the question, accept/decline/cancel the answer). It is the
//! [`Confirmer`] the confirm service asks while the call runs.
//!
//! The question rides the stream of the request it belongs to (the request's id is put on it,
//! so Streamable HTTP sends it on that request's response stream even from a guest's host
//! function); a call running as a task after its request was answered falls back to the
//! session's standalone stream.

use std::collections::BTreeMap;

use rmcp::model::{
    ClientResult, ElicitRequest, ElicitRequestParams, ElicitationAction, ElicitationSchema,
    RequestId, ServerRequest,
};
use rmcp::service::{OriginatingRequestId, RequestContext};
use rmcp::{Peer, RoleServer};

use crate::confirm::{Answer, AnswerFuture, Confirmer};

/// Whether this request's client can be asked, and how.
enum Reach {
    Asks {
        peer: Peer<RoleServer>,
        origin: RequestId,
    },
    /// Why not: the text completes "…, and {why}".
    Cannot(String),
}

pub(super) struct PeerConfirmer {
    reach: Reach,
}

impl PeerConfirmer {
    pub(super) fn for_request(context: &RequestContext<RoleServer>) -> Self {
        let stateless = context
            .meta
            .protocol_version()
            .is_some_and(|v| !v.has_initialize());
        let form = context
            .client_capabilities()
            .and_then(|c| c.elicitation)
            .is_some_and(|e| e.form.is_some() || e.url.is_none());
        let reach = if stateless {
            Reach::Cannot(
                "this request is a stateless 2026-07-28 one, on which a server may not send \
                 requests (elicitation included) to its client; connect with a 2025-11-25 \
                 session (initialize) whose client declares elicitation"
                    .to_owned(),
            )
        } else if !form {
            Reach::Cannot(
                "this client did not declare the 'elicitation' capability (form mode) at \
                 initialize, so it cannot be asked"
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
}

impl Confirmer for PeerConfirmer {
    fn ask<'a>(&'a self, message: &'a str) -> AnswerFuture<'a> {
        Box::pin(async move {
            let (peer, origin) = match &self.reach {
                Reach::Cannot(why) => return Answer::Unavailable(why.clone()),
                Reach::Asks { peer, origin } => (peer, origin),
            };
            let mut request = ElicitRequest::new(ElicitRequestParams::FormElicitationParams {
                meta: None,
                message: message.to_owned(),
                requested_schema: ElicitationSchema::new(BTreeMap::new()),
            });
            request
                .extensions
                .insert(OriginatingRequestId(origin.clone()));
            match peer
                .send_request(ServerRequest::ElicitRequest(request))
                .await
            {
                Ok(ClientResult::ElicitResult(result)) => match result.action {
                    ElicitationAction::Accept => Answer::Accepted,
                    ElicitationAction::Decline => Answer::Declined,
                    // Cancel, and any action a later revision adds: no yes.
                    _ => Answer::Cancelled,
                },
                Ok(_) => Answer::Unavailable(
                    "the client answered the question with something other than an \
                     elicitation result"
                        .to_owned(),
                ),
                Err(e) => Answer::Unavailable(format!("the question could not be put ({e})")),
            }
        })
    }
}

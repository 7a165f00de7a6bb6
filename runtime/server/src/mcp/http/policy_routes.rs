//! The policy routes: `GET /api/extensions/NAME/policy` shows an extension's policy,
//! `POST /api/extensions/NAME/policy/grant` and `.../revoke` (body `{"grant": "host:api.x.org"}`)
//! change it, written back to the config file and effective from the guest's next use. What the
//! `policy`, `grant` and `revoke` subcommands call. Authenticated like `/api/stop`: in Hub mode
//! only the server's own `--mcp-token` may change what a guest reaches.

use http::{Method, Request, Response, StatusCode};
use hyper::body::Incoming;
use serde_json::{Value, json};

use super::body::{json_response, read_body};
use super::{Body, HttpContext};

const PREFIX: &str = "/api/extensions/";

/// What a policy route names: the extension and the action.
enum Action {
    Show,
    Grant,
    Revoke,
}

/// Whether `path` is a policy route, and which.
fn parse(path: &str) -> Option<(&str, Action)> {
    let rest = path.strip_prefix(PREFIX)?;
    let (name, action) = if let Some(name) = rest.strip_suffix("/policy") {
        (name, Action::Show)
    } else if let Some(name) = rest.strip_suffix("/policy/grant") {
        (name, Action::Grant)
    } else {
        (rest.strip_suffix("/policy/revoke")?, Action::Revoke)
    };
    (!name.is_empty() && !name.contains('/')).then_some((name, action))
}

pub(super) fn is_policy_route(path: &str) -> bool {
    parse(path).is_some()
}

impl HttpContext {
    pub(super) async fn policy_route(
        &self,
        path: &str,
        method: Method,
        request: Request<Incoming>,
    ) -> Response<Body> {
        let Some((name, action)) = parse(path) else {
            return json_response(StatusCode::NOT_FOUND, json!({ "error": "no such route" }));
        };
        if let Err(refusal) = self.admit(&request, true, true) {
            return *refusal;
        }
        if self.state.hub.is_some() && self.config.mcp_token.is_none() {
            return json_response(
                StatusCode::FORBIDDEN,
                json!({ "error": "in Hub mode an extension's policy can be changed only with \
                the server's own --mcp-token; edit the config file and restart instead" }),
            );
        }
        let expected = match action {
            Action::Show => Method::GET,
            Action::Grant | Action::Revoke => Method::POST,
        };
        if method != expected {
            return json_response(
                StatusCode::METHOD_NOT_ALLOWED,
                json!({ "error": format!("{method} is not supported on {path}; use {expected}") }),
            );
        }
        let policies = self.state.policies.clone();
        let add = match action {
            Action::Show => return answer(policies.show(name)),
            Action::Grant => true,
            Action::Revoke => false,
        };
        let body = match read_body(request.into_body()).await {
            Ok(body) => body,
            Err(refusal) => return *refusal,
        };
        let Some(grant) = serde_json::from_slice::<Value>(&body)
            .ok()
            .and_then(|v| v.get("grant").and_then(Value::as_str).map(str::to_owned))
        else {
            return json_response(
                StatusCode::BAD_REQUEST,
                json!({ "error": "the body needs {\"grant\": \"...\"}, e.g. read-cells:nb1, \
                host:api.example.org, storage:data:read or env:NAME" }),
            );
        };
        let name = name.to_owned();
        let hub_mode = self.state.hub.is_some();
        // A file write: off the async workers.
        let changed =
            tokio::task::spawn_blocking(move || policies.change(&name, &grant, add, hub_mode))
                .await;
        match changed {
            Ok(outcome) => answer(outcome),
            Err(_) => json_response(
                StatusCode::INTERNAL_SERVER_ERROR,
                json!({ "error": "the policy change failed inside the server; see its log" }),
            ),
        }
    }
}

fn answer(outcome: Result<Value, wasm_host::PolicyError>) -> Response<Body> {
    use wasm_host::PolicyError;
    match outcome {
        Ok(value) => json_response(StatusCode::OK, value),
        Err(error) => {
            let status = match &error {
                PolicyError::Unknown(_) => StatusCode::NOT_FOUND,
                PolicyError::Refused(_) => StatusCode::BAD_REQUEST,
                PolicyError::NotSaved(_) => StatusCode::CONFLICT,
            };
            json_response(status, json!({ "error": error.to_string() }))
        }
    }
}

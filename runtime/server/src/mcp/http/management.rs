//! The management routes beside `/mcp`, as the Python server has them: `GET /api/healthz`,
//! `PUT /api/connect`, `DELETE /api/stop`. What the `connect` and `stop` subcommands call. The
//! extension routes (`/api/extensions`) are handed to `extension_routes`.

use std::time::Duration;

use http::{Method, Request, Response, StatusCode};
use hyper::body::Incoming;
use serde_json::{Value, json};

use super::body::{json_response, read_body};
use super::{Body, HttpContext, extension_routes};
use crate::tools::scope::Scope;
use jupyter_client::kernel::Liveness;
use server_core::domain::startup::JupyterState;

impl HttpContext {
    /// Answers a request under `/api/`.
    pub(super) async fn management(
        &self,
        path: &str,
        method: Method,
        request: Request<Incoming>,
    ) -> Response<Body> {
        // With an OAuth issuer every route but health needs a token with `server:admin`.
        if path != "/api/healthz"
            && let Err(refusal) = self
                .authorize(request.headers(), Some(Scope::ServerAdmin))
                .await
        {
            return *refusal;
        }
        match path {
            "/api/healthz" if method == Method::GET => {
                // Health is readable without a token, but only through an allowed Host/Origin.
                match self.admit(&request, true, false) {
                    Err(refusal) => *refusal,
                    Ok(()) => json_response(StatusCode::OK, self.health().await),
                }
            }
            "/api/connect" if method == Method::PUT => {
                if let Err(refusal) = self.admit(&request, true, true) {
                    return *refusal;
                }
                if let Some(hub) = &self.state.hub {
                    return json_response(
                        StatusCode::FORBIDDEN,
                        json!({ "error": format!(
                        "/api/connect is refused in Hub mode: each user's calls go to their \
                         own server on the JupyterHub at {}, which the Hub chooses",
                        hub.users.hub()
                    ) }),
                    );
                }
                self.connect(request).await
            }
            "/api/stop" if method == Method::DELETE => {
                if let Err(refusal) = self.admit(&request, true, true) {
                    return *refusal;
                }
                // In Hub mode a user's token gives no say over the server itself.
                if self.state.hub.is_some() && self.config.mcp_token.is_none() {
                    return json_response(
                        StatusCode::FORBIDDEN,
                        json!({ "error": "in Hub mode /api/stop needs the server's own \
                        --mcp-token; without one, stop the server with a signal (the Hub \
                        stops a managed service itself)" }),
                    );
                }
                tracing::info!("stop requested over HTTP");
                self.stop.cancel();
                json_response(
                    StatusCode::OK,
                    json!({ "success": true, "message": "stopping" }),
                )
            }
            "/api/sandbox/hosts" | "/api/sandbox/revoke" => {
                if let Err(refusal) = self.admit(&request, true, true) {
                    return *refusal;
                }
                self.sandbox_route(path, method, request).await
            }
            // Policy routes live under /api/extensions/NAME/policy: matched first.
            _ if super::policy_routes::is_policy_route(path) => {
                self.policy_route(path, method, request).await
            }
            p if extension_routes::handles(p) => {
                if let Err(refusal) = self.admit(&request, true, true) {
                    return *refusal;
                }
                if let Some(refusal) = extension_routes::refuse_hub_users(&self.state, &self.config)
                {
                    return refusal;
                }
                extension_routes::serve(&self.state, request, p).await
            }
            "/api/healthz" | "/api/connect" | "/api/stop" => json_response(
                StatusCode::METHOD_NOT_ALLOWED,
                json!({ "error": format!("{method} is not supported on {path}") }),
            ),
            _ => json_response(
                StatusCode::NOT_FOUND,
                json!({ "error": format!("no route {path}; MCP is served at /mcp") }),
            ),
        }
    }

    /// `GET /api/sandbox/hosts`: what people allowed sandboxed kernels (`kernel.egress-prompts`);
    /// `POST /api/sandbox/revoke` (body `{"host": "api.example.org"}`) takes it back.
    async fn sandbox_route(
        &self,
        path: &str,
        method: Method,
        request: Request<Incoming>,
    ) -> Response<Body> {
        let asks = &self.state.domain.egress_asks;
        match (path, method) {
            ("/api/sandbox/hosts", Method::GET) => {
                json_response(StatusCode::OK, json!({ "allowed": asks.list() }))
            }
            ("/api/sandbox/revoke", Method::POST) => {
                let body = match read_body(request.into_body()).await {
                    Ok(body) => body,
                    Err(refusal) => return *refusal,
                };
                let Some(host) = serde_json::from_slice::<Value>(&body)
                    .ok()
                    .and_then(|v| v.get("host").and_then(Value::as_str).map(str::to_owned))
                    .filter(|h| !h.is_empty())
                else {
                    return json_response(
                        StatusCode::BAD_REQUEST,
                        json!({ "error": "the body must be {\"host\": \"HOST\"} (or HOST:PORT)" }),
                    );
                };
                match asks.revoke(&host) {
                    Ok(revoked) => json_response(
                        StatusCode::OK,
                        json!({ "host": host, "revoked": revoked, "message": if revoked == 0 {
                            format!("nothing was allowed for {host}; `sandbox hosts` lists what is")
                        } else {
                            format!("{revoked} allowance(s) for {host} taken back; the next connection is asked again")
                        }}),
                    ),
                    Err(why) => json_response(
                        StatusCode::INTERNAL_SERVER_ERROR,
                        json!({ "error": format!("the allowance was taken back, but the config file could not be changed: {why}") }),
                    ),
                }
            }
            (_, method) => json_response(
                StatusCode::METHOD_NOT_ALLOWED,
                json!({ "error": format!("{method} is not supported on {path}; GET /api/sandbox/hosts, POST /api/sandbox/revoke") }),
            ),
        }
    }

    async fn health(&self) -> Value {
        if let Some(hub) = &self.state.hub {
            return json!({
                "success": true,
                "service": "jupyter-mcp-server",
                "message": "Jupyter MCP Server is running.",
                "status": "healthy",
                "version": env!("CARGO_PKG_VERSION"),
                "jupyterhub": { "url": hub.users.hub() },
            });
        }
        let jupyter = self.state.domain.jupyter();
        // As the Python server reports it: the current notebook's code sandbox, else the kernel
        // execute_code uses; `not_initialized` until there is one. Started without a code
        // sandbox, only the `default` notebook (--document-id) has one there.
        let kernel = match self.state.domain.notebooks.resolve(None) {
            Ok(notebook) if self.state.http.code_sandbox || notebook.name == "default" => {
                notebook.kernel()
            }
            Ok(_) => None,
            Err(_) => jupyter.current_default_kernel().await,
        };
        let kernel_status = match kernel.map(|k| k.liveness()) {
            None => "not_initialized",
            Some(Liveness::Gone(_)) => "dead",
            Some(Liveness::Alive) => "alive",
        };
        let reachable = tokio::time::timeout(Duration::from_secs(2), jupyter.rest().status())
            .await
            .is_ok_and(|r| r.is_ok());
        // While our own Jupyter starts we already serve: calls that need it wait for it.
        let mut shown = json!({ "url": jupyter.rest().shown_url(), "reachable": reachable });
        let status = match self.state.domain.startup.state() {
            JupyterState::Up => "healthy",
            JupyterState::Starting => {
                shown["state"] = json!("starting");
                "starting"
            }
            JupyterState::Failed(reason) => {
                shown["state"] = json!("failed");
                shown["error"] = json!(reason);
                "unhealthy"
            }
        };
        let mut health = json!({
            "success": true,
            "service": "jupyter-mcp-server",
            "message": "Jupyter MCP Server is running.",
            "status": status,
            "kernel_status": kernel_status,
            "version": env!("CARGO_PKG_VERSION"),
            "jupyter": shown,
        });
        // A store that cannot write (a full disk): serving goes on, records wait in memory.
        if let Some((place, since, why)) = self.state.domain.executions.store_failing() {
            if status == "healthy" {
                health["status"] = json!("degraded");
            }
            health["state_store"] = json!({
                "status": "failing",
                "place": place,
                "error": why,
                "since_seconds": since.elapsed().map(|d| d.as_secs()).unwrap_or(0),
            });
        }
        health
    }

    async fn connect(&self, request: Request<Incoming>) -> Response<Body> {
        let body = match read_body(request.into_body()).await {
            Ok(body) => body,
            Err(refusal) => return *refusal,
        };
        let parsed: Value = match serde_json::from_slice(&body) {
            Ok(v) => v,
            Err(e) => {
                return json_response(
                    StatusCode::BAD_REQUEST,
                    json!({ "error": format!("the body is not JSON: {e}") }),
                );
            }
        };
        let Some(url) = parsed.get("jupyter_url").and_then(Value::as_str) else {
            return json_response(
                StatusCode::BAD_REQUEST,
                json!({ "error": "the body needs \"jupyter_url\" (and optionally \"jupyter_token\")" }),
            );
        };
        let mut arguments = serde_json::Map::new();
        arguments.insert("jupyter_url".into(), url.into());
        if let Some(token) = parsed.get("jupyter_token").and_then(Value::as_str) {
            arguments.insert("jupyter_token".into(), token.into());
        }
        // The tool's own path: the same capability gate, hooks and span as an MCP call.
        let context = crate::tools::ToolContext::internal(self.state.domain.clone());
        let outcome = crate::dispatch::run(
            &self.state.tools,
            crate::tools::connect::NAME,
            Some(arguments),
            context,
            None,
        )
        .await;
        match outcome {
            Ok(Ok(output)) => json_response(
                StatusCode::OK,
                json!({ "success": true, "message": output.joined_text() }),
            ),
            Ok(Err(e)) => json_response(
                StatusCode::BAD_GATEWAY,
                json!({ "success": false, "error": crate::tools::steps::worded(&e) }),
            ),
            Err(unknown) => json_response(
                StatusCode::INTERNAL_SERVER_ERROR,
                json!({ "success": false, "error": unknown.to_string() }),
            ),
        }
    }
}

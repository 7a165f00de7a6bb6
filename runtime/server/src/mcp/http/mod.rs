//! MCP over Streamable HTTP on hyper, plus the management routes of the Python server.
//!
//! `/mcp` is rmcp's Streamable HTTP service (legacy sessions for 2025-11-25 clients, stateless
//! requests for 2026-07-28 ones), behind our own Host, Origin and bearer-token checks.
//! The management routes under `/api/` sit beside it (`management`; the extension routes in
//! `extension_routes`).

use std::convert::Infallible;
use std::net::SocketAddr;
use std::sync::Arc;
use std::time::Duration;

use bytes::Bytes;
use http::{HeaderMap, Method, Request, Response, StatusCode};
use http_body_util::Full;
use http_body_util::combinators::BoxBody;
use hyper::body::Incoming;
use rmcp::transport::streamable_http_server::session::local::LocalSessionManager;
use rmcp::transport::streamable_http_server::{StreamableHttpServerConfig, StreamableHttpService};
use serde_json::{Value, json};
use tokio_util::sync::CancellationToken;
use tower_service::Service;

use super::McpServer;
use super::ServerState;
use super::hub::HubFront;
use crate::config::HttpConfig;
use crate::dispatch::ToolView;
use crate::tools::scope::{Grant, Scope};
use jupyter_client::auth::Secret;
use jupyter_client::hub::HubError;
use server_core::domain::users::Caller;

mod body;
mod connections;
mod extension_routes;
mod guard;
mod management;
pub mod oauth;
mod policy_routes;

use body::{json_response, read_body, unauthorized};
use guard::{LOOPBACK_HOSTS, bearer};
pub use guard::{host_allowed, origin_allowed};

type Body = BoxBody<Bytes, Infallible>;

/// The header carrying an MCP session id.
const SESSION_HEADER: &str = "mcp-session-id";

#[derive(Debug, thiserror::Error)]
pub enum HttpError {
    #[error(
        "Streamable HTTP needs authentication: pass --mcp-token TOKEN (or set MCP_TOKEN), or \
         --insecure-mcp-noauth to serve without a token on a network you trust"
    )]
    NoAuthConfigured,
    #[error(
        "--oauth-issuer cannot be combined with {other}: with an issuer, its access tokens are \
         the authentication (and their scopes say what each caller may do), so {other} would \
         let callers around them; drop {other}"
    )]
    OAuthCombined { other: &'static str },
    #[error(transparent)]
    OAuth(#[from] oauth::OAuthError),
    #[error("cannot listen on {address}: {source}")]
    Bind {
        address: String,
        source: std::io::Error,
    },
}

struct HttpContext {
    state: Arc<ServerState>,
    config: HttpConfig,
    mcp: StreamableHttpService<McpServer, LocalSessionManager>,
    /// The same service without SSE priming events, for sessions of revisions before
    /// 2025-11-25 (`compat::expects_priming`); its sessions are its own, so a session's later
    /// requests are routed by where it was opened.
    mcp_unprimed: StreamableHttpService<McpServer, LocalSessionManager>,
    unprimed_sessions: Arc<LocalSessionManager>,
    stop: CancellationToken,
    /// `--oauth-issuer`: the tokens' checker.
    oauth: Option<Arc<oauth::ResourceServer>>,
}

impl HttpContext {
    /// `?only=NAME,...` (tools or toolsets): the narrower view one client asked for. The query
    /// is read on every request, so a client keeps its view by keeping its URL.
    fn tool_view(&self, query: Option<&str>) -> Result<Option<ToolView>, Box<Response<Body>>> {
        let only: Vec<String> = url::form_urlencoded::parse(query.unwrap_or("").as_bytes())
            .filter(|(key, _)| key == "only")
            .flat_map(|(_, value)| {
                value
                    .split(',')
                    .map(|n| n.trim().to_owned())
                    .filter(|n| !n.is_empty())
                    .collect::<Vec<_>>()
            })
            .collect();
        if only.is_empty() {
            return Ok(None);
        }
        self.state.tools.view(&only).map(Some).map_err(|unknown| {
            Box::new(json_response(
                StatusCode::BAD_REQUEST,
                json!({ "error": unknown.to_string() }),
            ))
        })
    }

    /// Hub mode: who the request's bearer token belongs to, as the Hub says; `Err` holds the
    /// refusal (401 for a missing or refused token, 502 when the Hub cannot answer).
    async fn hub_caller(
        &self,
        hub: &HubFront,
        headers: &HeaderMap,
    ) -> Result<Caller, Box<Response<Body>>> {
        let Some(token) = bearer(headers) else {
            return Err(Box::new(unauthorized(&format!(
                "a bearer token is required: send your JupyterHub API token (create one on the \
                 Hub's token page, {}hub/token) as Authorization: Bearer TOKEN",
                hub.users.hub()
            ))));
        };
        let token = Secret::new(token.to_owned());
        hub.users.identify(&token).await.map_err(|e| {
            Box::new(match e {
                HubError::TokenRefused { .. } => unauthorized(&e.to_string()),
                HubError::ScopeMissing { .. } => {
                    json_response(StatusCode::FORBIDDEN, json!({ "error": e.to_string() }))
                }
                other => json_response(
                    StatusCode::BAD_GATEWAY,
                    json!({ "error": other.to_string() }),
                ),
            })
        })
    }

    async fn route(self: Arc<Self>, request: Request<Incoming>) -> Response<Body> {
        let method = request.method().clone();
        if let Some(oauth) = &self.oauth
            && oauth.serves_metadata_at(request.uri().path())
        {
            return match self.admit(&request, true, false) {
                Err(refusal) => *refusal,
                Ok(()) => json_response(StatusCode::OK, oauth.resource_metadata()),
            };
        }
        // Every route lives under the prefix (a Hub service's /services/NAME/).
        let prefix = self.config.prefix.trim_end_matches('/');
        let Some(path) = request.uri().path().strip_prefix(prefix) else {
            return json_response(
                StatusCode::NOT_FOUND,
                json!({ "error": format!("no route {}; MCP is served at {prefix}/mcp", request.uri().path()) }),
            );
        };
        let path = path.to_owned();
        match path.as_str() {
            "/mcp" | "/mcp/" => {
                // In Hub mode the Hub's tokens are the authentication.
                let hub = self.state.hub.as_ref();
                if let Err(refusal) = self.admit(&request, false, hub.is_none()) {
                    return *refusal;
                }
                let caller = match hub {
                    Some(hub) => match self.hub_caller(hub, request.headers()).await {
                        Ok(caller) => Some(caller),
                        Err(refusal) => return *refusal,
                    },
                    None => None,
                };
                let grant = match self.authorize(request.headers(), None).await {
                    // Behind the Jupyter extension, the proxy says what Jupyter's authorizer lets
                    // this user do. A header can only narrow what the caller may do anyway.
                    Ok(None) if self.oauth.is_none() => guard::jupyter_grant(request.headers()),
                    Ok(grant) => grant,
                    Err(refusal) => return *refusal,
                };
                let session = request
                    .headers()
                    .get(SESSION_HEADER)
                    .and_then(|v| v.to_str().ok())
                    .map(str::to_owned);
                let foreign_session = match (&session, &self.oauth, &grant) {
                    (Some(id), Some(oauth), Some(grant)) => !oauth.session_allowed(id, grant),
                    _ => false,
                };
                if foreign_session
                    || matches!((hub, &caller, &session), (Some(hub), Some(caller), Some(id))
                        if !hub.session_allowed(id, caller))
                {
                    // The same answer as for a session that never was: nothing is revealed.
                    return json_response(
                        StatusCode::NOT_FOUND,
                        json!({ "error": "session not found; start a new one with initialize" }),
                    );
                }
                // Read the body ourselves, bounded in size and time, so a huge or trickling
                // request costs only itself.
                let (mut parts, body) = request.into_parts();
                if let Some(caller) = caller.clone() {
                    parts.extensions.insert(caller);
                }
                // The token's scopes narrow the client's view: what it may not call, it does not see.
                let view = match (self.tool_view(parts.uri.query()), grant.clone()) {
                    (Err(refusal), _) => return *refusal,
                    (Ok(view), Some(grant)) => Some(view.unwrap_or_default().with_grant(grant)),
                    (Ok(view), None) => view,
                };
                if let Some(view) = view {
                    parts.extensions.insert(view);
                }
                let body = match read_body(body).await {
                    Ok(body) => body,
                    Err(refusal) => return *refusal,
                };
                // Parsed once for the scope check, the priming choice and the repair.
                let message = serde_json::from_slice::<Value>(&body).ok();
                if let (Some(grant), Some(message)) = (&grant, &message)
                    && let Some(scope) = lacking_scope(&self.state, grant, message)
                {
                    return match &self.oauth {
                        Some(oauth) => guard::insufficient_scope(oauth, scope),
                        None => guard::not_permitted_by_jupyter(scope),
                    };
                }
                let version = parts
                    .headers
                    .get("mcp-protocol-version")
                    .and_then(|v| v.to_str().ok());
                let primed = match &session {
                    Some(id) => !self
                        .unprimed_sessions
                        .sessions
                        .read()
                        .await
                        .contains_key(id.as_str()),
                    None => super::compat::expects_priming(message.as_ref(), version),
                };
                let mut mcp = match primed {
                    true => self.mcp.clone(),
                    false => self.mcp_unprimed.clone(),
                };
                let body = match message.and_then(|m| super::compat::repair(&m, version)) {
                    Some(repaired) => Bytes::from(repaired.to_string()),
                    None => body,
                };
                let mut response = match mcp.call(Request::from_parts(parts, Full::new(body))).await
                {
                    Ok(response) => response,
                    Err(never) => match never {},
                };
                // rmcp ends a session with 202; the Python client expects 200 or 204 (and warns).
                if method == Method::DELETE && response.status() == StatusCode::ACCEPTED {
                    *response.status_mut() = StatusCode::NO_CONTENT;
                }
                // A session is its opener's alone: the token holder's, the Hub user's.
                match session_change(session.as_deref(), &method, &response) {
                    Some(SessionChange::Opened(id)) => {
                        if let (Some(oauth), Some(grant)) = (&self.oauth, &grant) {
                            oauth.session_opened(&id, grant);
                        }
                        if let (Some(hub), Some(caller)) = (hub, &caller) {
                            hub.session_opened(&id, caller);
                        }
                    }
                    Some(SessionChange::Closed(id)) => {
                        if let Some(oauth) = &self.oauth {
                            oauth.session_closed(&id);
                        }
                        if let Some(hub) = hub {
                            hub.session_closed(&id);
                        }
                    }
                    None => {}
                }
                response
            }
            p if p.starts_with("/api/") => self.management(p, method, request).await,
            _ => json_response(
                StatusCode::NOT_FOUND,
                json!({ "error": format!("no route {path}; MCP is served at /mcp") }),
            ),
        }
    }
}

enum SessionChange {
    Opened(String),
    Closed(String),
}

/// Whether this exchange opened an MCP session (the answer names one the request did not) or
/// closed one (DELETE).
fn session_change(
    asked: Option<&str>,
    method: &Method,
    response: &Response<Body>,
) -> Option<SessionChange> {
    match (asked, response.headers().get(SESSION_HEADER)) {
        (Some(id), _) if method == Method::DELETE => Some(SessionChange::Closed(id.to_owned())),
        (None, Some(opened)) => opened
            .to_str()
            .ok()
            .map(|id| SessionChange::Opened(id.to_owned())),
        _ => None,
    }
}

/// The first scope a request (or batch) needs that the token lacks, by what the method touches:
/// a tool call its tool's; reading resources, listing prompts, getting a built-in prompt (it
/// quotes cells) and following tasks `notebooks:read`; an extension's prompt, which runs guest
/// code, `notebooks:write` (as an extension tool that is not read-only); cancelling a task, which
/// interrupts its kernel, `code:execute`.
fn lacking_scope(state: &crate::mcp::ServerState, grant: &Grant, message: &Value) -> Option<Scope> {
    let messages = match message {
        Value::Array(batch) => batch.as_slice(),
        one => std::slice::from_ref(one),
    };
    messages.iter().find_map(|message| {
        let method = message.get("method")?.as_str()?;
        let named = || message.pointer("/params/name").and_then(Value::as_str);
        let scope = match method {
            "tools/call" => state.tools.get(named()?)?.spec().scope,
            "prompts/get"
                if named().is_some_and(|name| state.catalog.prompt_provider(name).is_some()) =>
            {
                Scope::NotebooksWrite
            }
            "tasks/cancel" => Scope::CodeExecute,
            _ if method.starts_with("resources/")
                || method.starts_with("prompts/")
                || method.starts_with("tasks/") =>
            {
                Scope::NotebooksRead
            }
            _ => return None,
        };
        (!grant.allows(scope)).then_some(scope)
    })
}

/// Refuses HTTP settings that would serve without authentication unless told to; checked before
/// anything is started, so a missing token costs the operator no wait.
/// In Hub mode the Hub's tokens are the authentication.
pub fn check_auth(config: &HttpConfig, hub_mode: bool) -> Result<(), HttpError> {
    if config.oauth.is_some() {
        for (other, given) in [
            ("--mcp-token (MCP_TOKEN)", config.mcp_token.is_some()),
            ("--insecure-mcp-noauth", config.insecure_noauth),
            ("--jupyterhub-url (Hub mode)", hub_mode),
        ] {
            if given {
                return Err(HttpError::OAuthCombined { other });
            }
        }
        return Ok(());
    }
    if !hub_mode && config.mcp_token.is_none() && !config.insecure_noauth {
        return Err(HttpError::NoAuthConfigured);
    }
    Ok(())
}

/// This server's own `/mcp` URL as clients name it: the default OAuth audience.
fn own_mcp_url(config: &HttpConfig) -> String {
    let host = if config.host.contains(':') && !config.host.starts_with('[') {
        format!("[{}]", config.host)
    } else {
        config.host.clone()
    };
    format!("http://{host}:{}{}mcp", config.port, config.prefix)
}

/// Serves until `stop` is cancelled (by a signal or `DELETE /api/stop`).
pub async fn serve(state: Arc<ServerState>, stop: CancellationToken) -> Result<(), HttpError> {
    let config = state.http.clone();
    check_auth(&config, state.hub.is_some())?;
    let oauth = match &config.oauth {
        Some(settings) => {
            let audience = settings
                .audience
                .clone()
                .unwrap_or_else(|| own_mcp_url(&config));
            let server = oauth::ResourceServer::discover(settings, audience).await?;
            tracing::info!(
                issuer = server.issuer(),
                "access tokens of the OAuth authorization server authenticate Streamable HTTP"
            );
            Some(Arc::new(server))
        }
        None => None,
    };
    if config.mcp_token.is_none() && state.hub.is_none() && oauth.is_none() {
        tracing::warn!(
            "--insecure-mcp-noauth: anyone who can reach {}:{} can run code through this server",
            config.host,
            config.port
        );
    }
    let address = format!("{}:{}", config.host, config.port);
    let listener = match config.listen_fd {
        Some(fd) => connections::handed_over(fd).map_err(|source| HttpError::Bind {
            address: format!("the socket handed over as --listen-fd {fd}"),
            source,
        })?,
        None => tokio::net::TcpListener::bind(&address)
            .await
            .map_err(|source| HttpError::Bind {
                address: address.clone(),
                source,
            })?,
    };
    let local: SocketAddr = listener
        .local_addr()
        .map_err(|source| HttpError::Bind { address, source })?;
    tracing::info!(
        "serving MCP over Streamable HTTP at http://{local}{}mcp",
        config.prefix
    );
    if !local.ip().is_loopback() {
        tracing::warn!(
            "listening on {} (--host {}): reachable from other machines, not only this one; \
             drop --host (or pass --host 127.0.0.1) to serve this machine alone",
            local.ip(),
            config.host
        );
    }

    let mut rmcp_config = StreamableHttpServerConfig::default()
        .with_cancellation_token(stop.child_token())
        .with_allowed_hosts(
            LOOPBACK_HOSTS
                .iter()
                .map(|h| h.to_string())
                .chain(config.allowed_hosts.iter().cloned()),
        );
    let mut origins: Vec<String> = ["http://localhost:*", "http://127.0.0.1:*", "http://[::1]:*"]
        .into_iter()
        .flat_map(|o| [o.to_owned(), o.replacen("http", "https", 1)])
        .collect();
    origins.extend(config.allowed_origins.iter().cloned());
    rmcp_config = rmcp_config.with_allowed_origins(origins);
    // One body limit on every route, the one SECURITY.md states (rmcp's own default is 4 MiB).
    rmcp_config.max_request_body_bytes = super::MAX_REQUEST_BYTES;
    let factory_state = state.clone();
    // Tasks outlive the request (and, stateless, the handler) that created them.
    let tasks = rmcp::task_manager::TaskManager::new();
    let new_server = move || Ok(McpServer::with_tasks(factory_state.clone(), tasks.clone()));
    let mut unprimed = LocalSessionManager::default();
    unprimed.session_config.sse_retry = None;
    let unprimed_sessions = Arc::new(unprimed);
    let mcp_unprimed = StreamableHttpService::new(
        new_server.clone(),
        unprimed_sessions.clone(),
        rmcp_config.clone().with_sse_retry(None),
    );
    let mcp = StreamableHttpService::new(
        new_server,
        Arc::new(LocalSessionManager::default()),
        rmcp_config,
    );
    let context = Arc::new(HttpContext {
        state,
        config,
        mcp,
        mcp_unprimed,
        unprimed_sessions,
        stop: stop.clone(),
        oauth,
    });

    let mut connections = tokio::task::JoinSet::new();
    let cap = connections::connection_cap();
    let permits = Arc::new(tokio::sync::Semaphore::new(cap));
    let mut at_capacity = false;
    tracing::debug!("serving at most {cap} HTTP connections at once");
    loop {
        let (stream, _) = tokio::select! {
            accepted = listener.accept() => match accepted {
                Ok(accepted) => accepted,
                Err(e) => {
                    tracing::warn!("accept failed: {e}");
                    tokio::time::sleep(Duration::from_millis(50)).await;
                    continue;
                }
            },
            _ = stop.cancelled() => break,
        };
        // Reap finished connections so the set does not grow without bound.
        while connections.try_join_next().is_some() {}
        let _ = stream.set_nodelay(true);
        let Ok(permit) = permits.clone().try_acquire_owned() else {
            // Once per flood, not once per connection.
            if !at_capacity {
                tracing::warn!(
                    "{cap} HTTP connections are open at once; new ones are refused (503) until \
                     some close"
                );
                at_capacity = true;
            }
            tokio::spawn(connections::refuse_at_capacity(stream));
            continue;
        };
        at_capacity = false;
        let context = context.clone();
        let stop = stop.clone();
        connections.spawn(async move {
            let _permit = permit;
            connections::serve_one(stream, context, stop).await;
        });
    }
    // Answer what is in flight before the process goes on to stop.
    let _ = tokio::time::timeout(Duration::from_secs(3), async {
        while connections.join_next().await.is_some() {}
    })
    .await;
    Ok(())
}

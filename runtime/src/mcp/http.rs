//! MCP over Streamable HTTP on hyper, plus the management routes of the Python server.
//!
//! `/mcp` is rmcp's Streamable HTTP service (legacy sessions for 2025-11-25 clients, stateless
//! requests for 2026-07-28 ones), behind our own Host, Origin and bearer-token checks.
//! `/api/healthz`, `PUT /api/connect` and `DELETE /api/stop` sit beside it, and the extension
//! routes (`/api/extensions`, in `extension_routes`).

use std::convert::Infallible;
use std::net::SocketAddr;
use std::sync::Arc;
use std::time::Duration;

use bytes::Bytes;
use http::{HeaderMap, Method, Request, Response, StatusCode, header};
use http_body_util::combinators::BoxBody;
use http_body_util::{BodyExt, Full};
use hyper::body::Incoming;
use hyper_util::rt::{TokioExecutor, TokioIo, TokioTimer};
use hyper_util::server::conn::auto::Builder as ConnectionBuilder;
use rmcp::transport::streamable_http_server::session::local::LocalSessionManager;
use rmcp::transport::streamable_http_server::{StreamableHttpServerConfig, StreamableHttpService};
use serde_json::{Value, json};
use tokio_util::sync::CancellationToken;
use tower_service::Service;

mod extension_routes;

use super::McpServer;
use super::ServerState;
use super::hub::HubFront;
use crate::config::HttpConfig;
use crate::dispatch::ToolView;
use crate::domain::users::Caller;
use crate::jupyter::auth::Secret;
use crate::jupyter::hub::HubError;
use crate::jupyter::kernel::Liveness;

type Body = BoxBody<Bytes, Infallible>;

/// The header carrying an MCP session id.
const SESSION_HEADER: &str = "mcp-session-id";

/// How long a request body may take to arrive (slow-body attacks hold a connection otherwise).
const BODY_TIMEOUT: Duration = Duration::from_secs(30);
/// How long request headers may take to arrive (slowloris).
const HEADER_TIMEOUT: Duration = Duration::from_secs(10);

#[derive(Debug, thiserror::Error)]
pub enum HttpError {
    #[error(
        "Streamable HTTP needs authentication: pass --mcp-token TOKEN (or set MCP_TOKEN), or \
         --insecure-mcp-noauth to serve without a token on a network you trust"
    )]
    NoAuthConfigured,
    #[error("cannot listen on {address}: {source}")]
    Bind {
        address: String,
        source: std::io::Error,
    },
}

const LOOPBACK_HOSTS: [&str; 4] = ["localhost", "127.0.0.1", "::1", "[::1]"];

/// Whether a `Host` header names this server: loopback, or one the operator allowed
/// (as `name` for any port or `name:port`).
pub fn host_allowed(host: &str, extra: &[String]) -> bool {
    let host = host.trim().to_ascii_lowercase();
    let name = strip_port(&host);
    LOOPBACK_HOSTS.contains(&name)
        || extra.iter().any(|allowed| {
            let allowed = allowed.trim().to_ascii_lowercase();
            allowed == host || allowed == name
        })
}

fn strip_port(authority: &str) -> &str {
    if let Some(rest) = authority.strip_prefix('[') {
        // [::1]:8080 → ::1; anything after `]` but a port ([::1].evil.com, [::1]evil.com) is
        // not an IPv6 literal, so the whole authority is the name and matches nothing loopback.
        return match rest.split_once(']') {
            Some((address, "")) => address,
            Some((address, port))
                if port.len() > 1
                    && port.starts_with(':')
                    && port[1..].chars().all(|c| c.is_ascii_digit()) =>
            {
                address
            }
            _ => authority,
        };
    }
    match authority.rsplit_once(':') {
        Some((name, port)) if port.chars().all(|c| c.is_ascii_digit()) && !name.contains(':') => {
            name
        }
        _ => authority,
    }
}

/// Whether a present `Origin` may call us: a loopback page, or one the operator allowed.
/// Allowed entries are `scheme://host[:port]`; `:*` matches any port.
pub fn origin_allowed(origin: &str, extra: &[String]) -> bool {
    let Ok(url) = url::Url::parse(origin) else {
        return false;
    };
    let Some(host) = url.host_str() else {
        return false;
    };
    if LOOPBACK_HOSTS.contains(&host) && matches!(url.scheme(), "http" | "https") {
        return true;
    }
    let port = url.port_or_known_default();
    extra.iter().any(|allowed| {
        let allowed = allowed.trim().trim_end_matches('/');
        if let Some(prefix) = allowed.strip_suffix(":*") {
            return url::Url::parse(prefix)
                .is_ok_and(|a| a.scheme() == url.scheme() && a.host_str() == Some(host));
        }
        url::Url::parse(allowed).is_ok_and(|a| {
            a.scheme() == url.scheme()
                && a.host_str() == Some(host)
                && a.port_or_known_default() == port
        })
    })
}

/// The bearer token a request presents.
fn bearer(headers: &HeaderMap) -> Option<&str> {
    headers
        .get(header::AUTHORIZATION)
        .and_then(|v| v.to_str().ok())
        .and_then(|v| {
            // The scheme is case-insensitive (RFC 9110 §11.1): `BEARER x` is a bearer token.
            let (scheme, token) = v.trim_start().split_once(' ')?;
            scheme
                .eq_ignore_ascii_case("bearer")
                .then_some(token.trim())
        })
        .filter(|t| !t.is_empty())
}

/// Compares a presented bearer token in constant time.
fn bearer_matches(headers: &HeaderMap, expected: &str) -> bool {
    let Some(presented) = bearer(headers) else {
        return false;
    };
    let (a, b) = (presented.trim().as_bytes(), expected.as_bytes());
    a.len() == b.len() && a.iter().zip(b).fold(0u8, |acc, (x, y)| acc | (x ^ y)) == 0
}

fn json_response(status: StatusCode, body: Value) -> Response<Body> {
    Response::builder()
        .status(status)
        .header(header::CONTENT_TYPE, "application/json")
        .body(Full::new(Bytes::from(body.to_string())).boxed())
        .expect("valid response")
}

fn unauthorized(message: &str) -> Response<Body> {
    let mut response = json_response(StatusCode::UNAUTHORIZED, json!({ "error": message }));
    response.headers_mut().insert(
        header::WWW_AUTHENTICATE,
        header::HeaderValue::from_static("Bearer realm=\"jupyter-mcp-server\""),
    );
    response
}

struct HttpContext {
    state: Arc<ServerState>,
    config: HttpConfig,
    mcp: StreamableHttpService<McpServer, LocalSessionManager>,
    stop: CancellationToken,
}

impl HttpContext {
    /// `Err` holds the refusal when the request may not proceed.
    fn admit(
        &self,
        request: &Request<Incoming>,
        management: bool,
        require_token: bool,
    ) -> Result<(), Box<Response<Body>>> {
        let headers = request.headers();
        let host = headers
            .get(header::HOST)
            .and_then(|h| h.to_str().ok())
            .map(str::to_owned)
            .or_else(|| request.uri().authority().map(|a| a.to_string()))
            .unwrap_or_default();
        if !host_allowed(&host, &self.config.allowed_hosts) {
            // 421 on the management routes, as the Python server answers.
            let status = if management {
                StatusCode::MISDIRECTED_REQUEST
            } else {
                StatusCode::FORBIDDEN
            };
            return Err(Box::new(json_response(
                status,
                json!({ "error": format!("Host '{host}' is not allowed; add it with --allowed-host") }),
            )));
        }
        if let Some(origin) = headers.get(header::ORIGIN).and_then(|o| o.to_str().ok())
            && !origin_allowed(origin, &self.config.allowed_origins)
        {
            return Err(Box::new(json_response(
                StatusCode::FORBIDDEN,
                json!({ "error": format!("Origin '{origin}' is not allowed; add it with --allowed-origin") }),
            )));
        }
        if let Some(token) = self.config.mcp_token.as_ref().filter(|_| require_token) {
            if !headers.contains_key(header::AUTHORIZATION) {
                return Err(Box::new(unauthorized(
                    "a bearer token is required (Authorization: Bearer TOKEN; the stop and \
                     connect subcommands send it with --mcp-token or MCP_TOKEN)",
                )));
            }
            if !bearer_matches(headers, token) {
                return Err(Box::new(unauthorized(
                    "the bearer token is not valid; pass the token the server was started with \
                     (--mcp-token or MCP_TOKEN)",
                )));
            }
        }
        Ok(())
    }

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
                other => json_response(
                    StatusCode::BAD_GATEWAY,
                    json!({ "error": other.to_string() }),
                ),
            })
        })
    }

    async fn route(self: Arc<Self>, request: Request<Incoming>) -> Response<Body> {
        let method = request.method().clone();
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
                let session = request
                    .headers()
                    .get(SESSION_HEADER)
                    .and_then(|v| v.to_str().ok())
                    .map(str::to_owned);
                if let (Some(hub), Some(caller), Some(id)) = (hub, &caller, &session)
                    && !hub.session_allowed(id, caller)
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
                match self.tool_view(parts.uri.query()) {
                    Ok(Some(view)) => {
                        parts.extensions.insert(view);
                    }
                    Ok(None) => {}
                    Err(refusal) => return *refusal,
                }
                let body = match read_body(body).await {
                    Ok(body) => body,
                    Err(refusal) => return *refusal,
                };
                let body = repair_initialize_body(&parts.headers, body);
                let mut mcp = self.mcp.clone();
                let mut response = match mcp.call(Request::from_parts(parts, Full::new(body))).await
                {
                    Ok(response) => response,
                    Err(never) => match never {},
                };
                // rmcp ends a session with 202; the Python client expects 200 or 204 (and warns).
                if method == Method::DELETE && response.status() == StatusCode::ACCEPTED {
                    *response.status_mut() = StatusCode::NO_CONTENT;
                }
                if let (Some(hub), Some(caller)) = (hub, &caller) {
                    match (&session, response.headers().get(SESSION_HEADER)) {
                        (Some(id), _) if method == Method::DELETE => hub.session_closed(id),
                        (None, Some(opened)) => {
                            if let Ok(opened) = opened.to_str() {
                                hub.session_opened(opened, caller);
                            }
                        }
                        _ => {}
                    }
                }
                response
            }
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
        // As the Python server reports it: the current notebook's kernel, else the kernel
        // execute_code uses; `not_initialized` until there is one.
        let kernel = match self.state.domain.notebooks.resolve(None) {
            Ok(notebook) => Some(notebook.kernel()),
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
        json!({
            "success": true,
            "service": "jupyter-mcp-server",
            "message": "Jupyter MCP Server is running.",
            "status": "healthy",
            "kernel_status": kernel_status,
            "version": env!("CARGO_PKG_VERSION"),
            "jupyter": { "url": jupyter.rest().shown_url(), "reachable": reachable },
        })
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
        let context = crate::tools::ToolContext {
            domain: self.state.domain.clone(),
            cancel: CancellationToken::new(),
            progress: None,
        };
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
                json!({ "success": false, "error": e.to_string() }),
            ),
            Err(unknown) => json_response(
                StatusCode::INTERNAL_SERVER_ERROR,
                json!({ "success": false, "error": unknown.to_string() }),
            ),
        }
    }
}

/// A request body, refused when over `MAX_REQUEST_BYTES` (413) or slower than `BODY_TIMEOUT`
/// (408); the same limits on every route.
async fn read_body(body: Incoming) -> Result<Bytes, Box<Response<Body>>> {
    let refusal = match tokio::time::timeout(BODY_TIMEOUT, collect_within_limit(body)).await {
        Ok(Ok(Some(body))) => return Ok(body),
        Ok(Ok(None)) => json_response(
            StatusCode::PAYLOAD_TOO_LARGE,
            json!({ "error": format!(
                "the request is larger than {} bytes; send less at once",
                super::MAX_REQUEST_BYTES
            ) }),
        ),
        Ok(Err(e)) => json_response(
            StatusCode::BAD_REQUEST,
            json!({ "error": format!("cannot read the body: {e}") }),
        ),
        Err(_) => json_response(
            StatusCode::REQUEST_TIMEOUT,
            json!({ "error": format!(
                "the request body did not arrive within {}s",
                BODY_TIMEOUT.as_secs()
            ) }),
        ),
    };
    Err(Box::new(refusal))
}

/// The body, or `None` when it is over the limit. The rest of an oversized body is read and
/// dropped (up to as much again) before we answer: closing on unread data resets the connection,
/// and the client would lose our 413 and see only a broken pipe.
async fn collect_within_limit(mut body: Incoming) -> Result<Option<Bytes>, hyper::Error> {
    let mut collected = Vec::new();
    let mut over = 0usize;
    while let Some(frame) = body.frame().await {
        let Ok(data) = frame?.into_data() else {
            continue;
        };
        if over > 0 || collected.len() + data.len() > super::MAX_REQUEST_BYTES {
            collected = Vec::new();
            over += data.len();
            if over > super::MAX_REQUEST_BYTES {
                break;
            }
            continue;
        }
        collected.extend_from_slice(&data);
    }
    Ok((over == 0).then(|| Bytes::from(collected)))
}

/// The body with a malformed `initialize` given defaults (see `compat`); anything else as it came.
fn repair_initialize_body(headers: &HeaderMap, body: Bytes) -> Bytes {
    let Ok(message) = serde_json::from_slice::<Value>(&body) else {
        return body;
    };
    let version = headers
        .get("mcp-protocol-version")
        .and_then(|v| v.to_str().ok());
    match super::compat::repair_initialize(&message, version) {
        Some(repaired) => Bytes::from(repaired.to_string()),
        None => body,
    }
}

/// Refuses HTTP settings that would serve without authentication unless told to; checked before
/// anything is started, so a missing token costs the operator no wait.
/// In Hub mode the Hub's tokens are the authentication.
pub fn check_auth(config: &HttpConfig, hub_mode: bool) -> Result<(), HttpError> {
    if !hub_mode && config.mcp_token.is_none() && !config.insecure_noauth {
        return Err(HttpError::NoAuthConfigured);
    }
    Ok(())
}

/// Serves until `stop` is cancelled (by a signal or `DELETE /api/stop`).
pub async fn serve(state: Arc<ServerState>, stop: CancellationToken) -> Result<(), HttpError> {
    let config = state.http.clone();
    check_auth(&config, state.hub.is_some())?;
    if config.mcp_token.is_none() && state.hub.is_none() {
        tracing::warn!(
            "--insecure-mcp-noauth: anyone who can reach {}:{} can run code through this server",
            config.host,
            config.port
        );
    }
    let address = format!("{}:{}", config.host, config.port);
    let listener = tokio::net::TcpListener::bind(&address)
        .await
        .map_err(|source| HttpError::Bind {
            address: address.clone(),
            source,
        })?;
    let local: SocketAddr = listener
        .local_addr()
        .map_err(|source| HttpError::Bind { address, source })?;
    tracing::info!(
        "serving MCP over Streamable HTTP at http://{local}{}mcp",
        config.prefix
    );

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
    let mcp = StreamableHttpService::new(
        move || Ok(McpServer::with_tasks(factory_state.clone(), tasks.clone())),
        Arc::new(LocalSessionManager::default()),
        rmcp_config,
    );
    let context = Arc::new(HttpContext {
        state,
        config,
        mcp,
        stop: stop.clone(),
    });

    let mut connections = tokio::task::JoinSet::new();
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
        let context = context.clone();
        let stop = stop.clone();
        connections.spawn(async move {
            let service = hyper::service::service_fn(move |request| {
                let context = context.clone();
                async move { Ok::<_, Infallible>(context.route(request).await) }
            });
            let mut builder = ConnectionBuilder::new(TokioExecutor::new());
            builder
                .http1()
                .timer(TokioTimer::new())
                .header_read_timeout(HEADER_TIMEOUT);
            let connection = builder.serve_connection_with_upgrades(TokioIo::new(stream), service);
            tokio::pin!(connection);
            tokio::select! {
                result = connection.as_mut() => {
                    if let Err(e) = result {
                        tracing::debug!("HTTP connection ended: {e}");
                    }
                }
                _ = stop.cancelled() => {
                    // Let the response in flight (e.g. to DELETE /api/stop) reach the client.
                    connection.as_mut().graceful_shutdown();
                    let _ = tokio::time::timeout(Duration::from_secs(2), connection.as_mut()).await;
                }
            }
        });
    }
    // Answer what is in flight before the process goes on to stop.
    let _ = tokio::time::timeout(Duration::from_secs(3), async {
        while connections.join_next().await.is_some() {}
    })
    .await;
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn hosts() {
        assert!(host_allowed("127.0.0.1:4040", &[]));
        assert!(host_allowed("localhost", &[]));
        assert!(host_allowed("[::1]:4040", &[]));
        assert!(!host_allowed("evil.example:4040", &[]));
        assert!(!host_allowed("[::1].evil.com:4040", &[]));
        assert!(!host_allowed("[::1]evil.com", &[]));
        assert!(!host_allowed("[::1]:", &[]));
        assert!(host_allowed(
            "lab.example.org:443",
            &["lab.example.org".into()]
        ));
        assert!(host_allowed(
            "lab.example.org:8443",
            &["lab.example.org:8443".into()]
        ));
        assert!(!host_allowed(
            "lab.example.org:9999",
            &["lab.example.org:8443".into()]
        ));
    }

    #[test]
    fn origins() {
        assert!(origin_allowed("http://localhost:8888", &[]));
        assert!(origin_allowed("http://127.0.0.1", &[]));
        assert!(!origin_allowed("https://evil.example", &[]));
        assert!(!origin_allowed("null", &[]));
        let allowed = vec![
            "https://lab.example.org".to_owned(),
            "http://x.test:*".to_owned(),
        ];
        assert!(origin_allowed("https://lab.example.org", &allowed));
        assert!(!origin_allowed("https://lab.example.org:8443", &allowed));
        assert!(!origin_allowed("http://lab.example.org", &allowed));
        assert!(origin_allowed("http://x.test:1234", &allowed));
    }

    #[test]
    fn bearer_tokens() {
        let mut headers = HeaderMap::new();
        assert!(!bearer_matches(&headers, "t0k"));
        headers.insert(header::AUTHORIZATION, "Bearer t0k".parse().unwrap());
        assert!(bearer_matches(&headers, "t0k"));
        assert!(!bearer_matches(&headers, "t0kX"));
        headers.insert(header::AUTHORIZATION, "token t0k".parse().unwrap());
        assert!(!bearer_matches(&headers, "t0k"));
    }
}

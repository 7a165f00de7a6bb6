//! The JupyterHub REST API, as one user sees it with their own API token: who the token
//! belongs to (`GET /hub/api/user`), their default server's state, starting it and following
//! its spawn progress (the Hub's event stream). Knows nothing of MCP or of our per-user state.
//!
//! The token is the user's secret: it only travels in the `Authorization` header and never
//! appears in an error, a log line or a URL.

use std::time::Duration;

use reqwest::StatusCode;
use serde::Deserialize;
use url::Url;

use super::auth::Secret;
use super::rest::error_chain;

/// Where the Hub is: its public URL (the proxy users reach, which routes `/user/NAME/` to
/// each user's server) and its REST API.
#[derive(Debug, Clone)]
pub struct HubEndpoints {
    /// Ends with '/'.
    pub public: Url,
    /// `.../hub/api/`, ends with '/'.
    pub api: Url,
    /// How long a user's server may take to start (`--jupyterhub-spawn-timeout`).
    pub spawn_limit: Duration,
}

impl HubEndpoints {
    /// The API under the public URL unless given (a managed service gets the Hub's own
    /// address in `JUPYTERHUB_API_URL`).
    pub fn new(mut public: Url, api: Option<Url>) -> Self {
        with_slash(&mut public);
        let mut api = api.unwrap_or_else(|| public.join("hub/api/").expect("relative join"));
        with_slash(&mut api);
        HubEndpoints {
            public,
            api,
            spawn_limit: DEFAULT_SPAWN_LIMIT,
        }
    }
}

/// How long a user's server may take to start, unless the operator says otherwise.
pub const DEFAULT_SPAWN_LIMIT: Duration = Duration::from_secs(300);

fn with_slash(url: &mut Url) {
    if !url.path().ends_with('/') {
        let path = format!("{}/", url.path());
        url.set_path(&path);
    }
}

/// A user's default server as the Hub reports it.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub enum ServerState {
    /// Not running (or not reported: the token cannot read servers).
    #[default]
    Stopped,
    /// Starting or stopping (the Hub's `pending`: "spawn", "stop").
    Pending(String),
    /// Ready at this path under the public URL.
    Ready(String),
    /// The Hub did not say: the token may use the server but not read its state (it has
    /// `access:servers` without `read:servers`). The server itself is asked.
    Unreported,
}

/// Who a token belongs to, and their default server.
#[derive(Debug, Clone)]
pub struct HubUser {
    pub name: String,
    pub server: ServerState,
    /// The token's own scopes as the Hub expands them (JupyterHub 2 and later; `None` from a
    /// Hub that does not say).
    pub scopes: Option<Vec<String>>,
}

impl HubUser {
    /// Whether the token may reach its user's default server, as the Hub documents for API
    /// access: `access:servers` unfiltered, or filtered to this user or this server. `None`
    /// scopes (an older Hub): the single-user server decides, as before.
    pub fn may_use_own_server(&self) -> bool {
        let Some(scopes) = &self.scopes else {
            return true;
        };
        let user = format!("access:servers!user={}", self.name);
        let server = format!("access:servers!server={}/", self.name);
        scopes
            .iter()
            .any(|scope| scope == "access:servers" || *scope == user || *scope == server)
    }
}

#[derive(Debug, thiserror::Error)]
pub enum HubError {
    #[error(
        "the JupyterHub at {hub} does not accept this token (revoked, expired, or not a \
         JupyterHub API token); create a token on the Hub's token page ({hub}hub/token) and \
         send it as the bearer token"
    )]
    TokenRefused { hub: String },
    #[error("the JupyterHub at {hub} cannot be reached: {reason}; check that it is running")]
    Unreachable { hub: String, reason: String },
    #[error("the JupyterHub at {hub} refused to {action}: HTTP {status}: {message}")]
    Refused {
        hub: String,
        action: &'static str,
        status: u16,
        message: String,
    },
    #[error("the JupyterHub at {hub} answered something that is not a JupyterHub API: {reason}")]
    Unexpected { hub: String, reason: String },
    #[error(
        "the JupyterHub at {hub} says this token of '{user}' may not use their server (it lacks \
         the scope access:servers!user={user}); create a token with that scope (the Hub's token \
         page gives one by default) and send it as the bearer token"
    )]
    ScopeMissing { hub: String, user: String },
    #[error(
        "the server of '{user}' does not answer, and this token may not read its state on the \
         JupyterHub at {hub} (it has no read:servers scope), so it cannot be started from here: \
         start it on the Hub's home page ({hub}hub/home), or use a token with read:servers and \
         servers"
    )]
    ServerUnreported { hub: String, user: String },
    #[error("your server on the JupyterHub at {hub} failed to start: {message}")]
    SpawnFailed { hub: String, message: String },
    #[error(
        "your server on the JupyterHub at {hub} did not become ready within {seconds}s; look at \
         its spawn log on the Hub's home page, then call again"
    )]
    SpawnTimeout { hub: String, seconds: u64 },
}

/// One event of the Hub's spawn progress stream.
#[derive(Debug, Deserialize)]
pub struct ProgressEvent {
    pub progress: Option<f64>,
    pub message: Option<String>,
    #[serde(default)]
    pub ready: bool,
    #[serde(default)]
    pub failed: bool,
}

#[derive(Deserialize)]
struct UserModel {
    name: String,
    /// The default server's URL path when it runs (older Hubs, and tokens without
    /// `read:servers`, may leave it out).
    server: Option<String>,
    pending: Option<String>,
    servers: Option<std::collections::HashMap<String, ServerModel>>,
    #[serde(default)]
    scopes: Option<Vec<String>>,
}

#[derive(Deserialize)]
struct ServerModel {
    #[serde(default)]
    ready: bool,
    pending: Option<String>,
    url: Option<String>,
}

impl UserModel {
    fn into_user(self) -> HubUser {
        let default = self.servers.as_ref().and_then(|s| s.get(""));
        let server = match (default, self.server, self.pending) {
            (Some(s), _, _) if s.pending.is_some() => {
                ServerState::Pending(s.pending.clone().unwrap_or_default())
            }
            (Some(s), _, _) if s.ready => ServerState::Ready(s.url.clone().unwrap_or_default()),
            (Some(_), _, _) => ServerState::Stopped,
            (None, _, Some(pending)) => ServerState::Pending(pending),
            (None, Some(path), None) => ServerState::Ready(path),
            (None, None, None)
                if self.scopes.as_ref().is_some_and(|scopes| {
                    !scopes.iter().any(|scope| scope.starts_with("read:servers"))
                }) =>
            {
                ServerState::Unreported
            }
            (None, None, None) => ServerState::Stopped,
        };
        HubUser {
            name: self.name,
            server,
            scopes: self.scopes,
        }
    }
}

/// The Hub's REST API with one client (connection pool) for every user.
#[derive(Debug, Clone)]
pub struct HubClient {
    endpoints: HubEndpoints,
    http: reqwest::Client,
}

impl HubClient {
    /// How long a user's server may take to start.
    pub fn spawn_limit(&self) -> Duration {
        self.endpoints.spawn_limit
    }

    pub fn new(endpoints: HubEndpoints) -> Self {
        let http = reqwest::Client::builder()
            .connect_timeout(Duration::from_secs(10))
            .tcp_nodelay(true)
            .build()
            .expect("the TLS backend is compiled in");
        HubClient { endpoints, http }
    }

    /// The Hub's public URL, as errors name it.
    pub fn shown(&self) -> String {
        super::rest::redacted(&self.endpoints.public)
    }

    /// A user's server URL from the path the Hub reports (`/user/NAME/`); the default path
    /// when the Hub gave none.
    pub fn server_url(&self, user: &str, path: Option<&str>) -> Url {
        let mut url = self.endpoints.public.clone();
        match path.filter(|p| !p.is_empty()) {
            Some(path) => url.set_path(path),
            None => {
                url.path_segments_mut()
                    .expect("http URLs have paths")
                    .pop_if_empty()
                    .extend(["user", user, ""]);
            }
        }
        with_slash(&mut url);
        url
    }

    fn api(&self, segments: &[&str]) -> Url {
        let mut url = self.endpoints.api.clone();
        url.path_segments_mut()
            .expect("http URLs have paths")
            .pop_if_empty()
            .extend(segments);
        url
    }

    /// A request to the API with the user's token in its header (never in the URL).
    fn request(
        &self,
        method: reqwest::Method,
        segments: &[&str],
        token: &Secret,
    ) -> reqwest::RequestBuilder {
        self.http
            .request(method, self.api(segments))
            .header("Authorization", format!("token {}", token.expose()))
    }

    fn unreachable(&self, error: &reqwest::Error) -> HubError {
        HubError::Unreachable {
            hub: self.shown(),
            reason: error_chain(error),
        }
    }

    /// Who the token belongs to and their default server's state.
    pub async fn user(&self, token: &Secret) -> Result<HubUser, HubError> {
        let response = self
            .request(reqwest::Method::GET, &["user"], token)
            .timeout(Duration::from_secs(30))
            .send()
            .await
            .map_err(|e| self.unreachable(&e))?;
        let status = response.status();
        if matches!(status, StatusCode::UNAUTHORIZED | StatusCode::FORBIDDEN) {
            return Err(HubError::TokenRefused { hub: self.shown() });
        }
        let body = response.text().await.map_err(|e| self.unreachable(&e))?;
        if !status.is_success() {
            return Err(self.refused("identify the token", status, &body));
        }
        serde_json::from_str::<UserModel>(&body)
            .map(UserModel::into_user)
            .map_err(|e| HubError::Unexpected {
                hub: self.shown(),
                reason: e.to_string(),
            })
    }

    fn refused(&self, action: &'static str, status: StatusCode, body: &str) -> HubError {
        // The Hub's errors are JSON `{"message": ...}`; a proxy's may be HTML.
        let message = serde_json::from_str::<serde_json::Value>(body)
            .ok()
            .and_then(|v| v.get("message").and_then(|m| m.as_str()).map(str::to_owned))
            .unwrap_or_else(|| body.chars().take(200).collect());
        HubError::Refused {
            hub: self.shown(),
            action,
            status: status.as_u16(),
            message,
        }
    }

    /// Asks the Hub to start the user's default server. `true`: it is ready already;
    /// `false`: it is spawning (follow [`HubClient::follow_progress`]).
    pub async fn start_server(&self, token: &Secret, user: &str) -> Result<bool, HubError> {
        let response = self
            .request(reqwest::Method::POST, &["users", user, "server"], token)
            .timeout(Duration::from_secs(60))
            .send()
            .await
            .map_err(|e| self.unreachable(&e))?;
        let status = response.status();
        let body = response.text().await.unwrap_or_default();
        match status {
            StatusCode::CREATED => Ok(true),
            StatusCode::ACCEPTED => Ok(false),
            StatusCode::UNAUTHORIZED => Err(HubError::TokenRefused { hub: self.shown() }),
            // "already running" (a race with someone else's start) is what we wanted.
            StatusCode::BAD_REQUEST if body.contains("already running") => Ok(true),
            _ => Err(self.refused("start your server", status, &body)),
        }
    }

    /// Follows the spawn progress stream, reporting each event, until the server is ready
    /// (`Ok`), failed (`SpawnFailed`) or `limit` passes. An ended stream is `Ok(false)`: the
    /// caller asks the Hub for the state.
    pub async fn follow_progress(
        &self,
        token: &Secret,
        user: &str,
        limit: Duration,
        mut report: impl FnMut(&ProgressEvent),
    ) -> Result<bool, HubError> {
        let follow = async {
            let mut response = self
                .request(
                    reqwest::Method::GET,
                    &["users", user, "server", "progress"],
                    token,
                )
                .header("Accept", "text/event-stream")
                .send()
                .await
                .map_err(|e| self.unreachable(&e))?;
            let status = response.status();
            if !status.is_success() {
                let body = response.text().await.unwrap_or_default();
                return Err(self.refused("report your server's progress", status, &body));
            }
            let mut pending = Vec::new();
            while let Some(chunk) = response.chunk().await.map_err(|e| self.unreachable(&e))? {
                pending.extend_from_slice(&chunk);
                // Server-sent events: `data: {...}` lines, events split by blank lines.
                while let Some(end) = pending.iter().position(|b| *b == b'\n') {
                    let line: Vec<u8> = pending.drain(..=end).collect();
                    let line = String::from_utf8_lossy(&line);
                    let Some(data) = line.trim().strip_prefix("data:") else {
                        continue;
                    };
                    let Ok(event) = serde_json::from_str::<ProgressEvent>(data.trim()) else {
                        continue;
                    };
                    report(&event);
                    if event.failed {
                        return Err(HubError::SpawnFailed {
                            hub: self.shown(),
                            message: event.message.unwrap_or_else(|| "no reason given".into()),
                        });
                    }
                    if event.ready {
                        return Ok(true);
                    }
                }
            }
            Ok(false)
        };
        tokio::time::timeout(limit, follow)
            .await
            .unwrap_or_else(|_| {
                // The whole limit, not what was left of it when following began.
                Err(HubError::SpawnTimeout {
                    hub: self.shown(),
                    seconds: self.spawn_limit().as_secs(),
                })
            })
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn client() -> HubClient {
        HubClient::new(HubEndpoints::new(
            Url::parse("http://127.0.0.1:8000/base").unwrap(),
            None,
        ))
    }

    #[test]
    fn urls_keep_the_base_path() {
        let hub = client();
        assert_eq!(
            hub.api(&["user"]).as_str(),
            "http://127.0.0.1:8000/base/hub/api/user"
        );
        assert_eq!(
            hub.api(&["users", "a b/c", "server"]).as_str(),
            "http://127.0.0.1:8000/base/hub/api/users/a%20b%2Fc/server"
        );
        assert_eq!(
            hub.server_url("alice", None).as_str(),
            "http://127.0.0.1:8000/base/user/alice/"
        );
        assert_eq!(
            hub.server_url("alice", Some("/base/user/alice")).as_str(),
            "http://127.0.0.1:8000/base/user/alice/"
        );
    }

    #[test]
    fn server_states_from_user_models() {
        let state = |json: &str| {
            serde_json::from_str::<UserModel>(json)
                .unwrap()
                .into_user()
                .server
        };
        assert_eq!(state(r#"{"name":"a"}"#), ServerState::Stopped);
        assert_eq!(
            state(r#"{"name":"a","server":"/user/a/","pending":null}"#),
            ServerState::Ready("/user/a/".into())
        );
        assert_eq!(
            state(r#"{"name":"a","servers":{"":{"ready":false,"pending":"spawn"}}}"#),
            ServerState::Pending("spawn".into())
        );
        assert_eq!(
            state(r#"{"name":"a","servers":{"":{"ready":true,"pending":null,"url":"/user/a/"}}}"#),
            ServerState::Ready("/user/a/".into())
        );
        assert_eq!(state(r#"{"name":"a","servers":{}}"#), ServerState::Stopped);
    }
}

//! The Jupyter Server REST API: contents, kernels, sessions, kernelspecs and status.
//!
//! Jupyter answers some failures misleadingly (a rejected token looks like an XSRF error, an
//! unknown kernel on some routes is a 500, a gateway's reason arrives in `reason` or a traceback
//! rather than `message`); [`classify_failure`] turns those into errors that say what actually
//! happened and who said so: the Jupyter Server, Enterprise Gateway, or the gateway behind a
//! Jupyter Server (`--GatewayClient.url`).

use std::sync::{Arc, Mutex, OnceLock};
use std::time::Duration;

use reqwest::{Method, StatusCode};
use serde::de::DeserializeOwned;
use serde_json::Value;
use url::Url;

use super::auth::{Auth, Credentials, LoginError};

mod contents;
mod kernels;
mod models;
mod send;

pub use kernels::KernelStart;
pub use models::{
    CollaborationSession, ContentsModel, KernelModel, KernelSpec, KernelSpecEntry, KernelSpecs,
    RoomEngine, SessionModel,
};
use send::Payload;

/// What a failing request was about, so errors can name it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Subject {
    Kernel(String),
    /// A kernel being started, of this kernelspec (the server's default when `None`).
    NewKernel(Option<String>),
    Path(String),
    Server,
    Collaboration,
}

impl std::fmt::Display for Subject {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            Subject::Kernel(id) => write!(f, "kernel '{id}'"),
            Subject::NewKernel(Some(spec)) => write!(f, "a new kernel of kernelspec '{spec}'"),
            Subject::NewKernel(None) => write!(f, "a new kernel"),
            Subject::Path(path) if path.is_empty() => write!(f, "the root directory"),
            Subject::Path(path) => write!(f, "'{path}'"),
            Subject::Server => write!(f, "the Jupyter Server"),
            Subject::Collaboration => write!(f, "real-time collaboration"),
        }
    }
}

/// What kind of server a client talks to, so a refusal names who refused.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Peer {
    JupyterServer,
    /// Jupyter Enterprise Gateway (its `/api` names a `gateway_version`).
    EnterpriseGateway,
}

impl Peer {
    fn name(self) -> &'static str {
        match self {
            Peer::JupyterServer => "the Jupyter Server",
            Peer::EnterpriseGateway => "Enterprise Gateway",
        }
    }
}

#[derive(Debug, thiserror::Error)]
pub enum RestError {
    #[error(
        "cannot reach the Jupyter Server at {url}: {reason}. Check that it is running and that the URL is right"
    )]
    Unreachable { url: String, reason: String },
    #[error(
        "{url} did not answer a request to start a kernel within {seconds} s \
         (--kernel-start-timeout); on a cluster the kernel's pod may still be being scheduled or \
         its image pulled: try again later, or raise --kernel-start-timeout"
    )]
    StartTimedOut { url: String, seconds: u64 },
    #[error(
        "{who} rejected the token (HTTP {status}{}). Check --jupyter-token / JUPYTER_TOKEN \
         (--code-sandbox-token / CODE_SANDBOX_TOKEN for a separate code sandbox)",
        colon_then(.reason)
    )]
    TokenRejected {
        who: String,
        status: u16,
        reason: String,
    },
    #[error("{subject} was not found on the Jupyter Server")]
    NotFound { subject: Subject },
    #[error("{who} refused {method} on {subject} (HTTP {status}): {message}")]
    Status {
        who: String,
        method: String,
        subject: Subject,
        status: u16,
        message: String,
    },
    #[error(
        "the path or id {segment:?} contains a control character (tab, newline, …); Jupyter paths \
         never do: give it without them"
    )]
    ControlCharacter { segment: String },
    #[error("the Jupyter Server sent an answer about {subject} that could not be read: {reason}")]
    Decode { subject: Subject, reason: String },
    #[error(transparent)]
    Login(#[from] LoginError),
}

/// `": reason"`, or nothing for no reason.
fn colon_then(reason: &str) -> String {
    if reason.is_empty() {
        String::new()
    } else {
        format!(": {reason}")
    }
}

/// What a failed answer says went wrong: its `message`, else its `reason` (Enterprise Gateway
/// puts its refusals there), else the last line of its traceback (a kernel start failing in a
/// gateway), else its text; HTTP's own phrases ("Forbidden", "Unknown server error") say nothing.
fn stated_reason(status: StatusCode, body: &str) -> String {
    let Ok(json) = serde_json::from_str::<Value>(body) else {
        return body.trim().chars().take(300).collect();
    };
    let says_something = |text: &&str| {
        let text = text.trim();
        !text.is_empty()
            && Some(text) != status.canonical_reason()
            && text != "Unknown server error"
    };
    let field = |key: &str| json.get(key).and_then(Value::as_str).filter(says_something);
    let last_traceback_line = || {
        json.get("traceback")
            .and_then(Value::as_str)
            .and_then(|t| t.lines().rev().find(|l| !l.trim().is_empty()))
            .map(|l| l.trim().to_owned())
    };
    field("message")
        .or_else(|| field("reason"))
        .map(str::to_owned)
        .or_else(last_traceback_line)
        .unwrap_or_else(|| {
            status
                .canonical_reason()
                .unwrap_or("no reason given")
                .to_owned()
        })
}

/// Whether a 403's reason is about who is asking (a token, a login, the XSRF check a bad token
/// trips on a POST), rather than about what was asked.
fn about_authentication(reason: &str) -> bool {
    let reason = reason.to_ascii_lowercase();
    ["token", "_xsrf", "auth", "login", "credential", "forbidden"]
        .iter()
        .any(|word| reason.contains(word))
}

/// Jupyter Server's gateway proxy answers a gateway's refusal with this text and drops the
/// gateway's own reason (it only reaches the Jupyter Server's log).
const RELAYED_FROM_GATEWAY: &str = "Error from Gateway";

/// Maps a failed response from `peer` at `base_url` to the error it really means.
pub fn classify_failure(
    method: &Method,
    status: StatusCode,
    body: &str,
    subject: Subject,
    base_url: &str,
    peer: Peer,
) -> RestError {
    let mut message = stated_reason(status, body);
    let mut who = format!("{} at {base_url}", peer.name());
    let relayed = message.starts_with(RELAYED_FROM_GATEWAY);
    if relayed {
        who = format!("the gateway behind the Jupyter Server at {base_url} (--GatewayClient.url)");
        message = "the Jupyter Server did not pass on the gateway's reason; the Jupyter \
                   Server's log has it"
            .to_owned();
    }
    let gateway = peer == Peer::EnterpriseGateway || who.starts_with("the gateway");
    match status {
        // The server's own file system refused (read-only directory, immutable file): a 403
        // too, but nothing to do with the token.
        StatusCode::FORBIDDEN if message.contains("Permission denied") => RestError::Status {
            who,
            method: method.to_string(),
            subject,
            status: status.as_u16(),
            message: format!(
                "{message} (the Jupyter Server cannot write there: check the permissions and \
                 free space of its notebook directory)"
            ),
        },
        // A gateway that refuses a kernel start refuses its user, not the token.
        StatusCode::FORBIDDEN if gateway && method == Method::POST => RestError::Status {
            who,
            method: method.to_string(),
            subject,
            status: status.as_u16(),
            message: format!(
                "{message} (Enterprise Gateway refuses the users in its unauthorized_users, \
                 root by default, and those missing from a non-empty authorized_users; the \
                 kernel's user is KERNEL_USERNAME: pass it with --kernel-env)"
            ),
        },
        // A gateway forbids listing kernels unless its operator allows it.
        StatusCode::FORBIDDEN if gateway && !about_authentication(&message) => RestError::Status {
            who,
            method: method.to_string(),
            subject,
            status: status.as_u16(),
            message,
        },
        StatusCode::FORBIDDEN if gateway && matches!(subject, Subject::Server) => {
            RestError::Status {
                who,
                method: method.to_string(),
                subject,
                status: status.as_u16(),
                message: format!(
                    "{message} (with a right token, this is a route the gateway keeps closed: \
                     Enterprise Gateway lists kernels only with --EnterpriseGatewayApp.list_kernels=True)"
                ),
            }
        }
        // Our token passed; the Jupyter Server's own one for its gateway did not.
        StatusCode::UNAUTHORIZED if relayed => RestError::Status {
            who,
            method: method.to_string(),
            subject,
            status: status.as_u16(),
            message: "the gateway refused the Jupyter Server's token for it (the Jupyter \
                      Server's GatewayClient.auth_token / JUPYTER_GATEWAY_AUTH_TOKEN)"
                .to_owned(),
        },
        // A bad token on a POST reads "'_xsrf' argument missing": it is still a bad token.
        StatusCode::UNAUTHORIZED => RestError::TokenRejected {
            who,
            status: status.as_u16(),
            reason: String::new(),
        },
        StatusCode::FORBIDDEN if about_authentication(&message) => RestError::TokenRejected {
            who,
            status: status.as_u16(),
            reason: message,
        },
        StatusCode::NOT_FOUND => RestError::NotFound { subject },
        // Restarting or interrupting an unknown kernel is a 500 with this text.
        StatusCode::INTERNAL_SERVER_ERROR
            if matches!(subject, Subject::Kernel(_))
                && (message.contains("Kernel does not exist")
                    || message.contains("No such kernel")
                    || body.contains("KeyError")) =>
        {
            RestError::NotFound { subject }
        }
        _ => RestError::Status {
            who,
            method: method.to_string(),
            subject,
            status: status.as_u16(),
            message,
        },
    }
}
/// A client for one Jupyter Server.
#[derive(Clone)]
pub struct JupyterRest {
    http: reqwest::Client,
    /// Always ends with '/', so relative joins keep a base path such as `/user/x/`.
    base: Url,
    auth: Auth,
    /// What kind of server this is, learned at the first failure that needs naming it.
    peer: Arc<OnceLock<Peer>>,
    /// The extension that last named a room here, asked first next time (the other is still
    /// asked when it says no: the server may have been restarted with the other).
    room_engine: Arc<Mutex<Option<RoomEngine>>>,
}

impl std::fmt::Debug for JupyterRest {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("JupyterRest")
            .field("base", &self.shown_url())
            .finish()
    }
}

impl JupyterRest {
    pub fn new(base: Url, token: Option<String>) -> Self {
        Self::with_auth(base, Auth::from_parts(token, None))
    }

    /// A client authenticating with a token, a password login or nothing.
    pub fn with_auth(mut base: Url, auth: Auth) -> Self {
        if !base.path().ends_with('/') {
            let path = format!("{}/", base.path());
            base.set_path(&path);
        }
        let http = reqwest::Client::builder()
            .connect_timeout(Duration::from_secs(10))
            .timeout(Duration::from_secs(60))
            .tcp_nodelay(true)
            .build()
            .expect("the TLS backend is compiled in");
        JupyterRest {
            http,
            base,
            auth,
            peer: Arc::default(),
            room_engine: Arc::default(),
        }
    }

    pub fn base_url(&self) -> &Url {
        &self.base
    }

    /// The base URL as shown in answers and logs: without credentials.
    pub fn shown_url(&self) -> String {
        redacted(&self.base)
    }

    pub fn token(&self) -> Option<&str> {
        self.auth.token()
    }

    /// The headers that authenticate a request now (logging in first for a password).
    pub async fn credentials(&self) -> Result<Credentials, RestError> {
        match &self.auth {
            Auth::None => Ok(Credentials::default()),
            Auth::Token(token) => Ok(Credentials::with_token(token)),
            Auth::Rotating(token) => Ok(token.credentials()),
            Auth::Password(login) => Ok(login.credentials(&self.base).await?),
        }
    }

    /// Fresh credentials after a request with `stale` ones was refused: a new login for a
    /// password, `None` when renewing cannot help (a token, or no credentials).
    pub async fn renew_credentials(
        &self,
        stale: &Credentials,
    ) -> Result<Option<Credentials>, RestError> {
        match &self.auth {
            Auth::Password(login) => Ok(Some(login.renew(&self.base, stale).await?)),
            _ => Ok(None),
        }
    }

    /// `api/...` joined to the base, with each path segment percent-encoded. A segment with a
    /// control character is refused before anything is built: URL parsing drops tabs and
    /// newlines, so `..<TAB>` would pass the url crate's `..` filter and later climb a level.
    pub fn endpoint(&self, segments: &[&str]) -> Result<Url, RestError> {
        if let Some(segment) = segments.iter().find(|s| s.chars().any(char::is_control)) {
            return Err(RestError::ControlCharacter {
                segment: (*segment).to_owned(),
            });
        }
        let mut url = self.base.clone();
        {
            let mut path = url.path_segments_mut().expect("http URLs have paths");
            path.pop_if_empty();
            for segment in segments {
                for part in segment.split('/').filter(|p| !p.is_empty()) {
                    path.push(part);
                }
            }
        }
        Ok(url)
    }

    /// `endpoint` with the matching websocket scheme.
    fn websocket_endpoint(&self, segments: &[&str]) -> Result<Url, RestError> {
        let mut url = self.endpoint(segments)?;
        let scheme = if url.scheme() == "https" { "wss" } else { "ws" };
        url.set_scheme(scheme)
            .expect("ws and wss are valid schemes");
        Ok(url)
    }

    /// The websocket URL of a kernel's channels.
    pub fn kernel_channels_url(&self, kernel_id: &str, session_id: &str) -> Result<Url, RestError> {
        let mut url = self.websocket_endpoint(&["api", "kernels", kernel_id, "channels"])?;
        url.query_pairs_mut().append_pair("session_id", session_id);
        Ok(url)
    }

    /// The readiness check: `GET /api/status`, or, from a gateway (Enterprise Gateway and Kernel
    /// Gateway have no such route), its kernelspecs; both need the token.
    pub async fn status(&self) -> Result<Value, RestError> {
        match self.get(&["api", "status"], Subject::Server).await {
            Err(RestError::NotFound { .. }) => {
                self.get(&["api", "kernelspecs"], Subject::Server).await
            }
            answer => answer,
        }
    }

    /// `POST /api/shutdown`: asks the server to stop, letting its extensions close first.
    pub async fn shutdown_server(&self) -> Result<(), RestError> {
        let url = self.endpoint(&["api", "shutdown"])?;
        self.send(Method::POST, url, None, Subject::Server)
            .await
            .map(drop)
    }
}

/// A Jupyter URL fit to show or log: without user info, query and fragment, where passwords
/// and tokens ride (`http://alice:pw@host/?token=...`).
pub fn redacted(url: &Url) -> String {
    let mut shown = url.clone();
    let _ = shown.set_username("");
    let _ = shown.set_password(None);
    shown.set_query(None);
    shown.set_fragment(None);
    shown.to_string()
}

/// The whole cause chain of an error on one line (reqwest hides the useful part in sources).
pub fn error_chain(error: &dyn std::error::Error) -> String {
    let mut text = error.to_string();
    let mut source = error.source();
    while let Some(cause) = source {
        let cause_text = cause.to_string();
        if !text.contains(&cause_text) {
            text.push_str(": ");
            text.push_str(&cause_text);
        }
        source = cause.source();
    }
    text
}

#[cfg(test)]
mod tests;

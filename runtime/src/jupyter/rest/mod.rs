//! The Jupyter Server REST API: contents, kernels, sessions, kernelspecs and status.
//!
//! Jupyter answers some failures misleadingly (a rejected token looks like an XSRF error, an
//! unknown kernel on some routes is a 500); [`classify_failure`] turns those into errors that say
//! what actually happened.

use std::time::Duration;

use reqwest::{Method, StatusCode};
use serde::de::DeserializeOwned;
use serde_json::Value;
use url::Url;

use super::auth::{Auth, Credentials, LoginError};

mod contents;
mod kernels;
mod models;

pub use models::{
    CollaborationSession, ContentsModel, KernelModel, KernelSpec, KernelSpecEntry, KernelSpecs,
    SessionModel,
};

/// What a failing request was about, so errors can name it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Subject {
    Kernel(String),
    Path(String),
    Server,
    Collaboration,
}

impl std::fmt::Display for Subject {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            Subject::Kernel(id) => write!(f, "kernel '{id}'"),
            Subject::Path(path) if path.is_empty() => write!(f, "the root directory"),
            Subject::Path(path) => write!(f, "'{path}'"),
            Subject::Server => write!(f, "the Jupyter Server"),
            Subject::Collaboration => write!(f, "real-time collaboration"),
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
        "the Jupyter Server at {url} rejected the token (HTTP 403). Check --jupyter-token / JUPYTER_TOKEN"
    )]
    TokenRejected { url: String },
    #[error("{subject} was not found on the Jupyter Server")]
    NotFound { subject: Subject },
    #[error("the Jupyter Server refused {method} on {subject} (HTTP {status}): {message}")]
    Status {
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

/// Maps a failed response to the error it really means.
pub fn classify_failure(
    method: &Method,
    status: StatusCode,
    body: &str,
    subject: Subject,
    base_url: &str,
) -> RestError {
    let message = serde_json::from_str::<Value>(body)
        .ok()
        .and_then(|v| v.get("message").and_then(Value::as_str).map(str::to_owned))
        .unwrap_or_else(|| body.trim().chars().take(300).collect());
    match status {
        // The server's own file system refused (read-only directory, immutable file): a 403
        // too, but nothing to do with the token.
        StatusCode::FORBIDDEN if message.contains("Permission denied") => RestError::Status {
            method: method.to_string(),
            subject,
            status: status.as_u16(),
            message: format!(
                "{message} (the Jupyter Server cannot write there: check the permissions and \
                 free space of its notebook directory)"
            ),
        },
        // A bad token on a POST reads "'_xsrf' argument missing": it is still a bad token.
        StatusCode::FORBIDDEN | StatusCode::UNAUTHORIZED => RestError::TokenRejected {
            url: base_url.to_owned(),
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
        JupyterRest { http, base, auth }
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

    pub(super) async fn send(
        &self,
        method: Method,
        url: Url,
        body: Option<Value>,
        subject: Subject,
    ) -> Result<String, RestError> {
        let credentials = self.credentials().await?;
        let mut answer = self
            .send_once(&method, &url, body.as_ref(), &credentials)
            .await?;
        // An expired login reads as a refused one: log in again and try once more.
        if matches!(answer.0, StatusCode::FORBIDDEN | StatusCode::UNAUTHORIZED)
            && matches!(
                classify_failure(&method, answer.0, &answer.1, subject.clone(), ""),
                RestError::TokenRejected { .. }
            )
            && let Some(renewed) = self.renew_credentials(&credentials).await?
        {
            answer = self
                .send_once(&method, &url, body.as_ref(), &renewed)
                .await?;
        }
        let (status, text) = answer;
        if status.is_success() {
            Ok(text)
        } else {
            Err(classify_failure(
                &method,
                status,
                &text,
                subject,
                &self.shown_url(),
            ))
        }
    }

    pub(super) async fn send_once(
        &self,
        method: &Method,
        url: &Url,
        body: Option<&Value>,
        credentials: &Credentials,
    ) -> Result<(StatusCode, String), RestError> {
        let mut request = self.http.request(method.clone(), url.clone());
        for (name, value) in &credentials.headers {
            request = request.header(*name, value);
        }
        if let Some(body) = body {
            request = request.json(body);
        }
        // reqwest's errors quote the whole URL, query (a token) included: drop it.
        let unreachable = |e: reqwest::Error| RestError::Unreachable {
            url: self.shown_url(),
            reason: error_chain(&e.without_url()),
        };
        let response = request.send().await.map_err(unreachable)?;
        let status = response.status();
        let text = response.text().await.map_err(unreachable)?;
        Ok((status, text))
    }

    /// `GET` of a JSON answer under the server's base URL.
    pub(super) async fn get<T: DeserializeOwned>(
        &self,
        path: &[&str],
        subject: Subject,
    ) -> Result<T, RestError> {
        self.json(Method::GET, self.endpoint(path)?, None, subject)
            .await
    }

    pub(super) async fn json<T: DeserializeOwned>(
        &self,
        method: Method,
        url: Url,
        body: Option<Value>,
        subject: Subject,
    ) -> Result<T, RestError> {
        let text = self.send(method, url, body, subject.clone()).await?;
        serde_json::from_str(&text).map_err(|e| RestError::Decode {
            subject,
            reason: e.to_string(),
        })
    }

    /// `GET /api/status`: the readiness check.
    pub async fn status(&self) -> Result<Value, RestError> {
        self.get(&["api", "status"], Subject::Server).await
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
mod tests {
    use super::*;

    #[test]
    fn shown_urls_carry_no_credentials() {
        let url = Url::parse("http://alice:pw@127.0.0.1:8888/lab/?token=abc#frag").unwrap();
        assert_eq!(redacted(&url), "http://127.0.0.1:8888/lab/");
    }

    #[test]
    fn a_refused_write_is_not_a_rejected_token() {
        let error = classify_failure(
            &Method::PUT,
            StatusCode::FORBIDDEN,
            r#"{"message": "Permission denied: nb.ipynb", "reason": null}"#,
            Subject::Path("nb.ipynb".into()),
            "http://127.0.0.1:8888/",
        );
        let text = error.to_string();
        assert!(
            text.contains("Permission denied: nb.ipynb") && !text.contains("token"),
            "{text}"
        );
    }

    fn classify(method: Method, status: u16, body: &str, subject: Subject) -> RestError {
        classify_failure(
            &method,
            StatusCode::from_u16(status).unwrap(),
            body,
            subject,
            "http://127.0.0.1:8888/",
        )
    }

    #[test]
    fn xsrf_complaint_means_the_token_was_rejected() {
        let err = classify(
            Method::POST,
            403,
            r#"{"message": "'_xsrf' argument missing from POST"}"#,
            Subject::Server,
        );
        assert!(matches!(err, RestError::TokenRejected { .. }), "{err}");
        assert!(err.to_string().contains("JUPYTER_TOKEN"));
    }

    #[test]
    fn unknown_kernel_500_means_not_found() {
        let err = classify(
            Method::POST,
            500,
            r#"{"message": "Kernel does not exist: abc", "reason": null}"#,
            Subject::Kernel("abc".into()),
        );
        assert!(matches!(err, RestError::NotFound { .. }), "{err}");
        assert_eq!(
            err.to_string(),
            "kernel 'abc' was not found on the Jupyter Server"
        );
    }

    #[test]
    fn a_real_500_stays_a_server_error() {
        let err = classify(
            Method::POST,
            500,
            r#"{"message": "No such kernel spec named 'nope'"}"#,
            Subject::Server,
        );
        match err {
            RestError::Status {
                status, message, ..
            } => {
                assert_eq!(status, 500);
                assert!(message.contains("kernel spec"));
            }
            other => panic!("unexpected {other}"),
        }
    }

    #[test]
    fn plain_text_404_names_the_path() {
        let err = classify(
            Method::GET,
            404,
            "Not Found",
            Subject::Path("a/b.ipynb".into()),
        );
        assert_eq!(
            err.to_string(),
            "'a/b.ipynb' was not found on the Jupyter Server"
        );
    }

    #[test]
    fn endpoints_keep_base_paths_and_encode_segments() {
        let rest = JupyterRest::new(Url::parse("http://h:1/user/x").unwrap(), None);
        assert_eq!(
            rest.endpoint(&["api", "contents", "dir with space/n#1.ipynb"])
                .unwrap()
                .as_str(),
            "http://h:1/user/x/api/contents/dir%20with%20space/n%231.ipynb"
        );
        assert_eq!(
            rest.kernel_channels_url("k1", "s1").unwrap().as_str(),
            "ws://h:1/user/x/api/kernels/k1/channels?session_id=s1"
        );
        let tls = JupyterRest::new(Url::parse("https://hub/").unwrap(), None);
        assert!(
            tls.kernel_channels_url("k", "s")
                .unwrap()
                .as_str()
                .starts_with("wss://hub/api/")
        );
        for bad in ["..\t", "a/..\n/b", "x\u{85}"] {
            assert!(matches!(
                rest.endpoint(&["api", "contents", bad]),
                Err(RestError::ControlCharacter { .. })
            ));
        }
    }
}

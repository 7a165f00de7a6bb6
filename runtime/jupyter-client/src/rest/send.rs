//! Sending a request: credentials attached (and renewed once when a login expired), the body
//! (JSON, or a text file escaped as it streams), a timeout, and a refusal classified by who sent
//! it (see [`super::classify_failure`]).

use super::*;

/// What a request carries: a JSON value, or a text file's contents as the contents API takes
/// them (`{"type": "file", "format": "text", "content": ...}`), streamed from the text as it
/// is escaped rather than built whole first.
#[derive(Clone, Copy)]
pub(super) enum Payload<'a> {
    Json(&'a Value),
    TextFile(&'a std::sync::Arc<String>),
}

impl JupyterRest {
    pub(super) async fn send(
        &self,
        method: Method,
        url: Url,
        body: Option<Value>,
        subject: Subject,
    ) -> Result<String, RestError> {
        self.send_timed(method, url, body, subject, None).await
    }

    /// `send` with its own time limit in place of the client's: only a kernel start on a cluster
    /// has one, and its expiry is reported as that.
    pub(super) async fn send_timed(
        &self,
        method: Method,
        url: Url,
        body: Option<Value>,
        subject: Subject,
        timeout: Option<Duration>,
    ) -> Result<String, RestError> {
        self.send_payload(
            method,
            url,
            body.as_ref().map(Payload::Json),
            subject,
            timeout,
        )
        .await
    }

    pub(super) async fn send_payload(
        &self,
        method: Method,
        url: Url,
        body: Option<Payload<'_>>,
        subject: Subject,
        timeout: Option<Duration>,
    ) -> Result<String, RestError> {
        let credentials = self.credentials().await?;
        let mut answer = self
            .send_once_timed(&method, &url, body, &credentials, timeout)
            .await?;
        // An expired login reads as a refused one: log in again and try once more.
        if matches!(answer.0, StatusCode::FORBIDDEN | StatusCode::UNAUTHORIZED)
            && matches!(
                classify_failure(
                    &method,
                    answer.0,
                    &answer.1,
                    subject.clone(),
                    "",
                    Peer::JupyterServer
                ),
                RestError::TokenRejected { .. }
            )
            && let Some(renewed) = self.renew_credentials(&credentials).await?
        {
            answer = self
                .send_once_timed(&method, &url, body, &renewed, timeout)
                .await?;
        }
        let (status, text) = answer;
        if status.is_success() {
            Ok(text)
        } else {
            let peer = self.peer(&credentials).await;
            Err(classify_failure(
                &method,
                status,
                &text,
                subject,
                &self.shown_url(),
                peer,
            ))
        }
    }

    /// What kind of server this is: Enterprise Gateway names its version at `/api`.
    async fn peer(&self, credentials: &Credentials) -> Peer {
        if let Some(peer) = self.peer.get() {
            return *peer;
        }
        let Ok(url) = self.endpoint(&["api"]) else {
            return Peer::JupyterServer;
        };
        let peer = match self.send_once(&Method::GET, &url, None, credentials).await {
            Ok((status, body)) if status.is_success() => {
                let about = serde_json::from_str::<Value>(&body).unwrap_or_default();
                if about.get("gateway_version").is_some() {
                    Peer::EnterpriseGateway
                } else {
                    Peer::JupyterServer
                }
            }
            // Not known this time (unreachable, refused): asked again at the next failure.
            _ => return Peer::JupyterServer,
        };
        *self.peer.get_or_init(|| peer)
    }

    pub(super) async fn send_once(
        &self,
        method: &Method,
        url: &Url,
        body: Option<&Value>,
        credentials: &Credentials,
    ) -> Result<(StatusCode, String), RestError> {
        self.send_once_timed(method, url, body.map(Payload::Json), credentials, None)
            .await
    }

    async fn send_once_timed(
        &self,
        method: &Method,
        url: &Url,
        body: Option<Payload<'_>>,
        credentials: &Credentials,
        timeout: Option<Duration>,
    ) -> Result<(StatusCode, String), RestError> {
        let mut request = self.http.request(method.clone(), url.clone());
        if let Some(timeout) = timeout {
            request = request.timeout(timeout);
        }
        for (name, value) in &credentials.headers {
            request = request.header(*name, value);
        }
        match body {
            Some(Payload::Json(body)) => request = request.json(body),
            Some(Payload::TextFile(text)) => {
                request = request
                    .header(reqwest::header::CONTENT_TYPE, "application/json")
                    .body(contents::text_file_body(text.clone()));
            }
            None => {}
        }
        // reqwest's errors quote the whole URL, query (a token) included: drop it.
        let unreachable = |e: reqwest::Error| RestError::Unreachable {
            url: self.shown_url(),
            reason: error_chain(&e.without_url()),
        };
        let response = match request.send().await {
            Ok(response) => response,
            Err(e) if e.is_timeout() && timeout.is_some() => {
                return Err(RestError::StartTimedOut {
                    url: self.shown_url(),
                    seconds: timeout.unwrap_or_default().as_secs(),
                });
            }
            Err(e) => return Err(unreachable(e)),
        };
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
}

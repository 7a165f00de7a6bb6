//! How we authenticate to a Jupyter Server: a token, or a password through its login form.
//!
//! A password login is what a browser does: `GET /login` hands out the `_xsrf` cookie, `POST
//! /login` with `_xsrf` and the password answers with a login cookie. Requests then carry the
//! cookies, and those that change something also carry `X-XSRFToken`. A login expires (cookie
//! age, a server restarted with a new secret); a request refused with 401/403 renews it once.
//! The password is never logged, shown or put in an error.

use std::sync::Arc;
use std::time::Duration;

use reqwest::StatusCode;
use url::Url;

use crate::rest::redacted;

/// A secret that never shows in `Debug` output or logs.
#[derive(Clone, PartialEq, Eq)]
pub struct Secret(String);

impl Secret {
    pub fn new(value: String) -> Self {
        Secret(value)
    }

    pub fn expose(&self) -> &str {
        &self.0
    }
}

impl std::fmt::Debug for Secret {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str("Secret(…)")
    }
}

/// What a server needs from us.
#[derive(Debug, Clone, Default)]
pub enum Auth {
    #[default]
    None,
    Token(String),
    /// Shared by every client of that server, so one login serves them all.
    Password(Arc<PasswordLogin>),
    /// A token its owner may replace while clients use it (Hub mode: the latest API token a
    /// user presented, so a rotated token takes over and a revoked one is not kept).
    Rotating(Arc<RotatingToken>),
}

/// A token shared by every client of one server, replaceable at any time.
#[derive(Debug)]
pub struct RotatingToken(std::sync::RwLock<Secret>);

impl RotatingToken {
    pub fn new(token: Secret) -> Self {
        RotatingToken(std::sync::RwLock::new(token))
    }

    pub fn set(&self, token: &Secret) {
        let mut current = self.0.write().expect("token lock");
        if *current != *token {
            *current = token.clone();
        }
    }

    pub fn credentials(&self) -> Credentials {
        Credentials::with_token(self.0.read().expect("token lock").expose())
    }
}

impl Auth {
    /// A token when there is one (it needs no login), else a password, else nothing.
    pub fn from_parts(token: Option<String>, password: Option<Secret>) -> Self {
        match (token.filter(|t| !t.is_empty()), password) {
            (Some(token), _) => Auth::Token(token),
            (None, Some(password)) if !password.expose().is_empty() => {
                Auth::Password(Arc::new(PasswordLogin::new(password)))
            }
            _ => Auth::None,
        }
    }

    pub fn token(&self) -> Option<&str> {
        match self {
            Auth::Token(token) => Some(token),
            _ => None,
        }
    }
}

/// Headers that authenticate one request.
#[derive(Clone, Default, PartialEq, Eq)]
pub struct Credentials {
    pub headers: Vec<(&'static str, String)>,
    /// The login they came from (compared on renewal, so two callers renew only once).
    login_generation: u64,
}

impl Credentials {
    pub fn with_token(token: &str) -> Self {
        Credentials {
            headers: vec![("Authorization", format!("token {token}"))],
            login_generation: 0,
        }
    }
}

impl std::fmt::Debug for Credentials {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        let names: Vec<&str> = self.headers.iter().map(|(n, _)| *n).collect();
        write!(f, "Credentials({names:?})")
    }
}

#[derive(Debug, thiserror::Error)]
pub enum LoginError {
    #[error("cannot reach {url} to log in: {reason}")]
    Unreachable { url: String, reason: String },
    #[error(
        "the Jupyter Server at {url} refused the password. Check --jupyter-password / \
         JUPYTER_PASSWORD (or --document-password / DOCUMENT_PASSWORD for the document server)"
    )]
    Refused { url: String },
    #[error("logging in to {url} failed: {reason}")]
    Failed { url: String, reason: String },
}

/// One password login to one server, renewed when it expires.
pub struct PasswordLogin {
    password: Secret,
    session: tokio::sync::Mutex<Option<Credentials>>,
}

impl std::fmt::Debug for PasswordLogin {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str("PasswordLogin")
    }
}

impl PasswordLogin {
    pub fn new(password: Secret) -> Self {
        PasswordLogin {
            password,
            session: tokio::sync::Mutex::new(None),
        }
    }

    /// The current login's headers, logging in first if there is none.
    pub async fn credentials(&self, base: &Url) -> Result<Credentials, LoginError> {
        let mut session = self.session.lock().await;
        if let Some(credentials) = session.as_ref() {
            return Ok(credentials.clone());
        }
        let fresh = self.login(base, 1).await?;
        *session = Some(fresh.clone());
        Ok(fresh)
    }

    /// A new login in place of `stale` (unless someone renewed it meanwhile).
    pub async fn renew(&self, base: &Url, stale: &Credentials) -> Result<Credentials, LoginError> {
        let mut session = self.session.lock().await;
        if let Some(current) = session.as_ref()
            && current.login_generation != stale.login_generation
        {
            return Ok(current.clone());
        }
        tracing::info!("the login to {} expired; logging in again", redacted(base));
        let fresh = self.login(base, stale.login_generation + 1).await?;
        *session = Some(fresh.clone());
        Ok(fresh)
    }

    async fn login(&self, base: &Url, generation: u64) -> Result<Credentials, LoginError> {
        let url = base.join("login").expect("a relative path joins");
        let shown = redacted(&url);
        // Redirects are not followed: the login cookie comes with the 302 itself.
        let http = reqwest::Client::builder()
            .redirect(reqwest::redirect::Policy::none())
            .connect_timeout(Duration::from_secs(10))
            .timeout(Duration::from_secs(30))
            .build()
            .map_err(|e| LoginError::Failed {
                url: shown.clone(),
                reason: e.to_string(),
            })?;
        let unreachable = |e: reqwest::Error| LoginError::Unreachable {
            url: shown.clone(),
            reason: super::rest::error_chain(&e),
        };
        let form_page = http.get(url.clone()).send().await.map_err(unreachable)?;
        let mut jar = CookieJar::default();
        jar.take(form_page.headers());
        let Some(xsrf) = jar.get("_xsrf").map(str::to_owned) else {
            return Err(LoginError::Failed {
                url: shown,
                reason: format!(
                    "the login page (HTTP {}) set no _xsrf cookie; is this a Jupyter Server with \
                     password login?",
                    form_page.status()
                ),
            });
        };
        let answer = http
            .post(url.clone())
            .header(reqwest::header::COOKIE, jar.header())
            .form(&[
                ("_xsrf", xsrf.as_str()),
                ("password", self.password.expose()),
            ])
            .send()
            .await
            .map_err(unreachable)?;
        let status = answer.status();
        let before = jar.len();
        jar.take(answer.headers());
        // Success is a redirect that sets the login cookie; a wrong password shows the form again.
        if !status.is_redirection() || jar.len() == before {
            return Err(
                if status == StatusCode::OK || status == StatusCode::UNAUTHORIZED {
                    LoginError::Refused { url: shown }
                } else {
                    LoginError::Failed {
                        url: shown,
                        reason: format!("the login answered HTTP {status}"),
                    }
                },
            );
        }
        tracing::info!("logged in to {} with a password", redacted(base));
        Ok(Credentials {
            headers: vec![("Cookie", jar.header()), ("X-XSRFToken", xsrf)],
            login_generation: generation,
        })
    }
}

/// The cookies a server set, by name, in the order first set.
#[derive(Default)]
struct CookieJar(Vec<(String, String)>);

impl CookieJar {
    fn take(&mut self, headers: &reqwest::header::HeaderMap) {
        for value in headers.get_all(reqwest::header::SET_COOKIE) {
            let Ok(value) = value.to_str() else { continue };
            let pair = value.split(';').next().unwrap_or_default();
            let Some((name, value)) = pair.split_once('=') else {
                continue;
            };
            let (name, value) = (name.trim().to_owned(), value.trim().to_owned());
            self.0.retain(|(n, _)| *n != name);
            // An empty value is the server clearing the cookie.
            if !value.is_empty() {
                self.0.push((name, value));
            }
        }
    }

    fn get(&self, name: &str) -> Option<&str> {
        self.0
            .iter()
            .find(|(n, _)| n == name)
            .map(|(_, v)| v.as_str())
    }

    fn len(&self) -> usize {
        self.0.len()
    }

    fn header(&self) -> String {
        self.0
            .iter()
            .map(|(n, v)| format!("{n}={v}"))
            .collect::<Vec<_>>()
            .join("; ")
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn secrets_do_not_show() {
        let auth = Auth::from_parts(None, Some(Secret::new("hunter2".into())));
        let shown = format!("{auth:?} {:?}", Secret::new("hunter2".into()));
        assert!(!shown.contains("hunter2"), "{shown}");
        assert!(matches!(
            Auth::from_parts(Some("t".into()), Some(Secret::new("p".into()))),
            Auth::Token(_)
        ));
        assert!(matches!(
            Auth::from_parts(Some(String::new()), None),
            Auth::None
        ));
    }

    #[test]
    fn cookies_are_collected_and_cleared() {
        let mut headers = reqwest::header::HeaderMap::new();
        headers.append(
            reqwest::header::SET_COOKIE,
            "_xsrf=2|ab|cd|1; expires=Wed, 30 Dec 2026 00:00:00 GMT; Path=/"
                .parse()
                .unwrap(),
        );
        headers.append(
            reqwest::header::SET_COOKIE,
            "username-127-0-0-1-8888=\"2|1:0|10:17\"; HttpOnly; Path=/"
                .parse()
                .unwrap(),
        );
        let mut jar = CookieJar::default();
        jar.take(&headers);
        assert_eq!(jar.get("_xsrf"), Some("2|ab|cd|1"));
        assert_eq!(
            jar.header(),
            "_xsrf=2|ab|cd|1; username-127-0-0-1-8888=\"2|1:0|10:17\""
        );
        let mut cleared = reqwest::header::HeaderMap::new();
        cleared.append(
            reqwest::header::SET_COOKIE,
            "_xsrf=; Path=/".parse().unwrap(),
        );
        jar.take(&cleared);
        assert_eq!(jar.get("_xsrf"), None);
    }
}

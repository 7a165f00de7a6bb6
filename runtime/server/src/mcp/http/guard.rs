//! Who may call: Host and Origin checks against DNS rebinding and cross-site pages, and the
//! bearer token, compared in constant time.

use http::{HeaderMap, Request, Response, StatusCode, header};
use hyper::body::Incoming;
use serde_json::json;

use super::body::{json_response, unauthorized};
use super::oauth::{OAuthError, ResourceServer};
use super::{Body, HttpContext};
use crate::tools::scope::{Grant, Scope};

pub(super) const LOOPBACK_HOSTS: [&str; 4] = ["localhost", "127.0.0.1", "::1", "[::1]"];

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

/// A refusal carrying a `WWW-Authenticate` challenge.
fn challenge(status: StatusCode, www_authenticate: String, message: &str) -> Response<Body> {
    let mut response = json_response(status, json!({ "error": message }));
    if let Ok(value) = header::HeaderValue::from_str(&www_authenticate) {
        response
            .headers_mut()
            .insert(header::WWW_AUTHENTICATE, value);
    }
    response
}

/// 403 for a call beyond the token's scopes (RFC 6750 §3.1).
pub(super) fn insufficient_scope(oauth: &ResourceServer, scope: Scope) -> Response<Body> {
    challenge(
        StatusCode::FORBIDDEN,
        oauth.insufficient_scope(scope),
        &format!(
            "the access token does not carry the scope '{scope}' this needs; ask the \
             authorization server {} for a token with it",
            oauth.issuer()
        ),
    )
}

/// The header the Jupyter extension's proxy sets: the scopes Jupyter's authorizer grants the
/// logged-in user, space-separated.
pub(super) const JUPYTER_SCOPES_HEADER: &str = "x-jupyter-mcp-scopes";

/// The grant the Jupyter extension's proxy passed on, if it passed one.
pub(super) fn jupyter_grant(headers: &HeaderMap) -> Option<Grant> {
    headers
        .get(JUPYTER_SCOPES_HEADER)
        .and_then(|v| v.to_str().ok())
        .map(Grant::from_scope_text)
}

/// A request behind the Jupyter extension that Jupyter's authorizer does not allow.
pub(super) fn not_permitted_by_jupyter(scope: Scope) -> Response<Body> {
    let permission = match scope {
        Scope::NotebooksRead => "read on contents",
        Scope::NotebooksWrite => "write on contents",
        Scope::CodeExecute => "execute on kernels",
        Scope::ServerAdmin => "write on server",
    };
    json_response(
        StatusCode::FORBIDDEN,
        json!({
            "error": format!(
                "the Jupyter Server's authorizer does not allow this user '{permission}', which \
                 this request needs ('{scope}'); ask the Jupyter Server's administrator for it"
            )
        }),
    )
}

/// The bearer token a request presents.
pub(super) fn bearer(headers: &HeaderMap) -> Option<&str> {
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
pub(super) fn bearer_matches(headers: &HeaderMap, expected: &str) -> bool {
    let Some(presented) = bearer(headers) else {
        return false;
    };
    let (a, b) = (presented.trim().as_bytes(), expected.as_bytes());
    a.len() == b.len() && a.iter().zip(b).fold(0u8, |acc, (x, y)| acc | (x ^ y)) == 0
}

impl HttpContext {
    /// OAuth mode: the request's access token checked with the issuer and, when `needs` names a
    /// scope, that scope required (403 `insufficient_scope` otherwise). `Ok(None)` when the
    /// server is not in OAuth mode (then `admit` has checked the static token).
    pub(super) async fn authorize(
        &self,
        headers: &HeaderMap,
        needs: Option<Scope>,
    ) -> Result<Option<Grant>, Box<Response<Body>>> {
        let Some(oauth) = &self.oauth else {
            return Ok(None);
        };
        let Some(token) = bearer(headers) else {
            return Err(Box::new(challenge(
                StatusCode::UNAUTHORIZED,
                oauth.challenge(None),
                &format!(
                    "an access token of the authorization server {} is required \
                     (Authorization: Bearer TOKEN); this server's metadata says how to get one",
                    oauth.issuer()
                ),
            )));
        };
        let grant = oauth.verify(token).await.map_err(|e| {
            Box::new(match e {
                OAuthError::Unreachable { .. } => {
                    json_response(StatusCode::BAD_GATEWAY, json!({ "error": e.to_string() }))
                }
                OAuthError::Busy => {
                    let mut busy = json_response(
                        StatusCode::SERVICE_UNAVAILABLE,
                        json!({ "error": e.to_string() }),
                    );
                    busy.headers_mut()
                        .insert(header::RETRY_AFTER, http::HeaderValue::from_static("1"));
                    busy
                }
                refused => challenge(
                    StatusCode::UNAUTHORIZED,
                    oauth.challenge(Some("invalid_token")),
                    &refused.to_string(),
                ),
            })
        })?;
        if let Some(scope) = needs
            && !grant.allows(scope)
        {
            return Err(Box::new(insufficient_scope(oauth, scope)));
        }
        Ok(Some(grant))
    }

    /// `Err` holds the refusal when the request may not proceed.
    pub(super) fn admit(
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

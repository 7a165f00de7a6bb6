//! OAuth 2.1 resource server (`--oauth-issuer`): the issuer's metadata and signing keys, access
//! tokens checked as JWTs (RS256, ES256, EdDSA: signature, `iss`, `aud`, `exp`/`nbf`) or, when
//! opaque, through the issuer's introspection endpoint (RFC 7662), and the protected-resource
//! metadata (RFC 9728) clients discover us by. A token is never logged; only its SHA-256 digest
//! is kept, as a cache key.

use std::collections::HashMap;
use std::sync::{Arc, PoisonError, RwLock};
use std::time::{Duration, Instant};

use jsonwebtoken::jwk::{AlgorithmParameters, EllipticCurve, Jwk};
use jsonwebtoken::{Algorithm, DecodingKey, Validation};
use serde::Deserialize;
use serde_json::{Value, json};
use tokio::sync::Mutex;
use url::Url;

mod introspection;

use introspection::Introspected;

use crate::config::OAuthSettings;
use crate::mcp::session_owners::SessionOwners;
use crate::tools::scope::{Grant, Scope};

/// Clock skew accepted on `exp` and `nbf`.
const LEEWAY_SECS: u64 = 30;
/// At most this many signing keys are kept; a larger set keeps its first ones.
const MAX_KEYS: usize = 32;
/// An unknown `kid` refetches the key set at most this often, so tokens naming made-up keys
/// cannot turn us into a flood against the issuer.
const REFETCH_EVERY: Duration = Duration::from_secs(5);
/// How long an introspection answer is trusted (a revoked opaque token is refused within it).
const INTROSPECTION_TTL: Duration = Duration::from_secs(10);
const MAX_INTROSPECTION_CACHE: usize = 1024;
/// Introspection calls for tokens not in the cache, per second: past it a caller is told to
/// retry, so a flood of made-up opaque tokens cannot turn us into a flood against the issuer.
const MAX_INTROSPECTIONS_PER_SECOND: u32 = 20;
const ISSUER_TIMEOUT: Duration = Duration::from_secs(10);

#[derive(Debug, thiserror::Error)]
pub enum OAuthError {
    /// Start-up: the issuer's metadata could not be read.
    #[error(
        "cannot read the authorization server's metadata for --oauth-issuer {issuer}: {reason}. \
         Check that the issuer URL is right and that it serves \
         /.well-known/oauth-authorization-server or /.well-known/openid-configuration"
    )]
    Metadata { issuer: String, reason: String },
    /// The token is refused; the text says why (never the token).
    #[error("{0}")]
    Refused(String),
    /// The issuer could not answer (502).
    #[error("the authorization server {issuer} could not be asked about the token: {reason}")]
    Unreachable { issuer: String, reason: String },
    /// Too many unknown opaque tokens at once (503, retry shortly).
    #[error(
        "too many unknown access tokens to check at once; retry in a second (a token checked \
         once is remembered for 10 s)"
    )]
    Busy,
}

#[derive(Debug, Deserialize)]
struct IssuerMetadata {
    issuer: String,
    jwks_uri: Option<String>,
    introspection_endpoint: Option<String>,
}

/// A signing key and the one algorithm it verifies.
#[derive(Clone)]
struct SigningKey {
    algorithm: Algorithm,
    key: DecodingKey,
}

#[derive(Default)]
struct KeyCache {
    keys: HashMap<String, SigningKey>,
    fetched: Option<Instant>,
}

impl KeyCache {
    /// A key we do not know may be refetched (the issuer may have rotated its keys).
    fn may_refetch_for(&self, kid: &str) -> bool {
        !self.keys.contains_key(kid) && self.fetched.is_none_or(|at| at.elapsed() >= REFETCH_EVERY)
    }
}

/// Client credentials for the introspection endpoint, read from the environment.
pub struct ClientCredentials {
    pub id: String,
    pub secret: jupyter_client::auth::Secret,
}

pub struct ResourceServer {
    issuer: String,
    audience: String,
    metadata_url: String,
    jwks_uri: Option<Url>,
    introspection: Option<Url>,
    credentials: Option<ClientCredentials>,
    http: reqwest::Client,
    /// The key set, read without waiting: a refetch swaps in a new one.
    keys: RwLock<Arc<KeyCache>>,
    /// One refetch at a time; only callers whose key is unknown wait for it.
    refetching: Mutex<()>,
    introspected: Mutex<HashMap<[u8; 32], Introspected>>,
    /// Introspection calls in the current second: (the second's start, calls).
    introspections: std::sync::Mutex<(Instant, u32)>,
    /// Each MCP session's opener: the holder of the token that opened it.
    sessions: SessionOwners,
}

/// The claims we check beyond what `jsonwebtoken` validates.
#[derive(Deserialize)]
struct AccessClaims {
    #[serde(default)]
    scope: Option<String>,
    /// Some issuers list scopes as an array under `scp`.
    #[serde(default)]
    scp: Option<Vec<String>>,
    #[serde(default)]
    sub: Option<String>,
    #[serde(default)]
    client_id: Option<String>,
}

impl ResourceServer {
    /// Reads the issuer's metadata (RFC 8414 first, then OpenID discovery) before serving.
    pub async fn discover(
        settings: &OAuthSettings,
        audience: String,
    ) -> Result<ResourceServer, OAuthError> {
        let http = reqwest::Client::builder()
            .timeout(ISSUER_TIMEOUT)
            .build()
            .map_err(|e| OAuthError::Metadata {
                issuer: settings.issuer.to_string(),
                reason: e.to_string(),
            })?;
        let issuer_text = settings.issuer.as_str().trim_end_matches('/').to_owned();
        let metadata = Self::read_metadata(&http, &settings.issuer)
            .await
            .map_err(|reason| OAuthError::Metadata {
                issuer: issuer_text.clone(),
                reason,
            })?;
        if metadata.issuer.trim_end_matches('/') != issuer_text {
            return Err(OAuthError::Metadata {
                issuer: issuer_text,
                reason: format!(
                    "its metadata names the issuer {}, not this one (RFC 8414 §3.3)",
                    metadata.issuer
                ),
            });
        }
        if metadata.jwks_uri.is_none() && metadata.introspection_endpoint.is_none() {
            return Err(OAuthError::Metadata {
                issuer: issuer_text,
                reason: "it names neither a jwks_uri nor an introspection_endpoint, so no \
                         token could be checked"
                    .into(),
            });
        }
        let metadata_url = protected_resource_metadata_url(&audience);
        Ok(ResourceServer {
            issuer: metadata.issuer,
            audience,
            metadata_url,
            jwks_uri: metadata.jwks_uri.and_then(|u| Url::parse(&u).ok()),
            introspection: metadata
                .introspection_endpoint
                .and_then(|u| Url::parse(&u).ok()),
            credentials: settings.client_id.clone().map(|id| ClientCredentials {
                id,
                secret: settings
                    .client_secret
                    .clone()
                    .unwrap_or_else(|| jupyter_client::auth::Secret::new(String::new())),
            }),
            http,
            keys: RwLock::default(),
            refetching: Mutex::new(()),
            introspected: Mutex::new(HashMap::new()),
            introspections: std::sync::Mutex::new((Instant::now(), 0)),
            sessions: SessionOwners::default(),
        })
    }

    async fn read_metadata(http: &reqwest::Client, issuer: &Url) -> Result<IssuerMetadata, String> {
        let mut reasons = Vec::new();
        for well_known in ["oauth-authorization-server", "openid-configuration"] {
            let url = well_known_url(issuer, well_known);
            match http.get(url.clone()).send().await {
                Ok(answer) if answer.status().is_success() => {
                    match answer.json::<IssuerMetadata>().await {
                        Ok(metadata) => return Ok(metadata),
                        Err(e) => {
                            reasons.push(format!("{url} is not authorization server metadata: {e}"))
                        }
                    }
                }
                Ok(answer) => reasons.push(format!("{url} answered {}", answer.status())),
                Err(e) => reasons.push(format!("{url}: {}", e.without_url())),
            }
        }
        Err(reasons.join("; "))
    }

    pub fn issuer(&self) -> &str {
        &self.issuer
    }

    /// `WWW-Authenticate` of a 401, pointing at our protected-resource metadata.
    pub fn challenge(&self, error: Option<&str>) -> String {
        match error {
            Some(error) => format!(
                "Bearer resource_metadata=\"{}\", error=\"{error}\"",
                self.metadata_url
            ),
            None => format!("Bearer resource_metadata=\"{}\"", self.metadata_url),
        }
    }

    /// `WWW-Authenticate` of a 403 for a call beyond the token's scopes.
    pub fn insufficient_scope(&self, scope: Scope) -> String {
        format!(
            "Bearer error=\"insufficient_scope\", scope=\"{scope}\", resource_metadata=\"{}\"",
            self.metadata_url
        )
    }

    /// The protected-resource metadata document (RFC 9728 §2).
    pub fn resource_metadata(&self) -> Value {
        json!({
            "resource": self.audience,
            "authorization_servers": [self.issuer],
            "scopes_supported": Scope::ALL.iter().map(|s| s.as_str()).collect::<Vec<_>>(),
            "bearer_methods_supported": ["header"],
            "resource_name": "jupyter-mcp-server",
        })
    }

    /// Whether `path` is where clients look for our metadata: the root form, and the one with
    /// the resource's path appended (RFC 9728 §3.1).
    pub fn serves_metadata_at(&self, path: &str) -> bool {
        let root = "/.well-known/oauth-protected-resource";
        let suffixed = Url::parse(&self.audience)
            .map(|u| format!("{root}{}", u.path().trim_end_matches('/')))
            .unwrap_or_default();
        path == root || path == suffixed || path == format!("{root}/mcp")
    }

    /// Checks a presented access token; `Ok` holds its scopes.
    pub async fn verify(&self, token: &str) -> Result<Grant, OAuthError> {
        match jsonwebtoken::decode_header(token) {
            Ok(header) => self.verify_jwt(token, header).await,
            Err(_) if self.introspection.is_some() => self.introspect(token).await,
            Err(_) => Err(OAuthError::Refused(format!(
                "the access token is not a JWT and the authorization server {} has no \
                 introspection endpoint to ask about it; get a token from that issuer for {}",
                self.issuer, self.audience
            ))),
        }
    }

    async fn verify_jwt(
        &self,
        token: &str,
        header: jsonwebtoken::Header,
    ) -> Result<Grant, OAuthError> {
        if !matches!(
            header.alg,
            Algorithm::RS256 | Algorithm::ES256 | Algorithm::EdDSA
        ) {
            return Err(OAuthError::Refused(format!(
                "the access token is signed with {:?}; this server accepts RS256, ES256 and EdDSA",
                header.alg
            )));
        }
        let kid = header.kid.unwrap_or_default();
        let mut keys = self.key_set();
        if keys.may_refetch_for(&kid) {
            let _one = self.refetching.lock().await;
            // Another caller may have refetched while this one waited.
            keys = self.key_set();
            if keys.may_refetch_for(&kid) {
                keys = self.refetch_keys(&keys).await?;
            }
        }
        let Some(key) = keys.keys.get(&kid) else {
            return Err(OAuthError::Refused(format!(
                "the access token is signed with a key (kid '{kid}') the authorization server {} \
                 does not publish",
                self.issuer
            )));
        };
        if key.algorithm != header.alg {
            return Err(OAuthError::Refused(format!(
                "the access token says {:?} but its key (kid '{kid}') is for {:?}",
                header.alg, key.algorithm
            )));
        }
        let mut validation = Validation::new(key.algorithm);
        validation.set_issuer(&[&self.issuer]);
        validation.set_audience(&[&self.audience]);
        validation.set_required_spec_claims(&["exp", "iss", "aud"]);
        validation.leeway = LEEWAY_SECS;
        validation.validate_nbf = true;
        let claims = jsonwebtoken::decode::<AccessClaims>(token, &key.key, &validation)
            .map_err(|e| self.explain(e))?
            .claims;
        let grant = match (claims.scope, claims.scp) {
            (Some(text), _) => Grant::from_scope_text(&text),
            (None, Some(list)) => Grant::from_scopes(list),
            (None, None) => Grant::default(),
        };
        Ok(self.held(grant, claims.sub.or(claims.client_id)))
    }

    /// The grant, held by the token's subject at this issuer (when the token names one).
    fn held(&self, grant: Grant, subject: Option<String>) -> Grant {
        match subject.filter(|s| !s.is_empty()) {
            Some(subject) => grant.held_by(format!("{} {subject}", self.issuer)),
            None => grant,
        }
    }

    fn key_set(&self) -> Arc<KeyCache> {
        self.keys
            .read()
            .unwrap_or_else(PoisonError::into_inner)
            .clone()
    }

    /// Remembers that a session was opened with `grant`'s token (when it names its holder).
    pub fn session_opened(&self, id: &str, grant: &Grant) {
        if let Some(holder) = grant.holder() {
            self.sessions.opened(id, holder.to_owned());
        }
    }

    /// Whether a request with `grant`'s token may use session `id`: only the holder that opened
    /// it; a token that names no holder, only a session opened by such a token.
    pub fn session_allowed(&self, id: &str, grant: &Grant) -> bool {
        self.sessions.allowed(id, grant.holder())
    }

    pub fn session_closed(&self, id: &str) {
        self.sessions.closed(id);
    }

    fn explain(&self, error: jsonwebtoken::errors::Error) -> OAuthError {
        use jsonwebtoken::errors::ErrorKind;
        OAuthError::Refused(match error.kind() {
            ErrorKind::ExpiredSignature => "the access token has expired; get a new one".into(),
            ErrorKind::ImmatureSignature => "the access token is not valid yet (nbf)".into(),
            ErrorKind::InvalidAudience => format!(
                "the access token is for another resource; this server accepts tokens for {} \
                 (RFC 8707: ask the authorization server with resource={})",
                self.audience, self.audience
            ),
            ErrorKind::InvalidIssuer => format!(
                "the access token was issued by another authorization server; this server \
                 accepts tokens of {}",
                self.issuer
            ),
            ErrorKind::InvalidSignature => "the access token's signature does not verify".into(),
            ErrorKind::MissingRequiredClaim(claim) => {
                format!("the access token has no '{claim}' claim")
            }
            other => format!("the access token is not valid: {other:?}"),
        })
    }

    /// Fetches the key set and swaps it in. A failure keeps the old keys and still counts as a
    /// fetch, so made-up key ids cannot make us ask the issuer more often than REFETCH_EVERY.
    async fn refetch_keys(&self, old: &KeyCache) -> Result<Arc<KeyCache>, OAuthError> {
        let (keys, outcome) = match self.fetch_keys().await {
            Ok(keys) => (keys, Ok(())),
            Err(error) => (old.keys.clone(), Err(error)),
        };
        let cache = Arc::new(KeyCache {
            keys,
            fetched: Some(Instant::now()),
        });
        *self.keys.write().unwrap_or_else(PoisonError::into_inner) = cache.clone();
        outcome.map(|()| cache)
    }

    async fn fetch_keys(&self) -> Result<HashMap<String, SigningKey>, OAuthError> {
        let Some(uri) = &self.jwks_uri else {
            return Err(OAuthError::Refused(format!(
                "the access token is a JWT but the authorization server {} publishes no jwks_uri",
                self.issuer
            )));
        };
        let unreachable = |reason: String| OAuthError::Unreachable {
            issuer: self.issuer.clone(),
            reason,
        };
        let answer = self
            .http
            .get(uri.clone())
            .send()
            .await
            .map_err(|e| unreachable(e.without_url().to_string()))?;
        if !answer.status().is_success() {
            return Err(unreachable(format!("{uri} answered {}", answer.status())));
        }
        let set: Value = answer
            .json()
            .await
            .map_err(|e| unreachable(format!("{uri} is not a JSON key set: {e}")))?;
        let keys = signing_keys(&set);
        tracing::debug!(keys = keys.len(), "read the authorization server's keys");
        Ok(keys)
    }
}

/// `https://as/realm` + `openid-configuration` → `https://as/.well-known/openid-configuration/realm`
/// for RFC 8414's form; OpenID discovery appends to the issuer's path instead. Both are tried in
/// the form their specification gives (an issuer without a path makes them the same).
fn well_known_url(issuer: &Url, name: &str) -> Url {
    let mut url = issuer.clone();
    let path = issuer.path().trim_end_matches('/');
    let path = if name == "openid-configuration" {
        format!("{path}/.well-known/{name}")
    } else {
        format!("/.well-known/{name}{path}")
    };
    url.set_path(&path);
    url.set_query(None);
    url
}

/// The metadata URL for a resource: the well-known name between its host and its path.
fn protected_resource_metadata_url(resource: &str) -> String {
    match Url::parse(resource) {
        Ok(mut url) => {
            let path = url.path().trim_end_matches('/').to_owned();
            url.set_path(&format!("/.well-known/oauth-protected-resource{path}"));
            url.set_query(None);
            url.to_string()
        }
        Err(_) => format!("{resource}/.well-known/oauth-protected-resource"),
    }
}

/// The keys of a JWK set we can verify with, each with its one algorithm; symmetric keys,
/// encryption keys and curves we do not accept are skipped.
fn signing_keys(set: &Value) -> HashMap<String, SigningKey> {
    let mut keys = HashMap::new();
    for raw in set
        .get("keys")
        .and_then(Value::as_array)
        .into_iter()
        .flatten()
    {
        if keys.len() >= MAX_KEYS {
            break;
        }
        if raw
            .get("use")
            .and_then(Value::as_str)
            .is_some_and(|u| u != "sig")
        {
            continue;
        }
        let Ok(jwk) = serde_json::from_value::<Jwk>(raw.clone()) else {
            continue;
        };
        let algorithm = match &jwk.algorithm {
            AlgorithmParameters::RSA(_) => Algorithm::RS256,
            AlgorithmParameters::EllipticCurve(ec) if ec.curve == EllipticCurve::P256 => {
                Algorithm::ES256
            }
            AlgorithmParameters::OctetKeyPair(okp) if okp.curve == EllipticCurve::Ed25519 => {
                Algorithm::EdDSA
            }
            _ => continue,
        };
        // A key published for another algorithm (e.g. an RSA key for PS256) is not ours to use.
        if raw
            .get("alg")
            .and_then(Value::as_str)
            .is_some_and(|alg| alg != algorithm_name(algorithm))
        {
            continue;
        }
        let Ok(key) = DecodingKey::from_jwk(&jwk) else {
            continue;
        };
        let kid = jwk.common.key_id.clone().unwrap_or_default();
        keys.entry(kid).or_insert(SigningKey { algorithm, key });
    }
    keys
}

fn algorithm_name(algorithm: Algorithm) -> &'static str {
    match algorithm {
        Algorithm::RS256 => "RS256",
        Algorithm::ES256 => "ES256",
        Algorithm::EdDSA => "EdDSA",
        _ => "",
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn well_known_urls() {
        let issuer = Url::parse("http://127.0.0.1:9000/realm").unwrap();
        assert_eq!(
            well_known_url(&issuer, "oauth-authorization-server").as_str(),
            "http://127.0.0.1:9000/.well-known/oauth-authorization-server/realm"
        );
        assert_eq!(
            well_known_url(&issuer, "openid-configuration").as_str(),
            "http://127.0.0.1:9000/realm/.well-known/openid-configuration"
        );
        assert_eq!(
            protected_resource_metadata_url("http://127.0.0.1:4040/mcp"),
            "http://127.0.0.1:4040/.well-known/oauth-protected-resource/mcp"
        );
    }

    #[test]
    fn only_signing_keys_we_accept_are_kept() {
        let set = json!({ "keys": [
            { "kty": "oct", "kid": "hmac", "k": "c2VjcmV0" },
            { "kty": "OKP", "crv": "Ed25519", "kid": "ed", "x": "11qYAYKxCrfVS_7TyWQHOg7hcvPapiMlrwIaaPcHURo" },
            { "kty": "RSA", "kid": "enc", "use": "enc", "n": "sXch", "e": "AQAB" },
            { "kty": "RSA", "kid": "ps", "alg": "PS256", "n": "sXch", "e": "AQAB" },
        ]});
        let keys = signing_keys(&set);
        assert_eq!(keys.len(), 1);
        assert_eq!(keys["ed"].algorithm, Algorithm::EdDSA);
    }
}

//! Opaque access tokens, asked about at the issuer's introspection endpoint (RFC 7662): every
//! answer kept under the token's digest for at most INTROSPECTION_TTL (refusals too, so an
//! unknown token costs one call), and a per-second allowance for tokens not in the cache.

use std::sync::PoisonError;
use std::time::{Duration, Instant};

use serde::Deserialize;
use serde_json::Value;
use sha2::{Digest, Sha256};

use super::{
    INTROSPECTION_TTL, LEEWAY_SECS, MAX_INTROSPECTION_CACHE, MAX_INTROSPECTIONS_PER_SECOND,
    OAuthError, ResourceServer,
};
use crate::tools::scope::Grant;

/// An introspection answer, the refusals included, so an unknown token costs one call per TTL.
pub(super) struct Introspected {
    outcome: Result<Grant, String>,
    until: Instant,
}

#[derive(Deserialize)]
struct IntrospectionAnswer {
    #[serde(default)]
    active: bool,
    #[serde(default)]
    scope: Option<String>,
    #[serde(default)]
    aud: Option<Value>,
    #[serde(default)]
    iss: Option<String>,
    #[serde(default)]
    exp: Option<u64>,
    #[serde(default)]
    sub: Option<String>,
    #[serde(default)]
    client_id: Option<String>,
}

impl ResourceServer {
    pub(super) async fn introspect(&self, token: &str) -> Result<Grant, OAuthError> {
        let digest: [u8; 32] = Sha256::digest(token.as_bytes()).into();
        {
            let mut cache = self.introspected.lock().await;
            cache.retain(|_, entry| entry.until > Instant::now());
            if let Some(entry) = cache.get(&digest) {
                return entry.outcome.clone().map_err(OAuthError::Refused);
            }
        }
        self.count_introspection()?;
        let outcome = self.ask_introspection(token).await;
        let remembered = match &outcome {
            Ok((grant, _)) => Ok(grant.clone()),
            Err(OAuthError::Refused(why)) => Err(why.clone()),
            // The issuer did not answer: nothing learned about the token.
            Err(_) => return outcome.map(|(grant, _)| grant),
        };
        let ttl = match &outcome {
            Ok((_, ttl)) => *ttl,
            Err(_) => INTROSPECTION_TTL,
        };
        let mut cache = self.introspected.lock().await;
        if cache.len() < MAX_INTROSPECTION_CACHE {
            cache.insert(
                digest,
                Introspected {
                    outcome: remembered,
                    until: Instant::now() + ttl,
                },
            );
        }
        outcome.map(|(grant, _)| grant)
    }

    /// Counts an introspection call against this second's allowance.
    fn count_introspection(&self) -> Result<(), OAuthError> {
        let mut window = self
            .introspections
            .lock()
            .unwrap_or_else(PoisonError::into_inner);
        if window.0.elapsed() >= Duration::from_secs(1) {
            *window = (Instant::now(), 0);
        }
        if window.1 >= MAX_INTROSPECTIONS_PER_SECOND {
            return Err(OAuthError::Busy);
        }
        window.1 += 1;
        Ok(())
    }

    /// Asks the issuer about an opaque token: its grant and how long to trust the answer.
    async fn ask_introspection(&self, token: &str) -> Result<(Grant, Duration), OAuthError> {
        let endpoint = self.introspection.clone().expect("checked by the caller");
        let unreachable = |reason: String| OAuthError::Unreachable {
            issuer: self.issuer.clone(),
            reason,
        };
        let mut request = self
            .http
            .post(endpoint.clone())
            .form(&[("token", token), ("token_type_hint", "access_token")]);
        if let Some(credentials) = &self.credentials {
            request = request.basic_auth(&credentials.id, Some(credentials.secret.expose()));
        }
        let answer = request
            .send()
            .await
            .map_err(|e| unreachable(e.without_url().to_string()))?;
        if !answer.status().is_success() {
            return Err(unreachable(format!(
                "its introspection endpoint answered {}; set OAUTH_CLIENT_ID and \
                 OAUTH_CLIENT_SECRET to this server's client credentials there",
                answer.status()
            )));
        }
        let answer: IntrospectionAnswer = answer
            .json()
            .await
            .map_err(|e| unreachable(format!("its introspection answer is not JSON: {e}")))?;
        if !answer.active {
            return Err(OAuthError::Refused(
                "the authorization server says the access token is not active (expired, \
                 revoked or unknown); get a new one"
                    .into(),
            ));
        }
        if answer
            .iss
            .as_deref()
            .is_some_and(|iss| iss.trim_end_matches('/') != self.issuer.trim_end_matches('/'))
        {
            return Err(self.explain(jsonwebtoken::errors::ErrorKind::InvalidIssuer.into()));
        }
        let audiences: Vec<&str> = match &answer.aud {
            Some(Value::String(one)) => vec![one.as_str()],
            Some(Value::Array(many)) => many.iter().filter_map(Value::as_str).collect(),
            _ => Vec::new(),
        };
        if !audiences.contains(&self.audience.as_str()) {
            return Err(self.explain(jsonwebtoken::errors::ErrorKind::InvalidAudience.into()));
        }
        let now_secs = jsonwebtoken::get_current_timestamp();
        // The issuer's clock may differ from ours: its word on `active` is not the last one.
        if answer.exp.is_some_and(|exp| exp + LEEWAY_SECS < now_secs) {
            return Err(self.explain(jsonwebtoken::errors::ErrorKind::ExpiredSignature.into()));
        }
        let grant = Grant::from_scope_text(answer.scope.as_deref().unwrap_or(""));
        let grant = self.held(grant, answer.sub.or(answer.client_id));
        let ttl = answer
            .exp
            .map(|exp| Duration::from_secs(exp.saturating_sub(now_secs)))
            .unwrap_or(INTROSPECTION_TTL)
            .min(INTROSPECTION_TTL);
        Ok((grant, ttl))
    }
}

//! Google sign-in: OAuth 2.0 authorization code flow with PKCE (S256), `state` bound to
//! the browser by a short-lived cookie, and an OIDC `nonce`; the ID token is verified
//! (RS256) against the provider's JWKS, issuer and audience. Endpoints are configurable,
//! so tests run against a local OIDC fixture.

use crate::address::HostAddr;
use crate::config::secrets::Secret;
use crate::config::GoogleConf;
use crate::errors::ApiError;
use crate::store::console::Identity;
use crate::upstream::{Call, UpstreamClient};
use base64::Engine;
use jsonwebtoken::jwk::JwkSet;
use jsonwebtoken::{decode, decode_header, Algorithm, DecodingKey, Validation};
use pingora_core::upstreams::peer::HttpPeer;
use serde::Deserialize;
use sha2::{Digest, Sha256};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

/// The cookie binding an authorization request to the browser that started it.
pub const STATE_COOKIE: &str = "nl_oauth";
/// How long a started sign-in may take.
pub const FLOW_TTL_SECS: i64 = 600;
const JWKS_TTL: Duration = Duration::from_secs(600);

pub struct Oidc {
    client_id: String,
    client_secret: Secret,
    redirect_uri: String,
    issuers: Vec<String>,
    authorization_endpoint: String,
    token: (HostAddr, HttpPeer),
    jwks: (HostAddr, HttpPeer),
    pub after_login: String,
    client: Arc<UpstreamClient>,
    jwks_cache: Mutex<Option<(Instant, JwkSet)>>,
}

#[derive(Deserialize)]
struct Claims {
    sub: String,
    nonce: Option<String>,
    email: Option<String>,
    #[serde(default)]
    email_verified: Option<serde_json::Value>,
    name: Option<String>,
    picture: Option<String>,
}

fn endpoint(url: &str) -> Result<(HostAddr, HttpPeer), String> {
    let a = HostAddr::parse(url)?;
    let p = a.peer(None)?;
    Ok((a, p))
}

impl Oidc {
    pub fn new(
        conf: &GoogleConf,
        secret: Secret,
        client: Arc<UpstreamClient>,
    ) -> Result<Oidc, String> {
        let mut issuers = vec![conf.issuer.clone()];
        // Google documents both spellings of its issuer.
        if conf.issuer == "https://accounts.google.com" {
            issuers.push("accounts.google.com".into());
        }
        Ok(Oidc {
            client_id: conf.client_id.clone(),
            client_secret: secret,
            redirect_uri: conf.redirect_uri.clone(),
            issuers,
            authorization_endpoint: conf.authorization_endpoint.clone(),
            token: endpoint(&conf.token_endpoint)
                .map_err(|e| format!("console.google.token_endpoint: {e}"))?,
            jwks: endpoint(&conf.jwks_uri).map_err(|e| format!("console.google.jwks_uri: {e}"))?,
            after_login: conf.after_login.clone(),
            client,
            jwks_cache: Mutex::new(None),
        })
    }

    /// Where to send the browser: the provider's consent page for this request.
    pub fn authorize_url(&self, state: &str, nonce: &str, verifier: &str) -> String {
        let challenge = pkce_challenge(verifier);
        let sep = if self.authorization_endpoint.contains('?') {
            '&'
        } else {
            '?'
        };
        format!(
            "{}{sep}response_type=code&client_id={}&redirect_uri={}&scope={}&state={}&nonce={}\
             &code_challenge={}&code_challenge_method=S256",
            self.authorization_endpoint,
            enc(&self.client_id),
            enc(&self.redirect_uri),
            enc("openid email profile"),
            enc(state),
            enc(nonce),
            enc(&challenge),
        )
    }

    /// Exchange the code (with the PKCE verifier) and verify the ID token.
    pub async fn sign_in(
        &self,
        code: &str,
        verifier: &str,
        nonce: &str,
        rid: &str,
    ) -> Result<Identity, ApiError> {
        let form = format!(
            "grant_type=authorization_code&code={}&redirect_uri={}&client_id={}&client_secret={}&code_verifier={}",
            enc(code),
            enc(&self.redirect_uri),
            enc(&self.client_id),
            enc(self.client_secret.expose()),
            enc(verifier),
        );
        let failed = |why: String| {
            log::warn!("console: OIDC token exchange failed: {why}");
            ApiError::new(
                502,
                "oidc_exchange_failed",
                "the sign-in provider did not accept the code",
            )
        };
        let call = Call {
            peer: &self.token.1,
            authority: self.token.0.authority(),
            method: "POST",
            path: &self.token.0.path,
            headers: &[],
            body: Some(form.as_bytes()),
            content_type: Some("application/x-www-form-urlencoded"),
            request_id: rid,
        };
        let r = self
            .client
            .send(call, Duration::from_secs(10), 1 << 20)
            .await
            .map_err(|e| failed(e.to_string()))?;
        if r.status != 200 {
            return Err(failed(format!("HTTP {}", r.status)));
        }
        let v: serde_json::Value =
            serde_json::from_slice(&r.body).map_err(|e| failed(e.to_string()))?;
        let id_token = v["id_token"]
            .as_str()
            .ok_or_else(|| failed("no id_token".into()))?;
        self.verify(id_token, nonce, rid).await
    }

    /// Signature (RS256, key by `kid` from the JWKS), issuer, audience, expiry, nonce.
    pub async fn verify(
        &self,
        id_token: &str,
        nonce: &str,
        rid: &str,
    ) -> Result<Identity, ApiError> {
        let invalid = |why: &str| {
            log::warn!("console: ID token refused: {why}");
            ApiError::new(400, "invalid_token", "the ID token did not verify")
        };
        let header = decode_header(id_token).map_err(|_| invalid("header"))?;
        if header.alg != Algorithm::RS256 {
            return Err(invalid("algorithm"));
        }
        let kid = header.kid.ok_or_else(|| invalid("no kid"))?;
        // A key unknown to the cached set may be a rotation: fetch once more.
        let jwk = match self.jwks(false, rid).await?.find(&kid).cloned() {
            Some(k) => k,
            None => self
                .jwks(true, rid)
                .await?
                .find(&kid)
                .cloned()
                .ok_or_else(|| invalid("unknown kid"))?,
        };
        let key = DecodingKey::from_jwk(&jwk).map_err(|_| invalid("jwk"))?;
        let mut validation = Validation::new(Algorithm::RS256);
        validation.set_issuer(&self.issuers);
        validation.set_audience(&[&self.client_id]);
        validation.set_required_spec_claims(&["exp", "iss", "aud", "sub"]);
        let claims = decode::<Claims>(id_token, &key, &validation)
            .map_err(|e| invalid(&e.to_string()))?
            .claims;
        match claims.nonce.as_deref() {
            Some(n) if crate::crypto::secret_eq(n.as_bytes(), nonce.as_bytes()) => {}
            _ => return Err(invalid("nonce")),
        }
        let verified = matches!(claims.email_verified, Some(serde_json::Value::Bool(true)))
            || matches!(&claims.email_verified, Some(serde_json::Value::String(s)) if s == "true");
        Ok(Identity::Google {
            sub: claims.sub,
            email: claims
                .email
                .filter(|_| verified)
                .and_then(|e| super::email::normalize(&e)),
            name: claims.name.map(|n| n.chars().take(200).collect()),
            picture: claims
                .picture
                .filter(|p| p.starts_with("https://") && p.len() <= 2048),
        })
    }

    async fn jwks(&self, force: bool, rid: &str) -> Result<JwkSet, ApiError> {
        if !force {
            if let Ok(cache) = self.jwks_cache.lock() {
                if let Some((at, set)) = cache.as_ref() {
                    if at.elapsed() < JWKS_TTL {
                        return Ok(set.clone());
                    }
                }
            }
        }
        let unavailable = |why: String| {
            log::warn!("console: JWKS fetch failed: {why}");
            ApiError::new(
                502,
                "oidc_keys_unavailable",
                "the sign-in provider's keys could not be fetched",
            )
        };
        let call = Call {
            peer: &self.jwks.1,
            authority: self.jwks.0.authority(),
            method: "GET",
            path: &self.jwks.0.path,
            headers: &[],
            body: None,
            content_type: None,
            request_id: rid,
        };
        let r = self
            .client
            .send(call, Duration::from_secs(10), 1 << 20)
            .await
            .map_err(|e| unavailable(e.to_string()))?;
        if r.status != 200 {
            return Err(unavailable(format!("HTTP {}", r.status)));
        }
        let set: JwkSet =
            serde_json::from_slice(&r.body).map_err(|e| unavailable(e.to_string()))?;
        if let Ok(mut cache) = self.jwks_cache.lock() {
            *cache = Some((Instant::now(), set.clone()));
        }
        Ok(set)
    }
}

/// PKCE S256: base64url(SHA-256(verifier)).
pub fn pkce_challenge(verifier: &str) -> String {
    base64::engine::general_purpose::URL_SAFE_NO_PAD.encode(Sha256::digest(verifier.as_bytes()))
}

/// Percent-encode everything but RFC 3986 unreserved characters.
pub fn enc(s: &str) -> String {
    let mut out = String::with_capacity(s.len());
    for b in s.bytes() {
        if b.is_ascii_alphanumeric() || b"-._~".contains(&b) {
            out.push(b as char);
        } else {
            out.push_str(&format!("%{b:02X}"));
        }
    }
    out
}

/// A query parameter's decoded value (`+` is a space).
pub use crate::routes::matcher::query_param;

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn pkce_and_encoding() {
        // RFC 7636 appendix B.
        assert_eq!(
            pkce_challenge("dBjftJeZ4CVP-mB92K27uhbUJU1p1r_wW1gFWFOEjXk"),
            "E9Melhoa2OwvFrEMTJguCHaoeK1t8URWbuGJSstw-cM"
        );
        assert_eq!(enc("a b/c?d=e&f"), "a%20b%2Fc%3Fd%3De%26f");
        assert_eq!(
            query_param(Some("code=a%2Fb&state=x+y"), "code").as_deref(),
            Some("a/b")
        );
        assert_eq!(
            query_param(Some("code=a%2Fb&state=x+y"), "state").as_deref(),
            Some("x y")
        );
        assert_eq!(query_param(Some("code=1"), "state"), None);
    }
}

//! The console: cookie sessions with double-submit CSRF, sign-in flows, and the user's
//! keys. SPEC "Console routes" / "Authentication" / "States".
//!
//! - `nl_session`: 256 random bits, HttpOnly; the store keeps only its SHA-256.
//! - `nl_csrf`: 128 random bits (base64url), readable by script; unsafe methods must echo
//!   it in `X-CSRF-Token` (constant-time compare).
//! - Both: SameSite=Lax, Path=/, Expires = now + lifetime, Secure on TLS, when
//!   `console.origin` is https, or behind a trusted proxy that says
//!   `X-Forwarded-Proto: https`. Under half the lifetime left,
//!   any authenticated request pushes the expiry and re-issues both cookies.

pub mod email;
pub mod google;
pub mod page;
pub mod wallet;

use crate::errors::ApiError;
use crate::store::{self, Store};
use base64::Engine;
use std::net::IpAddr;
use std::sync::Arc;
use std::time::{Duration, UNIX_EPOCH};

pub const SESSION_COOKIE: &str = "nl_session";
pub const CSRF_COOKIE: &str = "nl_csrf";

pub use crate::auth::ConsoleSession;

pub struct Console {
    pub store: Store,
    pub ttl: i64,
    pub origin: Option<String>,
    /// `origin` is `https://…`: every cookie is `Secure`.
    https_origin: bool,
    trusted_proxies: crate::address::TrustedProxies,
    pub mailer: email::Mailer,
    pub email: crate::config::EmailConf,
    pub challenge_ttl: i64,
    pub max_challenges_per_client: i64,
    pub max_challenges_per_subject: i64,
    /// Plan of tenants created by console sign-up (the lowest).
    pub signup_plan: String,
    /// Google sign-in, when configured.
    pub oidc: Option<google::Oidc>,
}

/// A store call; its errors become 500 `internal` (SPEC), or 503 `store_unavailable`
/// with `Retry-After` when the store could not be reached in time; logged here.
pub async fn db<T>(
    call: impl std::future::Future<Output = Result<T, store::sql::StoreError>>,
) -> Result<T, ApiError> {
    call.await.map_err(|e| {
        log::error!("console store: {e}");
        e.to_api_error()
    })
}

impl Console {
    pub fn new(
        cfg: &crate::config::Loaded,
        store: Store,
        client: Arc<crate::upstream::UpstreamClient>,
    ) -> Result<Console, String> {
        let c = &cfg.app.console;
        let oidc = match (&c.google, &cfg.google_secret) {
            (Some(g), Some(secret)) => Some(google::Oidc::new(g, secret.clone(), client)?),
            _ => None,
        };
        Ok(Console {
            store,
            ttl: c.session_ttl_secs,
            origin: c.origin.clone(),
            https_origin: c
                .origin
                .as_deref()
                .is_some_and(|o| o.starts_with("https://")),
            // Checked at load (`config`): every entry parses.
            trusted_proxies: crate::address::TrustedProxies::parse(&c.trusted_proxies)
                .unwrap_or_default(),
            mailer: email::Mailer::new(cfg)?,
            email: c.email.clone(),
            challenge_ttl: c.challenge_ttl_secs,
            max_challenges_per_client: c.max_challenges_per_client,
            max_challenges_per_subject: c.max_challenges_per_subject,
            signup_plan: cfg.app.plans.first().cloned().unwrap_or_default(),
            oidc,
        })
    }

    /// Whether `peer` is one of `console.trusted_proxies` (its forwarding headers are
    /// believed).
    pub fn trusts(&self, peer: Option<IpAddr>) -> bool {
        peer.is_some_and(|p| self.trusted_proxies.contains(p))
    }

    /// The client behind a trusted proxy (`X-Forwarded-For`), or the peer itself.
    pub fn client(&self, peer: Option<IpAddr>, forwarded_for: Option<&str>) -> Option<IpAddr> {
        peer.map(|p| self.trusted_proxies.client(p, forwarded_for))
    }

    /// Cookies carry `Secure` on TLS, when the console's configured origin is https (the
    /// browser reaches it over TLS even when a proxy in front speaks plain HTTP to the
    /// edge), or when a trusted proxy says the client used https.
    pub fn secure(&self, tls: bool, peer: Option<IpAddr>, forwarded_proto: Option<&str>) -> bool {
        tls || self.https_origin
            || (peer.is_some_and(|p| self.trusted_proxies.contains(p))
                && forwarded_proto.is_some_and(|v| v.trim().eq_ignore_ascii_case("https")))
    }

    /// The session behind the request's `nl_session` cookie. Refusals are 401
    /// `unauthenticated` and clear the cookies; an expired session is revoked.
    pub async fn resolve(
        &self,
        cookie_header: Option<&str>,
        secure: bool,
    ) -> Result<ConsoleSession, ApiError> {
        let unauthenticated = || {
            let mut e = ApiError::new(401, "unauthenticated", "no valid session");
            for c in clear_cookies(secure) {
                e = e.with_header("Set-Cookie", c);
            }
            e
        };
        let token = cookie(cookie_header, SESSION_COOKIE)
            .filter(|t| !t.is_empty() && t.len() <= 128)
            .ok_or_else(unauthenticated)?;
        let hash = crate::crypto::sha256(token);
        let row = db(self.store.session(&hash)).await?;
        let Some(row) = row else {
            return Err(unauthenticated());
        };
        if row.revoked {
            return Err(unauthenticated());
        }
        if row.expires_at <= crate::clock::now() {
            let _ = db(self.store.revoke_session(&hash)).await;
            return Err(unauthenticated());
        }
        Ok(ConsoleSession {
            token_hash: hash,
            user_id: row.user_id,
            provider: row.provider,
            expires_at: row.expires_at,
            tenant_id: row.tenant_id,
            csrf: cookie(cookie_header, CSRF_COOKIE).map(str::to_string),
        })
    }

    /// Sliding refresh: under half the lifetime left, push the expiry and re-issue both
    /// cookies (a CSRF token is minted when the browser lost its `nl_csrf` cookie, so the
    /// session stays usable for writes). A failed extension is logged and does not fail
    /// the request.
    pub async fn refresh(
        &self,
        s: &ConsoleSession,
        secure: bool,
        session_token: Option<&str>,
    ) -> Vec<String> {
        let now = crate::clock::now();
        if s.expires_at - now >= self.ttl / 2 {
            return Vec::new();
        }
        let Some(token) = session_token else {
            return Vec::new();
        };
        let csrf = match s.csrf.as_deref().filter(|c| !c.is_empty()) {
            Some(c) => c.to_string(),
            None => random_token(16),
        };
        let expires = now + self.ttl;
        let hash = s.token_hash;
        match db(self.store.extend_session(&hash, expires)).await {
            Ok(true) => session_cookies(token, &csrf, expires, secure),
            _ => {
                log::warn!("console: session extension failed; cookies left as they are");
                Vec::new()
            }
        }
    }

    /// Start a session for `user_id`: store its hash, return the two cookies.
    pub async fn start_session(
        &self,
        user_id: String,
        provider: &'static str,
        secure: bool,
    ) -> Result<Vec<String>, ApiError> {
        let token = random_token(32);
        let csrf = random_token(16);
        let expires = crate::clock::now() + self.ttl;
        let hash = crate::crypto::sha256(&token);
        db(self
            .store
            .create_session(&hash, &user_id, provider, expires))
        .await?;
        Ok(session_cookies(&token, &csrf, expires, secure))
    }
}

/// Double-submit check on unsafe methods: cookie present, header equal (constant time).
pub fn check_csrf(
    method: &str,
    cookie_value: Option<&str>,
    header: Option<&str>,
) -> Result<(), ApiError> {
    if matches!(method, "GET" | "HEAD" | "OPTIONS") {
        return Ok(());
    }
    let cookie_value = cookie_value
        .filter(|c| !c.is_empty())
        .ok_or_else(|| ApiError::new(403, "csrf_missing", "nl_csrf cookie missing"))?;
    match header {
        Some(h) if crate::crypto::secret_eq(h.trim().as_bytes(), cookie_value.as_bytes()) => Ok(()),
        _ => Err(ApiError::new(
            403,
            "csrf_invalid",
            "X-CSRF-Token does not match",
        )),
    }
}

/// A cookie's value from a `Cookie` header (`a=1; b=2`).
pub fn cookie<'a>(header: Option<&'a str>, name: &str) -> Option<&'a str> {
    header?.split(';').find_map(|pair| {
        let (k, v) = pair.trim().split_once('=')?;
        (k == name).then(|| v.trim().trim_matches('"'))
    })
}

/// `n` random bytes, base64url without padding.
pub fn random_token(n: usize) -> String {
    let mut bytes = vec![0u8; n];
    rand::RngCore::fill_bytes(&mut rand::thread_rng(), &mut bytes);
    base64::engine::general_purpose::URL_SAFE_NO_PAD.encode(bytes)
}

fn http_date(unix: i64) -> String {
    httpdate::fmt_http_date(UNIX_EPOCH + Duration::from_secs(unix.max(0) as u64))
}

pub fn session_cookies(token: &str, csrf: &str, expires: i64, secure: bool) -> Vec<String> {
    let when = http_date(expires);
    let sec = if secure { "; Secure" } else { "" };
    vec![
        format!("{SESSION_COOKIE}={token}; Path=/; Expires={when}; HttpOnly; SameSite=Lax{sec}"),
        format!("{CSRF_COOKIE}={csrf}; Path=/; Expires={when}; SameSite=Lax{sec}"),
    ]
}

pub fn clear_cookies(secure: bool) -> Vec<String> {
    let sec = if secure { "; Secure" } else { "" };
    let gone = "Expires=Thu, 01 Jan 1970 00:00:00 GMT; Max-Age=0";
    vec![
        format!("{SESSION_COOKIE}=; Path=/; {gone}; HttpOnly; SameSite=Lax{sec}"),
        format!("{CSRF_COOKIE}=; Path=/; {gone}; SameSite=Lax{sec}"),
    ]
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn cookies_parse_and_csrf_rules() {
        let h = Some("a=1; nl_session=tok; nl_csrf=c5");
        assert_eq!(cookie(h, "nl_session"), Some("tok"));
        assert_eq!(cookie(h, "nl_csrf"), Some("c5"));
        assert_eq!(cookie(h, "nl"), None);
        assert!(check_csrf("GET", None, None).is_ok());
        assert_eq!(
            check_csrf("POST", None, Some("x")).unwrap_err().code,
            "csrf_missing"
        );
        assert_eq!(
            check_csrf("POST", Some(""), Some("x")).unwrap_err().code,
            "csrf_missing"
        );
        assert_eq!(
            check_csrf("POST", Some("c5"), None).unwrap_err().code,
            "csrf_invalid"
        );
        assert_eq!(
            check_csrf("DELETE", Some("c5"), Some("c6"))
                .unwrap_err()
                .code,
            "csrf_invalid"
        );
        assert!(check_csrf("POST", Some("c5"), Some("c5")).is_ok());
    }

    #[test]
    fn session_cookie_attributes() {
        let c = session_cookies("T", "C", 1_900_000_000, true);
        assert_eq!(
            c[0],
            "nl_session=T; Path=/; Expires=Sun, 17 Mar 2030 17:46:40 GMT; HttpOnly; SameSite=Lax; Secure"
        );
        assert_eq!(
            c[1],
            "nl_csrf=C; Path=/; Expires=Sun, 17 Mar 2030 17:46:40 GMT; SameSite=Lax; Secure"
        );
        assert!(!session_cookies("T", "C", 0, false)[0].contains("Secure"));
        assert_eq!(random_token(32).len(), 43);
        assert_eq!(random_token(16).len(), 22);
    }
}

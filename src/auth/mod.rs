//! Who the caller is: admin (loopback / token), API keys, and the plan checks on them.
//! Console sessions (`crate::console`) are the other kind of principal.

pub mod keys;
pub mod plans;

use crate::config::secrets::Secret;
use crate::crypto::secret_eq;
use crate::errors::ApiError;
use crate::store::KeyRecord;
use std::net::IpAddr;
use std::sync::Arc;

/// Every scope a key may carry: `rpc:read` for JSON-RPC reads (HTTP, WebSocket, batches),
/// `rpc:write` for anything that sends a transaction (`eth_sendRawTransaction`, the REST
/// senders and bundles, builder and private RPC), and the Solana products' own.
pub const SCOPES: &[&str] = &["rpc:read", "rpc:write", "sol_watchlist", "sol_gpa_snapshot"];

/// What a key gets when its creator names no scopes (the CLI; the console's default key).
pub const DEFAULT_SCOPES: &[&str] = &["rpc:read", "rpc:write"];

/// Every tenant feature a route or handler checks.
pub const FEATURES: &[&str] = &["eth.chain_metrics_el", "eth.chain_metrics_cl"];

/// The first entry of `given` that is not in `known`, as an error naming the known ones.
pub fn check_known(what: &str, given: &[String], known: &[&str]) -> Result<(), String> {
    match given.iter().find(|g| !known.contains(&g.as_str())) {
        Some(bad) => Err(format!(
            "unknown {what} '{bad}' (known: {})",
            known.join(", ")
        )),
        None => Ok(()),
    }
}

/// The authenticated caller, as far as the edge knows it.
#[derive(Debug, Clone)]
pub enum Principal {
    Anonymous,
    Admin,
    Key(Arc<KeyRecord>),
    /// A console user, by cookie session.
    User(Arc<ConsoleSession>),
}

/// A resolved console session.
#[derive(Debug, Clone)]
pub struct ConsoleSession {
    pub token_hash: [u8; 32],
    pub user_id: String,
    pub provider: String,
    pub expires_at: i64,
    /// The tenant it acts in (`store::team`); `None`: the user's own.
    pub tenant_id: Option<String>,
    /// The `nl_csrf` value the browser holds (re-issued unchanged on refresh).
    pub csrf: Option<String>,
}

/// Lapsed trial or subscription, checked on every key use.
pub fn check_standing(rec: &KeyRecord, now: i64) -> Result<(), ApiError> {
    if rec.revoked {
        return Err(ApiError::new(401, "unauthorized", "API key is revoked"));
    }
    if let Some(at) = rec
        .restrictions
        .as_ref()
        .and_then(|r| r.expires_at)
        .filter(|at| *at <= now)
    {
        return Err(ApiError::new(
            401,
            "key_expired",
            format!("the API key expired at {}", crate::clock::rfc3339(at)),
        ));
    }
    if let Some(end) = rec.subscription_ends_at {
        if end <= now {
            return Err(ApiError::new(
                401,
                "subscription_expired",
                "the subscription has lapsed",
            ));
        }
    } else if let Some(end) = rec.trial_ends_at {
        if end <= now {
            return Err(ApiError::new(401, "trial_expired", "the trial has ended"));
        }
    }
    Ok(())
}

/// Loopback by the socket's peer address only: `X-Forwarded-For` and `Host` never count.
pub fn is_loopback(ip: IpAddr) -> bool {
    match ip {
        IpAddr::V4(v4) => v4.is_loopback(),
        IpAddr::V6(v6) => {
            v6.is_loopback() || v6.to_ipv4_mapped().is_some_and(|v4| v4.is_loopback())
        }
    }
}

/// Where a request comes from, as far as admin is concerned.
#[derive(Debug, Clone, Copy)]
pub struct Origin {
    /// Admin may be served on the listener the request came in on (not where
    /// `admin.listen` keeps admin elsewhere).
    pub admin_here: bool,
    /// The client: the socket peer, or the client the trusted proxies report.
    pub client: Option<IpAddr>,
    /// The connection is from loopback and carries a forwarding header: a local proxy
    /// not listed in `trusted_proxies` stands in between, so the socket does not make
    /// the client local. (Behind a trusted proxy, `client` is the one it reports.)
    pub proxied_unknown: bool,
}

impl Origin {
    /// A loopback origin: a client on this host with no proxy in between, or one the
    /// trusted proxies report as loopback.
    pub fn is_loopback(&self) -> bool {
        !self.proxied_unknown && self.client.is_some_and(is_loopback)
    }
}

/// Why an admin request was refused, for the log and the metric.
#[derive(Debug, Clone, Copy, PartialEq)]
pub enum AdminRefusal {
    /// An `X-Admin-Token` was sent and is not the configured one (or none is configured).
    WrongToken,
    /// No token, and the origin is not loopback (or loopback admin is off).
    NoToken,
}

/// Admin routes: a loopback origin (where `allow_loopback`), or a valid `X-Admin-Token`.
pub fn admin(
    origin: Origin,
    token_header: Option<&[u8]>,
    token: Option<&Secret>,
    allow_loopback: bool,
) -> Result<Principal, (AdminRefusal, ApiError)> {
    let refused = |why| {
        (
            why,
            ApiError::new(403, "admin_forbidden", "admin endpoint loopback-only"),
        )
    };
    if !origin.admin_here {
        return Err(refused(AdminRefusal::NoToken));
    }
    // A token that was sent is checked even from loopback: a wrong one is refused
    // (and counted), never excused by where it came from.
    if let Some(given) = token_header {
        return match token {
            Some(expected) if secret_eq(given, expected.expose().as_bytes()) => {
                Ok(Principal::Admin)
            }
            _ => Err(refused(AdminRefusal::WrongToken)),
        };
    }
    if allow_loopback && origin.is_loopback() {
        return Ok(Principal::Admin);
    }
    Err(refused(AdminRefusal::NoToken))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn loopback_is_by_socket_address() {
        assert!(is_loopback("127.0.0.1".parse().unwrap()));
        assert!(is_loopback("::1".parse().unwrap()));
        assert!(is_loopback("::ffff:127.0.0.1".parse().unwrap()));
        assert!(!is_loopback("10.0.0.1".parse().unwrap()));
        assert!(!is_loopback("::ffff:10.0.0.1".parse().unwrap()));
    }

    #[test]
    fn admin_token_or_loopback() {
        std::env::set_var("CHAINEDGE_TEST_ADMIN", "tok");
        let t = crate::config::secrets::SecretRef("env:CHAINEDGE_TEST_ADMIN".into())
            .resolve()
            .unwrap();
        let at = |ip: &str, proxied| Origin {
            admin_here: true,
            client: Some(ip.parse().unwrap()),
            proxied_unknown: proxied,
        };
        let remote = at("10.1.1.1", false);
        let local = at("127.0.0.1", false);
        assert!(admin(remote, Some(b"tok"), Some(&t), true).is_ok());
        assert!(admin(remote, Some(b"tok2"), Some(&t), true).is_err());
        assert!(admin(remote, None, Some(&t), true).is_err());
        assert!(admin(remote, Some(b"tok"), None, true).is_err());
        assert!(admin(local, None, None, true).is_ok());
        // A wrong token from loopback is refused, not excused.
        assert_eq!(
            admin(local, Some(b"nope"), Some(&t), true).unwrap_err().0,
            AdminRefusal::WrongToken
        );
        // Loopback admin can be turned off; a proxied loopback socket is not local.
        assert!(admin(local, None, Some(&t), false).is_err());
        assert!(admin(at("127.0.0.1", true), None, None, true).is_err());
    }
}

//! Polygon firehose connection info (`GET /v1/polygon/firehose/{logs,mempool}`) and the
//! tokens that open its channels (`/ws/polygon/{logs,mempool}`).
//!
//! A token is short-lived (`streams.firehose.token_ttl_secs`, 60 s by default), bound
//! to one channel and to the key it was issued to (its id, tenant and plan): a JWT
//! signed with HS256 under `streams.firehose.secret`. It is presented at connect time in
//! `Authorization: Bearer <token>` or, from a browser, as the second WebSocket
//! subprotocol after `chainedge.firehose.v1`; never in the URL, which ends up in logs
//! and referrers. The channel checks the signature (in constant time), the channel
//! and the expiry: a tampered, foreign-channel or expired token is refused, so a token
//! replayed after its expiry opens nothing. Within its lifetime a token may be used
//! again (a reconnect); the key's connection cap bounds how many channels it opens.

use super::Request;
use crate::errors::ApiError;
use crate::reply::Reply;
use serde::{Deserialize, Serialize};
use serde_json::json;

/// The WebSocket subprotocol a browser offers, followed by the token.
pub const PROTOCOL: &str = "chainedge.firehose.v1";
/// The channels a token can open.
pub const CHANNELS: &[&str] = &["logs", "mempool"];
/// Longest token accepted (a real one is about 200 bytes).
const MAX_TOKEN: usize = 1024;

/// What a token grants: one channel, to one key, until `expires` (Unix seconds).
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct Grant {
    #[serde(rename = "channel")]
    pub channel: String,
    /// The key it was issued to.
    #[serde(rename = "sub")]
    pub key_id: String,
    pub tenant: String,
    pub plan: String,
    #[serde(rename = "exp")]
    pub expires: u64,
    /// Makes two tokens issued in the same second differ.
    #[serde(rename = "jti")]
    pub nonce: String,
}

/// Why a token was refused.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Refused {
    Malformed,
    BadSignature,
    OtherChannel,
    Expired,
}

impl Refused {
    pub fn error(self) -> ApiError {
        let (code, why) = match self {
            Refused::Malformed => ("invalid_token", "the firehose token is malformed"),
            Refused::BadSignature => ("invalid_token", "the firehose token's signature is wrong"),
            Refused::OtherChannel => ("invalid_token", "the firehose token is for another channel"),
            Refused::Expired => (
                "token_expired",
                "the firehose token has expired; ask /v1/polygon/firehose/… for a new one",
            ),
        };
        ApiError::new(401, code, why)
    }
}

/// A JWT (RFC 7519) signed with HS256 under the firehose secret.
pub fn issue(secret: &[u8], grant: &Grant) -> Result<String, ApiError> {
    let key = jsonwebtoken::EncodingKey::from_secret(secret);
    jsonwebtoken::encode(&jsonwebtoken::Header::default(), grant, &key)
        .map_err(|e| ApiError::internal(format!("firehose token not signed: {e}")))
}

/// The grant of a token for `channel`, if it is genuine (HS256 under `secret`, no other
/// algorithm) and not expired at `now`.
pub fn verify(secret: &[u8], token: &str, channel: &str, now: u64) -> Result<Grant, Refused> {
    use jsonwebtoken::errors::ErrorKind;
    if token.len() > MAX_TOKEN {
        return Err(Refused::Malformed);
    }
    let mut rules = jsonwebtoken::Validation::new(jsonwebtoken::Algorithm::HS256);
    // The expiry is checked below against `now`, with no leeway.
    rules.validate_exp = false;
    rules.required_spec_claims.clear();
    let key = jsonwebtoken::DecodingKey::from_secret(secret);
    let grant = jsonwebtoken::decode::<Grant>(token, &key, &rules)
        .map_err(|e| match e.kind() {
            ErrorKind::InvalidSignature => Refused::BadSignature,
            _ => Refused::Malformed,
        })?
        .claims;
    if grant.channel != channel {
        return Err(Refused::OtherChannel);
    }
    if now >= grant.expires {
        return Err(Refused::Expired);
    }
    Ok(grant)
}

/// The token a WebSocket upgrade presents: `Authorization: Bearer …`, or the offered
/// subprotocols `chainedge.firehose.v1, <token>` (then the answer names the protocol).
pub fn presented<'a>(
    authorization: Option<&'a str>,
    protocols: Option<&'a str>,
) -> Option<(&'a str, bool)> {
    if let Some(t) = authorization
        .and_then(|a| a.strip_prefix("Bearer "))
        .map(str::trim)
    {
        return Some((t, false));
    }
    let mut offered = protocols?.split(',').map(str::trim);
    let first = offered.next()?;
    (first == PROTOCOL)
        .then(|| offered.next())
        .flatten()
        .map(|t| (t, true))
}

pub const HANDLERS: &[super::Handler] = &[super::Handler::new("polygon_firehose_info", |s, r| {
    Box::pin(info_route(s, r))
})];

/// The pool the logs channel follows, and the chain whose mempool the other carries.
pub const POOL: &str = "polygon_bor";
pub const CHAIN: &str = "polygon";

/// Whether a channel's source runs here: 503 naming what to configure when not.
pub fn source_ready(
    mempools: &crate::state::mempool::Mempools,
    pools: &crate::pools::Pools,
    channel: &str,
) -> Result<(), ApiError> {
    match channel {
        "mempool" if !mempools.watches(CHAIN) => Err(ApiError::new(
            503,
            "mempool_not_configured",
            "the polygon mempool is not watched here (config `mempool.polygon`)",
        )),
        "logs" if pools.get(POOL).is_none() => Err(ApiError::new(
            503,
            "pool_not_configured",
            format!("no {POOL} pool is configured"),
        )),
        _ => Ok(()),
    }
}

/// Where clients open the channels: `streams.firehose.public_url`, else the console's
/// origin with a WebSocket scheme.
pub fn public_url(app: &crate::config::AppConfig) -> String {
    if let Some(u) = &app.streams.firehose.public_url {
        return u.clone();
    }
    match app.console.origin.as_deref() {
        Some(o) if o.starts_with("https://") => format!("wss://{}", &o[8..]),
        Some(o) => format!("ws://{}", o.trim_start_matches("http://")),
        None => "ws://127.0.0.1".into(),
    }
}

/// The info route of either channel (its route name says which).
async fn info_route(s: &super::Services<'_>, req: &Request<'_>) -> Result<Reply, ApiError> {
    let channel = if req.route.ends_with(".mempool") {
        "mempool"
    } else {
        "logs"
    };
    let key = req.key().ok_or_else(|| {
        ApiError::new(
            403,
            "api_key_required",
            "a firehose token is issued to an API key",
        )
    })?;
    // A token outlives the request: it is issued only on the key as the store has it
    // now, never on a cached (perhaps revoked) record.
    let rec = match s.keys().fresh(&key.secret_sha256).await? {
        Some(rec) => rec,
        None => return Err(ApiError::new(401, "unauthorized", "unknown API key")),
    };
    connection(s, channel, &rec)
}

/// Where `channel` is and a token that opens it for `key` (a record fresh from the
/// store, whose standing is checked here): the key route's answer, and the console's
/// for one of the tenant's keys.
pub fn connection(
    s: &super::Services<'_>,
    channel: &str,
    key: &crate::store::KeyRecord,
) -> Result<Reply, ApiError> {
    source_ready(s.mempools(), s.pools, channel)?;
    crate::auth::check_standing(key, crate::clock::now())?;
    let app = &s.config.app;
    info(
        s.config
            .firehose_secret
            .as_ref()
            .map(|k| k.expose().as_bytes()),
        app.streams.firehose.token_ttl_secs,
        &public_url(app),
        channel,
        key,
    )
}

/// `GET /v1/polygon/firehose/{channel}`: where the channel is and a token to open it.
pub fn info(
    secret: Option<&[u8]>,
    ttl_secs: u64,
    public_url: &str,
    channel: &str,
    key: &crate::store::KeyRecord,
) -> Result<Reply, ApiError> {
    let Some(secret) = secret else {
        return Err(ApiError::new(
            503,
            "firehose_not_configured",
            "the firehose is not configured here (streams.firehose.secret)",
        ));
    };
    let expires = crate::clock::now() as u64 + ttl_secs;
    let grant = Grant {
        channel: channel.to_string(),
        key_id: key.key_id.clone(),
        tenant: key.tenant_id.clone(),
        plan: key.plan.clone(),
        expires,
        nonce: format!("{:016x}", rand::random::<u64>()),
    };
    let token = issue(secret, &grant)?;
    let body = json!({
        "channel": channel,
        "url": format!("{public_url}/ws/polygon/{channel}"),
        "token": token,
        "protocol": PROTOCOL,
        "expires_at": super::rfc3339(expires as i64),
        "expires_in_secs": ttl_secs,
    });
    // A bearer credential: never cached by anything in between.
    Ok(Reply::json(200, body.to_string()).with_headers(vec![("Cache-Control", "no-store".into())]))
}

#[cfg(test)]
mod tests {
    use super::*;
    use base64::engine::general_purpose::URL_SAFE_NO_PAD;
    use base64::Engine;

    fn grant(expires: u64) -> Grant {
        Grant {
            channel: "logs".into(),
            key_id: "k1".into(),
            tenant: "t1".into(),
            plan: "business".into(),
            expires,
            nonce: "00".into(),
        }
    }

    #[test]
    fn a_token_opens_its_channel_until_it_expires_and_nothing_else() {
        let secret = [7u8; 32];
        let t = issue(&secret, &grant(1_000)).unwrap();
        assert_eq!(verify(&secret, &t, "logs", 999), Ok(grant(1_000)));
        assert_eq!(verify(&secret, &t, "logs", 1_000), Err(Refused::Expired));
        assert_eq!(
            verify(&secret, &t, "mempool", 999),
            Err(Refused::OtherChannel)
        );
        assert_eq!(
            verify(&[8u8; 32], &t, "logs", 999),
            Err(Refused::BadSignature)
        );
        // A changed grant (a later expiry, another plan) no longer matches its signature.
        let parts: Vec<&str> = t.split('.').collect();
        let longer = URL_SAFE_NO_PAD.encode(serde_json::to_vec(&grant(9_999)).unwrap());
        let tampered = format!("{}.{longer}.{}", parts[0], parts[2]);
        assert_eq!(
            verify(&secret, &tampered, "logs", 999),
            Err(Refused::BadSignature)
        );
        // Unsigned ("alg": "none") or another algorithm is never taken.
        let none = URL_SAFE_NO_PAD.encode(br#"{"alg":"none","typ":"JWT"}"#);
        let unsigned = format!("{none}.{}.", parts[1]);
        assert!(verify(&secret, &unsigned, "logs", 999).is_err());
        let payload = parts[1];
        for bad in [
            "",
            "x",
            ".",
            "a.b",
            &format!("{payload}."),
            &"a".repeat(2000),
        ] {
            assert!(verify(&secret, bad, "logs", 999).is_err(), "{bad}");
        }
    }

    #[test]
    fn tokens_come_in_a_bearer_header_or_as_a_subprotocol() {
        assert_eq!(presented(Some("Bearer abc"), None), Some(("abc", false)));
        assert_eq!(
            presented(None, Some("chainedge.firehose.v1, abc.def")),
            Some(("abc.def", true))
        );
        assert_eq!(presented(None, Some("other, abc")), None);
        assert_eq!(presented(None, Some("chainedge.firehose.v1")), None);
        assert_eq!(presented(Some("Basic xyz"), None), None);
    }
}

//! Local handlers: routes answered by the edge itself rather than passed through.
//!
//! **The handler contract.** A handler is an async function of the [`Services`] it may
//! use (the gateway, the pools, the store, what capture keeps) and a plain [`Request`],
//! returning `Result<Reply, ApiError>`. It never sees a socket or a Pingora session: the
//! edge has already matched the route, authenticated and authorized the caller, counted
//! the rate limit and read the body within the route's bound, and it writes the answer
//! (adding `Server`, `X-Request-Id`, CORS and rate headers) on whichever server took the
//! request. Errors are `ApiError`s; the edge renders them in the route's envelope.
//!
//! **The registry.** Each handler file declares its handlers once, in a `HANDLERS` table,
//! by the name a manifest's `handler:` uses (`registry.rs` lists the tables); the route
//! table resolves every name when it loads (`chainedge -t` refuses one it does not know),
//! and the edge calls the entry. The recipe for a new handler is in CONTRIBUTING.md.

pub mod base_page;
pub mod beacon;
pub mod channels;
pub mod console;
pub mod firehose;
pub mod heimdall;
pub mod indexed;
pub mod indexed_tokens;
pub mod intel;
pub mod mempool;
pub mod mesh;
pub mod metrics_mirror;
pub mod mev_share;
pub mod openapi;
pub mod peer_graph;
pub mod registry;
pub mod relay;
pub mod rest_read;
pub mod sender;
pub mod sol;
pub mod trace;
pub mod tx;
pub mod tx_hooks;
pub mod usage;
pub mod wallet;

pub use registry::{Handler, Services};

use crate::auth::{ConsoleSession, Principal};
use crate::store::KeyRecord;
use bytes::Bytes;

/// What a local handler is given.
pub struct Request<'a> {
    /// The route's name (`polygon.firehose.logs`), for handlers that serve several.
    pub route: &'a str,
    /// Routes are matched per method, so no handler branches on it yet; it is part of
    /// the contract for the one that will.
    #[allow(dead_code)]
    pub method: &'a str,
    /// The path as the client sent it, still percent-encoded.
    pub path: &'a str,
    /// The path had `.`/`..` or encoded-slash segments (only tail routes get this far).
    pub path_suspicious: bool,
    /// Values of the route's `{param}`s, in order (a tail is the rest of the path).
    pub params: &'a [String],
    pub query: Option<&'a str>,
    /// The body, read in full within the route's bound (empty for GET and HEAD).
    pub body: Bytes,
    /// Who is calling, as the guard established.
    pub caller: &'a Principal,
    /// The `Cookie` header (console routes).
    pub cookies: Option<&'a str>,
    /// Whether cookies set on the answer get `Secure`.
    pub secure: bool,
    pub request_id: &'a str,
    /// The client's address: the socket peer, or the client a trusted proxy names.
    pub client: Option<std::net::IpAddr>,
}

pub use crate::clock::rfc3339;

/// A push entry's dead letters as the API answers them (watchlist entries, transaction
/// hooks).
pub fn dead_letters_json(
    entry_id: &str,
    letters: &[crate::store::sol_watchlist::DeadLetter],
) -> serde_json::Value {
    let items: Vec<serde_json::Value> = letters
        .iter()
        .map(|d| {
            serde_json::json!({
                "id": d.id,
                "attempts": d.attempts,
                "last_error": d.last_error,
                "created_at": rfc3339(d.created_at),
                "payload": serde_json::from_str::<serde_json::Value>(&d.payload).unwrap_or(serde_json::Value::Null),
            })
        })
        .collect();
    serde_json::json!({"entry_id": entry_id, "items": items})
}

/// An entry's delivery log (`.../deliveries`), newest first.
pub fn deliveries_json(
    entry_id: &str,
    log: &[crate::store::deliveries::Delivery],
) -> serde_json::Value {
    let items: Vec<serde_json::Value> = log
        .iter()
        .map(|d| {
            serde_json::json!({
                "delivery_id": d.delivery_id,
                "at": crate::clock::rfc3339_ms(d.at_ms),
                "delivered": d.delivered,
                "attempts": d.attempts,
                "error": (!d.delivered).then_some(&d.error),
            })
        })
        .collect();
    serde_json::json!({"entry_id": entry_id, "items": items})
}

/// 404 for a dead letter an entry does not hold (or no longer: another retry took it).
pub fn no_dead_letter(id: &str) -> crate::errors::ApiError {
    let shown: String = id.chars().take(60).collect();
    crate::errors::ApiError::new(404, "not_found", format!("no dead letter {shown}"))
}

impl Request<'_> {
    /// The last `{param}` (a tail route's tail), or "".
    pub fn tail(&self) -> &str {
        self.params.last().map(String::as_str).unwrap_or("")
    }

    /// One query parameter, percent-decoded (the first, if repeated).
    pub fn query_param(&self, name: &str) -> Option<String> {
        crate::routes::matcher::query_param(self.query, name)
    }

    /// The key a transaction sent by this request is followed for
    /// (`GET /v1/{chain}/tx/{hash}`), when the caller is a key.
    pub fn submitter(&self) -> Option<crate::tracking::Submitter<'_>> {
        self.key().map(|k| crate::tracking::Submitter {
            tenant: &k.tenant_id,
            key_id: &k.key_id,
        })
    }

    /// The caller's API key, when the caller is one.
    pub fn key(&self) -> Option<&KeyRecord> {
        match self.caller {
            Principal::Key(k) => Some(k),
            _ => None,
        }
    }

    /// The caller's console session, when signed in by cookie.
    pub fn session(&self) -> Option<&ConsoleSession> {
        match self.caller {
            Principal::User(s) => Some(s),
            _ => None,
        }
    }
}

/// A body member that may be left out (its `#[serde(default)]`) but, when sent, is not
/// `null`: the contract types these members without `null`, so `null` is a 400 like any
/// other value of the wrong type. Use as `#[serde(default, deserialize_with =
/// "not_null")]` on an `Option`.
pub fn not_null<'de, D, T>(d: D) -> Result<Option<T>, D::Error>
where
    D: serde::Deserializer<'de>,
    T: serde::Deserialize<'de>,
{
    T::deserialize(d).map(Some)
}

/// A REST body: one JSON object, read into `T`. serde would also read a struct from a
/// JSON array, member by member in order (`[null, "0x…"]`); the contract's bodies are
/// objects, so anything else is a 400 before a field is read.
pub fn object_body<'a, T: serde::Deserialize<'a>>(
    raw: &'a [u8],
) -> Result<T, crate::errors::ApiError> {
    use crate::errors::ApiError;
    if !is_object(raw) {
        return Err(ApiError::invalid_params("body: a JSON object is expected"));
    }
    serde_json::from_slice(raw).map_err(|e| ApiError::invalid_params(format!("body: {e}")))
}

/// Whether a body is a JSON object by its first byte past whitespace (serde's derive would
/// read a struct from an array too); the value is parsed after.
pub fn is_object(raw: &[u8]) -> bool {
    raw.iter().find(|b| !b.is_ascii_whitespace()) == Some(&b'{')
}

/// A body member that is a struct of its own, read from a JSON object only (see
/// `object_body`). Use as `#[serde(deserialize_with = "object_member")]`.
pub fn object_member<'de, D, T>(d: D) -> Result<T, D::Error>
where
    D: serde::Deserializer<'de>,
    T: serde::de::DeserializeOwned,
{
    use serde::de::Error;
    use serde::Deserialize;
    let object = serde_json::Map::<String, serde_json::Value>::deserialize(d)?;
    serde_json::from_value(serde_json::Value::Object(object)).map_err(D::Error::custom)
}

#[cfg(test)]
mod body_tests {
    #[derive(serde::Deserialize, Debug)]
    #[allow(dead_code)]
    struct Body {
        name: String,
        #[serde(default, deserialize_with = "super::not_null")]
        tag: Option<String>,
        #[serde(default, deserialize_with = "super::object_member")]
        inner: Inner,
    }

    #[derive(serde::Deserialize, Debug, Default)]
    #[allow(dead_code)]
    struct Inner {
        #[serde(default)]
        a: Option<String>,
    }

    #[test]
    fn a_body_is_an_object_and_null_is_not_left_out() {
        let read = |raw: &str| super::object_body::<Body>(raw.as_bytes());
        assert_eq!(read(r#" {"name": "a"}"#).unwrap().tag, None);
        assert_eq!(
            read(r#"{"name": "a", "tag": "t"}"#).unwrap().tag.as_deref(),
            Some("t")
        );
        for refused in [
            r#"["a"]"#,
            r#"["a", "t"]"#,
            r#"{"name": "a", "tag": null}"#,
            "",
            "null",
        ] {
            let e = read(refused).unwrap_err();
            assert_eq!(e.status, 400, "{refused}");
        }
    }
}

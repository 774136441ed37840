//! Admitting a WebSocket channel: the handshake (RFC 6455), the caller's key, and the
//! key's connection cap by plan. The route's rate limit was counted by the guard, once,
//! like any request's.

use super::{ChannelRequest, Headers, Holder, PushChannel, Services};
use crate::auth::Principal;
use crate::cluster::places::OwnerPlace;
use crate::errors::ApiError;
use crate::store::KeyRecord;
use crate::streams::push::PushSource;
use std::sync::Arc;

/// A tenant's push channel, opened with one of its keys: the handshake checked and the
/// key's connection place taken.
pub struct KeyChannel {
    pub accept: String,
    pub key: Arc<KeyRecord>,
    slot: OwnerPlace,
}

impl KeyChannel {
    /// The channel, carrying `source` (subscribed before the 101: nothing sent after it
    /// is missed).
    pub fn open(self, source: Box<dyn PushSource>) -> PushChannel {
        PushChannel {
            accept: self.accept,
            protocol: None,
            source,
            holder: Holder::Caller,
            slot: self.slot,
        }
    }
}

/// Admit a push channel opened with an API key (the watchlist's, the transactions'). Its
/// own parameters are checked first by the caller of this (a bad one is a 400 even
/// without an upgrade); then the handshake, the key, the key's connection cap.
pub async fn key_channel(
    s: &Services<'_>,
    req: &ChannelRequest<'_>,
) -> Result<KeyChannel, ApiError> {
    let accept = handshake_accept(req.headers)?;
    let Principal::Key(key) = req.caller else {
        return Err(ApiError::new(401, "unauthorized", "an API key is required"));
    };
    let slot = connection_place(s, &key.key_id, &key.plan).await?;
    Ok(KeyChannel {
        accept,
        key: key.clone(),
        slot,
    })
}

/// A connection's place under its key's cap (by the key's plan), across instances when
/// clustered; 429 `stream_cap_exceeded` past it.
pub async fn connection_place(
    s: &Services<'_>,
    key_id: &str,
    plan: &str,
) -> Result<OwnerPlace, ApiError> {
    let cap = s.config.app.streams.websocket.max_connections(plan);
    s.ws_connections()
        .take(format!("key:{key_id}"), cap)
        .await
        .ok_or_else(|| connection_cap_reached(cap))
}

/// The refusal of a connection past the key's cap.
pub fn connection_cap_reached(cap: usize) -> ApiError {
    ApiError::new(
        429,
        "stream_cap_exceeded",
        format!("{cap} WebSocket connections are already open for this key"),
    )
    .with_field("max_connections", cap)
}

/// The handshake headers of an upgrade checked: its `Sec-WebSocket-Accept`.
pub fn handshake_accept(headers: &dyn Headers) -> Result<String, ApiError> {
    let key = headers
        .header("sec-websocket-key")
        .map(str::trim)
        .filter(|k| is_handshake_key(k))
        .ok_or_else(|| {
            ApiError::new(
                400,
                "bad_request",
                "Sec-WebSocket-Key is missing or invalid",
            )
        })?;
    if headers.header("sec-websocket-version").map(str::trim) != Some("13") {
        return Err(ApiError::new(
            426,
            "upgrade_required",
            "only WebSocket version 13 is supported",
        )
        .with_header("Sec-WebSocket-Version", "13"));
    }
    Ok(tokio_tungstenite::tungstenite::handshake::derive_accept_key(key.as_bytes()))
}

/// A `Sec-WebSocket-Key`: base64 of 16 bytes (RFC 6455 §4.1).
fn is_handshake_key(key: &str) -> bool {
    key.len() == 24
        && key.ends_with("==")
        && key[..22]
            .bytes()
            .all(|b| b.is_ascii_alphanumeric() || b == b'+' || b == b'/')
}

//! A WebSocket upgrade once checked, whichever channel it opens: the handshake, the
//! session's owner and lease, and what a server-to-client channel reads from. The
//! sessions themselves are `websocket` (JSON-RPC) and `push_channel` (firehose,
//! watchlist), chosen by `servers`.

use super::Downstream;
use crate::auth::Principal;
use crate::cluster::places::OwnerPlace;
use crate::errors::ApiError;
use crate::routes::Route;
use std::future::Future;
use std::net::IpAddr;
use std::pin::Pin;
use std::sync::Arc;
use tokio_tungstenite::tungstenite::protocol::frame::coding::CloseCode;
use tokio_tungstenite::tungstenite::Message;

/// An accepted upgrade: what the session needs once the 101 is out.
pub struct WsUpgrade {
    /// `Sec-WebSocket-Accept` for the 101.
    pub accept: String,
    /// The subprotocol the 101 names (a firehose token offered as one).
    pub protocol: Option<&'static str>,
    /// A server-to-client channel (firehose, watchlist) rather than JSON-RPC, its feed
    /// already open so the client misses nothing sent after the 101.
    pub(super) push: Option<Box<dyn PushSource>>,
    pub(super) pool: String,
    pub(super) principal: Principal,
    pub(super) client_ip: Option<IpAddr>,
    pub(super) category: Option<String>,
    pub(super) request_id: String,
    /// The upgrade's route, for each message's access-log line.
    pub(super) route: Option<Arc<Route>>,
    /// A channel opened with a token: the key it was given to, and when it expires.
    pub(super) grant: Option<(String, i64)>,
    /// How checked every answer of the session must be (`X-Chainedge-Require-Verified`
    /// on the upgrade).
    pub(super) required: crate::verify::Verified,
    pub(super) _slot: OwnerPlace,
}

impl WsUpgrade {
    /// What ends this session besides either side: its key revoked or lapsed, its
    /// token expired.
    pub(super) fn lease(&self, keys: &crate::auth::keys::KeyAuth) -> super::lease::Lease {
        use super::lease::{Holder, Lease};
        match (&self.principal, &self.grant) {
            (Principal::Key(k), _) => Lease::new(keys, Some(Holder::Hash(k.secret_sha256)), None),
            (_, Some((key_id, expires))) => {
                Lease::new(keys, Some(Holder::Id(key_id.clone())), Some(*expires))
            }
            _ => Lease::new(keys, None, None),
        }
    }
}

/// A tenant's push channel, opened with one of its keys: the key's rate limit and
/// connection cap passed.
pub(super) struct KeyChannel {
    pub accept: String,
    pub key: Arc<crate::store::KeyRecord>,
    slot: OwnerPlace,
}

impl super::Edge {
    /// Admit a push channel opened with an API key (the watchlist's, the transactions'):
    /// its own parameters (`check`, first: a bad one is a 400 even without an upgrade),
    /// the handshake, the key, the route's rate category, the key's connection cap.
    pub(super) async fn key_channel<D: Downstream + ?Sized>(
        &self,
        session: &D,
        ctx: &mut super::Ctx,
        route: &Route,
        check: impl FnOnce(&D) -> Result<(), ApiError>,
    ) -> Result<KeyChannel, ApiError> {
        let st = &*self.state;
        // Its own parameters first: a bad one is a 400 however the request came.
        check(session)?;
        let accept = handshake_accept(session)?;
        let Some(Principal::Key(key)) = ctx.principal.clone() else {
            return Err(ApiError::new(401, "unauthorized", "an API key is required"));
        };
        if let Some(category) = &route.rate {
            let cost =
                crate::rpc::compute_units::Cost::request(st.compute_units.route(&route.name));
            let client = ctx.client(session.client_ip());
            ctx.rate_headers = self.limit(client, &Principal::Key(key.clone()), category, cost)?;
        }
        let cap = st.config.app.streams.websocket.max_connections(&key.plan);
        let slot = st
            .ws_connections()
            .take(format!("key:{}", key.key_id), cap)
            .await
            .ok_or_else(|| connection_cap_reached(cap))?;
        Ok(KeyChannel { accept, key, slot })
    }
}

impl KeyChannel {
    /// The upgrade, carrying `feed` (subscribed before the 101: nothing sent after it
    /// is missed).
    pub(super) fn open<D: Downstream + ?Sized>(
        self,
        session: &D,
        ctx: &super::Ctx,
        feed: Box<dyn PushSource>,
    ) -> WsUpgrade {
        WsUpgrade {
            accept: self.accept,
            protocol: None,
            push: Some(feed),
            pool: String::new(),
            client_ip: ctx.client(session.client_ip()),
            principal: Principal::Key(self.key),
            category: None,
            request_id: ctx.request_id.clone(),
            route: ctx.route.clone(),
            grant: None,
            required: crate::verify::Verified::None,
            _slot: self.slot,
        }
    }
}

/// The refusal of a connection past the key's cap.
pub(super) fn connection_cap_reached(cap: usize) -> ApiError {
    ApiError::new(
        429,
        "stream_cap_exceeded",
        format!("{cap} WebSocket connections are already open for this key"),
    )
    .with_field("max_connections", cap)
}

/// The headers of the 101 that accepts an upgrade (both servers write them).
pub fn handshake_headers(up: &WsUpgrade) -> Vec<(&'static str, &str)> {
    let mut h = vec![
        ("Upgrade", "websocket"),
        ("Connection", "Upgrade"),
        ("Sec-WebSocket-Accept", up.accept.as_str()),
    ];
    if let Some(p) = up.protocol {
        h.push(("Sec-WebSocket-Protocol", p));
    }
    h
}

/// The handshake headers of an upgrade checked: its `Sec-WebSocket-Accept`.
pub(super) fn handshake_accept<D: Downstream + ?Sized>(session: &D) -> Result<String, ApiError> {
    let key = session
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
    if session.header("sec-websocket-version").map(str::trim) != Some("13") {
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

/// What a channel's source gives next.
pub(super) enum Item {
    Send(Message),
    /// The reader fell too far behind the source: closed as a slow consumer.
    Lagged,
    /// The source ended: close with this code and reason.
    End(CloseCode, String),
}

/// A server-to-client channel's source (boxed in the upgrade, so the session does not
/// need to know which channel it serves).
pub(super) trait PushSource: Send + Sync {
    fn next(&mut self) -> Pin<Box<dyn Future<Output = Item> + Send + '_>>;
}

/// Resolves when the server starts shutting down; never without a shutdown channel.
pub(super) async fn going_away(shutdown: &mut Option<pingora_core::server::ShutdownWatch>) {
    match shutdown {
        Some(rx) => {
            while !*rx.borrow_and_update() {
                if rx.changed().await.is_err() {
                    return;
                }
            }
        }
        None => std::future::pending().await,
    }
}

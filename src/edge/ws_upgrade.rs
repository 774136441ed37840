//! A WebSocket upgrade once checked, whichever channel it opens: the handshake's answer,
//! the session's owner and lease, and what a server-to-client channel reads from. The
//! held socket itself is `websocket`'s, for JSON-RPC sessions and push channels alike.

use crate::auth::Principal;
use crate::cluster::places::OwnerPlace;
use crate::routes::Route;
use std::net::IpAddr;
use std::sync::Arc;

/// An accepted upgrade: what the session needs once the 101 is out.
pub struct WsUpgrade {
    /// `Sec-WebSocket-Accept` for the 101.
    pub accept: String,
    /// The subprotocol the 101 names (a firehose token offered as one).
    pub protocol: Option<&'static str>,
    /// A server-to-client channel (firehose, watchlist) rather than JSON-RPC, its feed
    /// already open so the client misses nothing sent after the 101.
    pub(super) push: Option<Box<dyn crate::streams::push::PushSource>>,
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

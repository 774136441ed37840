//! The Polygon firehose channels (`/ws/polygon/logs`, `/ws/polygon/mempool`): opened by
//! a token from `/v1/polygon/firehose/…` (`handlers::firehose`), then one WebSocket
//! text message per item, server to client:
//!
//! - `logs`: every log of the chain as `eth_subscribe("logs")` gives it (a reorged one
//!   again with `removed: true`), from the hub's shared node subscription on
//!   `polygon_bor` (`streams::subscriptions`): one node subscription for all channels.
//! - `mempool`: every transaction the mempool watcher sees arrive
//!   (`{hash, from, to, nonce, gas_price_wei, first_seen}`).
//!
//! The same bounds as a JSON-RPC session: the key's connection cap (by the plan the
//! token carries), a bounded send buffer (a slow consumer is closed with 1008), ping and
//! idle timeout, "going away" (1001) at shutdown. Messages from the client are not
//! read as anything (control frames aside).

use super::admit::{connection_place, handshake_accept};
use super::{
    Channel, ChannelRequest, ChannelTraits, ChannelTransport, Holder, Opener, PushChannel,
};
use crate::errors::ApiError;
use crate::handlers::firehose::{self, CHAIN, POOL, PROTOCOL};
use crate::handlers::Services;
use crate::streams::push::{Item, PushSource};
use crate::streams::subscriptions::{ClientShare, Ended};
use serde_json::json;
use std::future::Future;
use std::net::IpAddr;
use std::pin::Pin;
use std::sync::Arc;
use tokio::sync::broadcast;
use tokio_tungstenite::tungstenite::Message;

pub const CHANNELS: &[Channel] = &[Channel {
    traits: ChannelTraits::new(
        "firehose_ws",
        "the Polygon firehose",
        ChannelTransport::PushWebSocket,
    ),
    open: Opener::Push(|s, req| Box::pin(open(s, req))),
}];

/// Check an upgrade to a firehose channel: the handshake, the token (signature,
/// channel, expiry), that the channel has a source, and the key's connection cap.
async fn open(s: &Services<'_>, req: &ChannelRequest<'_>) -> Result<PushChannel, ApiError> {
    let accept = handshake_accept(req.headers)?;
    let channel = firehose::CHANNELS
        .iter()
        .copied()
        .find(|c| req.route.name.ends_with(&format!(".{c}")))
        .ok_or_else(ApiError::route_not_found)?;
    let secret = s.config.firehose_secret.as_ref().ok_or_else(|| {
        ApiError::new(
            503,
            "firehose_not_configured",
            "the firehose is not configured here (streams.firehose.secret)",
        )
    })?;
    let (token, as_protocol) = firehose::presented(
        req.headers.header("authorization"),
        req.headers.header("sec-websocket-protocol"),
    )
    .ok_or_else(|| {
        ApiError::new(
            401,
            "invalid_token",
            format!(
                "a firehose token is required: Authorization: Bearer <token>, or the subprotocols {PROTOCOL}, <token>"
            ),
        )
    })?;
    let grant = firehose::verify(
        secret.expose().as_bytes(),
        token,
        channel,
        crate::clock::now() as u64,
    )
    .map_err(firehose::Refused::error)?;
    grant_holds(s, &grant, req.headers.header("origin"), req.client).await?;
    firehose::source_ready(s.mempools(), s.pools, channel)?;
    let slot = connection_place(s, &grant.key_id, &grant.plan).await?;
    // Open before the 101: what happens after the client reads it reaches the client.
    let feed = Feed::open(s, channel).await?;
    Ok(PushChannel {
        accept,
        protocol: as_protocol.then_some(PROTOCOL),
        source: Box::new(feed),
        holder: Holder::Grant {
            key_id: grant.key_id.clone(),
            expires: grant.expires as i64,
        },
        slot,
    })
}

/// A token outlives what it was issued on: at each upgrade the key it names must still
/// stand (a revoked key's unexpired token opens nothing), and the key's own rules on
/// origins and client addresses hold here as on any request with the key. Read from the
/// store, not a cache; a store that cannot say is a 503.
async fn grant_holds(
    s: &Services<'_>,
    grant: &firehose::Grant,
    origin: Option<&str>,
    client: Option<IpAddr>,
) -> Result<(), ApiError> {
    let key = s
        .store()
        .key_standing_by_id(&grant.key_id)
        .await
        .map_err(|e| e.to_api_error())?
        .ok_or_else(|| ApiError::new(401, "unauthorized", "the token's key no longer exists"))?;
    crate::auth::check_standing(&key, crate::clock::now())?;
    match &key.restrictions {
        Some(r) => r.request(origin, client, Some(CHAIN)),
        None => Ok(()),
    }
}

/// Where a channel's items come from.
enum Feed {
    Logs(ClientShare),
    Mempool(broadcast::Receiver<Arc<str>>),
}

impl Feed {
    async fn open(s: &Services<'_>, channel: &str) -> Result<Feed, ApiError> {
        match channel {
            "logs" => {
                let pool = s
                    .pools
                    .get(POOL)
                    .ok_or_else(|| ApiError::new(503, "pool_not_configured", POOL))?;
                let share = s
                    .subscriptions()
                    .subscribe(pool, &json!(["logs", {}]))
                    .await?;
                Ok(Feed::Logs(share))
            }
            _ => s
                .mempools()
                .arrivals(CHAIN)
                .map(Feed::Mempool)
                .ok_or_else(|| ApiError::new(503, "mempool_not_configured", CHAIN)),
        }
    }

    /// The next item as a text message; `Err` when this reader fell too far behind.
    async fn next(&mut self) -> Result<Message, Ended> {
        match self {
            Feed::Logs(share) => share
                .recv()
                .await
                .map(|log| Message::text(String::from_utf8_lossy(&log).into_owned())),
            Feed::Mempool(rx) => loop {
                match rx.recv().await {
                    Ok(tx) => return Ok(Message::text(&*tx)),
                    Err(broadcast::error::RecvError::Lagged(_)) => return Err(Ended::Lagged),
                    Err(broadcast::error::RecvError::Closed) => {
                        std::future::pending::<()>().await;
                    }
                }
            },
        }
    }
}

impl PushSource for Feed {
    fn next(&mut self) -> Pin<Box<dyn Future<Output = Item> + Send + '_>> {
        Box::pin(async move {
            match Feed::next(self).await {
                Ok(m) => Item::Send(m),
                Err(Ended::Lagged) => Item::Lagged,
            }
        })
    }
}

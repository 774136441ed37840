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

use super::ws_upgrade::{connection_cap_reached, handshake_accept, Item, PushSource, WsUpgrade};
use super::{Ctx, Downstream, Edge, State};
use crate::auth::Principal;
use crate::errors::ApiError;
use crate::handlers::firehose::{self, PROTOCOL};
use crate::routes::Route;
use crate::streams::subscriptions::{ClientShare, Ended};
use serde_json::json;
use std::future::Future;
use std::pin::Pin;
use std::sync::Arc;
use tokio::sync::broadcast;
use tokio_tungstenite::tungstenite::Message;

/// The pool and chain behind the channels.
use crate::handlers::firehose::{CHAIN, POOL};

impl Edge {
    /// Check an upgrade to a firehose channel: the handshake, the token (signature,
    /// channel, expiry), that the channel has a source, and the key's connection cap.
    pub(super) async fn firehose_upgrade<D: Downstream + ?Sized>(
        &self,
        session: &D,
        ctx: &mut Ctx,
        route: &Route,
    ) -> Result<WsUpgrade, ApiError> {
        let st = &*self.state;
        let accept = handshake_accept(session)?;
        let channel = firehose::CHANNELS
            .iter()
            .copied()
            .find(|c| route.name.ends_with(&format!(".{c}")))
            .ok_or_else(ApiError::route_not_found)?;
        let secret = st.config.firehose_secret.as_ref().ok_or_else(|| {
            ApiError::new(
                503,
                "firehose_not_configured",
                "the firehose is not configured here (streams.firehose.secret)",
            )
        })?;
        let (token, as_protocol) = firehose::presented(
            session.header("authorization"),
            session.header("sec-websocket-protocol"),
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
        let client_ip = ctx.client(session.client_ip());
        self.grant_holds(&grant, session.header("origin"), client_ip)
            .await?;
        crate::handlers::firehose::source_ready(st.mempools(), &st.pools, channel)?;
        let conf = &st.config.app.streams.websocket;
        let cap = conf.max_connections(&grant.plan);
        let slot = st
            .ws_connections()
            .take(format!("key:{}", grant.key_id), cap)
            .await
            .ok_or_else(|| connection_cap_reached(cap))?;
        // Open before the 101: what happens after the client reads it reaches the client.
        let feed = Feed::open(st, channel).await?;
        Ok(WsUpgrade {
            accept,
            protocol: as_protocol.then_some(PROTOCOL),
            push: Some(Box::new(feed)),
            pool: POOL.into(),
            principal: Principal::Anonymous,
            client_ip,
            category: None,
            request_id: ctx.request_id.clone(),
            route: ctx.route.clone(),
            grant: Some((grant.key_id.clone(), grant.expires as i64)),
            required: crate::verify::Verified::None,
            _slot: slot,
        })
    }
}

impl Edge {
    /// A token outlives what it was issued on: at each upgrade the key it names must
    /// still stand (a revoked key's unexpired token opens nothing), and the key's own
    /// rules on origins and client addresses hold here as on any request with the key.
    /// Read from the store, not a cache; a store that cannot say is a 503.
    async fn grant_holds(
        &self,
        grant: &firehose::Grant,
        origin: Option<&str>,
        client: Option<std::net::IpAddr>,
    ) -> Result<(), ApiError> {
        let key = self
            .state
            .store()
            .key_standing_by_id(&grant.key_id)
            .await
            .map_err(|e| e.to_api_error())?
            .ok_or_else(|| {
                ApiError::new(401, "unauthorized", "the token's key no longer exists")
            })?;
        crate::auth::check_standing(&key, crate::clock::now())?;
        match &key.restrictions {
            Some(r) => r.request(origin, client, Some(CHAIN)),
            None => Ok(()),
        }
    }
}

/// Where a channel's items come from.
pub(super) enum Feed {
    Logs(ClientShare),
    Mempool(broadcast::Receiver<Arc<str>>),
}

impl Feed {
    async fn open(state: &State, channel: &str) -> Result<Feed, ApiError> {
        match channel {
            "logs" => {
                let pool = state
                    .pools
                    .get(POOL)
                    .ok_or_else(|| ApiError::new(503, "pool_not_configured", POOL))?;
                let share = state
                    .subscriptions()
                    .subscribe(pool, &json!(["logs", {}]))
                    .await?;
                Ok(Feed::Logs(share))
            }
            _ => state
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

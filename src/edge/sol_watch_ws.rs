//! The watchlist channel (`/ws/sol/watchlist?client=<id>`): where entries with
//! `callback_type: ws` are delivered. Opened with the tenant's API key (business tier,
//! scope `sol_watchlist`); `client` is the identifier the entries name as their
//! `callback_url`. One text message per change of a watched account (the delivery body of
//! `sol_watch`), for this tenant's entries with that client id only; every connection
//! with the same id gets each. Messages sent while no channel is open are not kept.
//!
//! The key's connection cap applies; the rest of the bounds are `push_channel`'s.

use super::ws_upgrade::{connection_cap_reached, handshake_accept, Item, PushSource, WsUpgrade};
use super::{Ctx, Downstream, Edge};
use crate::auth::Principal;
use crate::capture::sol::watch::WsPush;
use crate::errors::ApiError;
use crate::routes::Route;
use crate::rpc::compute_units::Cost;
use std::future::Future;
use std::pin::Pin;
use std::sync::Arc;
use tokio::sync::broadcast;
use tokio_tungstenite::tungstenite::protocol::frame::coding::CloseCode;
use tokio_tungstenite::tungstenite::Message;

/// Whose deliveries a channel carries.
#[derive(Debug, Clone)]
pub struct WatchChannel {
    pub tenant_id: String,
    pub client_id: String,
}

impl Edge {
    /// Check an upgrade to the watchlist channel: the handshake, the client id, the
    /// key's connection cap.
    pub(super) async fn sol_watch_upgrade<D: Downstream + ?Sized>(
        &self,
        session: &D,
        ctx: &mut Ctx,
        route: &Route,
    ) -> Result<WsUpgrade, ApiError> {
        let st = &*self.state;
        let accept = handshake_accept(session)?;
        let Some(Principal::Key(key)) = ctx.principal.clone() else {
            return Err(ApiError::new(401, "unauthorized", "an API key is required"));
        };
        let client_id = crate::routes::matcher::query_param(session.query(), "client")
            .filter(|c| {
                (1..=64).contains(&c.len())
                    && c.bytes().all(|b| b.is_ascii_alphanumeric() || b"._-".contains(&b))
            })
            .ok_or_else(|| {
                ApiError::invalid_params(
                    "client is required: the identifier your ws entries name as callback_url (1 to 64 of A-Z a-z 0-9 . _ -)",
                )
            })?;
        if let Some(category) = &route.rate {
            let cost = Cost::request(st.compute_units.route(&route.name));
            let client = ctx.client(session.client_ip());
            ctx.rate_headers = self.limit(client, &Principal::Key(key.clone()), category, cost)?;
        }
        let conf = &st.config.app.streams.websocket;
        let cap = conf.max_connections(&key.plan);
        let slot = st
            .ws_connections
            .take(format!("key:{}", key.key_id), cap)
            .await
            .ok_or_else(|| connection_cap_reached(cap))?;
        Ok(WsUpgrade {
            accept,
            protocol: None,
            // Subscribed before the 101: no delivery after it is missed.
            push: Some(Box::new(Deliveries {
                feed: st.sol_watch.ws_feed(),
                channel: WatchChannel {
                    tenant_id: key.tenant_id.clone(),
                    client_id,
                },
            })),
            pool: String::new(),
            client_ip: ctx.client(session.client_ip()),
            principal: Principal::Key(key),
            category: None,
            request_id: ctx.request_id.clone(),
            route: ctx.route.clone(),
            grant: None,
            _slot: slot,
        })
    }
}

/// This channel's deliveries from the push service's feed.
pub(super) struct Deliveries {
    feed: broadcast::Receiver<Arc<WsPush>>,
    channel: WatchChannel,
}

impl PushSource for Deliveries {
    fn next(&mut self) -> Pin<Box<dyn Future<Output = Item> + Send + '_>> {
        Box::pin(async move {
            loop {
                match self.feed.recv().await {
                    Ok(push) => {
                        if push.tenant_id == self.channel.tenant_id
                            && push.client_id == self.channel.client_id
                        {
                            return Item::Send(Message::text(push.text.clone()));
                        }
                    }
                    Err(broadcast::error::RecvError::Lagged(_)) => return Item::Lagged,
                    Err(broadcast::error::RecvError::Closed) => {
                        return Item::End(CloseCode::Away, "push stopped".into())
                    }
                }
            }
        })
    }
}

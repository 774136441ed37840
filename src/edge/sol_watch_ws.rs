//! The watchlist channel (`/ws/sol/watchlist?client=<id>`): where entries with
//! `callback_type: ws` are delivered. Opened with the tenant's API key (business tier,
//! scope `sol_watchlist`); `client` is the identifier the entries name as their
//! `callback_url`. One text message per change of a watched account (the delivery body of
//! `sol_watch`), for this tenant's entries with that client id only; every connection
//! with the same id gets each. Messages sent while no channel is open are not kept.
//!
//! The key's connection cap applies; the rest of the bounds are `push_channel`'s.

use super::ws_upgrade::{Item, PushSource, WsUpgrade};
use super::{Ctx, Downstream, Edge};
use crate::errors::ApiError;
use crate::routes::Route;
use crate::state::sol_watch::WsPush;
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
        let mut client_id = String::new();
        let admitted = self.key_channel(session, ctx, route, |s: &D| {
            client_id = crate::routes::matcher::query_param(s.query(), "client")
                .filter(|c| {
                    (1..=64).contains(&c.len())
                        && c.bytes().all(|b| b.is_ascii_alphanumeric() || b"._-".contains(&b))
                })
                .ok_or_else(|| {
                    ApiError::invalid_params(
                        "client is required: the identifier your ws entries name as callback_url (1 to 64 of A-Z a-z 0-9 . _ -)",
                    )
                })?;
            Ok(())
        });
        let channel = admitted.await?;
        let feed = Box::new(Deliveries {
            feed: self.state.sol_watch().ws_feed(),
            channel: WatchChannel {
                tenant_id: channel.key.tenant_id.clone(),
                client_id,
            },
        });
        Ok(channel.open(session, ctx, feed))
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

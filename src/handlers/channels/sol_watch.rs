//! The watchlist channel (`/ws/sol/watchlist?client=<id>`): where entries with
//! `callback_type: ws` are delivered. Opened with the tenant's API key (business tier,
//! scope `sol_watchlist`); `client` is the identifier the entries name as their
//! `callback_url`. One text message per change of a watched account (the delivery body of
//! `sol_watch`), for this tenant's entries with that client id only; every connection
//! with the same id gets each. Messages sent while no channel is open are not kept.
//!
//! The key's connection cap applies; the rest of the bounds are the held socket's.

use super::admit::key_channel;
use super::{Channel, ChannelRequest, ChannelTraits, ChannelTransport, Opener, PushChannel};
use crate::errors::ApiError;
use crate::handlers::Services;
use crate::state::sol_watch::WsPush;
use crate::streams::push::{Item, PushSource};
use std::future::Future;
use std::pin::Pin;
use std::sync::Arc;
use tokio::sync::broadcast;
use tokio_tungstenite::tungstenite::protocol::frame::coding::CloseCode;
use tokio_tungstenite::tungstenite::Message;

pub const CHANNELS: &[Channel] = &[Channel {
    traits: ChannelTraits::new(
        "sol_watchlist_ws",
        "the watchlist channel",
        ChannelTransport::PushWebSocket,
    ),
    open: Opener::Push(|s, req| Box::pin(open(s, req))),
}];

/// Check an upgrade to the watchlist channel: the client id, the handshake, the key's
/// connection cap.
async fn open(s: &Services<'_>, req: &ChannelRequest<'_>) -> Result<PushChannel, ApiError> {
    let client_id = crate::routes::matcher::query_param(req.query, "client")
        .filter(|c| {
            (1..=64).contains(&c.len())
                && c.bytes().all(|b| b.is_ascii_alphanumeric() || b"._-".contains(&b))
        })
        .ok_or_else(|| {
            ApiError::invalid_params(
                "client is required: the identifier your ws entries name as callback_url (1 to 64 of A-Z a-z 0-9 . _ -)",
            )
        })?;
    let channel = key_channel(s, req).await?;
    let feed = Box::new(Deliveries {
        feed: s.sol_watch().ws_feed(),
        tenant_id: channel.key.tenant_id.clone(),
        client_id,
    });
    Ok(channel.open(feed))
}

/// This channel's deliveries from the push service's feed: the tenant's, for one
/// client id.
struct Deliveries {
    feed: broadcast::Receiver<Arc<WsPush>>,
    tenant_id: String,
    client_id: String,
}

impl PushSource for Deliveries {
    fn next(&mut self) -> Pin<Box<dyn Future<Output = Item> + Send + '_>> {
        Box::pin(async move {
            loop {
                match self.feed.recv().await {
                    Ok(push) => {
                        if push.tenant_id == self.tenant_id && push.client_id == self.client_id {
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

//! The transaction channel (`/ws/txs`): every status change of the transactions the
//! tenant's keys sent through the edge, one text message each (`state::tx_push`'s
//! message), in order. Opened with one of the tenant's API keys; every key of the
//! tenant hears every change (`key_id` says whose it was).
//!
//! `?since=<event_id>` first replays the tenant's changes after that id (at most
//! [`REPLAY`], kept for `tx_tracking.retention_hours`), so a client that reconnects with
//! the last `event_id` it saw misses nothing. The key's connection cap applies; the rest
//! of the bounds are the held socket's.

use super::admit::key_channel;
use super::{Channel, ChannelRequest, ChannelTraits, ChannelTransport, Opener, PushChannel};
use crate::errors::ApiError;
use crate::handlers::Services;
use crate::state::tx_push::{message, ChannelMessage};
use crate::streams::push::{Item, PushSource};
use std::collections::VecDeque;
use std::future::Future;
use std::pin::Pin;
use std::sync::Arc;
use tokio::sync::broadcast;
use tokio_tungstenite::tungstenite::protocol::frame::coding::CloseCode;
use tokio_tungstenite::tungstenite::Message;

/// Changes replayed on open at most.
pub const REPLAY: i64 = 1000;

pub const CHANNELS: &[Channel] = &[Channel {
    traits: ChannelTraits::new(
        "tx_status_ws",
        "the transaction channel",
        ChannelTransport::PushWebSocket,
    ),
    open: Opener::Push(|s, req| Box::pin(open(s, req))),
}];

/// Check an upgrade to the transaction channel: `since`, the handshake, the key's
/// connection cap; then read what is to be replayed.
async fn open(s: &Services<'_>, req: &ChannelRequest<'_>) -> Result<PushChannel, ApiError> {
    let mut since = None;
    if let Some(raw) = crate::routes::matcher::query_param(req.query, "since") {
        let n = raw.parse::<i64>().ok().filter(|n| *n >= 0).ok_or_else(|| {
            ApiError::invalid_params("since must be an event_id: a whole number ≥ 0")
        })?;
        since = Some(n);
    }
    let channel = key_channel(s, req).await?;
    let push = s.tx_push();
    // Subscribed before the replay is read: nothing falls between the two.
    let feed = push.channel_feed();
    let mut replay = VecDeque::new();
    let mut after = 0;
    if let Some(since) = since {
        let missed = push
            .store()
            .tenant_tx_events_after(&channel.key.tenant_id, since, REPLAY)
            .await
            .map_err(|e| e.to_api_error())?;
        after = missed.last().map_or(since, |e| e.id);
        replay.extend(missed.iter().map(|e| message(e, &[])));
    }
    let changes = Box::new(Changes {
        feed,
        tenant_id: channel.key.tenant_id.clone(),
        replay,
        after,
    });
    Ok(channel.open(changes))
}

/// One tenant's changes: the replay, then the live ones after it.
struct Changes {
    feed: broadcast::Receiver<Arc<ChannelMessage>>,
    tenant_id: String,
    replay: VecDeque<String>,
    /// The last change replayed: live ones up to it were sent already.
    after: i64,
}

impl PushSource for Changes {
    fn next(&mut self) -> Pin<Box<dyn Future<Output = Item> + Send + '_>> {
        Box::pin(async move {
            if let Some(text) = self.replay.pop_front() {
                return Item::Send(Message::text(text));
            }
            loop {
                match self.feed.recv().await {
                    Ok(m) if m.tenant_id == self.tenant_id && m.event_id > self.after => {
                        return Item::Send(Message::text(m.text.clone()));
                    }
                    Ok(_) => {}
                    Err(broadcast::error::RecvError::Lagged(_)) => return Item::Lagged,
                    Err(broadcast::error::RecvError::Closed) => {
                        return Item::End(CloseCode::Away, "push stopped".into())
                    }
                }
            }
        })
    }
}

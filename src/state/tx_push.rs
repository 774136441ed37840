//! Status changes of followed transactions, pushed to their tenants: on the tenant's
//! WebSocket channel (`/ws/txs`, `edge/tx_ws.rs`) and to its webhooks
//! (`/v1/tx/hooks`), signed and retried as the Solana watchlist's are
//! (`webhook.rs`), dead-lettered after the last attempt.
//!
//! The follower (`capture::txs`) writes each change into `tx_events` in the same store transaction as the
//! change itself, so what is pushed is what is stored, in order. Every instance tails
//! that table for its own channels; the one instance holding the `tx_push` lease delivers
//! webhooks and moves their cursor only once a batch is delivered or dead-lettered:
//! after a crash the batch goes out again (at least once; `delivery_id` is stable, so a
//! receiver can tell a repeat).
//!
//! **A message** (channel and webhook alike): `{"type": "tx_status", "event_id",
//! "key_id", "previous_status", "reorged", "tx": <as GET /v1/{chain}/tx/{hash}>,
//! "sent_at"}`; webhooks add `hook_id` and `delivery_id`.
//!
//! This is the feed and the delivery; the producer running them is `capture::txs::push`.

use crate::config::secrets::Secret;
use crate::config::usage::TxTrackingConf;
use crate::state::{deliveries, webhook};
use crate::store::sol_watchlist::{DeadLetter, Letters};
use crate::store::tx_push::{TxEvent, TxHook};
use crate::store::txs::{TrackedTx, TxChange};
use crate::store::Store;
use bytes::Bytes;
use futures_util::StreamExt;
use serde_json::{json, Value};
use std::collections::HashMap;
use std::future::Future;
use std::pin::Pin;
use std::sync::Arc;
use tokio::sync::broadcast;

/// Changes read from the store per round at most.
const BATCH: i64 = 256;
/// Messages buffered for the channels (a channel further behind is closed as slow).
const WS_BUFFER: usize = 4096;
/// The webhook dispatcher's cursor in `push_cursors`.
pub const CURSOR: &str = "tx_webhooks";

/// A change as the channels send it: the tenant it is for and the message.
#[derive(Debug)]
pub struct ChannelMessage {
    pub tenant_id: String,
    pub event_id: i64,
    pub text: String,
}

/// What `update_tx` stores with a change: the transaction after it, what it was, and
/// whether it left a block it was in.
pub fn event_body(before: &TrackedTx, change: &TxChange, now: i64) -> String {
    let after = TrackedTx {
        status: change.status.clone(),
        block_number: change.block_number,
        block_hash: change.block_hash.clone(),
        tx_index: change.tx_index,
        replaced_by: change.replaced_by.clone(),
        resends: change.resends,
        revert_reason: change.revert_reason.clone(),
        updated_at: now,
        ..before.clone()
    };
    let in_block = before.block_hash.is_some() || before.block_number.is_some();
    let reorged = in_block
        && (before.block_hash != change.block_hash || before.block_number != change.block_number);
    json!({
        "previous_status": before.status,
        "reorged": reorged,
        "tx": crate::tracking::status_json(&after, None),
    })
    .to_string()
}

/// Whether `change` is one the tenant hears about: a new status, or a new block.
pub fn worth_pushing(before: &TrackedTx, change: &TxChange) -> bool {
    change.status != before.status
        || change.block_hash != before.block_hash
        || change.block_number != before.block_number
}

/// `event` as a message, with `extra` fields (a webhook's ids).
pub fn message(event: &TxEvent, extra: &[(&str, Value)]) -> String {
    let mut m = serde_json::from_str::<Value>(&event.body).unwrap_or_else(|_| json!({}));
    if let Some(o) = m.as_object_mut() {
        o.insert("type".into(), json!("tx_status"));
        o.insert("event_id".into(), json!(event.id));
        o.insert("key_id".into(), json!(event.key_id));
        for (k, v) in extra {
            o.insert((*k).to_string(), v.clone());
        }
        o.insert("sent_at".into(), json!(crate::clock::now()));
    }
    m.to_string()
}

pub struct TxPush {
    conf: TxTrackingConf,
    secret: Option<Secret>,
    store: Store,
    channels: broadcast::Sender<Arc<ChannelMessage>>,
    sender: webhook::Sender,
}

impl TxPush {
    pub fn new(conf: TxTrackingConf, secret: Option<Secret>, store: Store) -> Arc<TxPush> {
        Arc::new(TxPush {
            sender: webhook::Sender::new(&conf.webhook),
            conf,
            secret,
            store,
            channels: broadcast::channel(WS_BUFFER).0,
        })
    }

    pub fn conf(&self) -> &TxTrackingConf {
        &self.conf
    }

    pub fn store(&self) -> &Store {
        &self.store
    }

    /// Whether hooks can be signed here (`tx_tracking.signing_secret`).
    pub fn webhooks_enabled(&self) -> bool {
        self.secret.is_some()
    }

    /// A hook's signing secret (hex), when webhooks are configured.
    pub fn hook_secret(&self, hook_id: &str) -> Option<String> {
        let master = self.secret.as_ref()?;
        Some(webhook::entry_secret(master, webhook::TX_HOOKS, hook_id))
    }

    /// The ranges callbacks may resolve to besides public addresses.
    /// The client hooks are delivered with (tests and retries by hand use it too).
    pub fn sender(&self) -> &webhook::Sender {
        &self.sender
    }

    pub fn allow(&self) -> &[crate::net_policy::Cidr] {
        self.sender.allow()
    }

    /// Messages for the channels, from now.
    pub fn channel_feed(&self) -> broadcast::Receiver<Arc<ChannelMessage>> {
        self.channels.subscribe()
    }

    /// This instance's channels get every change after `cursor`: the new cursor.
    pub async fn tail(&self, cursor: i64) -> Result<i64, String> {
        let events = self
            .store
            .tx_events_after(cursor, BATCH)
            .await
            .map_err(|e| format!("reading changes: {e}"))?;
        let mut last = cursor;
        for e in events {
            last = e.id;
            if self.channels.receiver_count() > 0 {
                let _ = self.channels.send(Arc::new(ChannelMessage {
                    tenant_id: e.tenant_id.clone(),
                    event_id: e.id,
                    text: message(&e, &[]),
                }));
            }
        }
        Ok(last)
    }

    /// Deliver the changes after `cursor` to their tenants' hooks, all of them delivered
    /// or dead-lettered before the stored cursor moves: the new cursor.
    pub async fn deliver_after(&self, cursor: i64) -> Result<i64, String> {
        let events = self
            .store
            .tx_events_after(cursor, BATCH)
            .await
            .map_err(|e| format!("reading changes: {e}"))?;
        let Some(last) = events.last().map(|e| e.id) else {
            return Ok(cursor);
        };
        let mut hooks: HashMap<&str, Vec<TxHook>> = HashMap::new();
        for e in &events {
            if !hooks.contains_key(e.tenant_id.as_str()) {
                let of_tenant = self
                    .store
                    .tx_hooks(&e.tenant_id)
                    .await
                    .map_err(|e| format!("reading hooks: {e}"))?;
                hooks.insert(&e.tenant_id, of_tenant);
            }
        }
        let mut sends: Vec<Pin<Box<dyn Future<Output = ()> + Send + '_>>> = Vec::new();
        for e in &events {
            for h in &hooks[e.tenant_id.as_str()] {
                sends.push(Box::pin(self.deliver(e, h)));
            }
        }
        let at_once = self.conf.webhook.max_pending.max(1);
        futures_util::stream::iter(sends)
            .buffer_unordered(at_once)
            .collect::<Vec<()>>()
            .await;
        self.store
            .set_push_cursor(CURSOR, last)
            .await
            .map_err(|e| format!("storing the cursor: {e}"))?;
        Ok(last)
    }

    /// Every attempt of one change to one hook; a dead letter if none succeeded.
    async fn deliver(&self, event: &TxEvent, hook: &TxHook) {
        let delivery_id = format!("tx-{}-{}", event.id, hook.id);
        let body = message(
            event,
            &[
                ("hook_id", json!(hook.id)),
                ("delivery_id", json!(delivery_id)),
            ],
        );
        let (store, of) = (&self.store, Letters::TxHooks);
        let (attempts, why) = match self.hook_secret(&hook.id) {
            None => (0, "webhooks are not configured here".to_string()),
            Some(secret) => {
                let bytes = Bytes::from(body.clone());
                let sent = self
                    .sender
                    .deliver(&hook.callback_url, &bytes, &secret, &delivery_id)
                    .await;
                match sent {
                    Ok(n) => {
                        deliveries::record(store, of, &hook.id, &delivery_id, Ok(n)).await;
                        return;
                    }
                    Err(failed) => failed,
                }
            }
        };
        // Every failure is logged as the watchlist's are, then kept as a dead letter.
        let failed = Err((attempts, why.as_str()));
        deliveries::record(store, of, &hook.id, &delivery_id, failed).await;
        let letter = DeadLetter {
            id: delivery_id,
            entry_id: hook.id.clone(),
            tenant_id: hook.tenant_id.clone(),
            payload: body,
            attempts: attempts as i64,
            last_error: why.chars().take(500).collect(),
            created_at: crate::clock::now(),
        };
        // A repeat after a crash finds its letter already kept.
        if let Err(e) = self.store.add_dead_letter(Letters::TxHooks, &letter).await {
            log::warn!("tx hooks: keeping a dead letter of hook {}: {e}", hook.id);
        }
    }
}

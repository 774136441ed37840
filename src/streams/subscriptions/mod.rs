//! Shared subscriptions: one node subscription per (pool, kind, parameters), fanned out
//! to every client subscription that asked for the same thing.
//!
//! A driver task holds the node subscription on the first available host with the `ws`
//! capability. When that node fails, or falls behind the pool's head (`newHeads`), the
//! driver subscribes again on another node and fills the gap before going on: heads
//! missed in between are fetched (`eth_getBlockByNumber`) and delivered in order; logs
//! delivered from blocks the new node does not have are delivered again with
//! `removed: true`, and logs since the last block seen (or the lowest withdrawn one) are
//! fetched (`eth_getLogs`) and delivered once; what was already delivered is not
//! delivered again. Clients see none of this: their
//! subscription ids are the edge's own and stay the same.
//!
//! Fan-out is a bounded broadcast: a client that falls `BROADCAST_BACKLOG` notifications
//! behind is closed as a slow consumer rather than buffered. When the last client lets go
//! (unsubscribe or disconnect), the driver stops and the node subscription is dropped.

mod follow;

use super::node_link::NODE_TIMEOUT;
use crate::address::plain_inet;
use crate::errors::ApiError;
use crate::observe::metrics;
use crate::pools::Pool;
use bytes::Bytes;
use follow::drive;
use serde_json::Value;
use std::collections::HashMap;
use std::sync::{Arc, Mutex, Weak};
use tokio::sync::broadcast;

/// Notifications a client may fall behind before it is closed as a slow consumer.
const BROADCAST_BACKLOG: usize = 1024;

/// The subscription kinds the product offers.
pub const KINDS: &[&str] = &["newHeads", "logs", "newPendingTransactions"];

/// Every shared subscription of the process.
#[derive(Default)]
pub struct Hub {
    shared: Mutex<HashMap<String, Weak<Shared>>>,
}

/// One node subscription and its fan-out.
pub struct Shared {
    key: String,
    pool: String,
    kind: String,
    tx: broadcast::Sender<Bytes>,
    /// Whether the node subscription is in place (a new client's answer waits for it,
    /// so nothing that happens after its `eth_subscribe` is answered is missed).
    live: tokio::sync::watch::Receiver<bool>,
    driver: tokio::task::JoinHandle<()>,
    hub: Arc<Hub>,
}

impl Drop for Shared {
    fn drop(&mut self) {
        self.driver.abort();
        if let Ok(mut map) = self.hub.shared.lock() {
            if map.get(&self.key).is_some_and(|w| w.strong_count() == 0) {
                map.remove(&self.key);
            }
        }
        metrics::UPSTREAM_SUBSCRIPTIONS
            .with_label_values(&[&self.pool, &self.kind])
            .dec();
    }
}

/// A client's subscription: its edge id and its place in the fan-out.
pub struct ClientShare {
    pub id: String,
    rx: broadcast::Receiver<Bytes>,
    shared: Arc<Shared>,
    /// A place the holder counts this share against (a key's cap), freed with it.
    _place: Option<Box<dyn Send + Sync>>,
}

impl ClientShare {
    /// Keep `place` for as long as this share lives.
    pub fn hold(&mut self, place: impl Send + Sync + 'static) {
        self._place = Some(Box::new(place));
    }

    /// The next node `result` as the node sent it (for the edge's own consumers, such as
    /// the mempool watcher).
    pub async fn recv(&mut self) -> Result<Bytes, Ended> {
        loop {
            match self.rx.recv().await {
                Ok(result) => return Ok(result),
                Err(broadcast::error::RecvError::Lagged(_)) => return Err(Ended::Lagged),
                Err(broadcast::error::RecvError::Closed) => {
                    std::future::pending::<()>().await;
                }
            }
        }
    }
}

impl Drop for ClientShare {
    fn drop(&mut self) {
        metrics::SUBSCRIPTION_CLIENTS
            .with_label_values(&[&self.shared.pool, &self.shared.kind])
            .dec();
    }
}

impl Hub {
    /// A client subscription to `params` (`[kind, filter?]`) on `pool`: joins the node
    /// subscription for the same thing, or starts one, and returns once it is in place.
    pub async fn subscribe(
        self: &Arc<Self>,
        pool: &Arc<Pool>,
        params: &Value,
    ) -> Result<ClientShare, ApiError> {
        let share = self.join(pool, params)?;
        let mut live = share.shared.live.clone();
        let in_place = tokio::time::timeout(NODE_TIMEOUT * 2, live.wait_for(|up| *up))
            .await
            .is_ok_and(|r| r.is_ok());
        if !in_place {
            return Err(ApiError::new(
                503,
                "no_upstream",
                format!(
                    "no node of pool {} took the subscription in time",
                    pool.name
                ),
            ));
        }
        Ok(share)
    }

    fn join(self: &Arc<Self>, pool: &Arc<Pool>, params: &Value) -> Result<ClientShare, ApiError> {
        let kind = params
            .get(0)
            .and_then(Value::as_str)
            .filter(|k| KINDS.contains(k))
            .ok_or_else(|| ApiError::invalid_params("unknown subscription kind"))?
            .to_string();
        // serde_json keeps object keys sorted, so equal filters give equal keys.
        let key = format!("{}|{params}", pool.name);
        let shared = {
            let mut map = self
                .shared
                .lock()
                .map_err(|_| ApiError::internal("subscriptions"))?;
            match map.get(&key).and_then(Weak::upgrade) {
                Some(s) => s,
                None => {
                    if !pool
                        .candidates(Some("ws"))
                        .iter()
                        .any(|h| plain_inet(h.endpoint(true).1).is_some())
                    {
                        return Err(ApiError::new(
                            503,
                            "no_upstream",
                            format!("no host in pool {} can hold a subscription", pool.name),
                        ));
                    }
                    let (tx, _) = broadcast::channel(BROADCAST_BACKLOG);
                    let (up, live) = tokio::sync::watch::channel(false);
                    let driver = tokio::spawn(drive(pool.clone(), params.clone(), tx.clone(), up));
                    let s = Arc::new(Shared {
                        key: key.clone(),
                        pool: pool.name.clone(),
                        kind: kind.clone(),
                        tx,
                        live,
                        driver,
                        hub: self.clone(),
                    });
                    metrics::UPSTREAM_SUBSCRIPTIONS
                        .with_label_values(&[&pool.name, &kind])
                        .inc();
                    map.insert(key, Arc::downgrade(&s));
                    s
                }
            }
        };
        metrics::SUBSCRIPTION_CLIENTS
            .with_label_values(&[&pool.name, &kind])
            .inc();
        Ok(ClientShare {
            id: format!("0x{:032x}", rand::random::<u128>()),
            rx: shared.tx.subscribe(),
            shared,
            _place: None,
        })
    }
}

/// Why a client's stream of notifications ended.
pub enum Ended {
    /// It fell more than the backlog behind.
    Lagged,
}

/// A client connection's subscriptions.
pub struct ClientSubscriptions {
    shares: Vec<ClientShare>,
    max: usize,
}

impl ClientSubscriptions {
    pub fn new(max: usize) -> Self {
        ClientSubscriptions {
            shares: Vec::new(),
            max,
        }
    }

    pub fn add(&mut self, share: ClientShare) -> String {
        let id = share.id.clone();
        self.shares.push(share);
        id
    }

    pub fn is_full(&self) -> bool {
        self.shares.len() >= self.max
    }

    pub fn max(&self) -> usize {
        self.max
    }

    /// Drop the subscription `id` (only this connection's own ids match).
    pub fn remove(&mut self, id: &str) -> bool {
        let before = self.shares.len();
        self.shares.retain(|s| s.id != id);
        self.shares.len() != before
    }

    /// The next notification frame for this client; never resolves without
    /// subscriptions.
    pub async fn next(&mut self) -> Result<String, Ended> {
        if self.shares.is_empty() {
            return std::future::pending().await;
        }
        loop {
            let waits = self.shares.iter_mut().map(|s| {
                Box::pin(async move {
                    let got = s.rx.recv().await;
                    (s.id.as_str(), got)
                })
            });
            let ((id, got), _, _) = futures_util::future::select_all(waits).await;
            match got {
                Ok(result) => return Ok(notification(id, &result)),
                Err(broadcast::error::RecvError::Lagged(_)) => return Err(Ended::Lagged),
                // The driver lives as long as a share holds it; not reached.
                Err(broadcast::error::RecvError::Closed) => continue,
            }
        }
    }
}

/// `eth_subscription` for client subscription `id`, around a node's `result` as it sent it.
fn notification(id: &str, result: &[u8]) -> String {
    let result = std::str::from_utf8(result).unwrap_or("null");
    format!(
        r#"{{"jsonrpc":"2.0","method":"eth_subscription","params":{{"subscription":"{id}","result":{result}}}}}"#
    )
}

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

use super::node_link::{NodeLink, NODE_TIMEOUT};
use crate::address::plain_inet;
use crate::errors::ApiError;
use crate::observe::metrics;
use crate::pools::Pool;
use bytes::Bytes;
use serde_json::{json, Value};
use std::collections::{HashMap, VecDeque};
use std::sync::{Arc, Mutex, Weak};
use std::time::{Duration, Instant};
use tokio::sync::broadcast;

/// Notifications a client may fall behind before it is closed as a slow consumer.
const BROADCAST_BACKLOG: usize = 1024;
/// A node this many blocks behind the pool's head, and quiet for `LAG_QUIET`, is left.
const LAG_BLOCKS: u64 = 3;
const LAG_QUIET: Duration = Duration::from_secs(6);
/// Most heads fetched to fill one gap (older ones are skipped: clients resync).
const MAX_GAP: u64 = 256;

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

/// What was delivered, so a new node's answers continue where the last one stopped.
#[derive(Default)]
struct Cursor {
    /// Recent heads delivered (number, hash), oldest first.
    heads: VecDeque<(u64, String)>,
    /// Recent logs delivered (block hash, log index, removed).
    logs: VecDeque<(String, String, bool)>,
    /// Recent logs delivered as they were, to withdraw (`removed: true`) those of blocks
    /// a new node does not have.
    delivered: VecDeque<Value>,
    /// Highest block a delivered log was in.
    log_block: Option<u64>,
}

impl Cursor {
    fn last_head(&self) -> Option<u64> {
        self.heads.iter().map(|(n, _)| *n).max()
    }
}

/// Hold the node subscription for as long as the task lives, moving between nodes.
async fn drive(
    pool: Arc<Pool>,
    params: Value,
    tx: broadcast::Sender<Bytes>,
    live: tokio::sync::watch::Sender<bool>,
) {
    let kind = params[0].as_str().unwrap_or_default().to_string();
    let mut cursor = Cursor::default();
    let mut avoid: Option<String> = None;
    let mut backoff = Duration::from_millis(100);
    loop {
        let link = match NodeLink::open(&pool, avoid.as_deref()).await {
            Some(link) => link,
            None => {
                avoid = None;
                tokio::time::sleep(backoff).await;
                backoff = (backoff * 2).min(Duration::from_secs(5));
                continue;
            }
        };
        let host = link.host.clone();
        let opened = tokio::time::Instant::now();
        let reason = follow(link, &pool, &params, &kind, &tx, &mut cursor, &live).await;
        // A node that fails at once (it refuses the subscription or the gap fill) is not
        // asked again in a tight loop.
        if opened.elapsed() < Duration::from_secs(1) {
            tokio::time::sleep(backoff).await;
            backoff = (backoff * 2).min(Duration::from_secs(5));
        } else {
            backoff = Duration::from_millis(100);
        }
        log::info!(
            "{} subscription ({kind}) left {}: {reason}",
            pool.name,
            host.id
        );
        live.send_replace(false);
        host.record_failure(&format!("subscription: {reason}"));
        metrics::RESUBSCRIPTIONS
            .with_label_values(&[
                &pool.name,
                &kind,
                if reason.starts_with("lagging") {
                    "lag"
                } else {
                    "failure"
                },
            ])
            .inc();
        avoid = Some(host.id.clone());
    }
}

/// Subscribe on `link`, fill the gap since `cursor`, then deliver until the node fails or
/// lags; the reason it stopped.
async fn follow(
    mut link: NodeLink,
    pool: &Pool,
    params: &Value,
    kind: &str,
    tx: &broadcast::Sender<Bytes>,
    cursor: &mut Cursor,
    live: &tokio::sync::watch::Sender<bool>,
) -> String {
    let sub = match link.call("eth_subscribe", params.clone()).await {
        Ok(Value::String(s)) => s,
        Ok(other) => return format!("eth_subscribe answered {other}"),
        Err(e) => return e,
    };
    if let Err(e) = fill_gap(&mut link, params, kind, tx, cursor).await {
        return e;
    }
    live.send_replace(true);
    let mut quiet_since = Instant::now();
    let mut check = tokio::time::interval(Duration::from_secs(2));
    loop {
        tokio::select! {
            note = link.notification() => {
                let v = match note {
                    Ok(v) => v,
                    Err(e) => return e,
                };
                if v["params"]["subscription"].as_str() != Some(sub.as_str()) {
                    continue;
                }
                quiet_since = Instant::now();
                let result = &v["params"]["result"];
                match kind {
                    "newHeads" => {
                        if let Some(n) = hex_u64(&result["number"]) {
                            if let Some(last) = cursor.last_head() {
                                if n > last + 1 {
                                    if let Err(e) = fill_heads(&mut link, last + 1, n - 1, tx, cursor).await {
                                        return e;
                                    }
                                }
                            }
                        }
                        deliver_head(result, tx, cursor);
                    }
                    "logs" => deliver_log(result, tx, cursor),
                    _ => {
                        let _ = tx.send(Bytes::from(result.to_string()));
                    }
                }
            }
            _ = check.tick() => {
                if kind == "newHeads" {
                    let pool_head = pool.head.load(std::sync::atomic::Ordering::Relaxed);
                    let ours = cursor.last_head().unwrap_or(pool_head);
                    if pool_head > ours + LAG_BLOCKS && quiet_since.elapsed() > LAG_QUIET {
                        return format!("lagging: at {ours}, pool head {pool_head}");
                    }
                }
            }
        }
    }
}

/// After (re)subscribing: what happened since the last delivery, delivered once.
async fn fill_gap(
    link: &mut NodeLink,
    params: &Value,
    kind: &str,
    tx: &broadcast::Sender<Bytes>,
    cursor: &mut Cursor,
) -> Result<(), String> {
    match kind {
        "newHeads" => {
            let Some(last) = cursor.last_head() else {
                return Ok(());
            };
            let head = hex_u64(&link.call("eth_blockNumber", json!([])).await?).unwrap_or(0);
            if head > last {
                fill_heads(link, last + 1, head, tx, cursor).await?;
            }
            Ok(())
        }
        "logs" => {
            let Some(last) = cursor.log_block else {
                return Ok(());
            };
            let from = withdraw_orphaned_logs(link, tx, cursor)
                .await?
                .unwrap_or(last);
            let mut filter = params.get(1).cloned().unwrap_or_else(|| json!({}));
            if let Some(f) = filter.as_object_mut() {
                f.insert("fromBlock".into(), json!(format!("0x{from:x}")));
                f.insert("toBlock".into(), json!("latest"));
            }
            if let Value::Array(logs) = link.call("eth_getLogs", json!([filter])).await? {
                for log in &logs {
                    deliver_log(log, tx, cursor);
                }
            }
            Ok(())
        }
        _ => Ok(()),
    }
}

/// Blocks whose delivered logs are checked against a new node (the most recent ones).
const MAX_LOG_BLOCKS_CHECKED: usize = 64;

/// After moving to another node: the logs delivered from blocks that node does not have
/// on its chain (the old node was on a branch that lost, or a reorg happened in between)
/// are delivered again with `removed: true`, newest first, as a node does on a reorg.
/// The lowest such block, from which the new node's logs are fetched.
async fn withdraw_orphaned_logs(
    link: &mut NodeLink,
    tx: &broadcast::Sender<Bytes>,
    cursor: &mut Cursor,
) -> Result<Option<u64>, String> {
    let mut blocks: Vec<(u64, String)> = cursor
        .delivered
        .iter()
        .filter(|l| !l["removed"].as_bool().unwrap_or(false))
        .filter_map(|l| {
            Some((
                hex_u64(&l["blockNumber"])?,
                l["blockHash"].as_str()?.to_string(),
            ))
        })
        .collect();
    blocks.sort();
    blocks.dedup();
    let mut orphaned = std::collections::HashSet::new();
    for (n, hash) in blocks.iter().rev().take(MAX_LOG_BLOCKS_CHECKED) {
        let block = link
            .call("eth_getBlockByNumber", json!([format!("0x{n:x}"), false]))
            .await?;
        if block["hash"].as_str() != Some(hash.as_str()) {
            orphaned.insert(hash.clone());
        }
    }
    if orphaned.is_empty() {
        return Ok(None);
    }
    let mut withdrawn: Vec<Value> = cursor
        .delivered
        .iter()
        .filter(|l| !l["removed"].as_bool().unwrap_or(false))
        .filter(|l| {
            l["blockHash"]
                .as_str()
                .is_some_and(|h| orphaned.contains(h))
        })
        .cloned()
        .collect();
    let lowest = withdrawn
        .iter()
        .filter_map(|l| hex_u64(&l["blockNumber"]))
        .min();
    withdrawn.reverse();
    for mut log in withdrawn {
        log["removed"] = Value::Bool(true);
        deliver_log(&log, tx, cursor);
    }
    Ok(lowest)
}

/// Heads `from..=to` fetched and delivered in order (the newest `MAX_GAP` at most).
async fn fill_heads(
    link: &mut NodeLink,
    from: u64,
    to: u64,
    tx: &broadcast::Sender<Bytes>,
    cursor: &mut Cursor,
) -> Result<(), String> {
    for n in from.max(to.saturating_sub(MAX_GAP - 1))..=to {
        let mut block = link
            .call("eth_getBlockByNumber", json!([format!("0x{n:x}"), false]))
            .await?;
        if let Some(b) = block.as_object_mut() {
            // A head, as newHeads gives it: the header fields only.
            for body_field in [
                "transactions",
                "uncles",
                "size",
                "totalDifficulty",
                "withdrawals",
            ] {
                b.remove(body_field);
            }
        }
        if !block.is_null() {
            deliver_head(&block, tx, cursor);
        }
    }
    Ok(())
}

/// A head once: the same (number, hash) is never delivered twice; a new hash at a
/// known height (a reorg) is.
fn deliver_head(head: &Value, tx: &broadcast::Sender<Bytes>, cursor: &mut Cursor) {
    let (Some(n), Some(hash)) = (hex_u64(&head["number"]), head["hash"].as_str()) else {
        return;
    };
    if cursor.heads.iter().any(|(m, h)| *m == n && h == hash) {
        return;
    }
    cursor.heads.push_back((n, hash.to_string()));
    if cursor.heads.len() > 2 * MAX_GAP as usize {
        cursor.heads.pop_front();
    }
    let _ = tx.send(Bytes::from(head.to_string()));
}

/// A log once (by block hash, index and `removed`).
fn deliver_log(log: &Value, tx: &broadcast::Sender<Bytes>, cursor: &mut Cursor) {
    let id = (
        log["blockHash"].as_str().unwrap_or_default().to_string(),
        log["logIndex"].as_str().unwrap_or_default().to_string(),
        log["removed"].as_bool().unwrap_or(false),
    );
    if cursor.logs.contains(&id) {
        return;
    }
    cursor.logs.push_back(id);
    if cursor.logs.len() > 4096 {
        cursor.logs.pop_front();
    }
    cursor.delivered.push_back(log.clone());
    if cursor.delivered.len() > 1024 {
        cursor.delivered.pop_front();
    }
    if let Some(b) = hex_u64(&log["blockNumber"]) {
        cursor.log_block = Some(cursor.log_block.map_or(b, |c| c.max(b)));
    }
    let _ = tx.send(Bytes::from(log.to_string()));
}

fn hex_u64(v: &Value) -> Option<u64> {
    u64::from_str_radix(v.as_str()?.strip_prefix("0x")?, 16).ok()
}

//! Following the node: the driver that holds one node subscription, moves to another
//! node when it fails or falls behind, and fills the gap so clients see every head and
//! log once, in order.

use super::super::node_link::NodeLink;
use crate::observe::metrics;
use crate::pools::Pool;
use bytes::Bytes;
use serde_json::{json, Value};
use std::collections::VecDeque;
use std::sync::Arc;
use std::time::{Duration, Instant};
use tokio::sync::broadcast;

/// A node this many blocks behind the pool's head, and quiet for `LAG_QUIET`, is left.
const LAG_BLOCKS: u64 = 3;
const LAG_QUIET: Duration = Duration::from_secs(6);
/// Most heads fetched to fill one gap (older ones are skipped: clients resync).
const MAX_GAP: u64 = 256;

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
pub(super) async fn drive(
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

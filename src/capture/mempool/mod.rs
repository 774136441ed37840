//! Mempool watchers: one per configured EVM chain (`mempool:`), polling the pool's
//! `txpool_content` (hosts with the `txpool` capability) in the background and keeping,
//! in memory and bounded, what is pending now and when each transaction first arrived.
//! Where the pool has hosts with `ws`, the watcher also takes the shared
//! `newPendingTransactions` subscription (one node subscription for it and every client,
//! `streams::subscriptions`) and looks the announced hashes up in batches, so arrivals
//! are seen as they happen rather than at the next poll; the poll still decides what has
//! left. The snapshot and stats endpoints read that memory only.
//!
//! Bounds: at most `max_pending` pending transactions tracked (the highest-priced kept
//! when a node holds more) and at most `MAX_ARRIVALS` arrivals remembered for the stats
//! windows (the oldest dropped first; with the default rates that is hours).

use crate::capture::{Health, Producer};
use crate::config::MempoolConf;
use crate::observe::metrics;
use crate::pools::Pools;
use crate::rpc::Gateway;
use crate::streams::subscriptions::Hub;
use async_trait::async_trait;
use pingora_core::server::ShutdownWatch;
use serde_json::{json, Value};
use std::collections::{HashMap, HashSet, VecDeque};
use std::sync::{Arc, RwLock};
use std::time::{Duration, Instant};
use tokio::sync::broadcast;

/// Stats windows, by name (the complete set the stats endpoints take).
pub const WINDOWS: &[(&str, u64)] = &[("1m", 60), ("5m", 300), ("15m", 900), ("1h", 3600)];
/// Most arrivals remembered for the stats windows.
pub const MAX_ARRIVALS: usize = 200_000;
/// Senders listed in `top_senders`.
pub const TOP_SENDERS: usize = 10;
/// Announced hashes looked up per batch, and how long one waits for company.
const LOOKUP_BATCH: usize = 200;
const LOOKUP_EVERY: Duration = Duration::from_millis(200);
/// Wait before taking the subscription again after it ended or could not be taken.
const RESUBSCRIBE: Duration = Duration::from_secs(5);

/// One pending transaction as the snapshot shows it.
#[derive(Debug, Clone)]
pub struct PendingTx {
    pub hash: String,
    pub from: String,
    pub to: Option<String>,
    pub nonce: u64,
    /// `gasPrice`, or `maxFeePerGas` for fee-market transactions, in wei.
    pub gas_price_wei: u128,
    /// Unix seconds when this edge first saw it.
    pub first_seen: u64,
}

/// A pending transaction as the mempool firehose sends it.
fn arrival_json(tx: &PendingTx) -> String {
    json!({
        "hash": tx.hash,
        "from": tx.from,
        "to": tx.to,
        "nonce": tx.nonce,
        "gas_price_wei": tx.gas_price_wei.to_string(),
        "first_seen": tx.first_seen,
    })
    .to_string()
}

struct Arrival {
    at: Instant,
    from: String,
    gas_price_wei: u128,
}

/// What one chain's watcher knows.
#[derive(Default)]
pub struct MempoolView {
    pending: HashMap<String, PendingTx>,
    arrivals: VecDeque<Arrival>,
    /// The last poll that worked (None before the first).
    updated: Option<Instant>,
}

/// Arrivals kept for a slow firehose reader before it is dropped.
const ARRIVALS_BACKLOG: usize = 1024;

/// Every chain's view, shared by the watchers (writers) and the handlers (readers).
#[derive(Default)]
pub struct Mempools {
    views: HashMap<String, RwLock<MempoolView>>,
    /// Each new pending transaction as JSON, for the firehose channels.
    arrivals: HashMap<String, broadcast::Sender<Arc<str>>>,
}

impl Mempools {
    pub fn new(chains: impl IntoIterator<Item = String>) -> Mempools {
        let chains: Vec<String> = chains.into_iter().collect();
        Mempools {
            views: chains
                .iter()
                .map(|c| (c.clone(), RwLock::new(MempoolView::default())))
                .collect(),
            arrivals: chains
                .into_iter()
                .map(|c| (c, broadcast::channel(ARRIVALS_BACKLOG).0))
                .collect(),
        }
    }

    /// New pending transactions of `chain` as they arrive (the mempool firehose):
    /// `{hash, from, to, nonce, gas_price_wei, first_seen}`.
    pub fn arrivals(&self, chain: &str) -> Option<broadcast::Receiver<Arc<str>>> {
        self.arrivals.get(chain).map(broadcast::Sender::subscribe)
    }

    pub fn watches(&self, chain: &str) -> bool {
        self.views.contains_key(chain)
    }

    /// Pending transactions, highest price first: (count, age of the data, the first `limit`).
    pub fn snapshot(
        &self,
        chain: &str,
        limit: usize,
    ) -> Option<(usize, Option<Duration>, Vec<PendingTx>)> {
        let view = self.views.get(chain)?.read().ok()?;
        let mut txs: Vec<&PendingTx> = view.pending.values().collect();
        txs.sort_by(|a, b| {
            b.gas_price_wei
                .cmp(&a.gas_price_wei)
                .then(a.hash.cmp(&b.hash))
        });
        Some((
            view.pending.len(),
            view.updated.map(|u| u.elapsed()),
            txs.into_iter().take(limit).cloned().collect(),
        ))
    }

    /// Stats over the last `secs` seconds of arrivals.
    pub fn stats(&self, chain: &str, secs: u64) -> Option<Stats> {
        let view = self.views.get(chain)?.read().ok()?;
        let since = Instant::now().checked_sub(Duration::from_secs(secs));
        let recent: Vec<&Arrival> = view
            .arrivals
            .iter()
            .rev()
            .take_while(|a| since.is_none_or(|s| a.at >= s))
            .collect();
        let mut prices: Vec<u128> = recent.iter().map(|a| a.gas_price_wei).collect();
        prices.sort_unstable();
        let mut by_sender: HashMap<&str, u64> = HashMap::new();
        for a in &recent {
            *by_sender.entry(a.from.as_str()).or_default() += 1;
        }
        let mut top: Vec<(String, u64)> = by_sender
            .into_iter()
            .map(|(s, n)| (s.to_string(), n))
            .collect();
        top.sort_by(|a, b| b.1.cmp(&a.1).then(a.0.cmp(&b.0)));
        top.truncate(TOP_SENDERS);
        Some(Stats {
            tx_per_sec: recent.len() as f64 / secs as f64,
            gas_p50_gwei: percentile_gwei(&prices, 50),
            gas_p95_gwei: percentile_gwei(&prices, 95),
            gas_p99_gwei: percentile_gwei(&prices, 99),
            top_senders: top,
            samples: recent.len(),
        })
    }
}

pub struct Stats {
    pub tx_per_sec: f64,
    pub gas_p50_gwei: f64,
    pub gas_p95_gwei: f64,
    pub gas_p99_gwei: f64,
    pub top_senders: Vec<(String, u64)>,
    pub samples: usize,
}

/// Nearest-rank percentile of sorted prices, in gwei (0 with no samples).
fn percentile_gwei(sorted: &[u128], p: usize) -> f64 {
    if sorted.is_empty() {
        return 0.0;
    }
    let rank = (p * sorted.len()).div_ceil(100).max(1) - 1;
    sorted[rank.min(sorted.len() - 1)] as f64 / 1e9
}

/// Polls one chain's pool and keeps its view.
pub struct Watcher {
    chain: String,
    pool: String,
    conf: MempoolConf,
    pools: Arc<Pools>,
    gateway: Arc<Gateway>,
    mempools: Arc<Mempools>,
    hub: Arc<Hub>,
}

impl Watcher {
    pub fn new(
        chain: &str,
        conf: MempoolConf,
        pools: Arc<Pools>,
        gateway: Arc<Gateway>,
        mempools: Arc<Mempools>,
        hub: Arc<Hub>,
    ) -> Watcher {
        Watcher {
            chain: chain.to_string(),
            pool: conf.pool_for(chain).to_string(),
            conf,
            pools,
            gateway,
            mempools,
            hub,
        }
    }

    /// Follow `newPendingTransactions` while a `ws` host takes it; returns when it cannot.
    async fn follow(&self) {
        let Some(pool) = self.pools.get(&self.pool) else {
            return;
        };
        if pool.candidates(Some("ws")).is_empty() {
            return;
        }
        let params = serde_json::json!(["newPendingTransactions"]);
        let Ok(mut share) = self.hub.subscribe(pool, &params).await else {
            return;
        };
        let mut hashes: Vec<String> = Vec::new();
        loop {
            let next = tokio::time::timeout(LOOKUP_EVERY, share.recv()).await;
            match next {
                Ok(Ok(result)) => {
                    if let Ok(Value::String(h)) = serde_json::from_slice::<Value>(&result) {
                        hashes.push(h);
                    }
                    if hashes.len() < LOOKUP_BATCH {
                        continue;
                    }
                }
                // Fell behind the fan-out: take it again (the poll fills the gap).
                Ok(Err(_)) => return,
                Err(_) => {}
            }
            if !hashes.is_empty() {
                self.look_up(pool, std::mem::take(&mut hashes)).await;
            }
        }
    }

    /// The announced transactions, admitted as arrivals (best effort: the poll is the net).
    async fn look_up(&self, pool: &crate::pools::Pool, hashes: Vec<String>) {
        let calls: Vec<(&str, Value)> = hashes
            .iter()
            .map(|h| ("eth_getTransactionByHash", json!([h])))
            .collect();
        let rid = format!("mempool-{}", self.chain);
        let Ok((answers, _)) = self.gateway.read_batch_each(pool, &calls, &rid).await else {
            return;
        };
        let txs: Vec<PendingTx> = answers
            .into_iter()
            .filter_map(|a| a.ok())
            // Mined already (has a block) or unknown: not pending.
            .filter(|tx| tx.get("blockNumber").is_none_or(Value::is_null))
            .filter_map(|tx| {
                let from = tx.get("from").and_then(Value::as_str)?.to_ascii_lowercase();
                pending_tx(&from, &tx)
            })
            .collect();
        self.admit(txs, false);
    }

    async fn poll(&self) -> Result<(), String> {
        let pool = self
            .pools
            .get(&self.pool)
            .ok_or_else(|| format!("no pool {}", self.pool))?;
        let rid = format!("mempool-{}", self.chain);
        let (content, _) = self
            .gateway
            .read_call_with(pool, Some("txpool"), "txpool_content", json!([]), &rid)
            .await
            .map_err(|e| e.message)?;
        let mut seen = parse_pending(&content);
        // Over the bound: keep the highest-priced (what a block builder looks at first).
        if seen.len() > self.conf.max_pending {
            seen.sort_by_key(|t| std::cmp::Reverse(t.gas_price_wei));
            seen.truncate(self.conf.max_pending);
        }
        self.admit(seen, true);
        Ok(())
    }

    /// Record `txs` as pending (new ones as arrivals); with `complete`, they are the whole
    /// pending set and whatever else was pending has left.
    fn admit(&self, txs: Vec<PendingTx>, complete: bool) {
        let Some(view) = self.mempools.views.get(&self.chain) else {
            return;
        };
        let Ok(mut view) = view.write() else {
            return;
        };
        let now = Instant::now();
        let unix = crate::clock::now() as u64;
        if complete {
            let current: HashSet<&str> = txs.iter().map(|t| t.hash.as_str()).collect();
            view.pending.retain(|h, _| current.contains(h.as_str()));
        }
        for mut tx in txs {
            if view.pending.contains_key(&tx.hash) || view.pending.len() >= self.conf.max_pending {
                continue;
            }
            tx.first_seen = unix;
            if let Some(firehose) = self.mempools.arrivals.get(&self.chain) {
                if firehose.receiver_count() > 0 {
                    let _ = firehose.send(Arc::from(arrival_json(&tx).as_str()));
                }
            }
            view.arrivals.push_back(Arrival {
                at: now,
                from: tx.from.clone(),
                gas_price_wei: tx.gas_price_wei,
            });
            view.pending.insert(tx.hash.clone(), tx);
        }
        let horizon = WINDOWS.iter().map(|w| w.1).max().unwrap_or(3600);
        while view.arrivals.len() > MAX_ARRIVALS
            || view
                .arrivals
                .front()
                .is_some_and(|a| now.duration_since(a.at).as_secs() > horizon)
        {
            view.arrivals.pop_front();
        }
        if complete {
            view.updated = Some(now);
        }
        metrics::MEMPOOL_PENDING
            .with_label_values(&[&self.chain])
            .set(view.pending.len() as i64);
    }
}

/// `txpool_content`'s `pending` section: {sender: {nonce: tx}}.
fn parse_pending(content: &Value) -> Vec<PendingTx> {
    let mut out = Vec::new();
    let Some(by_sender) = content.get("pending").and_then(Value::as_object) else {
        return out;
    };
    for (sender, by_nonce) in by_sender {
        let Some(by_nonce) = by_nonce.as_object() else {
            continue;
        };
        out.extend(
            by_nonce
                .values()
                .filter_map(|tx| pending_tx(&sender.to_ascii_lowercase(), tx)),
        );
    }
    out
}

/// One transaction object as nodes give it (`txpool_content`, `eth_getTransactionByHash`).
fn pending_tx(from: &str, tx: &Value) -> Option<PendingTx> {
    let hash = tx.get("hash").and_then(Value::as_str)?;
    let gas_price_wei = tx
        .get("gasPrice")
        .or_else(|| tx.get("maxFeePerGas"))
        .and_then(Value::as_str)
        .and_then(|h| u128::from_str_radix(h.strip_prefix("0x")?, 16).ok())?;
    let nonce = tx
        .get("nonce")
        .and_then(Value::as_str)
        .and_then(crate::jsonrpc::quantity::quantity)?;
    Some(PendingTx {
        hash: hash.to_ascii_lowercase(),
        from: from.to_string(),
        to: tx
            .get("to")
            .and_then(Value::as_str)
            .map(str::to_ascii_lowercase),
        nonce,
        gas_price_wei,
        first_seen: 0,
    })
}

#[async_trait]
impl Producer for Watcher {
    fn name(&self) -> String {
        format!("mempool/{}", self.chain)
    }

    async fn run(&self, health: &Health, mut shutdown: ShutdownWatch) {
        let subscribed = async {
            loop {
                self.follow().await;
                tokio::time::sleep(RESUBSCRIBE).await;
            }
        };
        tokio::select! {
            _ = self.poll_loop(health, shutdown.clone()) => {}
            _ = subscribed => {}
            _ = shutdown.changed() => {}
        }
    }
}

impl Watcher {
    async fn poll_loop(&self, health: &Health, mut shutdown: ShutdownWatch) {
        let every = Duration::from_millis(self.conf.poll_ms);
        loop {
            health.round(self.poll().await);
            tokio::select! {
                _ = tokio::time::sleep(every) => {}
                _ = shutdown.changed() => return,
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn percentiles_by_nearest_rank() {
        let gwei: Vec<u128> = (1..=100).map(|g| g * 1_000_000_000).collect();
        assert_eq!(percentile_gwei(&gwei, 50), 50.0);
        assert_eq!(percentile_gwei(&gwei, 95), 95.0);
        assert_eq!(percentile_gwei(&gwei, 99), 99.0);
        assert_eq!(percentile_gwei(&[3_000_000_000], 99), 3.0);
        assert_eq!(percentile_gwei(&[], 50), 0.0);
    }

    #[test]
    fn pending_section_parsed_and_odd_entries_skipped() {
        let content = json!({"pending": {"0xAA": {
            "0": {"hash": "0x01", "nonce": "0x0", "to": "0xBB", "gasPrice": "0x3b9aca00"},
            "1": {"hash": "0x02", "nonce": "0x1", "to": null, "maxFeePerGas": "0x77359400"},
            "2": {"hash": "0x03", "nonce": "0x2"}
        }}, "queued": {}});
        let mut txs = parse_pending(&content);
        txs.sort_by_key(|t| t.nonce);
        assert_eq!(txs.len(), 2);
        assert_eq!(
            (txs[0].from.as_str(), txs[0].gas_price_wei),
            ("0xaa", 1_000_000_000)
        );
        assert_eq!(
            (txs[1].to.as_deref(), txs[1].gas_price_wei),
            (None, 2_000_000_000)
        );
    }
}

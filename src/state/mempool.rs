//! What the mempool watchers (`capture::mempool`) know, in memory and bounded: per
//! chain, what is pending now and when each transaction first arrived, and the arrivals
//! as they happen for the firehose. The watchers write it; the snapshot, stats and
//! firehose handlers read it.

use serde_json::json;
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

impl Mempools {
    /// Record `txs` of `chain` as pending (new ones as arrivals, at most `max_pending`
    /// kept); with `complete`, they are the whole pending set and whatever else was
    /// pending has left. The number pending after, or None for a chain not watched.
    pub fn admit(
        &self,
        chain: &str,
        txs: Vec<PendingTx>,
        complete: bool,
        max_pending: usize,
    ) -> Option<usize> {
        let view = self.views.get(chain)?;
        let mut view = view.write().ok()?;
        let now = Instant::now();
        let unix = crate::clock::now() as u64;
        if complete {
            let current: HashSet<&str> = txs.iter().map(|t| t.hash.as_str()).collect();
            view.pending.retain(|h, _| current.contains(h.as_str()));
        }
        for mut tx in txs {
            if view.pending.contains_key(&tx.hash) || view.pending.len() >= max_pending {
                continue;
            }
            tx.first_seen = unix;
            if let Some(firehose) = self.arrivals.get(chain) {
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
        Some(view.pending.len())
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
}

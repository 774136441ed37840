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
use crate::state::mempool::{Mempools, PendingTx};
use crate::streams::subscriptions::Hub;
use async_trait::async_trait;
use pingora_core::server::ShutdownWatch;
use serde_json::{json, Value};
use std::sync::Arc;
use std::time::Duration;

/// Announced hashes looked up per batch, and how long one waits for company.
const LOOKUP_BATCH: usize = 200;
const LOOKUP_EVERY: Duration = Duration::from_millis(200);
/// Wait before taking the subscription again after it ended or could not be taken.
const RESUBSCRIBE: Duration = Duration::from_secs(5);

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

    /// Keep `txs` in the chain's view (`state::mempool`) and count what is pending.
    fn admit(&self, txs: Vec<PendingTx>, complete: bool) {
        let max = self.conf.max_pending;
        if let Some(pending) = self.mempools.admit(&self.chain, txs, complete, max) {
            metrics::MEMPOOL_PENDING
                .with_label_values(&[&self.chain])
                .set(pending as i64);
        }
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

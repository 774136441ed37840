//! One chain's open transactions, each round: the receipt says `included` (`final` once
//! the chain's finalized block passed it, `failed` when it reverted); a receipt gone
//! from an `included` one means its block was reorged out (back to `pending`). Without
//! a receipt, a node holding it keeps it `pending`; a sender whose nonce moved past it
//! means another transaction took its place (`replaced`); held by no node, it is sent
//! again to every healthy node after `resend_after_secs`, at most `max_resends` times,
//! then `dropped`. With several instances on one store, the one holding the chain's
//! lease (Redis) follows it.

use crate::capture::{Health, Producer};
use crate::cluster::leases::{Lease, Leases, Place};
use crate::config::usage::TxTrackingConf;
use crate::jsonrpc::quantity::quantity;
use crate::jsonrpc::{Id, Request};
use crate::observe::metrics;
use crate::pools::{Pool, Pools};
use crate::rpc::Gateway;
use crate::store::txs::{TrackedTx, TxChange, DROPPED, FAILED, FINAL, INCLUDED, PENDING, REPLACED};
use crate::store::Store;
use crate::tracking;
use async_trait::async_trait;
use pingora_core::server::ShutdownWatch;
use serde_json::{json, Value};
use std::sync::Arc;
use std::time::Duration;

/// How often settled transactions past the retention are pruned.
const PRUNE_EVERY_SECS: i64 = 3600;

pub struct Follower {
    /// Clustered, one instance follows a chain at a time: the one holding its lease.
    pub leases: Arc<Leases>,
    pub chain: &'static str,
    pub pool: &'static str,
    pub conf: TxTrackingConf,
    pub pools: Arc<Pools>,
    pub gateway: Arc<Gateway>,
    pub store: Store,
}

/// The chain as one round sees it.
struct Chain<'a> {
    pool: &'a Pool,
    finalized: Option<u64>,
    now: i64,
}

impl Follower {
    pub(super) fn rid(&self) -> String {
        format!("txs-{}", self.chain)
    }

    /// One round over the open transactions, the least recently looked at first.
    async fn round(&self) -> Result<(), String> {
        let open = self
            .store
            .open_txs(self.chain, self.conf.per_round as i64)
            .await
            .map_err(|e| e.to_string())?;
        if open.is_empty() {
            return Ok(());
        }
        let pool = self
            .pools
            .get(self.pool)
            .ok_or_else(|| format!("no {} pool", self.pool))?;
        let now = crate::clock::now();
        if self.chain == "sol" {
            return self.sol_round(pool, &open, now).await;
        }
        let chain = Chain {
            pool,
            finalized: self.finalized(pool).await,
            now,
        };
        for tx in &open {
            let change = self
                .fate(&chain, tx)
                .await
                .map_err(|e| format!("{}: {}", tx.hash, e.message))?;
            self.record(tx, &change, now).await?;
        }
        Ok(())
    }

    /// Store what became of `tx` (its status change pushed with it) and count it.
    pub(super) async fn record(
        &self,
        tx: &TrackedTx,
        change: &TxChange,
        now: i64,
    ) -> Result<(), String> {
        if change.status != tx.status {
            metrics::TX_STATUS
                .with_label_values(&[self.chain, &change.status])
                .inc();
        }
        if tx.included_at.is_none() {
            if let Some(at) = change.included_at {
                metrics::TX_INCLUSION
                    .with_label_values(&[self.chain])
                    .observe((at - tx.submitted_at).max(0) as f64);
            }
        }
        let event = crate::state::tx_push::worth_pushing(tx, change)
            .then(|| crate::state::tx_push::event_body(tx, change, now));
        self.store
            .update_tx(self.chain, &tx.hash, change, now, event.as_deref())
            .await
            .map_err(|e| e.to_string())
    }

    /// The chain's finalized block, when its nodes know one.
    async fn finalized(&self, pool: &Pool) -> Option<u64> {
        let (block, _) = self
            .gateway
            .read_call(
                pool,
                "eth_getBlockByNumber",
                json!(["finalized", false]),
                &self.rid(),
            )
            .await
            .ok()?;
        block
            .get("number")
            .and_then(Value::as_str)
            .and_then(quantity)
    }

    /// What became of `tx` since it was last looked at.
    async fn fate(
        &self,
        chain: &Chain<'_>,
        tx: &TrackedTx,
    ) -> Result<TxChange, crate::errors::ApiError> {
        let rid = self.rid();
        let (receipt, _) = self
            .gateway
            .read_call(
                chain.pool,
                "eth_getTransactionReceipt",
                json!([tx.hash]),
                &rid,
            )
            .await?;
        let kept = TxChange {
            status: tx.status.clone(),
            resends: tx.resends,
            included_at: tx.included_at,
            ..TxChange::default()
        };
        if let Some(included) = included(&receipt) {
            let failed = super::revert::reverted(&receipt);
            let status = if failed {
                FAILED
            } else if chain.finalized.is_some_and(|f| f >= included.0) {
                FINAL
            } else {
                INCLUDED
            };
            // Asked once, as it fails (a failed transaction is not looked at again).
            let revert_reason = if failed {
                super::revert::reason(&self.gateway, chain.pool, &tx.hash, included.0, &rid).await
            } else {
                None
            };
            return Ok(TxChange {
                status: status.to_string(),
                block_number: Some(included.0 as i64),
                block_hash: Some(included.1),
                tx_index: Some(included.2 as i64),
                included_at: kept.included_at.or(Some(chain.now)),
                revert_reason,
                ..kept
            });
        }
        // No receipt: pending (again, if its block was reorged out), replaced, or lost.
        let pending = TxChange {
            status: PENDING.to_string(),
            ..kept
        };
        // A private or bundled transaction is in no public pool by design.
        if tx.route == tracking::PUBLIC && self.held_by_a_node(chain.pool, &tx.hash).await {
            return Ok(pending);
        }
        let (count, _) = self
            .gateway
            .read_call(
                chain.pool,
                "eth_getTransactionCount",
                json!([tx.sender, "latest"]),
                &rid,
            )
            .await?;
        let next_nonce = count.as_str().and_then(quantity).unwrap_or(0);
        if next_nonce > tx.nonce as u64 {
            let replaced_by = self.replacement(chain.pool, tx).await;
            return Ok(TxChange {
                status: REPLACED.to_string(),
                replaced_by,
                ..pending
            });
        }
        Ok(self.lost(chain, tx, pending).await)
    }

    /// Held by no node, not mined, not replaced: sent again once it has been missing
    /// for `resend_after_secs`, up to `max_resends` times; then dropped.
    async fn lost(&self, chain: &Chain<'_>, tx: &TrackedTx, pending: TxChange) -> TxChange {
        let since = tx.missing_since.unwrap_or(chain.now);
        let waited = chain.now - since >= self.conf.resend_after_secs as i64;
        if !waited {
            return TxChange {
                missing_since: Some(since),
                ..pending
            };
        }
        // A bundle's transaction is never sent alone: it is given up after as long as
        // a public one is followed before it is.
        let waited_out = match tx.route.as_str() {
            tracking::BUNDLE => {
                let patience = self.conf.resend_after_secs * (self.conf.max_resends as u64 + 1);
                chain.now - since >= patience as i64
            }
            _ => tx.resends >= self.conf.max_resends as i64,
        };
        if waited_out {
            return TxChange {
                status: DROPPED.to_string(),
                missing_since: Some(since),
                ..pending
            };
        }
        if tx.route == tracking::BUNDLE {
            return TxChange {
                missing_since: Some(since),
                ..pending
            };
        }
        let call = Request::new(Id::index(1), "eth_sendRawTransaction", json!([tx.raw]));
        // Not followed again as a new submission: this row goes on. A private one goes
        // to the private relay only: a public node would show it to everyone.
        let sent = match tx.route.as_str() {
            tracking::PRIVATE => self.send_private(&call).await,
            _ => self
                .gateway
                .write(chain.pool, &call, &self.rid(), None)
                .await
                .map(drop),
        };
        metrics::TX_RESENDS.with_label_values(&[self.chain]).inc();
        if let Err(e) = sent {
            log::warn!("txs/{}: re-sending {}: {}", self.chain, tx.hash, e.message);
        }
        TxChange {
            resends: tx.resends + 1,
            // The clock starts again: the nodes get time to take it.
            missing_since: Some(chain.now),
            ..pending
        }
    }

    /// `call` to the private relay (`eth_private_rpc`), its hosts in health order.
    async fn send_private(&self, call: &Request) -> Result<(), crate::errors::ApiError> {
        let pool = self.pools.get("eth_private_rpc").ok_or_else(|| {
            crate::errors::ApiError::new(503, "pool_not_configured", "no eth_private_rpc pool")
        })?;
        let hosts = pool.candidates(None);
        let methods = crate::rpc::PRIVATE_TX_METHODS;
        let rid = self.rid();
        self.gateway
            .forward(hosts, &call.to_bytes(), methods, &rid)
            .await
            .map(drop)
    }

    /// The followed transaction of the same sender and nonce that a block included.
    async fn replacement(&self, pool: &Pool, tx: &TrackedTx) -> Option<String> {
        let others = self
            .store
            .same_nonce(self.chain, &tx.sender, tx.nonce, &tx.hash)
            .await
            .ok()?;
        for other in others {
            let receipt = self
                .gateway
                .read_call(
                    pool,
                    "eth_getTransactionReceipt",
                    json!([other]),
                    &self.rid(),
                )
                .await;
            if receipt.is_ok_and(|(r, _)| included(&r).is_some()) {
                return Some(other);
            }
        }
        None
    }

    /// Whether any healthy node of the pool holds the transaction (its txpool, or a
    /// block the receipt lookup did not see yet).
    async fn held_by_a_node(&self, pool: &Pool, hash: &str) -> bool {
        for host in pool.candidates(None) {
            let one = pool.pinned_to(&host);
            if let Ok((tx, _)) = self
                .gateway
                .read_call(&one, "eth_getTransactionByHash", json!([hash]), &self.rid())
                .await
            {
                if !tx.is_null() {
                    return true;
                }
            }
        }
        false
    }
}

/// A receipt's block number, block hash and index, when the node has one.
fn included(receipt: &Value) -> Option<(u64, String, u64)> {
    let field = |k: &str| receipt.get(k).and_then(Value::as_str);
    Some((
        quantity(field("blockNumber")?)?,
        field("blockHash")?.to_ascii_lowercase(),
        quantity(field("transactionIndex")?)?,
    ))
}

#[async_trait]
impl Producer for Follower {
    fn name(&self) -> String {
        format!("txs/follow/{}", self.chain)
    }

    async fn run(&self, health: &Health, mut shutdown: ShutdownWatch) {
        let mut tick = tokio::time::interval(Duration::from_millis(self.conf.follow_interval_ms));
        tick.set_missed_tick_behavior(tokio::time::MissedTickBehavior::Delay);
        let mut pruned_at = 0i64;
        let mut lease = None;
        loop {
            tokio::select! {
                _ = shutdown.changed() => return,
                _ = tick.tick() => {}
            }
            // Several instances share the store: one of them follows (and re-sends);
            // a killed one's lease lapses within `LEASE_TTL` and another takes over. A
            // lease granted while Redis was away, or lost since, is taken again: the
            // instance steps down when another holds it.
            if lease.as_ref().is_none_or(Lease::needs_retake) {
                lease = None;
                match self.leases.take("txs_follow", self.chain, 1).await {
                    Place::Granted(held) => lease = Some(held),
                    Place::Full => continue,
                }
            }
            health.round(self.round().await);
            let now = crate::clock::now();
            if now - pruned_at >= PRUNE_EVERY_SECS {
                pruned_at = now;
                let before = now - self.conf.retention_hours as i64 * 3600;
                if let Err(e) = self.store.prune_txs(before).await {
                    log::warn!("txs/{}: pruning: {e}", self.chain);
                }
            }
        }
    }
}

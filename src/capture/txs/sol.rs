//! Solana's followed transactions, each round: `getSignatureStatuses` for all of them at
//! once says `included` (processed or confirmed, its slot), `final` (finalized) or
//! `failed` (its error, kept as `revert_reason`). Without a status, a transaction whose
//! blockhash the node no longer takes (`isBlockhashValid`) has `expired`: it can never
//! land. One still valid is sent again to every healthy node each round (as Helius and
//! Jito advise: the leader may never have got it), at most `solana_max_resends` times;
//! a signature is processed once, so a copy that arrives twice lands once. A bundle's
//! transaction is only watched: it lands with its bundle or expires.

use super::Follower;
use crate::pools::Pool;
use crate::store::txs::{TrackedTx, TxChange, EXPIRED, FAILED, FINAL, INCLUDED, PENDING};
use serde_json::{json, Value};

/// Signatures `getSignatureStatuses` takes at once.
const STATUS_BATCH: usize = 256;

impl Follower {
    /// One round over Solana's open transactions.
    pub(super) async fn sol_round(
        &self,
        pool: &Pool,
        open: &[TrackedTx],
        now: i64,
    ) -> Result<(), String> {
        for chunk in open.chunks(STATUS_BATCH) {
            let signatures: Vec<&str> = chunk.iter().map(|t| t.hash.as_str()).collect();
            let params = json!([signatures, {"searchTransactionHistory": true}]);
            let (answer, _) = self
                .gateway
                .read_call(pool, "getSignatureStatuses", params, &self.rid())
                .await
                .map_err(|e| format!("getSignatureStatuses: {}", e.message))?;
            let statuses = answer
                .get("value")
                .and_then(Value::as_array)
                .filter(|v| v.len() == chunk.len())
                .ok_or("getSignatureStatuses: not one status per signature")?;
            for (tx, status) in chunk.iter().zip(statuses) {
                let change = self.sol_fate(pool, tx, status, now).await;
                self.record(tx, &change, now).await?;
            }
        }
        Ok(())
    }

    /// What became of `tx`, whose status the node gave as `status`.
    async fn sol_fate(&self, pool: &Pool, tx: &TrackedTx, status: &Value, now: i64) -> TxChange {
        let kept = TxChange {
            status: tx.status.clone(),
            resends: tx.resends,
            included_at: tx.included_at,
            ..TxChange::default()
        };
        if status.is_object() {
            let err = status.get("err").filter(|e| !e.is_null());
            let state = match (
                err,
                status.get("confirmationStatus").and_then(Value::as_str),
            ) {
                (Some(_), _) => FAILED,
                (None, Some("finalized")) => FINAL,
                _ => INCLUDED,
            };
            return TxChange {
                status: state.to_string(),
                block_number: status.get("slot").and_then(Value::as_i64),
                revert_reason: err.map(|e| e.to_string().chars().take(256).collect()),
                included_at: kept.included_at.or(Some(now)),
                ..kept
            };
        }
        // No status: in flight, lost on the way to the leader, or expired (a slot that
        // held it and was skipped puts it back here too).
        let pending = TxChange {
            status: PENDING.to_string(),
            ..kept
        };
        let valid = match &tx.recent_blockhash {
            Some(hash) => self.blockhash_valid(pool, hash).await,
            None => Some(true),
        };
        match valid {
            Some(false) => TxChange {
                status: EXPIRED.to_string(),
                ..pending
            },
            // The node cannot say now: looked at again next round.
            None => pending,
            // A bundle's transaction is never sent alone; nor more than the bound.
            Some(true) if tx.route == crate::tracking::BUNDLE => pending,
            Some(true) if tx.resends >= self.conf.solana_max_resends as i64 => pending,
            Some(true) => {
                self.sol_send_again(pool, tx).await;
                TxChange {
                    resends: tx.resends + 1,
                    missing_since: Some(tx.missing_since.unwrap_or(now)),
                    ..pending
                }
            }
        }
    }

    /// Whether the node still takes transactions signed against `blockhash`.
    async fn blockhash_valid(&self, pool: &Pool, blockhash: &str) -> Option<bool> {
        let params = json!([blockhash, {"commitment": "processed"}]);
        let (answer, _) = self
            .gateway
            .read_call(pool, "isBlockhashValid", params, &self.rid())
            .await
            .ok()?;
        answer.get("value").and_then(Value::as_bool)
    }

    /// `tx` to every healthy node, unsimulated (it passed its simulation when sent).
    async fn sol_send_again(&self, pool: &Pool, tx: &TrackedTx) {
        let params =
            json!([tx.raw, {"encoding": "base64", "skipPreflight": true, "maxRetries": 0}]);
        for host in pool.candidates(None) {
            let one = pool.pinned_to(&host);
            let sent = self
                .gateway
                .node_call(&one, None, "sendTransaction", params.clone(), &self.rid())
                .await;
            if let Err(e) = sent {
                log::warn!("txs/sol: re-sending {}: {}", tx.hash, e.message);
            }
        }
        crate::observe::metrics::TX_RESENDS
            .with_label_values(&["sol"])
            .inc();
    }
}

//! Transactions the edge accepted, handed from the write path to the background: the
//! write path only puts what it knows (chain, hash, the signed bytes, whose key sent it)
//! on a bounded queue; `capture::txs` decodes, stores and follows each one until it is
//! final (`GET /v1/{eth|polygon|sol}/tx/{hash}`).
//!
//! Nothing here waits: a full queue drops the record (counted in
//! `chainedge_tx_tracking_dropped_total`), never the transaction.

use crate::observe::metrics;
use crate::store::txs::TrackedTx;
use serde_json::{json, Value};
use std::sync::Mutex;
use tokio::sync::mpsc;

/// Records waiting to be stored, at most.
pub const QUEUE: usize = 4096;

/// How a transaction went out, which decides how it may be sent again: to the chain's
/// nodes (`public`), to the private relay only, never to a public node (`private`), or
/// as part of a builder bundle, never alone (`bundle`: not sent again at all).
pub const PUBLIC: &str = "public";
pub const PRIVATE: &str = "private";
pub const BUNDLE: &str = "bundle";

/// Who sent a transaction: the key and its tenant (only keys' transactions are followed:
/// only a tenant can ask for them).
#[derive(Debug, Clone, Copy)]
pub struct Submitter<'a> {
    pub tenant: &'a str,
    pub key_id: &'a str,
}

/// One accepted transaction, as the write path saw it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Submitted {
    pub chain: &'static str,
    /// [`PUBLIC`], [`PRIVATE`] or [`BUNDLE`].
    pub route: &'static str,
    /// EVM: 0x-prefixed, lower case; Solana: the first signature, base58.
    pub hash: String,
    /// The signed transaction as sent (EVM: 0x-hex; Solana: the wire bytes in base64):
    /// re-sent from here when it is lost.
    pub raw: String,
    pub tenant: String,
    pub key_id: String,
    /// Unix seconds.
    pub at: i64,
}

/// The queue between the write path and the recorder.
pub struct TxLog {
    /// `tx_tracking.enabled`: when off, nothing is queued.
    enabled: bool,
    sender: mpsc::Sender<Submitted>,
    receiver: Mutex<Option<mpsc::Receiver<Submitted>>>,
}

impl TxLog {
    pub fn new(enabled: bool) -> Self {
        let (sender, receiver) = mpsc::channel(QUEUE);
        TxLog {
            enabled,
            sender,
            receiver: Mutex::new(Some(receiver)),
        }
    }

    /// A transaction `by` sent on `pool` was accepted: queue it for the recorder when its
    /// pool is a chain the edge follows.
    pub fn accepted(&self, pool: &str, hash: &str, raw: &str, by: Submitter<'_>) {
        if let Some(chain) = chain_of_pool(pool) {
            self.accepted_on(chain, PUBLIC, hash, raw, by);
        }
    }

    /// A transaction `by` sent to `chain` by `route` was accepted: queue it.
    pub fn accepted_on(
        &self,
        chain: &'static str,
        route: &'static str,
        hash: &str,
        raw: &str,
        by: Submitter<'_>,
    ) {
        if !self.enabled {
            return;
        }
        let record = Submitted {
            chain,
            route,
            // Base58 is case-sensitive; hex is not.
            hash: match chain {
                "sol" => hash.to_string(),
                _ => hash.to_ascii_lowercase(),
            },
            raw: raw.to_string(),
            tenant: by.tenant.to_string(),
            key_id: by.key_id.to_string(),
            at: crate::clock::now(),
        };
        if self.sender.try_send(record).is_err() {
            metrics::TX_TRACKING_DROPPED.inc();
        }
    }

    /// The queue's receiving end, for the one recorder (`None` once taken).
    pub fn take_receiver(&self) -> Option<mpsc::Receiver<Submitted>> {
        self.receiver
            .lock()
            .unwrap_or_else(|p| p.into_inner())
            .take()
    }
}

/// The chain whose transactions a pool takes, when the edge follows them: Ethereum's
/// execution pool, Polygon's bor pool and its sender routes, Solana's RPC pool.
pub fn chain_of_pool(pool: &str) -> Option<&'static str> {
    match pool {
        "eth_el" => Some("eth"),
        "polygon_bor" | "polygon_sender_anon" | "polygon_sender_no_auth" => Some("polygon"),
        "sol_rpc" => Some("sol"),
        _ => None,
    }
}

/// The pool the follower reads a chain from.
pub fn pool_of_chain(chain: &str) -> Option<&'static str> {
    match chain {
        "eth" => Some("eth_el"),
        "polygon" => Some("polygon_bor"),
        "sol" => Some("sol_rpc"),
        _ => None,
    }
}

/// A followed transaction as the API answers it and its pushes carry it
/// (`confirmations` counted from `head`, when known).
pub fn status_json(tx: &TrackedTx, head: Option<u64>) -> Value {
    let confirmations = match (tx.block_number, head) {
        (Some(block), Some(head)) => Some((head as i64 - block + 1).max(1)),
        _ => None,
    };
    let time = crate::clock::rfc3339;
    json!({
        "hash": tx.hash,
        "chain": tx.chain,
        "status": tx.status,
        "from": tx.sender,
        "nonce": tx.nonce,
        "block_number": tx.block_number,
        "block_hash": tx.block_hash,
        "transaction_index": tx.tx_index,
        "confirmations": confirmations,
        "route": tx.route,
        "replaced_by": tx.replaced_by,
        "revert_reason": tx.revert_reason,
        "resends": tx.resends,
        "submitted_at": time(tx.submitted_at),
        "updated_at": time(tx.updated_at),
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn only_followed_chains_are_queued_and_a_full_queue_drops_the_record() {
        let log = TxLog::new(true);
        let by = Submitter {
            tenant: "t",
            key_id: "k",
        };
        log.accepted("eth_mev_builder", "0xAA", "0x01", by);
        log.accepted("eth_el", "0xAA", "0x01", by);
        let mut rx = log.take_receiver().unwrap();
        let got = rx.try_recv().unwrap();
        assert_eq!((got.chain, got.hash.as_str()), ("eth", "0xaa"));
        assert!(rx.try_recv().is_err());
        assert!(log.take_receiver().is_none());
        for _ in 0..QUEUE + 5 {
            log.accepted("polygon_bor", "0xbb", "0x01", by);
        }
        assert_eq!(rx.len(), QUEUE);
        let off = TxLog::new(false);
        off.accepted("eth_el", "0xaa", "0x01", by);
        assert!(off.take_receiver().unwrap().try_recv().is_err());
    }
}

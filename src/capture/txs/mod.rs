//! Transactions accepted through the edge, followed until they settle: the recorder
//! stores what the write path queued (`tracking::TxLog`), decoding each transaction's
//! sender and nonce; one follower per chain (`follow.rs`) reads each open transaction's
//! fate from the nodes and sends again what every node lost; each change is pushed to the
//! tenant's channel and hooks (`push.rs`).

mod follow;
pub mod push;
mod revert;
mod sol;

pub use follow::Follower;

use crate::capture::{Health, Producer};
use crate::config::usage::TxTrackingConf;
use crate::store::txs::NewTx;
use crate::store::Store;
use crate::tracking::{Submitted, QUEUE};
use async_trait::async_trait;
use pingora_core::server::ShutdownWatch;
use std::sync::Mutex;
use std::time::Duration;
use tokio::sync::mpsc;

/// Records stored in one transaction at most.
const BATCH: usize = 256;

/// Stores the accepted transactions the write path queued.
pub struct Recorder {
    pub conf: TxTrackingConf,
    pub store: Store,
    pub queue: Mutex<Option<mpsc::Receiver<Submitted>>>,
}

impl Recorder {
    /// What is queued, decoded, at most `BATCH`; waits for the first record.
    async fn next_batch(queue: &mut mpsc::Receiver<Submitted>) -> Option<Vec<NewTx>> {
        let first = queue.recv().await?;
        let mut batch = Vec::with_capacity(BATCH);
        batch.extend(decoded(first));
        while batch.len() < BATCH {
            match queue.try_recv() {
                Ok(next) => batch.extend(decoded(next)),
                Err(_) => break,
            }
        }
        Some(batch)
    }

    /// Store `pending`; what the store did not take waits for the next round (bounded:
    /// past the queue's size the oldest are given up).
    async fn store(&self, pending: &mut Vec<NewTx>, health: &Health) {
        match self
            .store
            .track_txs(pending, self.conf.per_tenant as i64)
            .await
        {
            Ok(()) => {
                pending.clear();
                health.ok();
            }
            Err(e) => {
                health.failed(format!("storing followed transactions: {e}"));
                if pending.len() > QUEUE {
                    let over = pending.len() - QUEUE;
                    pending.drain(..over);
                    crate::observe::metrics::TX_TRACKING_DROPPED.inc_by(over as u64);
                }
            }
        }
    }
}

/// A queued transaction with its sender and nonce, or on Solana its fee payer and
/// recent blockhash (what does not decode is not followed).
fn decoded(s: Submitted) -> Option<NewTx> {
    let (sender, nonce, recent_blockhash) = match s.chain {
        "sol" => {
            use base64::Engine;
            let wire = base64::engine::general_purpose::STANDARD
                .decode(&s.raw)
                .ok()?;
            let tx = crate::sol_tx::decode_wire(wire).ok()?;
            (tx.fee_payer, 0, Some(tx.recent_blockhash))
        }
        _ => {
            let tx = crate::signed_tx::decode(&s.raw).ok()?;
            (tx.from, tx.nonce as i64, None)
        }
    };
    Some(NewTx {
        chain: s.chain.to_string(),
        route: s.route.to_string(),
        hash: s.hash,
        tenant_id: s.tenant,
        key_id: s.key_id,
        sender,
        nonce,
        recent_blockhash,
        raw: s.raw,
        submitted_at: s.at,
    })
}

#[async_trait]
impl Producer for Recorder {
    fn name(&self) -> String {
        "txs/record".into()
    }

    async fn run(&self, health: &Health, mut shutdown: ShutdownWatch) {
        let Some(mut queue) = self.queue.lock().unwrap_or_else(|p| p.into_inner()).take() else {
            return;
        };
        let mut pending: Vec<NewTx> = Vec::new();
        loop {
            let batch = tokio::select! {
                _ = shutdown.changed() => None,
                batch = Self::next_batch(&mut queue) => batch,
            };
            let Some(batch) = batch else {
                break;
            };
            pending.extend(batch);
            self.store(&mut pending, health).await;
            if !pending.is_empty() {
                // The store is away: wait before the next attempt.
                tokio::time::sleep(Duration::from_secs(1)).await;
            }
        }
        // What was accepted before the stop is stored before the process ends.
        queue.close();
        while let Ok(next) = queue.try_recv() {
            pending.extend(decoded(next));
        }
        self.store(&mut pending, health).await;
    }
}

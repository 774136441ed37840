//! Follows the transactions this instance's Solana senders accepted until they land
//! (`state::sol_mempool` keeps them): every second the pending ones are looked up with
//! `getSignatureStatuses`.

use crate::capture::{Health, Producer};
use crate::pools::Pools;
use crate::rpc::Gateway;
use crate::state::sol_mempool::{Fate, SolMempool};
use async_trait::async_trait;
use pingora_core::server::ShutdownWatch;
use serde_json::json;
use std::sync::Arc;
use std::time::Duration;

pub const POOL: &str = "sol_rpc";
/// Most signatures `getSignatureStatuses` takes at once.
const STATUS_BATCH: usize = 256;

/// Follows pending transactions until they land.
pub struct Tracker {
    pub mempool: Arc<SolMempool>,
    pub pools: Arc<Pools>,
    pub gateway: Arc<Gateway>,
}

impl Tracker {
    async fn round(&self) -> Result<(), String> {
        let Some(pool) = self.pools.get(POOL) else {
            return Ok(());
        };
        let pending = self.mempool.pending();
        for chunk in pending.chunks(STATUS_BATCH) {
            let (answer, _) = self
                .gateway
                .read_call(
                    pool,
                    "getSignatureStatuses",
                    json!([chunk, {"searchTransactionHistory": false}]),
                    "sol-mempool",
                )
                .await
                .map_err(|e| format!("getSignatureStatuses: {}", e.message))?;
            let Some(statuses) = answer["value"].as_array() else {
                return Err("getSignatureStatuses: no value list in the answer".into());
            };
            let now = crate::clock::now_ms();
            let window = self.mempool.window();
            for (sig, status) in chunk.iter().zip(statuses) {
                if status.is_null() {
                    continue;
                }
                let slot = status["slot"].as_u64().unwrap_or(0);
                let fate = if status["err"].is_null() {
                    let first = window
                        .iter()
                        .find(|s| &s.signature == sig)
                        .map_or(now, |s| s.first_seen);
                    Fate::Landed {
                        slot,
                        after_ms: now - first,
                    }
                } else {
                    Fate::Failed {
                        slot,
                        error: status["err"].clone(),
                    }
                };
                self.mempool.settle(sig, fate);
            }
        }
        Ok(())
    }
}

#[async_trait]
impl Producer for Tracker {
    fn name(&self) -> String {
        "sol/mempool".into()
    }

    async fn run(&self, health: &Health, mut shutdown: ShutdownWatch) {
        let mut tick = tokio::time::interval(Duration::from_secs(1));
        tick.set_missed_tick_behavior(tokio::time::MissedTickBehavior::Delay);
        loop {
            tokio::select! {
                _ = tick.tick() => health.round(self.round().await),
                _ = shutdown.changed() => return,
            }
        }
    }
}

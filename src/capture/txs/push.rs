//! The transaction pushes' producer: on every instance, the channels' tail of
//! `tx_events`; on the one holding the `tx_push` lease, the webhooks' deliveries
//! (`state::tx_push` describes both, and the messages).

use crate::capture::{Health, Producer};
use crate::cluster::leases::{Leases, Place};
use crate::state::tx_push::{TxPush, CURSOR};
use async_trait::async_trait;
use pingora_core::server::ShutdownWatch;
use std::sync::Arc;
use std::time::Duration;

/// The pushes' producer: the channels' tail on every instance; the webhooks on the one
/// holding the lease.
pub struct Push {
    pub push: Arc<TxPush>,
    pub leases: Arc<Leases>,
}

impl Push {
    /// Where the webhooks got to (a first start begins at the newest change: history
    /// is not delivered to hooks that did not exist then).
    async fn webhook_cursor(&self) -> Result<i64, String> {
        let store = self.push.store();
        match store.push_cursor(CURSOR).await.map_err(|e| e.to_string())? {
            Some(at) => Ok(at),
            None => {
                let at = store.last_tx_event().await.map_err(|e| e.to_string())?;
                store
                    .set_push_cursor(CURSOR, at)
                    .await
                    .map_err(|e| e.to_string())?;
                Ok(at)
            }
        }
    }
}

#[async_trait]
impl Producer for Push {
    fn name(&self) -> String {
        "txs/push".into()
    }

    async fn run(&self, health: &Health, mut shutdown: ShutdownWatch) {
        let push = &self.push;
        let mut tick = tokio::time::interval(Duration::from_millis(push.conf().push_interval_ms));
        tick.set_missed_tick_behavior(tokio::time::MissedTickBehavior::Delay);
        // Where this instance's channels and (while it holds the lease) the webhooks got
        // to; `None` until read (again, for the webhooks, after the lease changes hands).
        let mut tail = None;
        let mut hooks_at = None;
        let mut lease = None;
        loop {
            tokio::select! {
                _ = shutdown.changed() => return,
                _ = tick.tick() => {}
            }
            let mut round = self.tail_round(&mut tail).await;
            if push.webhooks_enabled() {
                if lease.is_none() {
                    if let Place::Granted(held) = self.leases.take("tx_push", "webhooks", 1).await {
                        lease = Some(held);
                        hooks_at = None;
                    }
                }
                if lease.is_some() {
                    round = round.and(self.webhook_round(&mut hooks_at).await);
                }
            }
            health.round(round);
        }
    }
}

impl Push {
    /// The channels' part of a round: from `at` (the newest change at start).
    async fn tail_round(&self, at: &mut Option<i64>) -> Result<(), String> {
        let from = match *at {
            Some(at) => at,
            None => self
                .push
                .store()
                .last_tx_event()
                .await
                .map_err(|e| e.to_string())?,
        };
        *at = Some(self.push.tail(from).await?);
        Ok(())
    }

    /// The webhooks' part of a round: from `at` (the stored cursor when unknown).
    async fn webhook_round(&self, at: &mut Option<i64>) -> Result<(), String> {
        let from = match *at {
            Some(at) => at,
            None => self.webhook_cursor().await?,
        };
        *at = Some(self.push.deliver_after(from).await?);
        Ok(())
    }
}

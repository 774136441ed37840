//! The keys' request logs from memory to the store, every flush interval: one batch per
//! round, each key cut to what it keeps. A request log is a debugging aid, not billing
//! data: what a failed write or a crash loses (one interval at most) is counted in
//! `chainedge_request_log_dropped_total`, not journaled.

use crate::capture::{Health, Producer};
use crate::observe::metrics;
use crate::store::Store;
use crate::usage::requests::RequestLog;
use async_trait::async_trait;
use pingora_core::server::ShutdownWatch;
use std::sync::Arc;
use std::time::Duration;

pub struct RequestLogWriter {
    pub log: Arc<RequestLog>,
    pub store: Store,
    pub interval: Duration,
}

impl RequestLogWriter {
    async fn write(&self, health: &Health) {
        let taken = self.log.take();
        if taken.entries.is_empty() && taken.groups.is_empty() {
            return;
        }
        let (rows, groups) = (&taken.entries, &taken.groups);
        match self
            .store
            .add_requests(rows, self.log.per_key(), groups)
            .await
        {
            Ok(()) => health.ok(),
            Err(e) => {
                metrics::request_log_dropped(rows.len() as u64);
                health.failed(e);
            }
        }
    }
}

#[async_trait]
impl Producer for RequestLogWriter {
    fn name(&self) -> String {
        "usage/requests".into()
    }

    async fn run(&self, health: &Health, mut shutdown: ShutdownWatch) {
        let mut tick = tokio::time::interval(self.interval);
        tick.set_missed_tick_behavior(tokio::time::MissedTickBehavior::Delay);
        loop {
            let stopping = tokio::select! {
                _ = tick.tick() => false,
                _ = shutdown.changed() => true,
            };
            self.write(health).await;
            if stopping {
                return;
            }
        }
    }
}

//! The consensus-layer capacity series behind `GET /v1/eth/intel/validator/series`,
//! sampled in the background from what the edge itself sees.
//!
//! **The measure.** Every second, for each host of the `eth_cl` pool, the sampler takes
//! the requests the edge sent that host in that second (beacon proxy, beacon events,
//! validator intel: everything counted in `chainedge_upstream_attempts_total`) less those
//! that failed (`chainedge_upstream_failures_total`). A host's **RPS ceiling** for a
//! minute is the largest such one-second count in that minute: the most requests per
//! second the host was seen to serve without failing. It is a lower bound of the host's
//! capacity, set by the traffic it was given, not a load test. Every few seconds the
//! sampler adds, per host, the minute's peak so far with its requests and failures
//! (`store::capacity`); the series sums the hosts' ceilings per minute, all hosts or
//! those of one client implementation. Rows older than `RETENTION` are pruned hourly.

use crate::capture::{Health, Producer};
use crate::observe::metrics;
use crate::pools::Pools;
use crate::store::capacity::HostMinute;
use crate::store::Store;
use async_trait::async_trait;
use pingora_core::server::ShutdownWatch;
use std::collections::HashMap;
use std::sync::Arc;
use std::time::Duration;

/// The pool sampled.
pub const POOL: &str = "eth_cl";
/// How long minutes are kept.
pub const RETENTION: Duration = Duration::from_secs(7 * 24 * 3600);
/// How often the minute so far is added to the store (the upsert adds counts and keeps
/// the larger peak, so a minute may be written in parts).
const FLUSH_EVERY_SECS: i64 = 5;

pub struct Sampler {
    pub pools: Arc<Pools>,
    pub store: Store,
}

/// One host's minute so far.
#[derive(Default, Clone, Copy)]
struct Minute {
    peak: u64,
    requests: u64,
    failures: u64,
}

#[async_trait]
impl Producer for Sampler {
    fn name(&self) -> String {
        "capacity".into()
    }

    async fn run(&self, health: &Health, mut shutdown: ShutdownWatch) {
        let Some(pool) = self.pools.get(POOL) else {
            return;
        };
        let hosts: Vec<(String, String)> = pool
            .hosts
            .iter()
            .map(|h| (h.id.clone(), h.family.clone()))
            .collect();
        let mut last: HashMap<&str, (u64, u64)> = hosts
            .iter()
            .map(|(id, _)| (id.as_str(), metrics::upstream_counts(POOL, id)))
            .collect();
        let mut minutes: HashMap<&str, Minute> = HashMap::new();
        let mut current = crate::clock::now() / 60 * 60;
        let mut flushed_at = crate::clock::now();
        let mut pruned_at = 0i64;
        let mut tick = tokio::time::interval(Duration::from_secs(1));
        tick.set_missed_tick_behavior(tokio::time::MissedTickBehavior::Delay);
        loop {
            let stopping = tokio::select! {
                _ = tick.tick() => false,
                _ = shutdown.changed() => true,
            };
            // The second that just ended belongs to the minute it started in.
            for (id, _) in &hosts {
                let now = metrics::upstream_counts(POOL, id);
                let before = last.insert(id.as_str(), now).unwrap_or(now);
                let sent = now.0.saturating_sub(before.0);
                let failed = now.1.saturating_sub(before.1);
                let m = minutes.entry(id.as_str()).or_default();
                m.peak = m.peak.max(sent.saturating_sub(failed));
                m.requests += sent;
                m.failures += failed;
            }
            let now = crate::clock::now();
            let minute = now / 60 * 60;
            if minute != current || now - flushed_at >= FLUSH_EVERY_SECS || stopping {
                flushed_at = now;
                let rows: Vec<HostMinute> = hosts
                    .iter()
                    .map(|(id, family)| {
                        let m = minutes.get(id.as_str()).copied().unwrap_or_default();
                        HostMinute {
                            minute: current,
                            host: id.clone(),
                            family: family.clone(),
                            peak_rps: m.peak as i64,
                            requests: m.requests as i64,
                            failures: m.failures as i64,
                        }
                    })
                    .collect();
                health.round(
                    self.store
                        .record_capacity(&rows)
                        .await
                        .map_err(|e| format!("the minute was not stored: {e}")),
                );
                minutes.clear();
                current = minute;
                if minute - pruned_at >= 3600 {
                    pruned_at = minute;
                    let before = minute - RETENTION.as_secs() as i64;
                    if let Err(e) = self.store.prune_capacity(before).await {
                        health.failed(format!("pruning failed: {e}"));
                    }
                }
            }
            if stopping {
                break;
            }
        }
    }
}

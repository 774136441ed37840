//! Solana MEV-cache analytics, sampled in the background from the hosts' own Prometheus
//! metrics (pool `sol_mev_cache`), behind `/v1/sol/mev-cache/*`.
//!
//! **The measure.** Every `interval_secs` each host's metrics are scraped (its
//! `metrics_url`, else `/metrics` on its URL) and its hits counter read: the metric
//! `solana.mev_cache.hits_metric` (default `mev_cache_hits_total`), summed over its label
//! sets. A sample stores the counter, its increase since the host's previous sample (a
//! counter that went down was reset: its new value is the increase) and the time between
//! the two. **Hits per second** over a span is the sum of the increases in it divided by
//! the sum of the times they cover; the leaderboard ranks hosts by it over a window. A
//! failed scrape stores nothing (a gap in the series, not a zero). The whole scrape, as
//! parsed (IPs and host names scrubbed as in the metrics mirror), is kept in memory as
//! the host's snapshot. Samples older than 7 days are pruned.

use crate::capture::{Health, Producer};
use crate::config::MevCacheConf;
use crate::pools::{Host, Pools, Service};
use crate::scrub::scrub;
use crate::state::mev_snapshots::{Snapshot, Snapshots};
use crate::store::mev_cache::Sample;
use crate::store::Store;
use crate::upstream::UpstreamClient;
use async_trait::async_trait;
use pingora_core::server::ShutdownWatch;
use serde_json::{json, Value};
use std::collections::BTreeMap;
use std::sync::Arc;
use std::time::Duration;

pub const POOL: &str = "sol_mev_cache";
/// How long samples are kept.
pub const RETENTION_SECS: i64 = 7 * 24 * 3600;
/// Most series kept in one host's snapshot.
pub const MAX_SNAPSHOT_SERIES: usize = 2000;
const MAX_SCRAPE: usize = 8 << 20;
const SCRAPE_TIMEOUT: Duration = Duration::from_secs(5);

/// The hits counter in an exposition: the named metric summed over its label sets
/// (`None` when the host does not expose it).
pub fn hits(series: &[prometheus_parse::Sample], metric: &str) -> Option<f64> {
    let bare = metric.strip_suffix("_total").unwrap_or(metric);
    let mut total = None;
    for s in series {
        if s.metric != metric && s.metric != bare {
            continue;
        }
        let v = match s.value {
            prometheus_parse::Value::Counter(v)
            | prometheus_parse::Value::Gauge(v)
            | prometheus_parse::Value::Untyped(v) => v,
            _ => continue,
        };
        if v.is_finite() && v >= 0.0 {
            *total.get_or_insert(0.0) += v;
        }
    }
    total
}

/// The increase from `before` to `now` of a counter (a decrease is a reset).
pub fn increase(before: f64, now: f64) -> f64 {
    if now >= before {
        now - before
    } else {
        now
    }
}

pub struct Sampler {
    pub conf: MevCacheConf,
    pub pools: Arc<Pools>,
    pub store: Store,
    pub client: Arc<UpstreamClient>,
    pub snapshots: Arc<Snapshots>,
}

impl Sampler {
    async fn scrape(&self, host: &Host) -> Result<prometheus_parse::Scrape, String> {
        let path = match &host.metrics {
            Some((addr, _)) => addr.path.clone(),
            None => "/metrics".to_string(),
        };
        let r = self
            .client
            .send(
                host.call_on(Service::Metrics, "GET", &path, "mev-cache-sampler"),
                SCRAPE_TIMEOUT,
                MAX_SCRAPE,
            )
            .await
            .map_err(|e| e.to_string())?;
        if r.status != 200 {
            return Err(format!("HTTP {}", r.status));
        }
        let text = std::str::from_utf8(&r.body).map_err(|_| "metrics are not UTF-8")?;
        let clean = scrub(text, &host.id);
        prometheus_parse::Scrape::parse(clean.lines().map(|l| Ok(l.to_string())))
            .map_err(|e| format!("metrics do not parse: {e}"))
    }

    /// One round: every host scraped; samples for those whose counter moved on.
    async fn round(&self) -> Result<(), String> {
        let Some(pool) = self.pools.get(POOL) else {
            return Ok(());
        };
        let mut samples = Vec::new();
        for host in &pool.hosts {
            let scrape = match self.scrape(host).await {
                Ok(s) => s,
                Err(e) => {
                    log::debug!("mev-cache: scraping {}: {e}", host.id);
                    continue;
                }
            };
            let at = crate::clock::now_ms();
            let counter = hits(&scrape.samples, &self.conf.hits_metric);
            let snapshot = snapshot_of(&scrape, at);
            let previous = (self.snapshots).replace(&host.id, snapshot, counter.unwrap_or(0.0));
            if let (Some((before_at, before)), Some(now)) = (previous, counter) {
                if at > before_at {
                    samples.push(Sample {
                        host: host.id.clone(),
                        at,
                        hits_total: now.round() as i64,
                        increase: increase(before, now).round() as i64,
                        interval_ms: at - before_at,
                    });
                }
            }
        }
        self.store
            .record_mev_cache(&samples)
            .await
            .map_err(|e| format!("storing samples: {e}"))
    }
}

fn snapshot_of(scrape: &prometheus_parse::Scrape, at: i64) -> Snapshot {
    let mut series: Vec<Value> = scrape
        .samples
        .iter()
        .map(|s| {
            let v = match &s.value {
                prometheus_parse::Value::Counter(v)
                | prometheus_parse::Value::Gauge(v)
                | prometheus_parse::Value::Untyped(v) => json!(v),
                prometheus_parse::Value::Histogram(b) => {
                    json!(b
                        .iter()
                        .map(|h| json!({"le": h.less_than, "count": h.count}))
                        .collect::<Vec<_>>())
                }
                prometheus_parse::Value::Summary(q) => {
                    json!(q
                        .iter()
                        .map(|x| json!({"quantile": x.quantile, "value": x.count}))
                        .collect::<Vec<_>>())
                }
            };
            let labels: BTreeMap<&String, &String> = s.labels.iter().collect();
            json!({"name": s.metric, "labels": labels, "value": v})
        })
        .collect();
    series.sort_by(|a, b| {
        (a["name"].as_str(), a["labels"].to_string())
            .cmp(&(b["name"].as_str(), b["labels"].to_string()))
    });
    let truncated = series.len() > MAX_SNAPSHOT_SERIES;
    series.truncate(MAX_SNAPSHOT_SERIES);
    Snapshot {
        sampled_at: at,
        series,
        truncated,
    }
}

#[async_trait]
impl Producer for Sampler {
    fn name(&self) -> String {
        "sol/mev_cache".into()
    }

    async fn run(&self, health: &Health, mut shutdown: ShutdownWatch) {
        let mut tick = tokio::time::interval(Duration::from_secs(self.conf.interval_secs.max(1)));
        tick.set_missed_tick_behavior(tokio::time::MissedTickBehavior::Delay);
        let mut pruned_at = 0;
        loop {
            tokio::select! {
                _ = tick.tick() => {}
                _ = shutdown.changed() => return,
            }
            health.round(self.round().await);
            let now = crate::clock::now_ms();
            if now - pruned_at > 3_600_000 {
                pruned_at = now;
                if let Err(e) = self
                    .store
                    .prune_mev_cache(now - RETENTION_SECS * 1000)
                    .await
                {
                    health.failed(format!("pruning: {e}"));
                }
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn parse(text: &str) -> Vec<prometheus_parse::Sample> {
        prometheus_parse::Scrape::parse(text.lines().map(|l| Ok(l.to_string())))
            .unwrap()
            .samples
    }

    #[test]
    fn hits_sum_the_counter_over_its_label_sets_and_resets_count_from_zero() {
        let text = "# TYPE mev_cache_hits counter\nmev_cache_hits_total{region=\"a\"} 10\nmev_cache_hits_total{region=\"b\"} 5\nother_total 99\n";
        assert_eq!(hits(&parse(text), "mev_cache_hits_total"), Some(15.0));
        assert_eq!(
            hits(&parse("other_total 1\n"), "mev_cache_hits_total"),
            None
        );
        assert_eq!(increase(100.0, 130.0), 30.0);
        assert_eq!(increase(100.0, 7.0), 7.0, "a reset");
    }
}

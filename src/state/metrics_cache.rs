//! The metrics mirror's cache (`/v1/{eth|polygon}/metrics/...`): each host's scrubbed
//! metrics, scraped at most once per `fresh_ms` (concurrent misses share one scrape),
//! and answered stale up to `stale_ms` while the host cannot be scraped.

use crate::config::MirrorConf;
use crate::errors::ApiError;
use crate::pools::Host;
use crate::scrub::scrub;
use crate::upstream::{Call, UpstreamClient};
use bytes::Bytes;
use std::collections::HashMap;
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

struct Cached {
    body: Bytes,
    at: Instant,
}

/// Scrubbed payloads per host. Hosts come from config, so the map is bounded by it.
pub struct MetricsCache {
    slots: Mutex<HashMap<String, Arc<tokio::sync::Mutex<Option<Cached>>>>>,
    conf: MirrorConf,
    client: Arc<UpstreamClient>,
}

/// `X-Cache-Status` values.
pub const MISS: &str = "miss";
pub const FRESH: &str = "fresh";
pub const STALE: &str = "stale";

impl MetricsCache {
    pub fn new(conf: MirrorConf, client: Arc<UpstreamClient>) -> Self {
        MetricsCache {
            slots: Mutex::new(HashMap::new()),
            conf,
            client,
        }
    }

    /// The scrubbed metrics of `host` and how they were obtained.
    pub async fn get(
        &self,
        host: &Host,
        request_id: &str,
    ) -> Result<(Bytes, &'static str), ApiError> {
        let key = format!("{}/{}", host.pool, host.id);
        let slot = {
            let mut slots = self
                .slots
                .lock()
                .map_err(|_| ApiError::internal("cache lock"))?;
            slots.entry(key).or_default().clone()
        };
        // One scrape per host at a time: concurrent misses wait here and then find it fresh.
        let mut entry = slot.lock().await;
        if let Some(c) = entry.as_ref() {
            if c.at.elapsed() < Duration::from_millis(self.conf.fresh_ms) {
                return Ok((c.body.clone(), FRESH));
            }
        }
        match self.scrape(host, request_id).await {
            Ok(body) => {
                *entry = Some(Cached {
                    body: body.clone(),
                    at: Instant::now(),
                });
                Ok((body, MISS))
            }
            Err(e) => match entry.as_ref() {
                Some(c) if c.at.elapsed() < Duration::from_millis(self.conf.stale_ms) => {
                    host.record_failure(&format!("metrics scrape: {e}"));
                    Ok((c.body.clone(), STALE))
                }
                _ => {
                    host.record_failure(&format!("metrics scrape: {e}"));
                    Err(ApiError::new(
                        502,
                        "upstream_unavailable",
                        format!("metrics scrape failed: {e}"),
                    ))
                }
            },
        }
    }

    async fn scrape(&self, host: &Host, request_id: &str) -> Result<Bytes, String> {
        let (addr, peer) = host.metrics.as_ref().ok_or("no metrics_url")?;
        let call = Call {
            peer,
            authority: addr.authority(),
            method: "GET",
            path: &addr.path,
            headers: &[],
            body: None,
            content_type: None,
            request_id,
        };
        let r = self
            .client
            .send(
                call,
                Duration::from_millis(self.conf.timeout_ms),
                self.conf.max_bytes,
            )
            .await
            .map_err(|e| e.to_string())?;
        if r.status != 200 {
            return Err(format!("HTTP {}", r.status));
        }
        let text = std::str::from_utf8(&r.body).map_err(|_| "metrics are not UTF-8".to_string())?;
        Ok(Bytes::from(scrub(text, &host.id)))
    }
}

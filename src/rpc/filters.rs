//! Filters live on the node that created them: remember which, and send polls there.

use super::call::jsonrpc_error;
use super::need::Need;
use super::Gateway;
use crate::errors::ApiError;
use crate::pools::Pool;
use bytes::Bytes;
use serde_json::Value;
use std::time::{Duration, Instant};

/// Filter id → (pool, host id), bounded and aging out like the nodes' own filters.
pub struct FilterHosts {
    map: std::sync::Mutex<lru::LruCache<String, (String, String, Instant)>>,
}

/// Nodes drop filters not polled for about 5 minutes; so do we.
const FILTER_TTL: Duration = Duration::from_secs(300);

impl Default for FilterHosts {
    fn default() -> Self {
        FilterHosts {
            map: std::sync::Mutex::new(lru::LruCache::new(
                std::num::NonZeroUsize::new(100_000).expect("non-zero"),
            )),
        }
    }
}

impl FilterHosts {
    fn remember(&self, id: &str, pool: &str, host: &str) {
        if let Ok(mut m) = self.map.lock() {
            m.put(
                id.to_string(),
                (pool.to_string(), host.to_string(), Instant::now()),
            );
        }
    }

    /// The host of a filter, refreshing its age (a poll keeps a filter alive).
    fn host(&self, id: &str, pool: &str) -> Option<String> {
        let mut m = self.map.lock().ok()?;
        let entry = m.get_mut(id)?;
        if entry.0 != pool || entry.2.elapsed() > FILTER_TTL {
            return None;
        }
        entry.2 = Instant::now();
        Some(entry.1.clone())
    }
}

impl Gateway {
    /// Filters: creation goes to any host (remembered by filter id); polls and uninstall
    /// go to that host only, since no other node has the filter.
    pub(super) async fn filter(
        &self,
        pool: &Pool,
        call: &Value,
        rid: &str,
    ) -> Result<(Value, Option<String>), ApiError> {
        let id = call.get("id").cloned().unwrap_or(Value::Null);
        let method = call.get("method").and_then(Value::as_str).unwrap_or("");
        let body = Bytes::from(serde_json::to_vec(call).unwrap_or_default());
        if method.starts_with("eth_new") {
            let r = self.read(pool, None, Need::default(), body, rid).await?;
            let v: Value = serde_json::from_slice(&r.body)
                .unwrap_or_else(|_| jsonrpc_error(&id, -32603, "upstream answered non-JSON"));
            if let (Some(fid), Some(host)) = (v.get("result").and_then(Value::as_str), &r.upstream)
            {
                self.filters.remember(fid, &pool.name, host);
            }
            return Ok((v, r.upstream));
        }
        let fid = call
            .get("params")
            .and_then(|p| p.get(0))
            .and_then(Value::as_str)
            .unwrap_or("");
        let Some(host) = self
            .filters
            .host(fid, &pool.name)
            .and_then(|h| pool.host(&h).cloned())
        else {
            return Ok((jsonrpc_error(&id, -32000, "filter not found"), None));
        };
        let timeout = self.conf.timeout;
        match self.attempt(&host, body, rid, timeout).await {
            Ok(b) => Ok((
                serde_json::from_slice(&b)
                    .unwrap_or_else(|_| jsonrpc_error(&id, -32603, "upstream answered non-JSON")),
                Some(host.id.clone()),
            )),
            // The node that holds the filter is gone: so is the filter.
            Err(_) => Ok((
                jsonrpc_error(&id, -32000, "filter not found"),
                Some(host.id.clone()),
            )),
        }
    }
}

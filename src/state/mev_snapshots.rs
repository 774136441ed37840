//! The Solana MEV-cache hosts' last scrapes, as `capture::sol::mev_cache` samples them
//! (IPs and host names scrubbed), for `/v1/sol/mev-cache/*`.

use serde_json::Value;
use std::collections::HashMap;
use std::sync::Mutex;

/// One host's last scrape.
#[derive(Debug, Clone)]
pub struct Snapshot {
    /// Unix milliseconds.
    pub sampled_at: i64,
    /// `{name, labels, value}` per series, by name then labels.
    pub series: Vec<Value>,
    pub truncated: bool,
}

/// The hosts' snapshots (and their counters, for the next increase).
#[derive(Default)]
pub struct Snapshots {
    hosts: Mutex<HashMap<String, (Snapshot, f64)>>,
}

impl Snapshots {
    pub fn get(&self, host: &str) -> Option<Snapshot> {
        self.hosts
            .lock()
            .unwrap_or_else(|p| p.into_inner())
            .get(host)
            .map(|(s, _)| s.clone())
    }

    /// Keep `snapshot` as `host`'s with its hits counter (0 when it has none): the
    /// previous snapshot's time and counter, for the increase.
    pub fn replace(&self, host: &str, snapshot: Snapshot, counter: f64) -> Option<(i64, f64)> {
        let mut hosts = self.hosts.lock().unwrap_or_else(|p| p.into_inner());
        let previous = hosts.get(host).map(|(s, c)| (s.sampled_at, *c));
        hosts.insert(host.to_string(), (snapshot, counter));
        previous
    }
}

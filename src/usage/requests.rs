//! Each key's request log, gathered off the hot path: a finished request of a key adds
//! one entry to a bounded buffer (one short lock, no I/O); the writer
//! (`capture::usage::requests`) moves the buffer to the store every flush interval,
//! where each key keeps its newest `usage.request_log_per_key`. What an entry holds is
//! what a developer debugging a failing call needs, never a body, a parameter or a secret.

use crate::observe::metrics;
use std::collections::HashMap;
use std::sync::Mutex;

pub use crate::store::requests::RequestRow as RequestEntry;

/// The entries of every key since the last flush, bounded.
pub struct RequestLog {
    entries: Mutex<Vec<RequestEntry>>,
    buffer: usize,
    per_key: usize,
}

impl RequestLog {
    /// A log holding at most `buffer` entries between flushes, of which the store keeps
    /// `per_key` per key (0: no log at all).
    pub fn new(buffer: usize, per_key: usize) -> RequestLog {
        RequestLog {
            entries: Mutex::new(Vec::new()),
            buffer: buffer.max(1),
            per_key,
        }
    }

    pub fn enabled(&self) -> bool {
        self.per_key > 0
    }

    /// What each key keeps.
    pub fn per_key(&self) -> usize {
        self.per_key
    }

    pub fn add(&self, entry: RequestEntry) {
        let Ok(mut entries) = self.entries.lock() else {
            return;
        };
        if entries.len() >= self.buffer {
            drop(entries);
            metrics::request_log_dropped(1);
            return;
        }
        entries.push(entry);
    }

    /// Everything gathered since the last call, with each key's older entries beyond
    /// what the store keeps left out.
    pub fn take(&self) -> Vec<RequestEntry> {
        let taken = match self.entries.lock() {
            Ok(mut e) => std::mem::take(&mut *e),
            Err(_) => return Vec::new(),
        };
        let mut seen: HashMap<&str, usize> = HashMap::new();
        let mut keep = vec![false; taken.len()];
        for (i, e) in taken.iter().enumerate().rev() {
            let n = seen.entry(e.key_id.as_str()).or_default();
            if *n < self.per_key {
                *n += 1;
                keep[i] = true;
            }
        }
        taken
            .into_iter()
            .zip(keep)
            .filter_map(|(e, k)| k.then_some(e))
            .collect()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn entry(key: &str, at_us: i64) -> RequestEntry {
        RequestEntry {
            key_id: key.into(),
            tenant_id: "t".into(),
            at_us,
            route: "eth.rpc".into(),
            method: "eth_call".into(),
            status: 200,
            error: None,
            latency_us: 10,
            upstream: None,
        }
    }

    #[test]
    fn bounded_and_newest_per_key() {
        let log = RequestLog::new(5, 2);
        for at in 0..4 {
            log.add(entry("a", at));
        }
        log.add(entry("b", 9));
        log.add(entry("b", 10)); // over the buffer: not kept
        let taken = log.take();
        let kept: Vec<(&str, i64)> = taken.iter().map(|e| (e.key_id.as_str(), e.at_us)).collect();
        assert_eq!(kept, [("a", 2), ("a", 3), ("b", 9)]);
        assert!(log.take().is_empty());
    }
}

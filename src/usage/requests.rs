//! Each key's request log, gathered off the hot path: a finished request of a key adds
//! one entry to a bounded buffer (one short lock, no I/O); the writer
//! (`capture::usage::requests`) moves the buffer to the store every flush interval,
//! where each key keeps its newest `usage.request_log_per_key`. What an entry holds is
//! what a developer debugging a failing call needs, never a body, a parameter or a secret.

use super::breakdown::{Finished, Group, Groups, MethodCounts};
use crate::observe::metrics;
use std::collections::HashMap;
use std::sync::Mutex;

pub use crate::store::requests::RequestRow as RequestEntry;

/// The entries of every key since the last flush, and the per-method breakdown of the
/// same requests (`breakdown.rs`), each bounded.
pub struct RequestLog {
    gathered: Mutex<Gathered>,
    buffer: usize,
    per_key: usize,
}

struct Gathered {
    entries: Vec<RequestEntry>,
    groups: Groups,
}

/// What a flush takes: the entries each key keeps, and the breakdown's groups.
pub struct Taken {
    pub entries: Vec<RequestEntry>,
    pub groups: Vec<(Group, MethodCounts)>,
}

impl RequestLog {
    /// A log holding at most `buffer` entries between flushes, of which the store keeps
    /// `per_key` per key (0: no log at all).
    pub fn new(buffer: usize, per_key: usize) -> RequestLog {
        RequestLog {
            gathered: Mutex::new(Gathered {
                entries: Vec::new(),
                groups: Groups::new(buffer),
            }),
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
        let Ok(mut g) = self.gathered.lock() else {
            return;
        };
        let counted = g.groups.add(&Finished {
            key_id: &entry.key_id,
            tenant_id: &entry.tenant_id,
            at_secs: entry.at_us.div_euclid(1_000_000),
            route: &entry.route,
            method: &entry.method,
            status: entry.status,
            error: entry.error.as_deref(),
            latency_us: entry.latency_us,
        });
        let kept = g.entries.len() < self.buffer;
        if kept {
            g.entries.push(entry);
        }
        drop(g);
        if !counted || !kept {
            metrics::request_log_dropped(1);
        }
    }

    /// Everything gathered since the last call, with each key's older entries beyond
    /// what the store keeps left out.
    pub fn take(&self) -> Taken {
        let (taken, groups) = match self.gathered.lock() {
            Ok(mut g) => (std::mem::take(&mut g.entries), g.groups.take()),
            Err(_) => {
                return Taken {
                    entries: Vec::new(),
                    groups: Vec::new(),
                }
            }
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
        let entries = taken
            .into_iter()
            .zip(keep)
            .filter_map(|(e, k)| k.then_some(e))
            .collect();
        Taken { entries, groups }
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
        let kept: Vec<(&str, i64)> = taken
            .entries
            .iter()
            .map(|e| (e.key_id.as_str(), e.at_us))
            .collect();
        assert_eq!(kept, [("a", 2), ("a", 3), ("b", 9)]);
        let calls: i64 = taken.groups.iter().map(|(_, c)| c.calls).sum();
        assert_eq!(calls, 6, "the breakdown counts what the log could not keep");
        assert!(log.take().entries.is_empty());
    }
}

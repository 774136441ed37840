//! Each key's request log, gathered off the hot path: a finished request of a key goes
//! into its key's ring of the newest `usage.request_log_per_key` entries (one short lock,
//! no I/O, and once a ring is full no allocation: the oldest entry's buffers are reused),
//! and into the key's per-method breakdown (`breakdown.rs`). The writer
//! (`capture::usage::requests`) moves both to the store every flush interval. What an
//! entry holds is what a developer debugging a failing call needs, never a body, a
//! parameter or a secret.

pub use super::breakdown::Finished;
use super::breakdown::{Group, KeyGroups, MethodCounts};
use crate::observe::metrics;
use rustc_hash::FxHashMap;
use std::collections::VecDeque;
use std::sync::Mutex;

pub use crate::store::requests::RequestRow as RequestEntry;

/// An entry in its key's ring: the key is the ring's.
#[derive(Default)]
struct Entry {
    at_us: i64,
    route: String,
    method: String,
    status: u16,
    error: Option<String>,
    latency_us: u64,
    upstream: Option<String>,
}

/// Copy `from` into `into`, reusing its buffer.
fn set(into: &mut String, from: &str) {
    into.clear();
    into.push_str(from);
}

fn set_opt(into: &mut Option<String>, from: Option<&str>) {
    match (into.as_mut(), from) {
        (Some(s), Some(f)) => set(s, f),
        (_, f) => *into = f.map(str::to_string),
    }
}

impl Entry {
    fn fill(&mut self, f: &Finished<'_>) {
        self.at_us = f.at_us;
        set(&mut self.route, f.route);
        set(&mut self.method, f.method);
        self.status = f.status;
        set_opt(&mut self.error, f.error);
        self.latency_us = f.latency_us;
        set_opt(&mut self.upstream, f.upstream);
    }
}

/// One key's part since the last flush.
struct KeyLog {
    tenant_id: String,
    /// Oldest first, at most `per_key`.
    entries: VecDeque<Entry>,
    groups: KeyGroups,
}

/// Every key's log since the last flush; `held` entries in all, at most `buffer`.
struct Gathered {
    keys: FxHashMap<String, KeyLog>,
    held: usize,
}

pub struct RequestLog {
    gathered: Mutex<Gathered>,
    buffer: usize,
    per_key: usize,
}

/// What a flush takes: each key's newest entries, and the breakdown's groups.
pub struct Taken {
    pub entries: Vec<RequestEntry>,
    pub groups: Vec<(Group, MethodCounts)>,
}

impl RequestLog {
    /// A log holding at most `buffer` entries between flushes, of which each key keeps
    /// its newest `per_key` (0: no log at all).
    pub fn new(buffer: usize, per_key: usize) -> RequestLog {
        RequestLog {
            gathered: Mutex::new(Gathered {
                keys: FxHashMap::default(),
                held: 0,
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

    pub fn add(&self, f: &Finished<'_>) {
        let Ok(mut g) = self.gathered.lock() else {
            return;
        };
        let Gathered { keys, held } = &mut *g;
        if !keys.contains_key(f.key_id) {
            if keys.len() >= self.buffer {
                drop(g);
                metrics::request_log_dropped(1);
                return;
            }
            let log = KeyLog {
                tenant_id: f.tenant_id.to_string(),
                entries: VecDeque::new(),
                groups: KeyGroups::default(),
            };
            keys.insert(f.key_id.to_string(), log);
        }
        let Some(log) = keys.get_mut(f.key_id) else {
            return;
        };
        let counted = log.groups.add(f);
        let kept = if log.entries.len() >= self.per_key {
            // Full: the oldest entry makes room, its buffers reused.
            let mut e = log.entries.pop_front().unwrap_or_default();
            e.fill(f);
            log.entries.push_back(e);
            true
        } else if *held < self.buffer {
            let mut e = Entry::default();
            e.fill(f);
            log.entries.push_back(e);
            *held += 1;
            true
        } else {
            false
        };
        drop(g);
        if !counted || !kept {
            metrics::request_log_dropped(1);
        }
    }

    /// Everything gathered since the last call.
    pub fn take(&self) -> Taken {
        let keys = match self.gathered.lock() {
            Ok(mut g) => {
                g.held = 0;
                std::mem::take(&mut g.keys)
            }
            Err(_) => FxHashMap::default(),
        };
        let mut taken = Taken {
            entries: Vec::new(),
            groups: Vec::new(),
        };
        for (key_id, log) in keys {
            taken
                .groups
                .extend(log.groups.into_groups(&key_id, &log.tenant_id));
            taken
                .entries
                .extend(log.entries.into_iter().map(|e| RequestEntry {
                    key_id: key_id.clone(),
                    tenant_id: log.tenant_id.clone(),
                    at_us: e.at_us,
                    route: e.route,
                    method: e.method,
                    status: e.status,
                    error: e.error,
                    latency_us: e.latency_us,
                    upstream: e.upstream,
                }));
        }
        taken
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn finished(key: &str, at_us: i64) -> Finished<'_> {
        Finished {
            key_id: key,
            tenant_id: "t",
            at_us,
            route: "eth.rpc",
            method: "eth_call",
            status: 200,
            error: (at_us % 2 == 1).then_some("rate_limited"),
            latency_us: 10,
            upstream: None,
        }
    }

    #[test]
    fn bounded_and_newest_per_key() {
        let log = RequestLog::new(3, 2);
        for at in [1, 2, 4, 5] {
            log.add(&finished("a", at));
        }
        log.add(&finished("b", 9));
        log.add(&finished("c", 10)); // over the buffer: not kept
        let taken = log.take();
        let mut kept: Vec<(&str, i64, Option<&str>)> = taken
            .entries
            .iter()
            .map(|e| (e.key_id.as_str(), e.at_us, e.error.as_deref()))
            .collect();
        kept.sort();
        assert_eq!(
            kept,
            [
                ("a", 4, None),
                ("a", 5, Some("rate_limited")),
                ("b", 9, Some("rate_limited"))
            ],
            "a reused entry carries nothing of the one before"
        );
        let calls: i64 = taken.groups.iter().map(|(_, c)| c.calls).sum();
        assert_eq!(calls, 6, "the breakdown counts what the log could not keep");
        assert!(log.take().entries.is_empty());
    }
}

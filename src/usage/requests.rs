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
use std::sync::atomic::{AtomicUsize, Ordering};
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

/// Shards of the log. A thread adds to its own (threads take one in turn when they first
/// log), so the proxy's worker threads never wait for each other or pass the lock's cache
/// lines back and forth: one shared lock cost the keyed `/rpc/eth` row about a quarter of
/// its requests/s on 2 cores.
const SHARDS: usize = 8;

static NEXT_SHARD: AtomicUsize = AtomicUsize::new(0);

thread_local! {
    static SHARD: usize = NEXT_SHARD.fetch_add(1, Ordering::Relaxed);
}

pub struct RequestLog {
    shards: Vec<Mutex<Gathered>>,
    /// Entries (and keys) one shard holds between flushes.
    shard_buffer: usize,
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
        RequestLog::with_shards(buffer, per_key, SHARDS)
    }

    fn with_shards(buffer: usize, per_key: usize, shards: usize) -> RequestLog {
        let gathered = || {
            Mutex::new(Gathered {
                keys: FxHashMap::default(),
                held: 0,
            })
        };
        RequestLog {
            shards: (0..shards.max(1)).map(|_| gathered()).collect(),
            shard_buffer: (buffer / shards.max(1)).max(1),
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
        let shard = SHARD.with(|s| *s) % self.shards.len();
        let Ok(mut g) = self.shards[shard].lock() else {
            return;
        };
        let Gathered { keys, held } = &mut *g;
        if !keys.contains_key(f.key_id) {
            if keys.len() >= self.shard_buffer {
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
        } else if *held < self.shard_buffer {
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

    /// Everything gathered since the last call: each key's newest `per_key` entries
    /// over every shard, and its groups (a group in several shards is added up by the
    /// store).
    pub fn take(&self) -> Taken {
        let mut taken = Taken {
            entries: Vec::new(),
            groups: Vec::new(),
        };
        for shard in &self.shards {
            let keys = match shard.lock() {
                Ok(mut g) => {
                    g.held = 0;
                    std::mem::take(&mut g.keys)
                }
                Err(_) => continue,
            };
            Self::take_keys(keys, &mut taken);
        }
        if self.shards.len() > 1 {
            self.newest_per_key(&mut taken.entries);
        }
        taken
    }

    /// Cut each key's entries to its newest `per_key` (a key several threads served
    /// has entries in several shards).
    fn newest_per_key(&self, entries: &mut Vec<RequestEntry>) {
        entries.sort_unstable_by(|a, b| a.key_id.cmp(&b.key_id).then(b.at_us.cmp(&a.at_us)));
        let mut kept = 0;
        let mut last: Option<String> = None;
        entries.retain(|e| {
            if last.as_deref() != Some(e.key_id.as_str()) {
                last = Some(e.key_id.clone());
                kept = 0;
            }
            kept += 1;
            kept <= self.per_key
        });
    }

    fn take_keys(keys: FxHashMap<String, KeyLog>, taken: &mut Taken) {
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
        let log = RequestLog::with_shards(3, 2, 1);
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

    #[test]
    fn threads_add_to_their_own_shards_and_a_flush_keeps_the_newest() {
        let log = std::sync::Arc::new(RequestLog::with_shards(100, 3, 4));
        // One thread after another (each in its own shard unless two share one): the
        // last thread's entries are the newest whichever shards they landed in.
        for t in 0..4 {
            let log = log.clone();
            std::thread::spawn(move || {
                for i in 0..5 {
                    log.add(&finished("k", t * 100 + i));
                }
            })
            .join()
            .unwrap();
        }
        let taken = log.take();
        let mut at: Vec<i64> = taken.entries.iter().map(|e| e.at_us).collect();
        at.sort();
        assert_eq!(at, [302, 303, 304], "the newest three over every shard");
        let calls: i64 = taken.groups.iter().map(|(_, c)| c.calls).sum();
        assert_eq!(calls, 20);
    }
}

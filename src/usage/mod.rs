//! Per-key usage, gathered off the hot path: a request adds its counts to an in-memory
//! table (one short lock on one of several shards, no I/O). The journal and the flusher
//! that make it durable are background capture (`capture::usage`). What is counted, per
//! key and minute:
//!
//! - `calls`: JSON-RPC calls (each call of a batch, each WebSocket message's calls) and
//!   other requests, refused ones included;
//! - `compute_units`: what the answered calls cost (`rpc::compute_units`); a request
//!   the edge refused costs nothing;
//! - `errors`: calls answered with an error (an error status, or a JSON-RPC error
//!   object in the answer), rate limits aside;
//! - `rate_limited`: calls refused by the rate or compute-unit limits.
//!
//! What a crash can lose is the counts not yet journaled: one journal interval (100 ms
//! by default). A failed flush is retried whole; a stop journals and flushes the last
//! counts after the last request has been answered (`Durable::finish`), and whatever
//! the store did not take then is added from the journal by the next instance to start
//! on that `store.state_dir` (docs/operations.md).

pub mod breakdown;
pub mod requests;

use crate::observe::metrics;
use crate::store::usage::{Counts, UsageRow};
use crate::store::KeyRecord;
use foldhash::HashMap;
use std::hash::BuildHasher;
use std::sync::Mutex;

/// Shards of the table: concurrent requests of different keys rarely share a lock.
const SHARDS: usize = 16;

/// One request's (or WebSocket message's) part.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct Tally {
    pub calls: u32,
    pub compute_units: u64,
    pub errors: u32,
    pub rate_limited: u32,
}

impl Tally {
    /// What `calls` costing `compute_units` count for, answered with `status` (and, on
    /// a 200, `error_answers` JSON-RPC errors among them).
    pub fn of(calls: u32, compute_units: u64, status: u16, error_answers: u32) -> Tally {
        match status {
            429 => Tally {
                calls,
                rate_limited: calls,
                ..Tally::default()
            },
            400.. => Tally {
                calls,
                errors: calls,
                ..Tally::default()
            },
            _ => Tally {
                calls,
                compute_units,
                errors: error_answers.min(calls),
                rate_limited: 0,
            },
        }
    }
}

/// A key's minutes not yet in the store.
struct Pending {
    tenant_id: String,
    /// (minute, counts), oldest first: one or two between flushes.
    minutes: Vec<(i64, Counts)>,
}

pub struct Usage {
    shards: Vec<Mutex<HashMap<String, Pending>>>,
    seed: foldhash::fast::RandomState,
    max_keys_per_shard: usize,
}

impl Usage {
    pub fn new(max_pending_keys: usize) -> Usage {
        Usage {
            shards: (0..SHARDS)
                .map(|_| Mutex::new(HashMap::default()))
                .collect(),
            seed: Default::default(),
            max_keys_per_shard: max_pending_keys.div_ceil(SHARDS).max(1),
        }
    }

    fn shard(&self, key_id: &str) -> &Mutex<HashMap<String, Pending>> {
        &self.shards[(self.seed.hash_one(key_id) % SHARDS as u64) as usize]
    }

    /// Count `t` for `key` in the current minute.
    pub fn record(&self, key: &KeyRecord, t: Tally) {
        if t.calls == 0 {
            return;
        }
        let counts = Counts {
            calls: t.calls as i64,
            compute_units: t.compute_units.min(i64::MAX as u64) as i64,
            errors: t.errors as i64,
            rate_limited: t.rate_limited as i64,
        };
        self.add(&key.key_id, &key.tenant_id, current_minute(), &counts);
    }

    fn add(&self, key_id: &str, tenant_id: &str, minute: i64, counts: &Counts) {
        let Ok(mut shard) = self.shard(key_id).lock() else {
            return;
        };
        if let Some(pending) = shard.get_mut(key_id) {
            match pending.minutes.iter_mut().rev().find(|(m, _)| *m == minute) {
                Some((_, c)) => c.add(counts),
                None => pending.minutes.push((minute, *counts)),
            }
            return;
        }
        if shard.len() >= self.max_keys_per_shard {
            drop(shard);
            metrics::usage_dropped(counts.calls as u64);
            return;
        }
        let mut minutes = Vec::with_capacity(2);
        minutes.push((minute, *counts));
        shard.insert(
            key_id.to_string(),
            Pending {
                tenant_id: tenant_id.to_string(),
                minutes,
            },
        );
    }

    /// Take everything gathered so far, as rows for the store.
    pub fn drain(&self) -> Vec<UsageRow> {
        let mut rows = Vec::new();
        for shard in &self.shards {
            let taken = match shard.lock() {
                Ok(mut s) => std::mem::take(&mut *s),
                Err(_) => continue,
            };
            for (key_id, p) in taken {
                for (minute, counts) in p.minutes {
                    rows.push(UsageRow {
                        key_id: key_id.clone(),
                        tenant_id: p.tenant_id.clone(),
                        minute,
                        counts,
                    });
                }
            }
        }
        rows
    }

    /// Put back rows a failed flush could not write (within the same bound).
    pub fn restore(&self, rows: Vec<UsageRow>) {
        for r in rows {
            self.add(&r.key_id, &r.tenant_id, r.minute, &r.counts);
        }
    }

    /// Keys with counts waiting for the store.
    pub fn pending_keys(&self) -> usize {
        self.shards
            .iter()
            .map(|s| s.lock().map(|s| s.len()).unwrap_or(0))
            .sum()
    }
}

/// Counts summed per (key id, minute), with each key's tenant, as rows for the store.
pub(crate) fn rows_of(
    sums: impl IntoIterator<Item = ((String, i64), (String, Counts))>,
) -> Vec<UsageRow> {
    sums.into_iter()
        .map(|((key_id, minute), (tenant_id, counts))| UsageRow {
            key_id,
            tenant_id,
            minute,
            counts,
        })
        .collect()
}

fn current_minute() -> i64 {
    crate::clock::now() / 60 * 60
}

#[cfg(test)]
mod tests {
    use super::*;

    fn key(id: &str) -> KeyRecord {
        KeyRecord {
            key_id: id.into(),
            tenant_id: format!("t-{id}"),
            user_id: None,
            plan: "free".into(),
            scopes: vec![],
            features: vec![],
            trial_ends_at: None,
            subscription_ends_at: None,
            revoked: false,
            secret_sha256: [0; 32],
            restrictions: None,
        }
    }

    #[test]
    fn tallies_add_up_per_key_and_minute_and_survive_a_failed_flush() {
        let u = Usage::new(1000);
        u.record(&key("a"), Tally::of(3, 60, 200, 1));
        u.record(&key("a"), Tally::of(2, 40, 429, 0));
        u.record(&key("a"), Tally::of(1, 20, 403, 0));
        u.record(&key("b"), Tally::of(1, 26, 200, 0));
        u.record(&key("b"), Tally::of(0, 0, 200, 0));
        let mut rows = u.drain();
        rows.sort_by(|x, y| x.key_id.cmp(&y.key_id));
        assert_eq!(rows.len(), 2);
        assert_eq!(
            rows[0].counts,
            Counts {
                calls: 6,
                compute_units: 60,
                errors: 2,
                rate_limited: 2
            }
        );
        assert_eq!(rows[0].tenant_id, "t-a");
        assert_eq!(rows[1].counts.compute_units, 26);
        assert!(u.drain().is_empty());
        // A failed flush puts rows back; new counts add to them.
        u.restore(rows);
        u.record(&key("b"), Tally::of(1, 26, 200, 0));
        let rows = u.drain();
        let b = rows.iter().find(|r| r.key_id == "b").unwrap();
        assert_eq!(b.counts.calls, 2);
        assert_eq!(b.counts.compute_units, 52);
    }

    #[test]
    fn the_table_is_bounded_in_keys() {
        let u = Usage::new(16); // one key per shard
        for i in 0..200 {
            u.record(&key(&format!("k{i}")), Tally::of(1, 1, 200, 0));
        }
        assert!(u.pending_keys() <= 16, "{}", u.pending_keys());
        // Keys already present keep counting.
        let kept = u.drain();
        assert!(!kept.is_empty());
    }
}

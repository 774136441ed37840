//! Other instances' traffic, for the limiter: every instance counts its own admitted
//! requests per (caller, category, second) exactly, as before, and adds what the others
//! admitted, as last heard from Redis.
//!
//! The request path never waits on Redis (the model is web3-proxy's deferred limiter):
//! it reads the others' counts from memory and notes its own admission there. A
//! background task (`cluster::sync`) sends the noted counts to Redis every
//! `cluster.sync_interval_ms` and brings back the global counts of each active caller,
//! in one atomic script call per round. So a burst spread over N instances is seen by
//! each within one round (the tolerance: at most one round of the others' traffic
//! unseen). When Redis cannot be reached, the others' counts age out after
//! `STALE_AFTER` and each instance falls back to its own limits (fail-open).

use foldhash::HashMap;
use std::hash::{Hash, Hasher};
use std::sync::Mutex;
use std::time::{Duration, Instant};

/// Others' counts older than this are ignored: the instance limits alone.
pub const STALE_AFTER: Duration = Duration::from_secs(2);
/// Shards of the table (callers hash to one), so concurrent requests rarely share a lock.
const SHARDS: usize = 16;
/// Callers tracked per shard; beyond, a new caller is limited by this instance alone
/// until an idle one leaves.
const MAX_PER_SHARD: usize = 8192;
/// Callers seen within this many seconds have their view of the others refreshed every
/// round (an idle caller costs Redis nothing).
const ACTIVE: u64 = 2;

struct Entry {
    /// The Redis key prefix: the caller and category in words, stable across instances.
    name: String,
    /// Own admissions not yet sent: (second, count).
    pending: Vec<(u64, i64)>,
    /// Own admissions sent, per second, for the seconds still in the window.
    sent: Vec<(u64, i64)>,
    /// Others' counts, newest first, for the seconds `others_at`, `others_at - 1`, ...
    others: Vec<f64>,
    others_at: u64,
    synced: Option<Instant>,
    /// The last second this caller was seen.
    touched: u64,
}

/// One caller's counts as a sync round sends them.
pub struct Outgoing {
    pub key: u64,
    pub name: String,
    pub deltas: Vec<(u64, i64)>,
}

pub struct SharedCounts {
    shards: Vec<Mutex<HashMap<u64, Entry>>>,
    horizon: u64,
}

impl SharedCounts {
    pub fn new(horizon: u64) -> SharedCounts {
        SharedCounts {
            shards: (0..SHARDS)
                .map(|_| Mutex::new(HashMap::default()))
                .collect(),
            horizon,
        }
    }

    pub fn horizon(&self) -> u64 {
        self.horizon
    }

    fn shard(&self, key: u64) -> &Mutex<HashMap<u64, Entry>> {
        &self.shards[(key % SHARDS as u64) as usize]
    }

    /// Add the others' counts for the seconds `now, now-1, ...` to `counts` (newest
    /// first). Nothing when the caller is new or the last sync is stale.
    pub fn add_others(&self, key: u64, now: u64, counts: &mut [f64]) {
        let Ok(shard) = self.shard(key).lock() else {
            return;
        };
        let Some(e) = shard.get(&key) else { return };
        if e.synced.is_none_or(|t| t.elapsed() >= STALE_AFTER) {
            return;
        }
        for (back, c) in counts.iter_mut().enumerate() {
            let second = now.wrapping_sub(back as u64);
            if second > e.others_at {
                continue; // newer than the last sync: not known yet
            }
            if let Some(o) = e.others.get((e.others_at - second) as usize) {
                *c += o;
            }
        }
    }

    /// Note `weight` admitted requests of a caller in second `now`.
    pub fn note(&self, key: u64, name: impl FnOnce() -> String, now: u64, weight: i64) {
        let Ok(mut shard) = self.shard(key).lock() else {
            return;
        };
        if !shard.contains_key(&key) && shard.len() >= MAX_PER_SHARD {
            return;
        }
        let e = shard.entry(key).or_insert_with(|| Entry {
            name: name(),
            pending: Vec::new(),
            sent: Vec::new(),
            others: Vec::new(),
            others_at: 0,
            synced: None,
            touched: now,
        });
        e.touched = now;
        match e.pending.last_mut() {
            Some((s, n)) if *s == now => *n += weight,
            _ => e.pending.push((now, weight)),
        }
    }

    /// Take what a sync round sends: every caller seen in the last `ACTIVE` seconds
    /// (with its pending counts, maybe none, so its view of the others stays fresh).
    /// Callers idle past the window are dropped; those idle for less keep what they
    /// sent, and catch up on the others within a round of coming back.
    pub fn take_outgoing(&self, now: u64) -> Vec<Outgoing> {
        let mut out = Vec::new();
        let oldest = now.saturating_sub(self.horizon + 1);
        for shard in &self.shards {
            let Ok(mut shard) = shard.lock() else {
                continue;
            };
            shard.retain(|_, e| e.touched >= oldest);
            for (key, e) in shard.iter_mut() {
                let deltas = std::mem::take(&mut e.pending);
                for &(s, n) in &deltas {
                    match e.sent.iter_mut().find(|(t, _)| *t == s) {
                        Some((_, m)) => *m += n,
                        None => e.sent.push((s, n)),
                    }
                }
                e.sent.retain(|(s, _)| *s >= oldest);
                if deltas.is_empty() && e.touched + ACTIVE < now {
                    continue;
                }
                out.push(Outgoing {
                    key: *key,
                    name: e.name.clone(),
                    deltas,
                });
            }
        }
        out
    }

    /// The global counts of a caller for the seconds `now, now-1, ...` (newest first),
    /// as Redis answered: the others' part is kept.
    pub fn set_global(&self, key: u64, now: u64, global: &[i64]) {
        let Ok(mut shard) = self.shard(key).lock() else {
            return;
        };
        let Some(e) = shard.get_mut(&key) else { return };
        e.others = global
            .iter()
            .enumerate()
            .map(|(back, g)| {
                let second = now.wrapping_sub(back as u64);
                let own: i64 = e
                    .sent
                    .iter()
                    .filter(|(s, _)| *s == second)
                    .map(|(_, n)| n)
                    .sum();
                (g - own).max(0) as f64
            })
            .collect();
        e.others_at = now;
        e.synced = Some(Instant::now());
    }
}

/// A caller's key, the same in every instance of one build (the local sketches use a
/// random seed per process; this one must agree across processes).
pub fn stable_key(parts: &[&[u8]]) -> u64 {
    #[allow(deprecated)]
    let mut h = std::hash::SipHasher::new_with_keys(0x6368_6169_6e65_6467, 0x6c69_6d69_7473);
    for p in parts {
        p.hash(&mut h);
    }
    h.finish()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn others_are_the_global_count_less_our_own() {
        let s = SharedCounts::new(10);
        s.note(7, || "t:a:c".into(), 100, 3);
        let out = s.take_outgoing(100);
        assert_eq!(out.len(), 1);
        assert_eq!(out[0].deltas, vec![(100, 3)]);
        // Redis: 10 in second 100 (3 of them ours), 4 in second 99.
        s.set_global(7, 100, &[10, 4, 0]);
        let mut counts = [0.0; 3];
        s.add_others(7, 100, &mut counts);
        assert_eq!(counts, [7.0, 4.0, 0.0]);
        // A second later, the same counts shift back by one.
        let mut counts = [0.0; 3];
        s.add_others(7, 101, &mut counts);
        assert_eq!(counts, [0.0, 7.0, 4.0]);
        // Unknown callers and other keys add nothing.
        let mut counts = [0.0; 3];
        s.add_others(8, 100, &mut counts);
        assert_eq!(counts, [0.0; 3]);
    }

    #[test]
    fn idle_callers_leave_and_stable_keys_agree() {
        let s = SharedCounts::new(10);
        s.note(1, || "a".into(), 100, 1);
        assert_eq!(s.take_outgoing(101).len(), 1, "active: refreshed");
        assert_eq!(s.take_outgoing(105).len(), 0, "idle: not sent");
        assert_eq!(s.take_outgoing(200).len(), 0);
        assert_eq!(
            stable_key(&[b"t", b"tenant-1", b"eth"]),
            stable_key(&[b"t", b"tenant-1", b"eth"])
        );
        assert_ne!(
            stable_key(&[b"t", b"tenant-1", b"eth"]),
            stable_key(&[b"t", b"tenant-1eth", b""])
        );
    }
}

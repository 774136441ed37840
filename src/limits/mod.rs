//! The tier × rate-category limiter.
//!
//! Algorithm: a sliding window of one-second buckets. The limiter keeps a ring of
//! `horizon + 1` count-min sketches (`pingora_limits::estimator::Estimator`), one per
//! wall-clock second, each counting admitted requests per (caller, category). With `L`
//! the sustained rate of the caller's plan in that category, a request is admitted while
//!   - the last second's count (`this second + previous × (1 − elapsed fraction)`)
//!     stays ≤ `burst × L` — the short-term ceiling, 2× by default, and
//!   - the count over the last `horizon` seconds (oldest bucket weighted the same way)
//!     stays ≤ `L × (horizon + burst − 1)` — on average `L`, plus one second of burst.
//!
//! So a caller at `L` is never refused, a caller idle for a while may send `burst × L`
//! at once, and a caller pushing harder is held to `L × (horizon + 1) / horizon` on
//! average (1.1 × L with the default 10-second horizon). Refused requests are not
//! counted, so hammering does not extend the penalty. Callers are tenants (all keys of a
//! tenant share its budget) or, without a credential, the client address (IPv6 by /64).
//!
//! Sketches never under-count: a hash collision can only make a caller look busier.
//! The chance shrinks with `sketch_slots`, which should be well above the number of
//! distinct callers active in one second. Memory: `(horizon + 1) × hashes × slots × 8` bytes.

pub mod shared;

use crate::config::limits::{LimitsConf, ANONYMOUS};
use foldhash::HashMap;
use pingora_limits::estimator::Estimator;
use shared::SharedCounts;
use std::hash::{BuildHasher, Hash, Hasher};
use std::net::IpAddr;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::Arc;
use std::time::{Instant, SystemTime, UNIX_EPOCH};

/// Callers whose past counts one thread keeps within a second (`past_counts`).
const PAST_KEYS: usize = 4096;

/// One thread's past counts: of which limiter, for which second, by key.
#[derive(Default)]
struct PastCounts {
    limiter: u64,
    second: u64,
    by_key: HashMap<u64, Box<[f64]>>,
}

thread_local! {
    static PAST_COUNTS: std::cell::RefCell<PastCounts> = Default::default();
}

/// Who is being limited.
pub enum Caller<'a> {
    /// A tenant, by id and plan rank.
    Tenant { id: &'a str, rank: usize },
    /// No credential: the client address.
    Address(IpAddr),
    /// One key under the rate cap its owner set (`max_rps`), beside its tenant's plan.
    Key(&'a str),
}

/// The outcome of one check, with what the response headers need.
#[derive(Debug, Clone, PartialEq)]
pub struct Decision {
    pub admitted: bool,
    pub limit_rps: f64,
    /// Requests that could still be sent right now.
    pub remaining: u64,
    /// Seconds until a request would be admitted again (refusals only).
    pub retry_after_sec: u64,
}

/// One second's counts; `second` says which second they belong to.
struct Bucket {
    second: AtomicU64,
    counts: Estimator,
}

pub struct Limiter {
    /// Which counts these are: a reload that keeps the ring keeps the id (`past_counts`).
    id: u64,
    /// Where seconds are read: from the limiter's start, wall-clock when counts are shared
    /// (so instances agree on them), or a clock a test moves.
    clock: Clock,
    /// Shared with the limiter a reload replaces, so counts carry over.
    ring: Arc<[Bucket]>,
    /// `(sketch_hashes, sketch_slots)` the ring's estimators were made with.
    sketch: (usize, usize),
    horizon: u64,
    burst: f64,
    /// Requests/s by plan rank; the anonymous rate is last.
    default: Box<[f64]>,
    categories: HashMap<String, Box<[f64]>>,
    /// Compute units/s by plan rank (anonymous last); infinite: not limited by units.
    compute_units: Option<Box<[f64]>>,
    seed: foldhash::fast::RandomState,
    /// Other instances' counts (`cluster.redis`), added to this instance's own.
    shared: Option<Arc<SharedCounts>>,
}

#[derive(Clone)]
enum Clock {
    Elapsed(Instant),
    Wall,
    #[cfg(test)]
    Manual(ManualClock),
}

/// A clock that moves only when told to (shared by the test and the limiter).
#[cfg(test)]
#[derive(Clone, Default)]
pub struct ManualClock(Arc<AtomicU64>);

#[cfg(test)]
impl ManualClock {
    pub fn now(&self) -> std::time::Duration {
        std::time::Duration::from_nanos(self.0.load(Ordering::Relaxed))
    }

    pub fn advance(&self, by: std::time::Duration) {
        self.0.fetch_add(by.as_nanos() as u64, Ordering::Relaxed);
    }
}

impl Limiter {
    pub fn new(conf: &LimitsConf, plans: &[String]) -> Limiter {
        let table = |t: Option<&std::collections::BTreeMap<String, f64>>| -> Box<[f64]> {
            plans
                .iter()
                .map(String::as_str)
                .chain([ANONYMOUS])
                .map(|p| {
                    t.and_then(|t| t.get(p))
                        .or_else(|| conf.default.get(p))
                        .copied()
                        .unwrap_or(1.0)
                })
                .collect()
        };
        static NEXT_ID: AtomicU64 = AtomicU64::new(0);
        Limiter {
            id: NEXT_ID.fetch_add(1, Ordering::Relaxed),
            clock: Clock::Elapsed(Instant::now()),
            ring: (0..=conf.horizon_secs)
                .map(|_| Bucket {
                    // u64::MAX: never a valid second, so unused buckets read as empty.
                    second: AtomicU64::new(u64::MAX),
                    counts: Estimator::new(conf.sketch_hashes, conf.sketch_slots),
                })
                .collect(),
            sketch: (conf.sketch_hashes, conf.sketch_slots),
            horizon: conf.horizon_secs,
            burst: conf.burst,
            default: table(None),
            categories: conf
                .categories
                .iter()
                .map(|(c, t)| (c.clone(), table(Some(t))))
                .collect(),
            compute_units: (!conf.compute_units.is_empty()).then(|| {
                plans
                    .iter()
                    .map(String::as_str)
                    .chain([ANONYMOUS])
                    .map(|p| conf.compute_units.get(p).copied().unwrap_or(f64::INFINITY))
                    .collect()
            }),
            seed: Default::default(),
            shared: None,
        }
    }

    /// New rates over this limiter's counts (a configuration reload): callers keep what
    /// they have used, unless the horizon or the sketch's size changed (then they start
    /// afresh); counts shared through the cluster stay shared.
    pub fn reconfigured(&self, conf: &LimitsConf, plans: &[String]) -> Limiter {
        let mut next = Limiter::new(conf, plans);
        if next.horizon == self.horizon && next.sketch == self.sketch {
            next.ring = self.ring.clone();
            next.seed = self.seed.clone();
            next.id = self.id;
            next.clock = self.clock.clone();
        }
        if let Some(shared) = &self.shared {
            next.share(shared.clone());
        }
        next
    }

    /// Count other instances' traffic too (the counts `cluster::sync` keeps fresh).
    pub fn share(&mut self, shared: Arc<SharedCounts>) {
        self.shared = Some(shared);
        self.clock = Clock::Wall;
    }

    /// Read time from `clock` (tests move it by hand: no test waits for a second boundary).
    #[cfg(test)]
    pub fn set_clock(&mut self, clock: ManualClock) {
        self.clock = Clock::Manual(clock);
    }

    /// The sustained rate of a caller in a category.
    pub fn limit_rps(&self, caller: &Caller, category: &str) -> f64 {
        let table = self.categories.get(category).unwrap_or(&self.default);
        table[rank_in(caller, table)]
    }

    /// Count one request and decide whether it is admitted.
    #[cfg(test)]
    pub fn check(&self, caller: &Caller, category: &str) -> Decision {
        self.check_weighted(caller, category, 1)
    }

    /// Count `weight` requests at once (the calls of a JSON-RPC batch) and decide.
    pub fn check_weighted(&self, caller: &Caller, category: &str, weight: u32) -> Decision {
        let limit = self.limit_rps(caller, category);
        let (now, frac) = self.now();
        self.check_at(caller, category, limit, weight.max(1) as isize, now, frac)
    }

    /// Count `units` compute units against the caller's plan; `None` when the plan is
    /// not limited by compute units.
    pub fn check_compute_units(&self, caller: &Caller, units: u64) -> Option<Decision> {
        let table = self.compute_units.as_ref()?;
        let limit = table[rank_in(caller, table)];
        if !limit.is_finite() || units == 0 {
            return None;
        }
        let (now, frac) = self.now();
        let units = units.min(isize::MAX as u64) as isize;
        Some(self.check_at(caller, COMPUTE_UNITS, limit, units, now, frac))
    }

    /// Count `weight` requests of one key against the cap its owner set for it.
    pub fn check_key_cap(&self, key_id: &str, max_rps: f64, weight: u32) -> Decision {
        let (now, frac) = self.now();
        let caller = Caller::Key(key_id);
        self.check_at(&caller, KEY_CAP, max_rps, weight.max(1) as isize, now, frac)
    }

    /// Give back what an admitted check counted, when a later check refused the same
    /// request (refusals never consume budget).
    pub fn refund(&self, caller: &Caller, category: &str, weight: u32) {
        let (now, _) = self.now();
        let weight = weight.max(1) as isize;
        self.current(now).incr(self.key(caller, category), -weight);
        if let Some(shared) = &self.shared {
            shared.note(
                stable_key(caller, category),
                || shared_name(caller, category),
                now,
                -(weight as i64),
            );
        }
    }

    /// The current second and how far into it we are.
    fn now(&self) -> (u64, f64) {
        let now = match &self.clock {
            Clock::Elapsed(start) => start.elapsed(),
            Clock::Wall => SystemTime::now()
                .duration_since(UNIX_EPOCH)
                .unwrap_or_default(),
            #[cfg(test)]
            Clock::Manual(clock) => clock.now(),
        };
        (now.as_secs(), now.subsec_nanos() as f64 / 1e9)
    }

    fn check_at(
        &self,
        caller: &Caller,
        category: &str,
        limit: f64,
        weight: isize,
        now: u64,
        frac: f64,
    ) -> Decision {
        let key = self.key(caller, category);
        let short_cap = self.burst * limit;
        let long_cap = limit * (self.horizon as f64 + self.burst - 1.0);

        // Counts per second, newest first: [now, now-1, ..., now-horizon].
        let mut counts = [0f64; 61];
        let counts = &mut counts[..=self.horizon as usize];
        self.past_counts(now, key, &mut counts[1..]);
        counts[0] = self.current(now).incr(key, weight) as f64;
        let stable = self.shared.as_ref().map(|shared| {
            let stable = stable_key(caller, category);
            shared.add_others(stable, now, counts);
            (shared, stable)
        });
        let oldest_share = 1.0 - frac;
        let short = counts[0] + counts[1] * oldest_share;
        let h = self.horizon as usize;
        let long = counts[..h].iter().sum::<f64>() + counts[h] * oldest_share;

        let admitted = short <= short_cap && long <= long_cap;
        if !admitted {
            // Refusals do not consume budget.
            self.current(now).incr(key, -weight);
        } else if let Some((shared, stable)) = stable {
            shared.note(stable, || shared_name(caller, category), now, weight as i64);
        }
        let remaining = (short_cap - short).min(long_cap - long).floor().max(0.0) as u64;
        let retry_after_sec = if admitted {
            0
        } else if long > long_cap {
            // Seconds until enough old buckets leave the window.
            let mut excess = long - long_cap;
            let mut wait = 0;
            for c in counts.iter().rev() {
                wait += 1;
                excess -= c;
                if excess <= 0.0 {
                    break;
                }
            }
            wait
        } else {
            1
        };
        Decision {
            admitted,
            limit_rps: limit,
            remaining,
            retry_after_sec,
        }
    }

    /// The bucket for second `now`, recycled from `horizon + 1` seconds ago if needed.
    fn current(&self, now: u64) -> &Estimator {
        let b = &self.ring[(now % self.ring.len() as u64) as usize];
        let seen = b.second.load(Ordering::Acquire);
        if seen != now
            && b.second
                .compare_exchange(seen, now, Ordering::AcqRel, Ordering::Acquire)
                .is_ok()
        {
            // A count racing with this reset may be lost: a rare under-count of one.
            b.counts.reset();
        }
        &b.counts
    }

    /// This instance's counts of `key` in the seconds before `now`, newest first. Those
    /// buckets are no longer counted into, so each thread reads them from the sketches
    /// once per key and second (a hash per sketch row and second: most of a check's
    /// cost) and keeps them until the second ends. A request counted by another thread
    /// just before the boundary may be missed for that second: an under-count of the
    /// few requests racing it, as with a bucket's reset.
    fn past_counts(&self, now: u64, key: u64, out: &mut [f64]) {
        PAST_COUNTS.with(|past| {
            let mut past = past.borrow_mut();
            if (past.limiter, past.second) != (self.id, now) {
                past.limiter = self.id;
                past.second = now;
                past.by_key.clear();
            }
            if let Some(kept) = past.by_key.get(&key).filter(|k| k.len() == out.len()) {
                out.copy_from_slice(kept);
                return;
            }
            for (back, c) in out.iter_mut().enumerate() {
                *c = self.count(now.wrapping_sub(back as u64 + 1), key);
            }
            if past.by_key.len() < PAST_KEYS {
                past.by_key.insert(key, out.into());
            }
        });
    }

    /// The count of `key` in second `second`, 0 if that bucket holds another second.
    fn count(&self, second: u64, key: u64) -> f64 {
        let b = &self.ring[(second % self.ring.len() as u64) as usize];
        if b.second.load(Ordering::Acquire) != second {
            return 0.0;
        }
        b.counts.get(key).max(0) as f64
    }

    /// One 64-bit key per (caller, category), so the sketches hash a `u64` per row.
    fn key(&self, caller: &Caller, category: &str) -> u64 {
        let mut h = self.seed.build_hasher();
        match caller {
            Caller::Tenant { id, .. } => {
                0u8.hash(&mut h);
                id.hash(&mut h);
            }
            Caller::Address(IpAddr::V4(a)) => {
                1u8.hash(&mut h);
                a.hash(&mut h);
            }
            Caller::Key(id) => {
                3u8.hash(&mut h);
                id.hash(&mut h);
            }
            Caller::Address(IpAddr::V6(a)) => match a.to_ipv4_mapped() {
                Some(v4) => {
                    1u8.hash(&mut h);
                    v4.hash(&mut h);
                }
                None => {
                    2u8.hash(&mut h);
                    a.segments()[..4].hash(&mut h);
                }
            },
        }
        category.hash(&mut h);
        h.finish()
    }
}

/// The rate category compute units are counted in.
pub const COMPUTE_UNITS: &str = "compute_units";

/// The rate category of a key's own cap (`max_rps`).
pub const KEY_CAP: &str = "key_cap";

/// A caller's row in a table by plan rank (anonymous last).
fn rank_in(caller: &Caller, table: &[f64]) -> usize {
    match caller {
        Caller::Tenant { rank, .. } => (*rank).min(table.len() - 1),
        Caller::Address(_) | Caller::Key(_) => table.len() - 1,
    }
}

/// A caller's key in every instance (see `shared::stable_key`).
fn stable_key(caller: &Caller, category: &str) -> u64 {
    match caller {
        Caller::Tenant { id, .. } => {
            shared::stable_key(&[b"t", id.as_bytes(), category.as_bytes()])
        }
        Caller::Key(id) => shared::stable_key(&[b"k", id.as_bytes(), category.as_bytes()]),
        Caller::Address(ip) => match address_bucket(ip) {
            IpAddr::V4(a) => shared::stable_key(&[b"4", &a.octets(), category.as_bytes()]),
            IpAddr::V6(a) => shared::stable_key(&[b"6", &a.octets(), category.as_bytes()]),
        },
    }
}

/// The caller in words, for the shared counters' names.
fn shared_name(caller: &Caller, category: &str) -> String {
    match caller {
        Caller::Tenant { id, .. } => format!("t:{id}:{category}"),
        Caller::Key(id) => format!("k:{id}:{category}"),
        Caller::Address(ip) => format!("a:{}:{category}", address_bucket(ip)),
    }
}

/// The address a limit applies to: IPv4 (also when mapped into IPv6) or an IPv6 /64.
fn address_bucket(ip: &IpAddr) -> IpAddr {
    match ip {
        IpAddr::V4(_) => *ip,
        IpAddr::V6(a) => match a.to_ipv4_mapped() {
            Some(v4) => IpAddr::V4(v4),
            None => {
                let s = a.segments();
                IpAddr::V6(std::net::Ipv6Addr::new(s[0], s[1], s[2], s[3], 0, 0, 0, 0))
            }
        },
    }
}

#[cfg(test)]
mod tests;

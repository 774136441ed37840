//! Caps on open streams that hold across instances: a place is a lease in Redis.
//!
//! Each capped owner (a user's MEV-Share stream, a key's WebSocket connections) is a
//! sorted set of leases scored by expiry, in Redis's own clock so instance clocks never
//! matter. Taking a place drops expired leases and adds one if fewer than the cap remain,
//! atomically (one script). A held lease is renewed every `RENEW_EVERY`; dropping it
//! removes it at once. A killed instance's places free themselves within `LEASE_TTL`.
//!
//! Redis away: the place is granted on this instance's own cap alone (fail-open, like the
//! rate limits), counted in `chainedge_cluster_redis_errors_total`. Such a lease is
//! provisional, and a held lease whose renewal Redis refuses (it lapsed while this
//! instance could not reach Redis, and may be another's now) is lost: a holder that must
//! be the only one (the transaction follower) asks `needs_retake` each round and takes
//! the place again, stepping down when another instance holds it.

use super::link::Link;
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::Arc;
use std::time::Duration;

/// How long a lease lives without renewal.
pub const LEASE_TTL: Duration = Duration::from_secs(15);
/// How often a held lease is renewed.
const RENEW_EVERY: Duration = Duration::from_secs(5);

/// KEYS[1] the owner's set; ARGV: member, cap, ttl ms. 1 when the place is taken.
const TAKE: &str = r#"
local t = redis.call('TIME')
local now = t[1] * 1000 + math.floor(t[2] / 1000)
redis.call('ZREMRANGEBYSCORE', KEYS[1], '-inf', now)
if redis.call('ZCARD', KEYS[1]) >= tonumber(ARGV[2]) then return 0 end
redis.call('ZADD', KEYS[1], now + tonumber(ARGV[3]), ARGV[1])
redis.call('PEXPIRE', KEYS[1], tonumber(ARGV[3]))
return 1
"#;

/// KEYS[1] the owner's set; ARGV: member, ttl ms. Pushes the member's expiry forward:
/// 1, or 0 when the member is gone or expired (the place may be another's by now).
const RENEW: &str = r#"
local t = redis.call('TIME')
local now = t[1] * 1000 + math.floor(t[2] / 1000)
local held = redis.call('ZSCORE', KEYS[1], ARGV[1])
if not held or tonumber(held) <= now then return 0 end
redis.call('ZADD', KEYS[1], now + tonumber(ARGV[2]), ARGV[1])
redis.call('PEXPIRE', KEYS[1], tonumber(ARGV[2]))
return 1
"#;

/// Where stream places are counted: Redis when the edge is clustered, else nowhere (the
/// callers' own per-instance caps are then the whole story).
pub struct Leases {
    link: Option<Arc<Link>>,
    /// Tells this instance's leases from others' (process id and start time).
    instance: String,
    next: AtomicU64,
}

/// The answer to "may this owner open one more stream?".
pub enum Place {
    Granted(Lease),
    /// Every place is held, on this instance or another.
    Full,
}

/// A held place: renewed while alive, given back when dropped.
pub struct Lease {
    held: Option<Held>,
    /// Granted while Redis could not be asked (on this instance's cap alone).
    provisional: bool,
}

struct Held {
    link: Arc<Link>,
    key: String,
    member: String,
    renewer: tokio::task::JoinHandle<()>,
    /// Redis refused a renewal: the lease lapsed and may be another's.
    lost: Arc<AtomicBool>,
}

impl Lease {
    /// Whether the holder should take its place again before acting as the only one:
    /// granted while Redis was away, or lost since.
    pub fn needs_retake(&self) -> bool {
        self.provisional
            || self
                .held
                .as_ref()
                .is_some_and(|h| h.lost.load(Ordering::Relaxed))
    }
}

impl Leases {
    pub fn new(link: Option<Arc<Link>>) -> Leases {
        let started = std::time::SystemTime::now()
            .duration_since(std::time::UNIX_EPOCH)
            .map(|d| d.as_nanos())
            .unwrap_or(0);
        Leases {
            link,
            instance: format!("{}-{started:x}", std::process::id()),
            next: AtomicU64::new(0),
        }
    }

    /// Take one of `cap` places of `scope` for `owner` across every instance.
    pub async fn take(&self, scope: &str, owner: &str, cap: usize) -> Place {
        let Some(link) = &self.link else {
            return Place::Granted(Lease {
                held: None,
                provisional: false,
            });
        };
        let key = format!("chainedge:lease:{scope}:{owner}");
        let member = format!(
            "{}:{}",
            self.instance,
            self.next.fetch_add(1, Ordering::Relaxed)
        );
        let ttl = LEASE_TTL.as_millis() as u64;
        let mut take = redis::cmd("EVAL");
        take.arg(TAKE)
            .arg(1)
            .arg(&key)
            .arg(&member)
            .arg(cap)
            .arg(ttl);
        match link.query::<i64>(&take).await {
            Some(0) => Place::Full,
            // Taken; or Redis away, and only this instance's cap applies.
            taken => {
                if taken.is_none() {
                    return Place::Granted(Lease {
                        held: None,
                        provisional: true,
                    });
                }
                let lost = Arc::new(AtomicBool::new(false));
                let renewer = tokio::spawn(renew(
                    link.clone(),
                    key.clone(),
                    member.clone(),
                    lost.clone(),
                ));
                Place::Granted(Lease {
                    held: Some(Held {
                        link: link.clone(),
                        key,
                        member,
                        renewer,
                        lost,
                    }),
                    provisional: false,
                })
            }
        }
    }
}

async fn renew(link: Arc<Link>, key: String, member: String, lost: Arc<AtomicBool>) {
    let ttl = LEASE_TTL.as_millis() as u64;
    loop {
        tokio::time::sleep(RENEW_EVERY).await;
        let mut renew = redis::cmd("EVAL");
        renew.arg(RENEW).arg(1).arg(&key).arg(&member).arg(ttl);
        // Redis away: retried next round, the stream goes on (fail-open). Redis saying the
        // lease is gone ends it: no renewal may bring back a place another holds.
        if link.query::<i64>(&renew).await == Some(0) {
            lost.store(true, Ordering::Relaxed);
            return;
        }
    }
}

impl Drop for Lease {
    fn drop(&mut self) {
        let Some(held) = self.held.take() else { return };
        held.renewer.abort();
        // Give the place back now rather than at expiry (best effort: the TTL is the net).
        if let Ok(rt) = tokio::runtime::Handle::try_current() {
            rt.spawn(async move {
                let mut rem = redis::cmd("ZREM");
                rem.arg(&held.key).arg(&held.member);
                let _: Option<i64> = held.link.query(&rem).await;
            });
        }
    }
}

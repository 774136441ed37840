//! Protocol-aware background health checks.
//!
//! Every `interval`, all hosts of all pools are probed in parallel with their own
//! protocol (EL `eth_blockNumber` + `eth_syncing`, CL `/eth/v1/node/syncing`, Solana
//! `getHealth` + `getSlot`, heimdall `/status`, relays `/eth/v1/builder/status`, others
//! any HTTP answer below 500). After the round each host is classified exactly once, in
//! this order:
//!   1. quarantined: `quarantine_after` consecutive failed checks, or never a good check.
//!      A failed check is an error, a timeout, or a zero height; it never overwrites the
//!      host's last good head.
//!   2. degraded: a failure short of quarantine, syncing, more than `max_lag` behind the
//!      pool head (the head a strict majority of this round's hosts reached, `tip`), or
//!      slower than `slow_ms`.
//!   3. available.

mod probe;

use super::{Host, Pool, Pools};
use crate::config::HealthConf;
use crate::observe::metrics;
use crate::upstream::UpstreamClient;
use async_trait::async_trait;
use pingora_core::server::ShutdownWatch;
use pingora_core::services::background::BackgroundService;
use pingora_core::services::ServiceReadyNotifier;
pub use probe::{probe, Observation, ProbeKind};
use std::sync::atomic::{AtomicBool, AtomicU32, AtomicU64, AtomicU8, Ordering};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum HealthState {
    Available = 0,
    Degraded = 1,
    Quarantined = 2,
}

impl HealthState {
    fn from_u8(v: u8) -> HealthState {
        match v {
            0 => HealthState::Available,
            1 => HealthState::Degraded,
            _ => HealthState::Quarantined,
        }
    }

    pub fn as_str(self) -> &'static str {
        match self {
            HealthState::Available => "available",
            HealthState::Degraded => "degraded",
            HealthState::Quarantined => "quarantined",
        }
    }
}

/// What the checker knows about one host; read lock-free on the request path.
pub struct HostHealth {
    state: AtomicU8,
    head: AtomicU64,
    lag: AtomicU64,
    latency_us: AtomicU64,
    failures: AtomicU32,
    ever_ok: AtomicBool,
    checked_at_ms: AtomicU64,
    pub(super) last_error: Mutex<Option<String>>,
}

impl Default for HostHealth {
    fn default() -> Self {
        HostHealth {
            // Not available until its first good check.
            state: AtomicU8::new(HealthState::Quarantined as u8),
            head: AtomicU64::new(0),
            lag: AtomicU64::new(0),
            latency_us: AtomicU64::new(0),
            failures: AtomicU32::new(0),
            ever_ok: AtomicBool::new(false),
            checked_at_ms: AtomicU64::new(0),
            last_error: Mutex::new(Some("awaiting first health check".into())),
        }
    }
}

impl HostHealth {
    /// A host as after a good check (unit tests).
    #[cfg(test)]
    pub(crate) fn available() -> Self {
        let h = HostHealth::default();
        h.state
            .store(HealthState::Available as u8, Ordering::Relaxed);
        h
    }

    pub fn state(&self) -> HealthState {
        HealthState::from_u8(self.state.load(Ordering::Relaxed))
    }
    pub fn head(&self) -> u64 {
        self.head.load(Ordering::Relaxed)
    }
    pub fn lag(&self) -> u64 {
        self.lag.load(Ordering::Relaxed)
    }
    pub fn latency_ms(&self) -> f64 {
        self.latency_us.load(Ordering::Relaxed) as f64 / 1000.0
    }
    pub fn consecutive_failures(&self) -> u32 {
        self.failures.load(Ordering::Relaxed)
    }
    /// Unix milliseconds of the last check, 0 before the first.
    pub fn checked_at_ms(&self) -> u64 {
        self.checked_at_ms.load(Ordering::Relaxed)
    }
}
/// The classification rules, separate from I/O so they can be tested alone.
pub struct Rules {
    pub quarantine_after: u32,
    pub max_lag: u64,
    pub slow: Duration,
}

impl Rules {
    pub fn classify(
        &self,
        failures: u32,
        ever_ok: bool,
        obs: Option<&Observation>,
        latency: Duration,
        lag: u64,
    ) -> HealthState {
        if failures >= self.quarantine_after || !ever_ok {
            return HealthState::Quarantined;
        }
        match obs {
            None => HealthState::Degraded,
            Some(o) if o.syncing || lag > self.max_lag || latency > self.slow => {
                HealthState::Degraded
            }
            Some(_) => HealthState::Available,
        }
    }
}

/// Probe a whole pool in parallel, then classify each host once.
pub async fn check_pool(client: &UpstreamClient, pool: &Pool, conf: &HealthConf) {
    let timeout = Duration::from_millis(conf.timeout_ms);
    let results = futures_join(pool.hosts.iter().map(|h| async move {
        let started = Instant::now();
        let r = probe(client, h, timeout).await;
        // A zero height is a broken answer, never a head.
        let r = r.and_then(|o| match o.head {
            Some(0) => Err("reported height 0".to_string()),
            _ => Ok(o),
        });
        (r, started.elapsed())
    }))
    .await;

    let now_ms = crate::clock::now_ms() as u64;
    // Heads first: the pool head is the majority's head of this round.
    for (h, (r, latency)) in pool.hosts.iter().zip(&results) {
        record_probe(h, r, *latency, now_ms);
    }
    let heads = pool.hosts.iter().zip(&results);
    let ok_heads = heads
        .filter(|(_, (r, _))| r.is_ok())
        .map(|(h, _)| h.health.head());
    let family = pool.hosts.first().map_or("", |h| h.family.as_str());
    let max_lag = pool
        .max_lag
        .unwrap_or_else(|| ProbeKind::for_family(family).default_max_lag());
    let pool_head = super::tip::serve(pool, ok_heads.collect(), max_lag);

    for (h, (r, latency)) in pool.hosts.iter().zip(&results) {
        let rules = Rules {
            quarantine_after: conf.quarantine_after,
            max_lag: pool
                .max_lag
                .unwrap_or_else(|| ProbeKind::for_family(&h.family).default_max_lag()),
            slow: Duration::from_millis(conf.slow_ms),
        };
        let hh = &h.health;
        let lag = match r {
            Ok(Observation {
                head: Some(head), ..
            }) => pool_head.saturating_sub(*head),
            _ => pool_head.saturating_sub(hh.head()),
        };
        let state = rules.classify(
            hh.consecutive_failures(),
            hh.ever_ok.load(Ordering::Relaxed),
            r.as_ref().ok(),
            *latency,
            lag,
        );
        hh.lag.store(lag, Ordering::Relaxed);
        let before = hh.state.swap(state as u8, Ordering::Relaxed);
        if before != state as u8 {
            // Operators read a host's moves in the log; the reason is the probe's.
            let why = match r {
                Err(e) => e.clone(),
                Ok(_) => format!("lag {lag}, probe {} ms", latency.as_millis()),
            };
            log::info!(
                "pool {} host {}: {} -> {} ({why})",
                pool.name,
                h.id,
                HealthState::from_u8(before).as_str(),
                state.as_str()
            );
        }
        metrics::host_health(&pool.name, &h.id, state as u8, hh.head(), lag, *latency);
    }
}

/// One host's probe in its health record: when, how long, and its head or its error.
fn record_probe(h: &Host, r: &Result<Observation, String>, latency: Duration, now_ms: u64) {
    let hh = &h.health;
    hh.checked_at_ms.store(now_ms, Ordering::Relaxed);
    hh.latency_us
        .store(latency.as_micros() as u64, Ordering::Relaxed);
    match r {
        Ok(o) => {
            hh.failures.store(0, Ordering::Relaxed);
            hh.ever_ok.store(true, Ordering::Relaxed);
            if let Some(head) = o.head {
                hh.head.store(head, Ordering::Relaxed);
            }
            if let Ok(mut e) = hh.last_error.lock() {
                if e.as_deref() == Some("awaiting first health check") {
                    *e = None;
                }
            }
        }
        Err(e) => {
            hh.failures.fetch_add(1, Ordering::Relaxed);
            if let Ok(mut last) = hh.last_error.lock() {
                *last = Some(format!("health check: {e}"));
            }
        }
    }
}

/// Run `futs` concurrently on this task and collect their outputs in order
/// (`join_all` without pulling in the futures crate).
async fn futures_join<F: std::future::Future>(futs: impl Iterator<Item = F>) -> Vec<F::Output> {
    let mut pending: Vec<_> = futs.map(|f| Some(Box::pin(f))).collect();
    let mut results: Vec<Option<F::Output>> = pending.iter().map(|_| None).collect();
    std::future::poll_fn(|cx| {
        let mut done = true;
        for (slot, result) in pending.iter_mut().zip(results.iter_mut()) {
            if let Some(f) = slot {
                match f.as_mut().poll(cx) {
                    std::task::Poll::Ready(v) => {
                        *result = Some(v);
                        *slot = None;
                    }
                    std::task::Poll::Pending => done = false,
                }
            }
        }
        if done {
            std::task::Poll::Ready(())
        } else {
            std::task::Poll::Pending
        }
    })
    .await;
    results.into_iter().flatten().collect()
}

/// One round over every pool, all pools in parallel.
pub async fn round(client: &UpstreamClient, pools: &Pools, conf: &HealthConf) {
    futures_join(pools.all().map(|p| check_pool(client, p, conf))).await;
}

/// The background service: a first round, then "ready" (the edge waits for it), then a
/// round every `interval` until shutdown, each over the pools as last (re)loaded.
pub struct HealthChecker {
    pub pools: Arc<arc_swap::ArcSwap<Pools>>,
    pub conf: HealthConf,
}

#[async_trait]
impl BackgroundService for HealthChecker {
    async fn start_with_ready_notifier(
        &self,
        mut shutdown: ShutdownWatch,
        ready: ServiceReadyNotifier,
    ) {
        // The client lives on this service's runtime, so its pooled connections do too.
        let client = UpstreamClient::default();
        round(&client, &self.pools.load_full(), &self.conf).await;
        ready.notify_ready();
        let mut ticker = tokio::time::interval(Duration::from_millis(self.conf.interval_ms));
        ticker.set_missed_tick_behavior(tokio::time::MissedTickBehavior::Delay);
        ticker.tick().await;
        loop {
            tokio::select! {
                _ = shutdown.changed() => return,
                _ = ticker.tick() => round(&client, &self.pools.load_full(), &self.conf).await,
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn rules() -> Rules {
        Rules {
            quarantine_after: 2,
            max_lag: 5,
            slow: Duration::from_millis(1500),
        }
    }

    fn ok(head: u64) -> Observation {
        Observation {
            head: Some(head),
            syncing: false,
        }
    }

    #[test]
    fn quarantine_before_degraded_before_available() {
        let r = rules();
        let fast = Duration::from_millis(5);
        // Never a good check: quarantined, whatever else.
        assert_eq!(
            r.classify(0, false, None, fast, 0),
            HealthState::Quarantined
        );
        // Consecutive failures reach the threshold: quarantined even if it was lagging.
        assert_eq!(
            r.classify(2, true, None, fast, 100),
            HealthState::Quarantined
        );
        // One failure short of quarantine: degraded.
        assert_eq!(r.classify(1, true, None, fast, 0), HealthState::Degraded);
        // Lagging, syncing or slow: degraded.
        assert_eq!(
            r.classify(0, true, Some(&ok(10)), fast, 6),
            HealthState::Degraded
        );
        let syncing = Observation {
            head: Some(10),
            syncing: true,
        };
        assert_eq!(
            r.classify(0, true, Some(&syncing), fast, 0),
            HealthState::Degraded
        );
        assert_eq!(
            r.classify(0, true, Some(&ok(10)), Duration::from_secs(2), 0),
            HealthState::Degraded
        );
        // Within the lag bound and fast: available.
        assert_eq!(
            r.classify(0, true, Some(&ok(10)), fast, 5),
            HealthState::Available
        );
    }

    #[test]
    fn probe_kind_by_family() {
        assert_eq!(ProbeKind::for_family("el-geth"), ProbeKind::Execution);
        assert_eq!(ProbeKind::for_family("bor"), ProbeKind::Execution);
        assert_eq!(ProbeKind::for_family("cl-teku"), ProbeKind::Beacon);
        assert_eq!(ProbeKind::for_family("solana"), ProbeKind::Solana);
        assert_eq!(ProbeKind::for_family("heimdall"), ProbeKind::Heimdall);
        assert_eq!(ProbeKind::for_family("mev-share"), ProbeKind::AnyHttp);
    }
}

//! The series every request touches (requests and latency by route and status, node
//! attempts, cache lookups), counted through per-thread handles: a request costs a
//! lookup in a short per-thread list and an atomic add, not label hashing under the
//! registry's lock.

use super::{CACHE_LOOKUPS, LATENCY, REQUESTS, UPSTREAM_ATTEMPTS, UPSTREAM_FAILURES};

/// Per-thread handles of the per-request series, so a request costs a map lookup and
/// two atomic adds instead of label hashing under the registry's lock. Bounded by the
/// route table (and `unmatched`) times the status labels below.
struct RouteSeries {
    latency: prometheus::Histogram,
    by_status: Vec<(&'static str, prometheus::IntCounter)>,
}

thread_local! {
    static ROUTE_SERIES: std::cell::RefCell<foldhash::HashMap<String, RouteSeries>> =
        std::cell::RefCell::new(foldhash::HashMap::default());
    static HOST_ATTEMPTS: std::cell::RefCell<Vec<(String, String, prometheus::IntCounter)>> =
        const { std::cell::RefCell::new(Vec::new()) };
    static CACHE_LOOKUP_SERIES: std::cell::RefCell<Vec<CacheLookupSeries>> =
        const { std::cell::RefCell::new(Vec::new()) };
}

/// One `chainedge_cache_lookups_total` series, kept per thread: every read is counted,
/// and a labelled lookup hashes its labels under the vector's lock.
struct CacheLookupSeries {
    outcome: &'static str,
    reason: &'static str,
    pool: String,
    counter: prometheus::IntCounter,
}

pub fn request_done(route: &str, status: u16, seconds: f64) {
    let label = status_label(status);
    ROUTE_SERIES.with(|series| {
        let mut series = series.borrow_mut();
        // One hash per request once the route's series exist.
        let s = match series.get_mut(route) {
            Some(s) => s,
            None => series.entry(route.to_string()).or_insert(RouteSeries {
                latency: LATENCY.with_label_values(&[route]),
                by_status: Vec::new(),
            }),
        };
        s.latency.observe(seconds);
        match s.by_status.iter().find(|(l, _)| *l == label) {
            Some((_, c)) => c.inc(),
            None => {
                let c = REQUESTS.with_label_values(&[route, label]);
                c.inc();
                s.by_status.push((label, c));
            }
        }
    });
}

/// Status label without a per-request allocation for the common codes.
pub(super) fn status_label(status: u16) -> &'static str {
    match status {
        200 => "200",
        204 => "204",
        400 => "400",
        401 => "401",
        403 => "403",
        404 => "404",
        405 => "405",
        413 => "413",
        431 => "431",
        426 => "426",
        429 => "429",
        500 => "500",
        501 => "501",
        502 => "502",
        503 => "503",
        504 => "504",
        0 => "0",
        _ => "other",
    }
}

pub fn upstream_attempt(pool: &str, host: &str) {
    HOST_ATTEMPTS.with(|counters| {
        let mut counters = counters.borrow_mut();
        // Pools and hosts are fixed at start-up, so the list stays short.
        match counters.iter().find(|(p, h, _)| p == pool && h == host) {
            Some((_, _, c)) => c.inc(),
            None => {
                let c = UPSTREAM_ATTEMPTS.with_label_values(&[pool, host]);
                c.inc();
                counters.push((pool.to_string(), host.to_string(), c));
            }
        }
    });
}

/// Calls sent to a host so far, and how many of them failed (every reason).
pub fn upstream_counts(pool: &str, host: &str) -> (u64, u64) {
    use prometheus::core::Collector;
    let attempts = UPSTREAM_ATTEMPTS.with_label_values(&[pool, host]).get();
    let labelled = |m: &prometheus::proto::Metric, name: &str, value: &str| {
        m.get_label()
            .iter()
            .any(|l| l.get_name() == name && l.get_value() == value)
    };
    let failures = UPSTREAM_FAILURES
        .collect()
        .iter()
        .flat_map(|family| family.get_metric())
        .filter(|m| labelled(m, "pool", pool) && labelled(m, "host", host))
        .map(|m| m.get_counter().get_value() as u64)
        .sum();
    (attempts, failures)
}

pub fn cache_lookup(pool: &str, outcome: &'static str, reason: &'static str) {
    CACHE_LOOKUP_SERIES.with(|series| {
        let mut series = series.borrow_mut();
        // Outcomes and reasons are a fixed set of literals and pools are fixed at start:
        // the list stays short.
        let found = series
            .iter()
            .find(|s| s.outcome == outcome && s.reason == reason && s.pool == pool);
        match found {
            Some(s) => s.counter.inc(),
            None => {
                let counter = CACHE_LOOKUPS.with_label_values(&[pool, outcome, reason]);
                counter.inc();
                series.push(CacheLookupSeries {
                    outcome,
                    reason,
                    pool: pool.to_string(),
                    counter,
                });
            }
        }
    });
}

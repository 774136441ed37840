//! The gateway's own metrics, served on a separate listener (`metrics.listen`).

use async_trait::async_trait;
use once_cell::sync::Lazy;
use pingora_core::apps::http_app::ServeHttp;
use pingora_core::protocols::http::ServerSession;
use prometheus::{
    Encoder, GaugeVec, HistogramOpts, HistogramVec, IntCounter, IntCounterVec, IntGaugeVec, Opts,
    Registry, TextEncoder,
};

mod background;
mod per_request;
mod trust;
mod txs;
pub use background::*;
pub use per_request::*;
pub use trust::*;
pub use txs::*;

pub static REGISTRY: Lazy<Registry> = Lazy::new(Registry::new);

fn register<C: prometheus::core::Collector + Clone + 'static>(c: C) -> C {
    // Registration only fails on duplicate names, which would be a programming error.
    REGISTRY
        .register(Box::new(c.clone()))
        .expect("metric registered once");
    c
}

pub static REQUESTS: Lazy<IntCounterVec> = Lazy::new(|| {
    register(
        IntCounterVec::new(
            Opts::new(
                "chainedge_requests_total",
                "Requests answered, by route and status",
            ),
            &["route", "status"],
        )
        .unwrap(),
    )
});

pub static LATENCY: Lazy<HistogramVec> = Lazy::new(|| {
    register(
        HistogramVec::new(
            HistogramOpts::new(
                "chainedge_request_duration_seconds",
                "Time from request head to last byte, by route",
            )
            .buckets(vec![
                0.0005, 0.001, 0.0025, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1.0, 2.5, 5.0,
                10.0,
            ]),
            &["route"],
        )
        .unwrap(),
    )
});

pub static UPSTREAM_ATTEMPTS: Lazy<IntCounterVec> = Lazy::new(|| {
    register(
        IntCounterVec::new(
            Opts::new(
                "chainedge_upstream_attempts_total",
                "Calls sent to upstream hosts",
            ),
            &["pool", "host"],
        )
        .unwrap(),
    )
});

pub static UPSTREAM_FAILURES: Lazy<IntCounterVec> = Lazy::new(|| {
    register(
        IntCounterVec::new(
            Opts::new(
                "chainedge_upstream_failures_total",
                "Upstream calls that failed, by reason",
            ),
            &["pool", "host", "reason"],
        )
        .unwrap(),
    )
});

pub static HEDGES: Lazy<IntCounterVec> = Lazy::new(|| {
    register(
        IntCounterVec::new(
            Opts::new(
                "chainedge_hedged_reads_total",
                "Reads given a second host after the hedge delay, by which attempt answered",
            ),
            &["pool", "won_by"],
        )
        .unwrap(),
    )
});

pub static ADMIN_REFUSED: Lazy<IntCounterVec> = Lazy::new(|| {
    register(
        IntCounterVec::new(
            Opts::new(
                "chainedge_admin_refused_total",
                "Admin requests refused, by reason (wrong_token: an X-Admin-Token that is not the configured one)",
            ),
            &["reason"],
        )
        .unwrap(),
    )
});

pub static COALESCED: Lazy<IntCounter> = Lazy::new(|| {
    register(
        IntCounter::new(
            "chainedge_coalesced_reads_total",
            "Reads answered by an identical read already in flight (no upstream call of their own)",
        )
        .unwrap(),
    )
});

pub static CACHE_LOOKUPS: Lazy<IntCounterVec> = Lazy::new(|| {
    register(
        IntCounterVec::new(
            Opts::new(
                "chainedge_cache_lookups_total",
                "Response cache lookups by outcome (hit, miss, bypass) and reason",
            ),
            &["pool", "outcome", "reason"],
        )
        .unwrap(),
    )
});

pub static CACHE_REORGS: Lazy<IntCounterVec> = Lazy::new(|| {
    register(
        IntCounterVec::new(
            Opts::new(
                "chainedge_cache_reorgs_total",
                "Reorgs seen by the cache tracker (answers not final dropped)",
            ),
            &["pool"],
        )
        .unwrap(),
    )
});

pub static CACHE_FINALIZED: Lazy<IntGaugeVec> = Lazy::new(|| {
    register(
        IntGaugeVec::new(
            Opts::new(
                "chainedge_cache_finalized_block",
                "The finalized block the cache tracker last read",
            ),
            &["pool"],
        )
        .unwrap(),
    )
});

pub static CACHE_BYTES: Lazy<prometheus::IntGauge> = Lazy::new(|| {
    register(
        prometheus::IntGauge::new("chainedge_cache_bytes", "Bytes of answers the cache keeps")
            .unwrap(),
    )
});

pub static CONNECTIONS_REFUSED: Lazy<IntCounterVec> = Lazy::new(|| {
    register(
        IntCounterVec::new(
            Opts::new(
                "chainedge_connections_refused_total",
                "Client connections closed at accept because a cap was reached, by cap",
            ),
            &["cap"],
        )
        .unwrap(),
    )
});

pub static REQUESTS_REFUSED: Lazy<IntCounterVec> = Lazy::new(|| {
    register(
        IntCounterVec::new(
            Opts::new(
                "chainedge_malformed_requests_total",
                "Requests refused for their framing before any route was looked at, by status",
            ),
            &["status"],
        )
        .unwrap(),
    )
});

/// A connection was closed at accept: `cap` is `listener` or `client`.
pub fn connection_refused(cap: &str) {
    CONNECTIONS_REFUSED.with_label_values(&[cap]).inc();
}

/// A request head was refused for its framing (400, 431, 501).
pub fn malformed_request(status: u16) {
    REQUESTS_REFUSED
        .with_label_values(&[status_label(status)])
        .inc();
}

fn gauge(name: &str, help: &str) -> IntGaugeVec {
    register(IntGaugeVec::new(Opts::new(name, help), &["pool", "host"]).unwrap())
}

pub static HOST_STATE: Lazy<IntGaugeVec> = Lazy::new(|| {
    gauge(
        "chainedge_host_state",
        "Health state per host: 0 available, 1 degraded, 2 quarantined",
    )
});
pub static HOST_HEAD: Lazy<IntGaugeVec> = Lazy::new(|| {
    gauge(
        "chainedge_host_head",
        "Last good head (block or slot) per host",
    )
});
pub static HOST_LAG: Lazy<IntGaugeVec> = Lazy::new(|| {
    gauge(
        "chainedge_host_lag",
        "Blocks or slots behind the pool head per host",
    )
});
pub static HOST_CHECK_LATENCY: Lazy<GaugeVec> = Lazy::new(|| {
    register(
        GaugeVec::new(
            Opts::new(
                "chainedge_host_check_latency_seconds",
                "Duration of the last health check per host",
            ),
            &["pool", "host"],
        )
        .unwrap(),
    )
});

pub static ACCESS_LOG_DROPPED: Lazy<prometheus::IntCounter> = Lazy::new(|| {
    register(
        prometheus::IntCounter::new(
            "chainedge_access_log_dropped_total",
            "Access log lines dropped because stdout could not keep up",
        )
        .unwrap(),
    )
});

pub static STREAMS_OPEN: Lazy<prometheus::IntGauge> = Lazy::new(|| {
    register(prometheus::IntGauge::new("chainedge_streams_open", "Open MEV-Share streams").unwrap())
});

pub static WS_SESSIONS: Lazy<prometheus::IntGauge> = Lazy::new(|| {
    register(
        prometheus::IntGauge::new("chainedge_ws_sessions", "Open WebSocket JSON-RPC sessions")
            .unwrap(),
    )
});

pub static UPSTREAM_SUBSCRIPTIONS: Lazy<IntGaugeVec> = Lazy::new(|| {
    register(
        IntGaugeVec::new(
            prometheus::Opts::new(
                "chainedge_upstream_subscriptions",
                "Node subscriptions held for clients, one per (pool, kind, parameters)",
            ),
            &["pool", "kind"],
        )
        .unwrap(),
    )
});

pub static SUBSCRIPTION_CLIENTS: Lazy<IntGaugeVec> = Lazy::new(|| {
    register(
        IntGaugeVec::new(
            prometheus::Opts::new(
                "chainedge_subscription_clients",
                "Client subscriptions served from the shared node subscriptions",
            ),
            &["pool", "kind"],
        )
        .unwrap(),
    )
});

pub static RESUBSCRIPTIONS: Lazy<IntCounterVec> = Lazy::new(|| {
    register(
        IntCounterVec::new(
            prometheus::Opts::new(
                "chainedge_resubscriptions_total",
                "Node subscriptions moved to another node (node failed or lagged)",
            ),
            &["pool", "kind", "reason"],
        )
        .unwrap(),
    )
});

pub static SSE_SLOW_CONSUMERS: Lazy<prometheus::IntCounter> = Lazy::new(|| {
    register(
        prometheus::IntCounter::new(
            "chainedge_sse_slow_consumers_total",
            "Event-stream clients closed because they fell behind the shared stream",
        )
        .unwrap(),
    )
});

pub static SLOW_CONSUMERS: Lazy<prometheus::IntCounter> = Lazy::new(|| {
    register(
        prometheus::IntCounter::new(
            "chainedge_ws_slow_consumers_total",
            "WebSocket clients closed because they fell behind their send buffer",
        )
        .unwrap(),
    )
});

/// Record one host's classification after a health round.
pub fn host_health(
    pool: &str,
    host: &str,
    state: u8,
    head: u64,
    lag: u64,
    latency: std::time::Duration,
) {
    let l = [pool, host];
    HOST_STATE.with_label_values(&l).set(state as i64);
    HOST_HEAD.with_label_values(&l).set(head as i64);
    HOST_LAG.with_label_values(&l).set(lag as i64);
    HOST_CHECK_LATENCY
        .with_label_values(&l)
        .set(latency.as_secs_f64());
}

/// Touch every metric so the families appear (with HELP/TYPE) before the first request.
pub fn init() {
    Lazy::force(&REQUESTS);
    Lazy::force(&LATENCY);
    Lazy::force(&UPSTREAM_ATTEMPTS);
    Lazy::force(&UPSTREAM_FAILURES);
    Lazy::force(&HEDGES);
    Lazy::force(&COALESCED);
    Lazy::force(&CACHE_LOOKUPS);
    Lazy::force(&CACHE_REORGS);
    Lazy::force(&CACHE_FINALIZED);
    Lazy::force(&CACHE_BYTES);
    Lazy::force(&HOST_STATE);
    Lazy::force(&HOST_HEAD);
    Lazy::force(&HOST_LAG);
    Lazy::force(&HOST_CHECK_LATENCY);
    Lazy::force(&STREAMS_OPEN);
    Lazy::force(&WS_SESSIONS);
    Lazy::force(&UPSTREAM_SUBSCRIPTIONS);
    Lazy::force(&SUBSCRIPTION_CLIENTS);
    Lazy::force(&RESUBSCRIPTIONS);
    Lazy::force(&SLOW_CONSUMERS);
    Lazy::force(&ACCESS_LOG_DROPPED);
    Lazy::force(&CONNECTIONS_REFUSED);
    Lazy::force(&REQUESTS_REFUSED);
    background::init();
}

pub fn cache_reorg(pool: &str) {
    CACHE_REORGS.with_label_values(&[pool]).inc();
}

pub fn cache_finalized(pool: &str, block: u64) {
    CACHE_FINALIZED
        .with_label_values(&[pool])
        .set(block.min(i64::MAX as u64) as i64);
}

pub fn cache_bytes(bytes: usize) {
    CACHE_BYTES.set(bytes.min(i64::MAX as usize) as i64);
}

pub fn coalesced_read() {
    COALESCED.inc();
}

/// A hedged read ended: `won_by` is `first` (the host tried first answered after all),
/// `other` (a later host did), or `none` (no answer worth returning).
pub fn hedged_read(pool: &str, won_by: &str) {
    HEDGES.with_label_values(&[pool, won_by]).inc();
}

pub fn upstream_failure(pool: &str, host: &str, reason: &str) {
    UPSTREAM_FAILURES
        .with_label_values(&[pool, host, reason])
        .inc();
}

pub fn render() -> Vec<u8> {
    let mut out = Vec::new();
    let _ = TextEncoder::new().encode(&REGISTRY.gather(), &mut out);
    out
}

/// `GET /metrics` on the metrics listener; everything else is 404.
pub struct MetricsApp;

#[async_trait]
impl ServeHttp for MetricsApp {
    async fn response(&self, session: &mut ServerSession) -> http::Response<Vec<u8>> {
        let path = session.req_header().uri.path();
        let method = session.req_header().method.as_str();
        let draining = crate::shutdown::server().is_some_and(|s| *s.borrow());
        let (status, ctype, body) = if path == "/healthz" {
            // For a load balancer: take this instance out of rotation while it drains
            // (shutdown or upgrade under way), before its listeners close.
            if draining {
                (
                    503,
                    "application/json",
                    br#"{"status":"draining"}"#.to_vec(),
                )
            } else {
                (200, "application/json", br#"{"status":"serving"}"#.to_vec())
            }
        } else if path != "/metrics" {
            (
                404,
                "application/json",
                br#"{"error":"route_not_found","code":404}"#.to_vec(),
            )
        } else if method != "GET" && method != "HEAD" {
            (
                405,
                "application/json",
                br#"{"error":"method_not_allowed","code":405}"#.to_vec(),
            )
        } else {
            (200, "text/plain; version=0.0.4", render())
        };
        http::Response::builder()
            .status(status)
            .header("Content-Type", ctype)
            .header("Content-Length", body.len())
            .header("Server", "chainedge")
            .body(body)
            .unwrap_or_default()
    }
}

//! Metrics of what runs beside the request path: background capture (every producer,
//! and the indexer and mempool watchers in detail), per-key usage and its journal, the
//! cluster link, the store's availability, configuration reloads.

use super::register;
use once_cell::sync::Lazy;
use prometheus::{GaugeVec, IntCounter, IntCounterVec, IntGaugeVec, Opts};

pub static CAPTURE_ROUNDS: Lazy<IntCounterVec> = Lazy::new(|| {
    register(
        IntCounterVec::new(
            Opts::new(
                "chainedge_capture_rounds_total",
                "Rounds of background capture, by producer and outcome (ok, failed)",
            ),
            &["producer", "outcome"],
        )
        .unwrap(),
    )
});

pub static CAPTURE_LAST_SUCCESS: Lazy<GaugeVec> = Lazy::new(|| {
    register(
        GaugeVec::new(
            Opts::new(
                "chainedge_capture_last_success_timestamp_seconds",
                "When a background producer last completed a round (Unix seconds)",
            ),
            &["producer"],
        )
        .unwrap(),
    )
});

pub static CAPTURE_RUNNING: Lazy<IntGaugeVec> = Lazy::new(|| {
    register(
        IntGaugeVec::new(
            Opts::new(
                "chainedge_capture_running",
                "1 while a background producer runs",
            ),
            &["producer"],
        )
        .unwrap(),
    )
});

static CLUSTER_REDIS_UP: Lazy<prometheus::IntGauge> = Lazy::new(|| {
    register(
        prometheus::IntGauge::new(
            "chainedge_cluster_redis_up",
            "1 while Redis answers (limits shared across instances); 0: each instance limits alone",
        )
        .unwrap(),
    )
});

static CLUSTER_REDIS_ERRORS: Lazy<prometheus::IntCounter> = Lazy::new(|| {
    register(
        prometheus::IntCounter::new(
            "chainedge_cluster_redis_errors_total",
            "Redis calls that failed (a sync round or a reconnection)",
        )
        .unwrap(),
    )
});

pub fn cluster_redis_up(up: bool) {
    CLUSTER_REDIS_UP.set(up as i64);
}

pub fn cluster_redis_error() {
    CLUSTER_REDIS_ERRORS.inc();
}

fn chain_gauge(name: &str, help: &str) -> IntGaugeVec {
    register(IntGaugeVec::new(Opts::new(name, help), &["chain"]).unwrap())
}

fn chain_counter(name: &str, help: &str) -> IntCounterVec {
    register(IntCounterVec::new(Opts::new(name, help), &["chain"]).unwrap())
}

/// The chain index (`src/capture/index/`), per chain.
pub static INDEX_HEAD: Lazy<IntGaugeVec> =
    Lazy::new(|| chain_gauge("chainedge_index_head", "Last block committed to the index"));
pub static INDEX_LAG: Lazy<IntGaugeVec> = Lazy::new(|| {
    chain_gauge(
        "chainedge_index_lag_blocks",
        "Blocks between the pool's head and the indexed head",
    )
});
pub static INDEX_BLOCKS: Lazy<IntCounterVec> = Lazy::new(|| {
    chain_counter(
        "chainedge_index_blocks_total",
        "Blocks committed to the index (rate: blocks/s)",
    )
});
pub static INDEX_HEADER_ONLY: Lazy<IntCounterVec> = Lazy::new(|| {
    chain_counter(
        "chainedge_index_header_only_blocks_total",
        "Empty blocks read from their headers alone (no body, no receipts fetched)",
    )
});
pub static INDEX_TRANSFERS: Lazy<IntCounterVec> = Lazy::new(|| {
    chain_counter(
        "chainedge_index_transfers_total",
        "Transfers committed to the index",
    )
});
pub static INDEX_REORGS: Lazy<IntCounterVec> =
    Lazy::new(|| chain_counter("chainedge_index_reorgs_total", "Reorgs rolled back"));
pub static INDEX_ROLLBACK_DEPTH: Lazy<IntGaugeVec> = Lazy::new(|| {
    chain_gauge(
        "chainedge_index_rollback_depth",
        "Blocks undone by the last reorg rolled back",
    )
});
pub static INDEX_ERRORS: Lazy<IntCounterVec> = Lazy::new(|| {
    chain_counter(
        "chainedge_index_errors_total",
        "Indexing steps that failed (node or store); the step is retried",
    )
});

pub static MEMPOOL_PENDING: Lazy<IntGaugeVec> = Lazy::new(|| {
    chain_gauge(
        "chainedge_mempool_pending",
        "Pending transactions the mempool watcher tracks",
    )
});

static USAGE_FLUSHES: Lazy<IntCounterVec> = Lazy::new(|| {
    register(
        IntCounterVec::new(
            Opts::new(
                "chainedge_usage_flushes_total",
                "Per-key usage flushes to the store, by outcome (ok, error)",
            ),
            &["outcome"],
        )
        .unwrap(),
    )
});

static USAGE_ROWS: Lazy<IntCounter> = Lazy::new(|| {
    register(
        IntCounter::new(
            "chainedge_usage_rows_flushed_total",
            "Per-key minute rows added to the store",
        )
        .unwrap(),
    )
});

static USAGE_PENDING: Lazy<prometheus::IntGauge> = Lazy::new(|| {
    register(
        prometheus::IntGauge::new(
            "chainedge_usage_pending_keys",
            "Keys with usage counts waiting for the store after the last flush",
        )
        .unwrap(),
    )
});

static USAGE_DROPPED: Lazy<IntCounter> = Lazy::new(|| {
    register(
        IntCounter::new(
            "chainedge_usage_dropped_total",
            "Calls not counted in per-key usage because the pending table was full",
        )
        .unwrap(),
    )
});

static USAGE_JOURNAL_ERRORS: Lazy<IntCounter> = Lazy::new(|| {
    register(
        IntCounter::new(
            "chainedge_usage_journal_errors_total",
            "Failed appends to the usage journal (the counts stay in memory and are retried)",
        )
        .unwrap(),
    )
});

static USAGE_RECOVERED: Lazy<IntCounter> = Lazy::new(|| {
    register(
        IntCounter::new(
            "chainedge_usage_recovered_calls_total",
            "Calls added to usage from the journal of an instance that stopped without \
             flushing them",
        )
        .unwrap(),
    )
});

static STORE_UNAVAILABLE: Lazy<IntCounterVec> = Lazy::new(|| {
    register(
        IntCounterVec::new(
            Opts::new(
                "chainedge_store_unavailable_total",
                "Store calls that failed for the database being unreachable (unreachable), \
                 known down (down: failed at once) or over their deadline (deadline)",
            ),
            &["reason"],
        )
        .unwrap(),
    )
});

static KEYS_SERVED_STALE: Lazy<IntCounter> = Lazy::new(|| {
    register(
        IntCounter::new(
            "chainedge_keys_served_stale_total",
            "Requests admitted on a cached key past its TTL because the store could not be \
             read",
        )
        .unwrap(),
    )
});

static CONFIG_RELOADS: Lazy<IntCounterVec> = Lazy::new(|| {
    register(
        IntCounterVec::new(
            Opts::new(
                "chainedge_config_reloads_total",
                "Configuration reloads (SIGHUP), by outcome (ok, refused)",
            ),
            &["outcome"],
        )
        .unwrap(),
    )
});

pub fn config_reload(outcome: &str) {
    CONFIG_RELOADS.with_label_values(&[outcome]).inc();
}

pub fn store_unavailable(reason: &str) {
    STORE_UNAVAILABLE.with_label_values(&[reason]).inc();
}

pub fn key_served_stale() {
    KEYS_SERVED_STALE.inc();
}

pub fn usage_journal_error() {
    USAGE_JOURNAL_ERRORS.inc();
}

pub fn usage_recovered(calls: u64) {
    USAGE_RECOVERED.inc_by(calls);
}

pub fn usage_flush(outcome: &str, rows: usize) {
    USAGE_FLUSHES.with_label_values(&[outcome]).inc();
    USAGE_ROWS.inc_by(rows as u64);
}

pub fn usage_pending(keys: usize) {
    USAGE_PENDING.set(keys.min(i64::MAX as usize) as i64);
}

pub fn usage_dropped(calls: u64) {
    USAGE_DROPPED.inc_by(calls);
}

static REQUEST_LOG_DROPPED: Lazy<IntCounter> = Lazy::new(|| {
    register(
        IntCounter::new(
            "chainedge_request_log_dropped_total",
            "Requests not kept in their key's request log: the buffer between flushes was full, or a write failed",
        )
        .unwrap(),
    )
});

pub fn request_log_dropped(n: u64) {
    REQUEST_LOG_DROPPED.inc_by(n);
}

/// Registers the families that have series from the start.
pub(super) fn init() {
    Lazy::force(&CAPTURE_ROUNDS);
    Lazy::force(&CAPTURE_LAST_SUCCESS);
    Lazy::force(&CAPTURE_RUNNING);
    Lazy::force(&INDEX_HEAD);
    Lazy::force(&INDEX_LAG);
    Lazy::force(&INDEX_BLOCKS);
    Lazy::force(&INDEX_HEADER_ONLY);
    Lazy::force(&INDEX_TRANSFERS);
    Lazy::force(&INDEX_REORGS);
    Lazy::force(&INDEX_ROLLBACK_DEPTH);
    Lazy::force(&INDEX_ERRORS);
    Lazy::force(&MEMPOOL_PENDING);
    Lazy::force(&USAGE_FLUSHES);
    Lazy::force(&USAGE_ROWS);
    Lazy::force(&USAGE_PENDING);
    Lazy::force(&USAGE_DROPPED);
    Lazy::force(&REQUEST_LOG_DROPPED);
}

//! Metrics of the transactions the edge follows (`capture::txs`): what became of them,
//! how long they took to land, what was sent again.

use super::register;
use once_cell::sync::Lazy;
use prometheus::{HistogramOpts, HistogramVec, IntCounter, IntCounterVec, Opts};

pub static TX_TRACKING_DROPPED: Lazy<IntCounter> = Lazy::new(|| {
    register(
        IntCounter::new(
            "chainedge_tx_tracking_dropped_total",
            "Accepted transactions not followed because the recorder's queue was full",
        )
        .unwrap(),
    )
});

pub static TX_STATUS: Lazy<IntCounterVec> = Lazy::new(|| {
    register(
        IntCounterVec::new(
            Opts::new(
                "chainedge_tx_status_total",
                "Followed transactions reaching a status (pending after a reorg, included, \
                 final, failed, replaced, dropped), by chain",
            ),
            &["chain", "status"],
        )
        .unwrap(),
    )
});

pub static TX_RESENDS: Lazy<IntCounterVec> = Lazy::new(|| {
    register(
        IntCounterVec::new(
            Opts::new(
                "chainedge_tx_resends_total",
                "Followed transactions sent again because no node had them, by chain",
            ),
            &["chain"],
        )
        .unwrap(),
    )
});

pub static TX_INCLUSION: Lazy<HistogramVec> = Lazy::new(|| {
    register(
        HistogramVec::new(
            HistogramOpts::new(
                "chainedge_tx_inclusion_seconds",
                "From acceptance to the first block that included the transaction, by chain",
            )
            .buckets(vec![
                1.0, 2.0, 4.0, 8.0, 12.0, 24.0, 36.0, 60.0, 120.0, 300.0, 600.0, 1800.0,
            ]),
            &["chain"],
        )
        .unwrap(),
    )
});

//! Metrics of what the edge believes of its nodes: the served tip against the highest
//! head reported.

use super::register;
use once_cell::sync::Lazy;
use prometheus::{IntCounterVec, IntGaugeVec, Opts};

pub static POOL_TIP: Lazy<IntGaugeVec> = Lazy::new(|| {
    register(
        IntGaugeVec::new(
            Opts::new(
                "chainedge_pool_tip",
                "The pool's served head (`majority`: a strict majority of hosts reached it) \
                 and the highest any host reported (`highest`)",
            ),
            &["pool", "of"],
        )
        .unwrap(),
    )
});

pub static POOL_STALLED: Lazy<IntGaugeVec> = Lazy::new(|| {
    register(
        IntGaugeVec::new(
            Opts::new(
                "chainedge_pool_majority_stalled",
                "1 while the majority's head stands still and a minority is past it by more \
                 than the pool's max_lag",
            ),
            &["pool"],
        )
        .unwrap(),
    )
});

/// One health round's tip of `pool`.
pub fn pool_tip(pool: &str, majority: u64, highest: u64, stalled: bool) {
    POOL_TIP
        .with_label_values(&[pool, "majority"])
        .set(majority as i64);
    POOL_TIP
        .with_label_values(&[pool, "highest"])
        .set(highest as i64);
    POOL_STALLED.with_label_values(&[pool]).set(stalled as i64);
}

pub static CHECKED: Lazy<IntCounterVec> = Lazy::new(|| {
    register(
        IntCounterVec::new(
            Opts::new(
                "chainedge_checked_answers_total",
                "Node answers judged against their own commitments, by check and outcome \
                 (proven, unchecked, disproved)",
            ),
            &["pool", "check", "outcome"],
        )
        .unwrap(),
    )
});

pub static DISPROVED: Lazy<IntCounterVec> = Lazy::new(|| {
    register(
        IntCounterVec::new(
            Opts::new(
                "chainedge_disproved_answers_total",
                "Node answers the edge disproved, by host and check",
            ),
            &["pool", "host", "check"],
        )
        .unwrap(),
    )
});

pub fn checked_answer(pool: &str, check: &str, outcome: &str) {
    CHECKED.with_label_values(&[pool, check, outcome]).inc();
}

pub fn disproved_answer(pool: &str, host: &str, check: &str) {
    DISPROVED.with_label_values(&[pool, host, check]).inc();
}

pub static QUORUM: Lazy<IntCounterVec> = Lazy::new(|| {
    register(
        IntCounterVec::new(
            Opts::new(
                "chainedge_quorum_reads_total",
                "Reads put to a vote, by outcome (agreed, dispute, unavailable)",
            ),
            &["pool", "outcome"],
        )
        .unwrap(),
    )
});

pub fn quorum_read(pool: &str, outcome: &str) {
    QUORUM.with_label_values(&[pool, outcome]).inc();
}

pub static EMPTY_PASSED: Lazy<IntCounterVec> = Lazy::new(|| {
    register(
        IntCounterVec::new(
            Opts::new(
                "chainedge_empty_answers_passed_total",
                "Checked reads answered null by a host and asked of another \
                 (rpc.verify.ask_past_empty)",
            ),
            &["pool"],
        )
        .unwrap(),
    )
});

/// A checked read's `null` from a host, passed over for another host's answer.
pub fn empty_answer_passed(pool: &str) {
    EMPTY_PASSED.with_label_values(&[pool]).inc();
}

pub static LIGHT_CLIENT_SLOT: Lazy<IntGaugeVec> = Lazy::new(|| {
    register(
        IntGaugeVec::new(
            Opts::new(
                "chainedge_light_client_slot",
                "The beacon light client's slots: its signed head (`head`), its finalized \
                 header (`finalized`); absent until it has bootstrapped",
            ),
            &["pool", "of"],
        )
        .unwrap(),
    )
});

pub static LIGHT_CLIENT_UPDATES: Lazy<IntCounterVec> = Lazy::new(|| {
    register(
        IntCounterVec::new(
            Opts::new(
                "chainedge_light_client_updates_total",
                "Beacon light-client updates by beacon host and outcome: applied, stale (no \
                 news, or a lagging node) or refused (does not hold: logged)",
            ),
            &["beacon_host", "outcome"],
        )
        .unwrap(),
    )
});

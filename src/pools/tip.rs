//! The pool's served tip: the head a strict majority of the hosts checked this round
//! have reached, so neither one host claiming a far-future block nor a frozen minority
//! moves what `latest` means; and a watch for the other case, a majority stuck while a
//! minority moves on.

use super::Pool;
use crate::observe::metrics;
use std::sync::atomic::{AtomicBool, AtomicU32, AtomicU64, Ordering};

/// Rounds the majority tip may stand still, with a minority past it by more than the
/// pool's `max_lag`, before the pool is said stalled.
const STALLED_AFTER_ROUNDS: u32 = 3;

/// The head a strict majority of `heads` has reached: the ⌊N/2⌋-th highest (0-based).
/// One or two hosts have no majority that could outvote one of them: their tip is the
/// highest, so a node of two that lags is still kept from `latest` (a fleet that wants
/// a lying head outvoted needs three).
pub fn majority_head(heads: &mut [u64]) -> u64 {
    if heads.len() <= 2 {
        return heads.iter().copied().max().unwrap_or(0);
    }
    heads.sort_unstable_by(|a, b| b.cmp(a));
    heads[heads.len() / 2]
}

/// What the health rounds said about the pool's heads beyond the served tip.
#[derive(Default)]
pub struct TipWatch {
    /// The highest head any host reported in the last round (not served: one host's word).
    highest: AtomicU64,
    /// Rounds the majority tip has not moved while some host was past it by more than
    /// `max_lag`.
    still_rounds: AtomicU32,
    stalled: AtomicBool,
}

/// How one round moved the tip.
#[derive(Debug, PartialEq, Eq)]
pub enum TipChange {
    Steady,
    /// The majority stopped following the highest heads (just now).
    Stalled,
    /// It moves again.
    Resumed,
}

impl TipWatch {
    pub fn highest(&self) -> u64 {
        self.highest.load(Ordering::Relaxed)
    }

    pub fn stalled(&self) -> bool {
        self.stalled.load(Ordering::Relaxed)
    }

    /// One round: the majority tip before and now, the highest head now, the lag allowed.
    pub fn round(&self, before: u64, tip: u64, highest: u64, max_lag: u64) -> TipChange {
        self.highest.store(highest, Ordering::Relaxed);
        let behind = highest > tip.saturating_add(max_lag);
        let rounds = if tip == before && behind {
            self.still_rounds.fetch_add(1, Ordering::Relaxed) + 1
        } else {
            self.still_rounds.store(0, Ordering::Relaxed);
            0
        };
        let stalled = rounds >= STALLED_AFTER_ROUNDS;
        match (self.stalled.swap(stalled, Ordering::Relaxed), stalled) {
            (false, true) => TipChange::Stalled,
            (true, false) => TipChange::Resumed,
            _ => TipChange::Steady,
        }
    }
}

/// The pool head after a health round, from the heads of the hosts that answered it:
/// the head a strict majority reached; the highest kept beside it, and a majority left
/// behind said once. `max_lag`: how far ahead a minority may be before that counts.
pub(super) fn serve(pool: &Pool, mut heads: Vec<u64>, max_lag: u64) -> u64 {
    let highest = heads.iter().copied().max().unwrap_or(0);
    let tip = majority_head(&mut heads);
    let before = pool.head.swap(tip, Ordering::Relaxed);
    match pool.tip.round(before, tip, highest, max_lag) {
        TipChange::Stalled => log::warn!(
            "pool {}: the majority's head {tip} has stood still for rounds while a minority \
             reports {highest}: the majority may be stalled, or the minority lying",
            pool.name
        ),
        TipChange::Resumed => {
            log::info!(
                "pool {}: the majority's head moves again ({tip})",
                pool.name
            )
        }
        TipChange::Steady => {}
    }
    metrics::pool_tip(&pool.name, tip, highest, pool.tip.stalled());
    tip
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_tip_is_where_a_strict_majority_is() {
        assert_eq!(majority_head(&mut []), 0);
        assert_eq!(majority_head(&mut [7]), 7);
        // Two cannot outvote each other: the higher (a lagging node kept from `latest`).
        assert_eq!(majority_head(&mut [10, 30]), 30);
        // Two nodes listed twice each: the majority is where both are.
        assert_eq!(majority_head(&mut [30, 30, 10, 10]), 10);
        // A far-future liar among three moves nothing; nor does a frozen one.
        assert_eq!(majority_head(&mut [100, u64::MAX, 101]), 101);
        assert_eq!(majority_head(&mut [100, 3, 101]), 100);
        // Two liars of five still do not.
        assert_eq!(majority_head(&mut [9_999, 100, 9_998, 100, 99]), 100);
        assert_eq!(majority_head(&mut [100, 100, 100, 1, 1]), 100);
    }

    #[test]
    fn a_majority_left_behind_is_said_stalled_after_three_rounds() {
        let w = TipWatch::default();
        // Moving: steady.
        assert_eq!(w.round(10, 11, 12, 5), TipChange::Steady);
        // Still, but nobody is far ahead: steady (a slow chain).
        for _ in 0..5 {
            assert_eq!(w.round(11, 11, 13, 5), TipChange::Steady);
        }
        // Still while a minority runs away.
        assert_eq!(w.round(11, 11, 40, 5), TipChange::Steady);
        assert_eq!(w.round(11, 11, 41, 5), TipChange::Steady);
        assert_eq!(w.round(11, 11, 42, 5), TipChange::Stalled);
        assert!(w.stalled());
        assert_eq!(w.highest(), 42);
        assert_eq!(w.round(11, 11, 43, 5), TipChange::Steady);
        assert_eq!(w.round(11, 43, 43, 5), TipChange::Resumed);
        assert!(!w.stalled());
    }
}

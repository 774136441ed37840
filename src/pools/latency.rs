//! How long a host takes to answer calls: a small log-scale histogram of recent answers,
//! from which a hedged read takes its delay (a host's p95, say).
//!
//! Lock-free: recording is two relaxed atomic adds. Buckets are a quarter of a power of
//! two wide (under 19% apart), from 16 µs to about 17 s. Every `HALF_LIFE` samples all
//! counts are halved, so the figure follows what the host does now, not last hour.

use std::sync::atomic::{AtomicU32, Ordering};
use std::time::Duration;

/// Bucket i starts at 2^(i/4) µs: 96 of them reach 2^24 µs (≈ 17 s).
const BUCKETS: usize = 96;
const HALF_LIFE: u32 = 2048;
/// Fewer samples than this say nothing about a tail.
const MIN_SAMPLES: u32 = 20;

pub struct LatencyHistogram {
    counts: [AtomicU32; BUCKETS],
    /// Samples since the last halving.
    since_decay: AtomicU32,
}

impl Default for LatencyHistogram {
    fn default() -> Self {
        LatencyHistogram {
            counts: std::array::from_fn(|_| AtomicU32::new(0)),
            since_decay: AtomicU32::new(0),
        }
    }
}

impl LatencyHistogram {
    pub fn record(&self, took: Duration) {
        let us = took.as_micros().clamp(1, u64::MAX as u128) as u64;
        self.counts[bucket_of(us)].fetch_add(1, Ordering::Relaxed);
        if self.since_decay.fetch_add(1, Ordering::Relaxed) + 1 == HALF_LIFE {
            // The one recorder that crossed the mark halves; racing adds may be halved a
            // moment early or late, which a statistic can bear.
            self.since_decay.store(0, Ordering::Relaxed);
            for c in &self.counts {
                let v = c.load(Ordering::Relaxed);
                c.store(v / 2, Ordering::Relaxed);
            }
        }
    }

    /// The latency under which a `q` share of recent answers came (the bucket's upper
    /// edge), or `None` before there are enough of them.
    pub fn quantile(&self, q: f64) -> Option<Duration> {
        let counts: [u32; BUCKETS] =
            std::array::from_fn(|i| self.counts[i].load(Ordering::Relaxed));
        let total: u64 = counts.iter().map(|&c| c as u64).sum();
        if total < MIN_SAMPLES as u64 {
            return None;
        }
        let rank = (q.clamp(0.0, 1.0) * total as f64).ceil().max(1.0) as u64;
        let mut seen = 0u64;
        for (i, &c) in counts.iter().enumerate() {
            seen += c as u64;
            if seen >= rank {
                return Some(Duration::from_micros(upper_edge_us(i)));
            }
        }
        Some(Duration::from_micros(upper_edge_us(BUCKETS - 1)))
    }
}

/// floor(4·log2(us)), from the bit length and the two bits after the leading one; all
/// under 16 µs share the first bucket in use.
fn bucket_of(us: u64) -> usize {
    let us = us.max(16);
    let log2 = 63 - us.leading_zeros() as usize;
    let quarter = ((us >> (log2 - 2)) & 0b11) as usize;
    (log2 * 4 + quarter).min(BUCKETS - 1)
}

fn upper_edge_us(bucket: usize) -> u64 {
    let (log2, quarter) = (bucket / 4, bucket % 4);
    // (4 + quarter + 1) / 4 · 2^log2
    ((4 + quarter as u64 + 1) << log2) / 4
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn buckets_are_quarter_octaves() {
        assert_eq!(bucket_of(1), bucket_of(16));
        assert_eq!(bucket_of(1024), 40);
        assert_eq!(bucket_of(1279), 40);
        assert_eq!(bucket_of(1280), 41);
        assert_eq!(bucket_of(2047), 43);
        assert_eq!(upper_edge_us(40), 1280);
        assert_eq!(bucket_of(u64::MAX), BUCKETS - 1);
        for us in [3u64, 17, 999, 12_345, 1_000_000] {
            assert!(upper_edge_us(bucket_of(us)) > us, "{us}");
        }
    }

    #[test]
    fn quantiles_follow_the_recent_answers() {
        let h = LatencyHistogram::default();
        assert_eq!(h.quantile(0.95), None);
        for i in 0..100u64 {
            // 95 fast answers (1 ms), 5 slow ones (100 ms).
            h.record(Duration::from_micros(if i < 95 { 1000 } else { 100_000 }));
        }
        let p95 = h.quantile(0.95).unwrap();
        assert!(p95 >= Duration::from_millis(1) && p95 < Duration::from_micros(1300));
        let p99 = h.quantile(0.99).unwrap();
        assert!(p99 >= Duration::from_millis(100) && p99 < Duration::from_millis(120));
        // The host slows down: after a few half-lives the old fast answers are gone.
        for _ in 0..(HALF_LIFE * 6) {
            h.record(Duration::from_millis(50));
        }
        let p50 = h.quantile(0.5).unwrap();
        assert!(p50 >= Duration::from_millis(50) && p50 < Duration::from_millis(60));
    }
}

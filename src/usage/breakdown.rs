//! Per-method usage for debugging: each key's calls, errors and latency by chain,
//! method and ten-minute slot, with a latency histogram for percentiles. Gathered with
//! the request log (`requests.rs`, the same lock, off the hot path's I/O) and written by
//! its writer. Billing totals are the usage tables' (`usage/mod.rs`); this is what a
//! developer needs to see which method fails or slows down.

pub use crate::store::method_usage::{Group, MethodCounts, BUCKETS, BUCKET_BOUNDS_MS};
use std::collections::HashMap;
use std::hash::BuildHasher;

/// Length of a slot: the finest step the breakdown answers in.
pub const SLOT_SECS: i64 = 600;

/// How far back the breakdown is kept: its longest window and a day.
pub const KEPT_SECS: i64 = 31 * 86_400;

/// Longest method name kept as it is; a longer one counts as `other`.
const MAX_METHOD_LEN: usize = 64;

/// The bucket a latency falls in.
pub fn bucket(latency_us: u64) -> usize {
    let ms_ceil = latency_us.div_ceil(1000);
    BUCKET_BOUNDS_MS
        .iter()
        .position(|&b| ms_ceil <= b)
        .unwrap_or(BUCKET_BOUNDS_MS.len())
}

/// How a method is counted: as asked when it is a plain name (a table refusal of an
/// unknown name counts as `unknown`, so a caller cannot grow its rows with made-up
/// names), else `other`.
pub fn method_label<'a>(method: &'a str, error: Option<&str>) -> &'a str {
    if error == Some("method_unknown") {
        return "unknown";
    }
    let plain = !method.is_empty()
        && method.len() <= MAX_METHOD_LEN
        && method
            .bytes()
            .all(|b| b.is_ascii_alphanumeric() || b == b'_' || b == b'.');
    if plain {
        method
    } else {
        "other"
    }
}

/// Groups gathered since the last flush, bounded in number.
pub struct Groups {
    map: HashMap<u64, (Group, MethodCounts)>,
    seed: std::collections::hash_map::RandomState,
    max: usize,
}

/// One finished request, as the breakdown counts it.
pub struct Finished<'a> {
    pub key_id: &'a str,
    pub tenant_id: &'a str,
    pub at_secs: i64,
    pub route: &'a str,
    pub method: &'a str,
    pub status: u16,
    pub error: Option<&'a str>,
    pub latency_us: u64,
}

impl Groups {
    pub fn new(max: usize) -> Groups {
        Groups {
            map: HashMap::new(),
            seed: Default::default(),
            max: max.max(1),
        }
    }

    /// Count one request; false when a new group would pass the bound (not counted).
    pub fn add(&mut self, f: &Finished<'_>) -> bool {
        let chain = crate::key_restrictions::chain_of_route(f.route).unwrap_or("other");
        let method = method_label(f.method, f.error);
        let slot = f.at_secs.div_euclid(SLOT_SECS) * SLOT_SECS;
        // Looked up by a hash of the borrowed parts: a group's strings are copied once,
        // when it is first seen, not on every request.
        let id = self.seed.hash_one((f.key_id, slot, chain, method));
        let counts = MethodCounts {
            calls: 1,
            errors: (f.status >= 400 || f.status == 0 || f.error.is_some()) as i64,
            latency_us: f.latency_us.min(i64::MAX as u64) as i64,
            buckets: {
                let mut b = [0; BUCKETS];
                b[bucket(f.latency_us)] = 1;
                b
            },
        };
        if let Some((_, c)) = self.map.get_mut(&id) {
            c.add(&counts);
            return true;
        }
        if self.map.len() >= self.max {
            return false;
        }
        let group = Group {
            key_id: f.key_id.to_string(),
            tenant_id: f.tenant_id.to_string(),
            slot,
            chain: chain.to_string(),
            method: method.to_string(),
        };
        self.map.insert(id, (group, counts));
        true
    }

    pub fn take(&mut self) -> Vec<(Group, MethodCounts)> {
        std::mem::take(&mut self.map).into_values().collect()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn finished<'a>(method: &'a str, latency_us: u64, status: u16) -> Finished<'a> {
        Finished {
            key_id: "k",
            tenant_id: "t",
            at_secs: 1_200,
            route: "eth.rpc",
            method,
            status,
            error: None,
            latency_us,
        }
    }

    #[test]
    fn groups_count_by_method_with_latency_buckets() {
        let mut g = Groups::new(2);
        assert!(g.add(&finished("eth_call", 800, 200)));
        assert!(g.add(&finished("eth_call", 30_000, 502)));
        assert!(g.add(&finished("eth_getLogs", 3_000_000, 200)));
        assert!(!g.add(&finished("eth_chainId", 1, 200)), "bounded");
        let mut rows = g.take();
        rows.sort_by(|a, b| a.0.method.cmp(&b.0.method));
        let (group, call) = &rows[0];
        assert_eq!((group.chain.as_str(), group.slot), ("eth", 1_200));
        assert_eq!((call.calls, call.errors, call.latency_us), (2, 1, 30_800));
        assert_eq!(
            (call.quantile_ms(0.5), call.quantile_ms(0.99)),
            (Some(1), Some(50))
        );
        assert_eq!(rows[1].1.quantile_ms(0.5), Some(2500), "the open bucket");
        assert!(g.take().is_empty());
    }

    #[test]
    fn made_up_methods_do_not_grow_the_groups() {
        assert_eq!(method_label("eth_call", None), "eth_call");
        assert_eq!(method_label("x_y", Some("method_unknown")), "unknown");
        assert_eq!(method_label("a b", None), "other");
        assert_eq!(method_label(&"m".repeat(65), None), "other");
        assert_eq!(bucket(0), 0);
        assert_eq!(bucket(1_001), 1);
        assert_eq!(bucket(2_500_001), BUCKETS - 1);
    }
}

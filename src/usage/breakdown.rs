//! Per-method usage for debugging: each key's calls, errors and latency by chain,
//! method and ten-minute slot, with a latency histogram for percentiles. Gathered with
//! the request log (`requests.rs`, the same lock, off the hot path's I/O) and written by
//! its writer. Billing totals are the usage tables' (`usage/mod.rs`); this is what a
//! developer needs to see which method fails or slows down.

#[cfg(test)]
use crate::store::method_usage::BUCKETS;
pub use crate::store::method_usage::{Group, MethodCounts, BUCKET_BOUNDS_MS};

/// Length of a slot: the finest step the breakdown answers in.
pub const SLOT_SECS: i64 = 600;

/// How far back the breakdown is kept: its longest window and a day.
pub const KEPT_SECS: i64 = 31 * 86_400;

/// Longest method name kept as it is; a longer one counts as `other`.
const MAX_METHOD_LEN: usize = 64;

/// One finished request (or WebSocket message) of a key, borrowed from the request.
pub struct Finished<'a> {
    pub key_id: &'a str,
    pub tenant_id: &'a str,
    pub at_us: i64,
    pub route: &'a str,
    pub method: &'a str,
    pub status: u16,
    pub error: Option<&'a str>,
    pub latency_us: u64,
    pub upstream: Option<&'a str>,
}

/// The bucket a latency falls in.
pub fn bucket(latency_us: u64) -> usize {
    let ms_ceil = latency_us.div_ceil(1000);
    BUCKET_BOUNDS_MS
        .iter()
        .position(|&b| ms_ceil <= b)
        .unwrap_or(BUCKET_BOUNDS_MS.len())
}

/// What a request counts under: a JSON-RPC call by its method (`method_label`); a REST
/// request (an HTTP method) by its route's name (`eth.wallet.balance`), which the route
/// table bounds, so "GET" never hides which product was asked.
pub fn label<'a>(f: &Finished<'a>) -> &'a str {
    const HTTP: &[&str] = &["GET", "HEAD", "POST", "PUT", "PATCH", "DELETE", "OPTIONS"];
    if HTTP.contains(&f.method) {
        method_label(f.route, None)
    } else {
        method_label(f.method, f.error)
    }
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

/// One key's groups since the last flush: (slot, chain, method) and counts, the newest
/// last. A flush holds one or two slots and the few methods a client calls, so a short
/// scan finds a group; past `MAX_GROUPS_PER_KEY` a new one is not counted.
#[derive(Default)]
pub struct KeyGroups {
    groups: Vec<(i64, &'static str, String, MethodCounts)>,
}

/// Groups one key may add between flushes.
pub const MAX_GROUPS_PER_KEY: usize = 64;

impl KeyGroups {
    /// Count one request of the key; false when it would pass the bound (not counted).
    pub fn add(&mut self, f: &Finished<'_>) -> bool {
        let chain = crate::key_restrictions::chain_of_route(f.route).unwrap_or("other");
        let method = label(f);
        let slot = f.at_us.div_euclid(1_000_000 * SLOT_SECS) * SLOT_SECS;
        let failed = f.status >= 400 || f.status == 0 || f.error.is_some();
        let found = self
            .groups
            .iter()
            .rposition(|(s, c, m, _)| *s == slot && *c == chain && m == method);
        let at = match found {
            Some(at) => at,
            None if self.groups.len() >= MAX_GROUPS_PER_KEY => return false,
            None => {
                self.groups
                    .push((slot, chain, method.to_string(), MethodCounts::default()));
                self.groups.len() - 1
            }
        };
        let counts = &mut self.groups[at].3;
        counts.calls += 1;
        counts.errors += failed as i64;
        counts.latency_us = counts
            .latency_us
            .saturating_add(f.latency_us.min(i64::MAX as u64) as i64);
        counts.buckets[bucket(f.latency_us)] += 1;
        true
    }

    /// The groups as the store takes them.
    pub fn into_groups(
        self,
        key_id: &str,
        tenant_id: &str,
    ) -> impl Iterator<Item = (Group, MethodCounts)> {
        let (key_id, tenant_id) = (key_id.to_string(), tenant_id.to_string());
        self.groups
            .into_iter()
            .map(move |(slot, chain, method, counts)| {
                let group = Group {
                    key_id: key_id.clone(),
                    tenant_id: tenant_id.clone(),
                    slot,
                    chain: chain.to_string(),
                    method,
                };
                (group, counts)
            })
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn finished(method: &str, latency_us: u64, status: u16) -> Finished<'_> {
        Finished {
            key_id: "k",
            tenant_id: "t",
            at_us: 1_234_000_000,
            route: "eth.rpc",
            method,
            status,
            error: None,
            latency_us,
            upstream: None,
        }
    }

    #[test]
    fn rest_requests_count_under_their_route() {
        let mut rest = finished("GET", 1_000, 200);
        rest.route = "eth.wallet.balance";
        assert_eq!(label(&rest), "eth.wallet.balance");
        assert_eq!(label(&finished("eth_call", 1_000, 200)), "eth_call");
        let mut unknown = finished("made_up", 1_000, 403);
        unknown.error = Some("method_unknown");
        assert_eq!(label(&unknown), "unknown");
    }

    #[test]
    fn groups_count_by_method_with_latency_buckets() {
        let mut g = KeyGroups::default();
        assert!(g.add(&finished("eth_call", 800, 200)));
        assert!(g.add(&finished("eth_call", 30_000, 502)));
        assert!(g.add(&finished("eth_getLogs", 3_000_000, 200)));
        let mut rows: Vec<_> = g.into_groups("k", "t").collect();
        rows.sort_by(|a, b| a.0.method.cmp(&b.0.method));
        let (group, call) = &rows[0];
        assert_eq!(
            (group.chain.as_str(), group.slot, group.key_id.as_str()),
            ("eth", 1_200, "k")
        );
        assert_eq!((call.calls, call.errors, call.latency_us), (2, 1, 30_800));
        assert_eq!(
            (call.quantile_ms(0.5), call.quantile_ms(0.99)),
            (Some(1), Some(50))
        );
        assert_eq!(rows[1].1.quantile_ms(0.5), Some(2500), "the open bucket");
    }

    #[test]
    fn a_key_adds_a_bounded_number_of_groups() {
        let mut g = KeyGroups::default();
        let names: Vec<String> = (0..=MAX_GROUPS_PER_KEY).map(|i| format!("m{i}")).collect();
        for name in &names[..MAX_GROUPS_PER_KEY] {
            assert!(g.add(&finished(name, 1, 200)));
        }
        assert!(
            !g.add(&finished(&names[MAX_GROUPS_PER_KEY], 1, 200)),
            "bounded"
        );
        assert!(g.add(&finished("m0", 1, 200)), "a known group still counts");
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

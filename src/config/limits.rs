//! `limits:` — sustained requests per second per plan and rate category.

use serde::Deserialize;
use std::collections::BTreeMap;

/// The pseudo-plan of callers without a credential (limited per client address).
pub const ANONYMOUS: &str = "anonymous";

#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct LimitsConf {
    /// Short-term ceiling as a multiple of the sustained rate.
    #[serde(default = "d_burst")]
    pub burst: f64,
    /// Window over which the sustained rate is enforced, seconds.
    #[serde(default = "d_horizon")]
    pub horizon_secs: u64,
    /// Count-min sketch size: columns per row and rows. Larger = fewer innocent
    /// refusals from hash collisions at high key cardinality.
    #[serde(default = "d_slots")]
    pub sketch_slots: usize,
    #[serde(default = "d_hashes")]
    pub sketch_hashes: usize,
    /// Requests/s per plan (and `anonymous`) for every category not listed below.
    #[serde(default = "d_table")]
    pub default: BTreeMap<String, f64>,
    /// Per rate category overrides; plans missing here take `default`'s value.
    #[serde(default)]
    pub categories: BTreeMap<String, BTreeMap<String, f64>>,
    /// Compute units per second per plan (and `anonymous`), on top of the request
    /// rates: each JSON-RPC call weighs its method's cost (`compute_units:`). A plan not
    /// listed is limited by requests only.
    #[serde(default)]
    pub compute_units: BTreeMap<String, f64>,
}

impl Default for LimitsConf {
    fn default() -> Self {
        LimitsConf {
            burst: d_burst(),
            horizon_secs: d_horizon(),
            sketch_slots: d_slots(),
            sketch_hashes: d_hashes(),
            default: d_table(),
            categories: BTreeMap::new(),
            compute_units: BTreeMap::new(),
        }
    }
}

fn d_burst() -> f64 {
    2.0
}
fn d_horizon() -> u64 {
    10
}
fn d_slots() -> usize {
    32768
}
fn d_hashes() -> usize {
    4
}
fn d_table() -> BTreeMap<String, f64> {
    [
        (ANONYMOUS, 5.0),
        ("free", 10.0),
        ("basic", 25.0),
        ("pro", 50.0),
        ("business", 100.0),
        ("enterprise", 250.0),
        ("scale", 1000.0),
    ]
    .into_iter()
    .map(|(k, v)| (k.to_string(), v))
    .collect()
}

impl LimitsConf {
    /// Problems as (key, reason), keys relative to the config root.
    pub fn problems(&self, plans: &[String]) -> Vec<(String, String)> {
        let mut out = Vec::new();
        if !(1.0..=10.0).contains(&self.burst) {
            out.push(("limits.burst".into(), "must be between 1 and 10".into()));
        }
        if !(2..=60).contains(&self.horizon_secs) {
            out.push((
                "limits.horizon_secs".into(),
                "must be between 2 and 60".into(),
            ));
        }
        if !(1024..=(1 << 24)).contains(&self.sketch_slots) {
            out.push((
                "limits.sketch_slots".into(),
                "must be between 1024 and 16777216".into(),
            ));
        }
        if !(1..=8).contains(&self.sketch_hashes) {
            out.push((
                "limits.sketch_hashes".into(),
                "must be between 1 and 8".into(),
            ));
        }
        let known = |p: &str| p == ANONYMOUS || plans.iter().any(|x| x == p);
        let mut check_table = |prefix: &str, table: &BTreeMap<String, f64>| {
            for (plan, rps) in table {
                if !known(plan) {
                    out.push((
                        format!("{prefix}.{plan}"),
                        format!("unknown plan; plans are {plans:?} and {ANONYMOUS}"),
                    ));
                }
                if !(rps.is_finite() && *rps > 0.0) {
                    out.push((
                        format!("{prefix}.{plan}"),
                        "must be a positive rate per second".into(),
                    ));
                }
            }
        };
        check_table("limits.default", &self.default);
        check_table("limits.compute_units", &self.compute_units);
        for (cat, table) in &self.categories {
            check_table(&format!("limits.categories.{cat}"), table);
        }
        for plan in plans.iter().map(String::as_str).chain([ANONYMOUS]) {
            if !self.default.contains_key(plan) {
                out.push((
                    "limits.default".into(),
                    format!("no rate for plan '{plan}'"),
                ));
            }
        }
        out
    }
}

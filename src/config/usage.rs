//! `compute_units:` (what calls cost) and `usage:` (per-key usage kept in the store).

use serde::Deserialize;
use std::collections::BTreeMap;

#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct ComputeUnitsConf {
    /// A JSON-RPC method the table does not list.
    #[serde(default = "d_default")]
    pub default: u32,
    /// A request to any other route (REST, passthroughs) without an entry in `routes`.
    #[serde(default = "d_default")]
    pub rest: u32,
    /// Per method, over the built-in table (`src/rpc/compute_units.rs`).
    #[serde(default)]
    pub methods: BTreeMap<String, u32>,
    /// Per route name (`plugins/*.yaml`).
    #[serde(default)]
    pub routes: BTreeMap<String, u32>,
}

impl Default for ComputeUnitsConf {
    fn default() -> Self {
        ComputeUnitsConf {
            default: d_default(),
            rest: d_default(),
            methods: BTreeMap::new(),
            routes: BTreeMap::new(),
        }
    }
}

fn d_default() -> u32 {
    20
}

#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct UsageConf {
    /// Count each API key's calls, compute units, errors and refusals per minute.
    #[serde(default = "d_true")]
    pub enabled: bool,
    /// How often the counts gathered in memory are added to the store.
    #[serde(default = "d_flush")]
    pub flush_interval_ms: u64,
    /// How often the counts are appended to the instance's journal on local disk
    /// (`store.state_dir`): what a crash can lose at most.
    #[serde(default = "d_journal")]
    pub journal_interval_ms: u64,
    /// Keys with counts waiting for the store at most; past it (a store down for long)
    /// new keys' counts are dropped and counted in `chainedge_usage_dropped_total`.
    #[serde(default = "d_pending")]
    pub max_pending_keys: usize,
    /// How long per-minute rows are kept (the 24-hour chart reads them).
    #[serde(default = "d_minutes")]
    pub minute_retention_hours: u64,
    /// How long per-hour rows are kept (the 30-day chart and exports read them).
    #[serde(default = "d_hours")]
    pub hour_retention_days: u64,
}

impl Default for UsageConf {
    fn default() -> Self {
        UsageConf {
            enabled: true,
            flush_interval_ms: d_flush(),
            journal_interval_ms: d_journal(),
            max_pending_keys: d_pending(),
            minute_retention_hours: d_minutes(),
            hour_retention_days: d_hours(),
        }
    }
}

fn d_true() -> bool {
    true
}
fn d_flush() -> u64 {
    10_000
}
fn d_journal() -> u64 {
    100
}
fn d_pending() -> usize {
    100_000
}
fn d_minutes() -> u64 {
    48
}
fn d_hours() -> u64 {
    400
}

impl UsageConf {
    pub fn problems(&self) -> Vec<(String, String)> {
        let mut out = Vec::new();
        if !(100..=300_000).contains(&self.flush_interval_ms) {
            out.push((
                "usage.flush_interval_ms".into(),
                "must be between 100 and 300000".into(),
            ));
        }
        if !(10..=1000).contains(&self.journal_interval_ms) {
            out.push((
                "usage.journal_interval_ms".into(),
                "must be between 10 and 1000".into(),
            ));
        }
        if self.max_pending_keys == 0 {
            out.push(("usage.max_pending_keys".into(), "must be positive".into()));
        }
        if self.minute_retention_hours < 24 {
            out.push((
                "usage.minute_retention_hours".into(),
                "at least 24 (the 24-hour chart reads minutes)".into(),
            ));
        }
        if self.hour_retention_days < 30 {
            out.push((
                "usage.hour_retention_days".into(),
                "at least 30 (the 30-day chart reads hours)".into(),
            ));
        }
        out
    }
}

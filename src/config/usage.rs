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
    /// Requests kept per key for its request log (`GET /v1/keys/{id}/requests`); 0: no
    /// log.
    #[serde(default = "d_log_per_key")]
    pub request_log_per_key: usize,
    /// Requests an instance holds between two flushes at most; past it (a flood, a
    /// store down) new ones are not logged (`chainedge_request_log_dropped_total`).
    #[serde(default = "d_log_buffer")]
    pub request_log_buffer: usize,
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
            request_log_per_key: d_log_per_key(),
            request_log_buffer: d_log_buffer(),
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
fn d_log_per_key() -> usize {
    100
}
fn d_log_buffer() -> usize {
    20_000
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
        if self.request_log_per_key > 1000 {
            out.push((
                "usage.request_log_per_key".into(),
                "must be at most 1000".into(),
            ));
        }
        if !(1..=1_000_000).contains(&self.request_log_buffer) {
            out.push((
                "usage.request_log_buffer".into(),
                "must be between 1 and 1000000".into(),
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

/// `tx_tracking:` transactions accepted through the edge followed until they settle
/// (`GET /v1/{eth|polygon}/tx/{hash}`).
#[derive(Debug, Clone, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct TxTrackingConf {
    #[serde(default = "d_true")]
    pub enabled: bool,
    /// How often the open transactions of each chain are looked at.
    #[serde(default = "d_follow")]
    pub follow_interval_ms: u64,
    /// Open transactions looked at per chain and round at most (the least recently
    /// looked at first).
    #[serde(default = "d_per_round")]
    pub per_round: u32,
    /// A transaction no healthy node holds, not mined and not replaced, is sent again
    /// to every healthy node after this long...
    #[serde(default = "d_resend_after")]
    pub resend_after_secs: u64,
    /// ...at most this many times; then it is `dropped`.
    #[serde(default = "d_max_resends")]
    pub max_resends: u32,
    /// Transactions kept per tenant (the oldest go first).
    #[serde(default = "d_per_tenant")]
    pub per_tenant: u32,
    /// How long a settled transaction (final, failed, replaced, dropped) is kept, and
    /// its pushed status changes.
    #[serde(default = "d_retention")]
    pub retention_hours: u64,
    /// How often each instance reads new status changes for its channels and hooks.
    #[serde(default = "d_push_interval")]
    pub push_interval_ms: u64,
    /// Solana: times a transaction without a status is sent again (once a round) while
    /// its blockhash is valid.
    #[serde(default = "d_sol_resends")]
    pub solana_max_resends: u32,
    /// Webhooks (`/v1/tx/hooks`) one tenant may hold.
    #[serde(default = "d_max_hooks")]
    pub max_hooks_per_tenant: i64,
    /// Secret reference (≥ 32 bytes) each hook's signing secret derives from; without
    /// it hooks are refused (the `/ws/txs` channel still works).
    #[serde(default)]
    pub signing_secret: Option<super::secrets::SecretRef>,
    #[serde(default)]
    pub webhook: super::WebhookConf,
}

impl Default for TxTrackingConf {
    fn default() -> Self {
        TxTrackingConf {
            enabled: true,
            follow_interval_ms: d_follow(),
            per_round: d_per_round(),
            resend_after_secs: d_resend_after(),
            max_resends: d_max_resends(),
            per_tenant: d_per_tenant(),
            retention_hours: d_retention(),
            push_interval_ms: d_push_interval(),
            solana_max_resends: d_sol_resends(),
            max_hooks_per_tenant: d_max_hooks(),
            signing_secret: None,
            webhook: super::WebhookConf::default(),
        }
    }
}

fn d_follow() -> u64 {
    2000
}
fn d_per_round() -> u32 {
    200
}
fn d_resend_after() -> u64 {
    24
}
fn d_max_resends() -> u32 {
    5
}
fn d_per_tenant() -> u32 {
    10_000
}
fn d_retention() -> u64 {
    7 * 24
}
fn d_sol_resends() -> u32 {
    30
}
fn d_push_interval() -> u64 {
    500
}
fn d_max_hooks() -> i64 {
    10
}

impl TxTrackingConf {
    /// What is wrong with it: (key, reason).
    pub fn problems(&self) -> Vec<(String, String)> {
        let mut out = Vec::new();
        let mut check = |key: &str, ok: bool, reason: &str| {
            if !ok {
                out.push((format!("tx_tracking.{key}"), reason.to_string()));
            }
        };
        check(
            "follow_interval_ms",
            (100..=60_000).contains(&self.follow_interval_ms),
            "must be between 100 and 60000",
        );
        check(
            "push_interval_ms",
            (50..=60_000).contains(&self.push_interval_ms),
            "must be between 50 and 60000",
        );
        check(
            "solana_max_resends",
            self.solana_max_resends <= 1000,
            "must be at most 1000",
        );
        check(
            "max_hooks_per_tenant",
            (0..=1000).contains(&self.max_hooks_per_tenant),
            "must be between 0 and 1000",
        );
        check(
            "per_round",
            (1..=10_000).contains(&self.per_round),
            "must be between 1 and 10000",
        );
        check(
            "resend_after_secs",
            (1..=3600).contains(&self.resend_after_secs),
            "must be between 1 and 3600",
        );
        check(
            "max_resends",
            self.max_resends <= 100,
            "must be 100 or less",
        );
        check(
            "per_tenant",
            (1..=1_000_000).contains(&self.per_tenant),
            "must be between 1 and 1000000",
        );
        check(
            "retention_hours",
            (1..=24 * 365).contains(&self.retention_hours),
            "must be between 1 and 8760",
        );
        out
    }
}

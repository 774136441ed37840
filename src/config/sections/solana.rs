//! The Solana layer's section (`solana:`): stake snapshots, watchlists and their push,
//! MEV-cache analytics.

use super::*;

/// The Solana layer (`solana:`).
#[derive(Debug, Deserialize, Clone, Default)]
#[serde(deny_unknown_fields)]
pub struct SolanaConf {
    #[serde(default)]
    pub stake_snapshots: StakeSnapshotsConf,
    #[serde(default)]
    pub watchlist: WatchlistConf,
    #[serde(default)]
    pub mev_cache: MevCacheConf,
}

/// MEV-cache analytics (`src/capture/sol/mev_cache.rs`): how the `sol_mev_cache` hosts are sampled.
#[derive(Debug, Deserialize, Clone)]
#[serde(deny_unknown_fields)]
pub struct MevCacheConf {
    /// Seconds between scrapes.
    #[serde(default = "d_mev_interval")]
    pub interval_secs: u64,
    /// The hosts' hits counter (summed over its label sets).
    #[serde(default = "d_hits_metric")]
    pub hits_metric: String,
}

impl Default for MevCacheConf {
    fn default() -> Self {
        MevCacheConf {
            interval_secs: d_mev_interval(),
            hits_metric: d_hits_metric(),
        }
    }
}

fn d_mev_interval() -> u64 {
    10
}

fn d_hits_metric() -> String {
    "mev_cache_hits_total".into()
}

/// Watchlists and their push (`src/capture/sol/watch/`).
#[derive(Debug, Deserialize, Clone)]
#[serde(deny_unknown_fields)]
pub struct WatchlistConf {
    /// Entries one tenant may hold.
    #[serde(default = "d_max_watch_entries")]
    pub max_entries_per_tenant: i64,
    /// Deliver changes from this instance (with several instances on one store, exactly
    /// one should push).
    #[serde(default = "d_true")]
    pub push: bool,
    /// Secret reference (≥ 32 bytes) each entry's webhook signing secret derives from;
    /// without it webhook entries are refused (ws entries still work).
    #[serde(default)]
    pub signing_secret: Option<SecretRef>,
    #[serde(default)]
    pub webhook: WebhookConf,
}

impl Default for WatchlistConf {
    fn default() -> Self {
        WatchlistConf {
            max_entries_per_tenant: d_max_watch_entries(),
            push: true,
            signing_secret: None,
            webhook: WebhookConf::default(),
        }
    }
}

fn d_max_watch_entries() -> i64 {
    100
}

/// Epoch stake snapshots (`src/capture/sol/stake.rs`): captured from the `sol_rpc` pool once per
/// epoch into the store.
#[derive(Debug, Deserialize, Clone)]
#[serde(deny_unknown_fields)]
pub struct StakeSnapshotsConf {
    /// Capture at all (default true when a `sol_rpc` pool is configured).
    #[serde(default = "d_true")]
    pub enabled: bool,
    /// How often the current epoch is checked.
    #[serde(default = "d_stake_poll_ms")]
    pub poll_ms: u64,
    /// Captured epochs kept (older ones are pruned after each capture).
    #[serde(default = "d_keep_epochs")]
    pub keep_epochs: u64,
}

impl Default for StakeSnapshotsConf {
    fn default() -> Self {
        StakeSnapshotsConf {
            enabled: true,
            poll_ms: d_stake_poll_ms(),
            keep_epochs: d_keep_epochs(),
        }
    }
}

fn d_stake_poll_ms() -> u64 {
    30_000
}

fn d_keep_epochs() -> u64 {
    90
}

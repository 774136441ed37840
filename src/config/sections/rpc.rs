//! `rpc`: the JSON-RPC gateway's bounds, attempts and hedging, per-class timeouts, the
//! write policy, the response cache and the `eth_getLogs` guard.

use super::d_true;
use serde::Deserialize;
use std::collections::BTreeMap;

#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct RpcConf {
    #[serde(default = "d_body")]
    pub max_body_bytes: usize,
    #[serde(default = "d_batch")]
    pub max_batch: usize,
    #[serde(default = "d_resp")]
    pub max_response_bytes: usize,
    /// A read's whole budget, every attempt included.
    #[serde(default = "d_timeout")]
    pub timeout_ms: u64,
    /// One host's share of a read's budget: past it, the next host is tried.
    #[serde(default = "d_attempt_timeout")]
    pub attempt_timeout_ms: u64,
    /// Budgets for a method class (`read`, `trace`, `debug`, `txpool`) other than the
    /// two above: a `debug_trace*` does not share an `eth_call`'s 10 s.
    #[serde(default = "d_class_timeouts")]
    pub class_timeouts: BTreeMap<String, ClassTimeouts>,
    #[serde(default)]
    pub hedge: HedgeConf,
    /// Identical single reads in flight at the same moment share one upstream call.
    #[serde(default = "d_true")]
    pub coalesce: bool,
    /// The `eth_getLogs` guard: ranges per plan, chunks, bisection, the result bound.
    #[serde(default)]
    pub get_logs: LogsConf,
    /// The finality-aware response cache for single reads.
    #[serde(default)]
    pub cache: CacheConf,
    /// How long a call with `X-Chainedge-Min-Block` waits for a host to reach that block
    /// before 503 `block_not_reached`.
    #[serde(default = "d_min_block_wait")]
    pub min_block_wait_ms: u64,
    #[serde(default = "d_attempts")]
    pub max_attempts: usize,
    #[serde(default)]
    pub write_policy: WritePolicy,
    /// Lowest plan per method family: `trace`, `debug`, `txpool`. Families not listed
    /// are open to every plan that may call the route.
    #[serde(default = "d_method_plans")]
    pub method_plans: BTreeMap<String, String>,
    /// Answers checked against themselves (docs/verification.md).
    #[serde(default)]
    pub verify: VerifyConf,
}

/// `rpc.verify`: what happens to an answer that carries its own commitment, and which
/// methods are asked of several hosts and answered only when enough agree.
#[derive(Debug, Clone, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct VerifyConf {
    #[serde(default)]
    pub mode: VerifyMode,
    #[serde(default)]
    pub quorum: Option<QuorumConf>,
    /// The level every answer to a plan's keys must reach (`pro: self`), as if each of
    /// its requests sent `X-Chainedge-Require-Verified`.
    #[serde(default)]
    pub require: std::collections::BTreeMap<String, String>,
    /// How many more hosts a checked read asks after one answered `null` (a lagging
    /// node, or one hiding what it has); the empty answer is served when none of them
    /// has better. 0 serves the first answer.
    #[serde(default = "d_ask_past_empty")]
    pub ask_past_empty: usize,
    /// Account reads proven against a trusted block's state root (absent: not proven).
    #[serde(default)]
    pub root: Option<RootConf>,
}

/// `rpc.verify.root`: `eth_getBalance`, `eth_getTransactionCount`, `eth_getCode` and
/// `eth_getStorageAt` within `window` blocks of the head answered from an `eth_getProof`
/// checked against the state root of a block anchored by a strict majority of `ask`
/// hosts giving the same self-consistent header (docs/verification.md#proofs).
#[derive(Debug, Clone, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct RootConf {
    #[serde(default = "d_root_ask")]
    pub ask: usize,
    #[serde(default = "d_root_window")]
    pub window: u64,
    /// `eth_getLogs` ranges of at most this many blocks are held to the blocks' receipts
    /// (complete logs); wider ones are served as before, unchecked.
    #[serde(default = "d_root_logs_blocks")]
    pub logs_blocks: u64,
    /// Blocks trusted by a beacon light client instead of a majority of hosts.
    #[serde(default)]
    pub light_client: Option<super::LightClientConf>,
}

fn d_root_logs_blocks() -> u64 {
    100
}

fn d_root_ask() -> usize {
    3
}

/// Full nodes keep the state of the last 128 blocks (geth's default): older reads need
/// an archive node's proofs, and are served unproven.
fn d_root_window() -> u64 {
    128
}

fn d_ask_past_empty() -> usize {
    1
}

impl Default for VerifyConf {
    fn default() -> Self {
        VerifyConf {
            mode: VerifyMode::default(),
            quorum: None,
            require: Default::default(),
            ask_past_empty: d_ask_past_empty(),
            root: None,
        }
    }
}

/// `rpc.verify.quorum`: `methods` are asked of `ask` hosts at once and answered when
/// `agree` of them give the same answer (a strict majority at least); a dispute or too
/// few hosts is an error, never a guess. `preset: verifier` adds the reads a bridge
/// verifier trusts (logs, blocks, receipts) and makes them unanimous.
#[derive(Debug, Clone, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct QuorumConf {
    #[serde(default)]
    pub methods: Vec<String>,
    #[serde(default = "d_quorum_ask")]
    pub ask: usize,
    #[serde(default)]
    pub agree: Option<usize>,
    #[serde(default)]
    pub preset: Option<QuorumPreset>,
}

#[derive(Debug, Clone, Copy, PartialEq, Eq, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum QuorumPreset {
    Verifier,
}

/// The reads the `verifier` preset puts to a unanimous vote.
pub const VERIFIER_METHODS: &[&str] = &[
    "eth_getLogs",
    "eth_getBlockByNumber",
    "eth_getBlockByHash",
    "eth_getBlockReceipts",
    "eth_getTransactionReceipt",
];

/// Solana reads the product layer makes that can be put to a vote: each answers at the
/// node's own slot, and the vote is on the value (`GET /v1/sol/wallet/{a}/balance`,
/// `GET /v1/sol/snapshot/account/{a}`).
pub const SOLANA_VOTABLE: &[&str] = &["getBalance", "getAccountInfo"];

impl QuorumConf {
    /// The methods voted on, the preset's included.
    pub fn all_methods(&self) -> Vec<String> {
        let mut m = self.methods.clone();
        if self.preset == Some(QuorumPreset::Verifier) {
            m.extend(VERIFIER_METHODS.iter().map(|s| s.to_string()));
        }
        m.sort();
        m.dedup();
        m
    }

    /// How many must agree: as configured, else unanimous under the verifier preset,
    /// else a strict majority of `ask`.
    pub fn agreeing(&self) -> usize {
        match (self.agree, self.preset) {
            (Some(n), _) => n,
            (None, Some(QuorumPreset::Verifier)) => self.ask,
            (None, None) => self.ask / 2 + 1,
        }
    }
}

fn d_quorum_ask() -> usize {
    3
}

/// `enforce`: a disproved answer is never served (the next host is asked); `observe`:
/// it is logged and counted but served, to roll checks out safely; `off`: no checks.
#[derive(Debug, Default, Clone, Copy, PartialEq, Eq, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum VerifyMode {
    #[default]
    Enforce,
    Observe,
    Off,
}

#[derive(Debug, Clone, Copy, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct ClassTimeouts {
    pub timeout_ms: Option<u64>,
    pub attempt_timeout_ms: Option<u64>,
}

fn d_class_timeouts() -> BTreeMap<String, ClassTimeouts> {
    let slow = ClassTimeouts {
        timeout_ms: Some(60_000),
        attempt_timeout_ms: Some(30_000),
    };
    [("trace", slow), ("debug", slow)]
        .into_iter()
        .map(|(k, v)| (k.to_string(), v))
        .collect()
}

/// `eth_getLogs`: the widest range (in blocks) a call may ask for, by plan (a plan not
/// listed has the range of the nearest plan below it); wider than `chunk_blocks`, a range
/// is fetched in chunks, `parallel` at a time, merged in order; a chunk a node refuses as
/// too large is bisected, at most `max_node_calls` calls in all; more than `max_results`
/// logs is an error naming the range that fits.
#[derive(Debug, Clone, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct LogsConf {
    #[serde(default = "d_logs_ranges")]
    pub max_block_range: BTreeMap<String, u64>,
    #[serde(default = "d_logs_chunk")]
    pub chunk_blocks: u64,
    #[serde(default = "d_logs_parallel")]
    pub parallel: usize,
    #[serde(default = "d_logs_results")]
    pub max_results: usize,
    #[serde(default = "d_logs_calls")]
    pub max_node_calls: usize,
}

impl Default for LogsConf {
    fn default() -> Self {
        LogsConf {
            max_block_range: d_logs_ranges(),
            chunk_blocks: d_logs_chunk(),
            parallel: d_logs_parallel(),
            max_results: d_logs_results(),
            max_node_calls: d_logs_calls(),
        }
    }
}

/// Modelled on the large providers' published bounds: a few hundred blocks on free
/// tiers, 10,000 on paid ones, wider for dedicated plans.
fn d_logs_ranges() -> BTreeMap<String, u64> {
    [
        ("anonymous", 500),
        ("free", 500),
        ("basic", 2_000),
        ("pro", 10_000),
        ("business", 50_000),
        ("enterprise", 1_000_000),
        ("scale", 1_000_000),
    ]
    .into_iter()
    .map(|(k, v)| (k.to_string(), v))
    .collect()
}

/// `rpc.cache`: answers kept for as long as what they depend on cannot change
/// (`src/rpc/cache.rs`).
#[derive(Debug, Clone, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct CacheConf {
    #[serde(default = "d_true")]
    pub enabled: bool,
    /// All answers kept, in bytes; least recently used out first.
    #[serde(default = "d_cache_bytes")]
    pub max_bytes: usize,
    /// One answer larger than this is not kept.
    #[serde(default = "d_cache_entry")]
    pub max_entry_bytes: usize,
    /// What follows the head (`latest`, gas prices): until the head moves, at most this.
    #[serde(default = "d_cache_head_ttl")]
    pub head_ttl_ms: u64,
    /// A numbered block not finalized yet: until a reorg, at most this.
    #[serde(default = "d_cache_unfinal_ttl")]
    pub unfinalized_ttl_ms: u64,
    /// How often the head and the finalized block are read (and reorgs told).
    #[serde(default = "d_cache_track")]
    pub track_interval_ms: u64,
}

impl Default for CacheConf {
    fn default() -> Self {
        CacheConf {
            enabled: true,
            max_bytes: d_cache_bytes(),
            max_entry_bytes: d_cache_entry(),
            head_ttl_ms: d_cache_head_ttl(),
            unfinalized_ttl_ms: d_cache_unfinal_ttl(),
            track_interval_ms: d_cache_track(),
        }
    }
}

fn d_cache_bytes() -> usize {
    64 << 20
}

fn d_cache_entry() -> usize {
    1 << 20
}

fn d_cache_head_ttl() -> u64 {
    1_000
}

fn d_cache_unfinal_ttl() -> u64 {
    10_000
}

fn d_cache_track() -> u64 {
    1_000
}

fn d_min_block_wait() -> u64 {
    2_000
}

fn d_logs_chunk() -> u64 {
    2_000
}

fn d_logs_parallel() -> usize {
    4
}

fn d_logs_results() -> usize {
    10_000
}

fn d_logs_calls() -> usize {
    64
}

/// Hedged reads: when the host tried first has not answered within its recent latency
/// quantile, the next host gets the same call; the first answer wins, the other attempt
/// is dropped. Never for writes, filters or anything with an effect.
#[derive(Debug, Clone, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct HedgeConf {
    #[serde(default = "d_true")]
    pub enabled: bool,
    /// Which of the host's recent answer times the delay is (0.95: its p95).
    #[serde(default = "d_hedge_quantile")]
    pub quantile: f64,
    /// Bounds on the delay: no hedge sooner than `min_delay_ms` (a fast host's tail is
    /// noise), none later than `max_delay_ms` (also the delay before a host has history).
    #[serde(default = "d_hedge_min")]
    pub min_delay_ms: u64,
    #[serde(default = "d_hedge_max")]
    pub max_delay_ms: u64,
    /// Method classes hedged: `read`, `trace`, `debug`, `txpool`.
    #[serde(default = "d_hedge_classes")]
    pub classes: Vec<String>,
}

impl Default for HedgeConf {
    fn default() -> Self {
        HedgeConf {
            enabled: true,
            quantile: d_hedge_quantile(),
            min_delay_ms: d_hedge_min(),
            max_delay_ms: d_hedge_max(),
            classes: d_hedge_classes(),
        }
    }
}

fn d_hedge_quantile() -> f64 {
    0.95
}
fn d_hedge_min() -> u64 {
    20
}
fn d_hedge_max() -> u64 {
    400
}
fn d_hedge_classes() -> Vec<String> {
    vec!["read".into(), "txpool".into()]
}
fn d_attempt_timeout() -> u64 {
    4_000
}

fn d_method_plans() -> BTreeMap<String, String> {
    [("trace", "pro"), ("debug", "pro"), ("txpool", "basic")]
        .into_iter()
        .map(|(k, v)| (k.to_string(), v.to_string()))
        .collect()
}

fn d_body() -> usize {
    1 << 20
}
fn d_batch() -> usize {
    100
}
fn d_resp() -> usize {
    32 << 20
}
fn d_timeout() -> u64 {
    10_000
}
fn d_attempts() -> usize {
    3
}

impl Default for RpcConf {
    fn default() -> Self {
        RpcConf {
            max_body_bytes: d_body(),
            max_batch: d_batch(),
            max_response_bytes: d_resp(),
            timeout_ms: d_timeout(),
            attempt_timeout_ms: d_attempt_timeout(),
            class_timeouts: d_class_timeouts(),
            hedge: HedgeConf::default(),
            coalesce: true,
            get_logs: LogsConf::default(),
            min_block_wait_ms: d_min_block_wait(),
            cache: CacheConf::default(),
            max_attempts: d_attempts(),
            write_policy: WritePolicy::default(),
            method_plans: d_method_plans(),
            verify: VerifyConf::default(),
        }
    }
}

/// How `eth_sendRawTransaction` is dispatched.
#[derive(Debug, Default, Clone, Copy, PartialEq, Eq, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum WritePolicy {
    /// Every healthy node of the pool at once; the fleet learns it without gossip.
    #[default]
    Broadcast,
    /// Host after host until one accepts.
    FirstAccepting,
}

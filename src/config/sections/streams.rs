//! `streams`: long-lived streams served by the edge (MEV-Share SSE, the Polygon
//! firehose) and WebSocket sessions.

use crate::config::secrets::SecretRef;
use serde::Deserialize;
use std::collections::BTreeMap;

/// Long-lived streams served by the edge (MEV-Share SSE).
#[derive(Debug, Clone, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct StreamsConf {
    /// The server closes a MEV-Share stream after this long; the client reconnects.
    #[serde(default = "d_window")]
    pub mev_share_window_secs: u64,
    /// A `:ping` comment after this long without anything sent.
    #[serde(default = "d_ping")]
    pub ping_interval_secs: u64,
    /// Open MEV-Share streams in total, across users.
    #[serde(default = "d_max_streams")]
    pub max_streams: usize,
    /// WebSocket JSON-RPC sessions terminated at the edge.
    #[serde(default)]
    pub websocket: WebSocketConf,
    /// The Polygon firehose channels (`/ws/polygon/{logs,mempool}`).
    #[serde(default)]
    pub firehose: FirehoseConf,
}

/// Firehose connection tokens: signed with `secret` (a secret reference, at least 32
/// bytes), valid for `token_ttl_secs` (to connect; an open channel stays open), for a
/// channel at `public_url` (default: `console.origin` with a ws scheme).
#[derive(Debug, Clone, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct FirehoseConf {
    #[serde(default)]
    pub secret: Option<SecretRef>,
    #[serde(default = "d_token_ttl")]
    pub token_ttl_secs: u64,
    #[serde(default)]
    pub public_url: Option<String>,
}

impl Default for FirehoseConf {
    fn default() -> Self {
        FirehoseConf {
            secret: None,
            token_ttl_secs: d_token_ttl(),
            public_url: None,
        }
    }
}

fn d_token_ttl() -> u64 {
    60
}

/// Bounds of a WebSocket JSON-RPC session (`/rpc/eth` upgrades).
#[derive(Debug, Clone, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct WebSocketConf {
    /// Open WebSocket connections per API key (per client address when anonymous), by
    /// plan; plans not listed get `default`.
    #[serde(default = "d_ws_connections")]
    pub max_connections_per_key: BTreeMap<String, usize>,
    /// Subscriptions one connection may hold at once.
    #[serde(default = "d_ws_subscriptions")]
    pub max_subscriptions_per_connection: usize,
    /// Subscriptions all of a key's connections may hold at once (across instances when
    /// clustered), by plan (`default` for plans not listed).
    #[serde(default = "d_ws_key_subscriptions")]
    pub max_subscriptions_per_key: BTreeMap<String, usize>,
    /// Messages waiting to go to one client; a client that lets more pile up is closed
    /// (1008, "slow consumer") rather than buffered without bound.
    #[serde(default = "d_ws_queue")]
    pub send_queue: usize,
    /// A ping goes out after this long; a connection silent for `idle_timeout_secs`
    /// (no message, no pong) is closed.
    #[serde(default = "d_ws_ping")]
    pub ping_interval_secs: u64,
    #[serde(default = "d_ws_idle")]
    pub idle_timeout_secs: u64,
}

impl Default for WebSocketConf {
    fn default() -> Self {
        WebSocketConf {
            max_connections_per_key: d_ws_connections(),
            max_subscriptions_per_connection: d_ws_subscriptions(),
            max_subscriptions_per_key: d_ws_key_subscriptions(),
            send_queue: d_ws_queue(),
            ping_interval_secs: d_ws_ping(),
            idle_timeout_secs: d_ws_idle(),
        }
    }
}

impl WebSocketConf {
    /// The connection cap for a plan.
    pub fn max_connections(&self, plan: &str) -> usize {
        self.max_connections_per_key
            .get(plan)
            .or_else(|| self.max_connections_per_key.get("default"))
            .copied()
            .unwrap_or(16)
    }

    /// The key-wide subscription cap for a plan.
    pub fn max_key_subscriptions(&self, plan: &str) -> usize {
        self.max_subscriptions_per_key
            .get(plan)
            .or_else(|| self.max_subscriptions_per_key.get("default"))
            .copied()
            .unwrap_or(64)
    }
}

fn d_ws_connections() -> BTreeMap<String, usize> {
    [
        ("default", 16),
        ("free", 4),
        ("basic", 16),
        ("pro", 64),
        ("business", 256),
        ("enterprise", 1024),
        ("scale", 1024),
        ("anonymous", 2),
    ]
    .into_iter()
    .map(|(k, v)| (k.to_string(), v))
    .collect()
}
fn d_ws_key_subscriptions() -> BTreeMap<String, usize> {
    [
        ("default", 64),
        ("free", 16),
        ("basic", 64),
        ("pro", 256),
        ("business", 1024),
        ("enterprise", 4096),
        ("scale", 4096),
        ("anonymous", 4),
    ]
    .into_iter()
    .map(|(k, v)| (k.to_string(), v))
    .collect()
}
fn d_ws_subscriptions() -> usize {
    32
}
fn d_ws_queue() -> usize {
    256
}
fn d_ws_ping() -> u64 {
    30
}
fn d_ws_idle() -> u64 {
    120
}

impl Default for StreamsConf {
    fn default() -> Self {
        StreamsConf {
            mev_share_window_secs: d_window(),
            ping_interval_secs: d_ping(),
            max_streams: d_max_streams(),
            websocket: WebSocketConf::default(),
            firehose: FirehoseConf::default(),
        }
    }
}

fn d_window() -> u64 {
    3600
}
fn d_ping() -> u64 {
    15
}
fn d_max_streams() -> usize {
    10_000
}

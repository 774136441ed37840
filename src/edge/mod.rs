//! The edge: one request pipeline behind both servers (the lean HTTP/1.1 front and
//! Pingora). Read it in this order:
//!
//! | file | stage |
//! |---|---|
//! | `context.rs` | the request's state (`Ctx`), what the pipeline decided (`Outcome`), request ids |
//! | `pipeline.rs` | classify → CORS → switches → guard → dispatch |
//! | `guard.rs` | authenticate, authorize (plans, scopes, features), rate limits |
//! | `dispatch.rs` | passthroughs become a `Pass`; JSON-RPC goes to the gateway |
//! | `local.rs` | which local handler answers a route |
//! | `hop.rs` | what never crosses a hop toward a node or back |
//! | `retry.rs` | when a passthrough goes on to the next host |
//! | `websocket.rs` | WebSocket JSON-RPC: the upgrade, then each message under the same policy |
//! | `live.rs` | the state as last (re)loaded, taken by each request at its start |
//! | `lease.rs` | how long a held session or channel may live: key revoked or lapsed, token expired |
//! | `proxy_http.rs` | Pingora's `ProxyHttp` phases around the pipeline, and the access log |
//! | `respond.rs` | writing a local `Reply` on Pingora's session |
//! | `downstream.rs` | the one view of a client request both servers give the pipeline |
//! | `servers.rs` | the rest of what the two servers use of the edge |
//!
//! The lean front (`src/front/`) uses only what is re-exported below under "the
//! servers' interface"; nothing else of the edge is visible outside it.

mod context;
mod cors;
mod dispatch;
mod downstream;
mod firehose;
mod guard;
mod hop;
mod lease;
mod live;
mod local;
mod pipeline;
mod proxy_http;
mod push_channel;
mod respond;
pub(crate) mod retry;
mod servers;
mod sol_watch_ws;
mod tx_ws;
mod websocket;
mod ws_conn;
mod ws_upgrade;

use crate::config::Loaded;
use crate::pools::Pools;
use crate::routes::matcher::Matcher;
use crate::rpc::Gateway;
use std::sync::Arc;

pub use live::Live;

// The servers' interface: the request's state and what the pipeline decided, the view of
// a client request the pipeline reads, the hop rules and the retry rule (`retry`) a
// passthrough follows, and the wire form of the edge's own headers.
pub(crate) use context::{Ctx, Outcome, Pass, PASS_READ_TIMEOUT};
pub(crate) use downstream::{payload_too_large, unreadable_body, Downstream, PreMatch};
pub(crate) use hop::{
    connection_options, forwarded_for, has_underscore, sets_console_cookie, CALLER_ONLY_HEADERS,
};
pub(crate) use respond::each_header;
pub(crate) use ws_upgrade::{handshake_headers, WsUpgrade};

/// Everything the edge needs: built at start-up, and again (sharing what holds state:
/// caches, sessions, counts) by each configuration reload (`app::reloaded_state`).
pub struct State {
    pub matcher: Matcher,
    /// The API's OpenAPI document (`src/contract.rs`), served at `/openapi.json`.
    pub openapi: bytes::Bytes,
    pub config: Loaded,
    pub pools: Arc<Pools>,
    pub gateway: Arc<Gateway>,
    pub keys: Arc<crate::auth::keys::KeyAuth>,
    /// What the mempool watchers keep (`src/state/mempool.rs`).
    pub mempools: Arc<crate::state::mempool::Mempools>,
    /// The store, for handlers that read it (the chain index).
    pub store: crate::store::Store,
    pub limiter: crate::limits::Limiter,
    /// What calls and routes cost, for compute-unit limits and usage.
    pub compute_units: crate::rpc::compute_units::ComputeUnits,
    /// Per-key usage gathered in memory (`src/capture/usage/` journals and flushes it).
    pub usage: Arc<crate::usage::Usage>,
    /// Each key's newest requests, gathered in memory (`src/capture/usage/requests.rs`
    /// writes them to the store).
    pub requests: Arc<crate::usage::requests::RequestLog>,
    pub metrics_cache: Arc<crate::state::metrics_cache::MetricsCache>,
    pub console: Arc<crate::console::Console>,
    pub stream_slots: Arc<crate::state::stream_slots::StreamSlots>,
    /// Open WebSocket connections per owner.
    pub ws_connections: Arc<crate::cluster::places::OwnerPlaces>,
    /// Subscriptions held over WebSocket per owner.
    pub ws_subscriptions: Arc<crate::cluster::places::OwnerPlaces>,
    pub subscriptions: Arc<crate::streams::subscriptions::Hub>,
    /// Shared event streams (beacon events).
    pub events: Arc<crate::streams::events::EventsHub>,
    /// Transactions the REST senders took recently (resends are answered once).
    pub sent: Arc<crate::state::sent::SentTransactions>,
    /// Peer-graph snapshots by depth.
    pub peer_graphs: Arc<crate::state::peer_graphs::PeerGraphs>,
    /// Solana watchlist push: the registry handlers update, the WebSocket channels' feed.
    pub sol_watch: Arc<crate::state::sol_watch::SolWatch>,
    /// Status changes of followed transactions, for `/ws/txs` and the hooks.
    pub tx_push: Arc<crate::state::tx_push::TxPush>,
    /// The MEV-cache hosts' last scrapes (`src/state/mev_snapshots.rs`).
    pub mev_cache: Arc<crate::state::mev_snapshots::Snapshots>,
    /// What the Solana senders submitted, followed until it lands (`src/state/sol_mempool.rs`).
    pub sol_mempool: Arc<crate::state::sol_mempool::SolMempool>,
}

pub struct Edge {
    pub state: Arc<State>,
    /// Where the current state is, for an edge that serves many requests (the servers'):
    /// each request takes its own view (`now`).
    pub live: Option<Arc<Live>>,
}
#[cfg(test)]
mod tests;

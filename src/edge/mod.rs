//! The edge: one request pipeline behind both servers (the lean HTTP/1.1 front and
//! Pingora). Read it in this order:
//!
//! | file | stage |
//! |---|---|
//! | `context.rs` | the request's state (`Ctx`), what the pipeline decided (`Outcome`), request ids |
//! | `pipeline.rs` | classify → CORS → switches → guard → dispatch |
//! | `guard.rs` | authenticate, authorize (plans, scopes, features), rate limits |
//! | `dispatch.rs` | JSON-RPC goes to the gateway; a channel (`handlers::channels`) opens and its outcome becomes a `Pass`, a stream or a held socket |
//! | `local.rs` | which local handler answers a route |
//! | `hop.rs` | what never crosses a hop toward a node or back |
//! | `retry.rs` | when a passthrough goes on to the next host |
//! | `websocket.rs` | WebSocket JSON-RPC: the upgrade, then each message under the same policy; the held socket of every WebSocket session, push channels' too |
//! | `live.rs` | the state as last (re)loaded, taken by each request at its start |
//! | `lease.rs` | how long a held session or channel may live: key revoked or lapsed, token expired |
//! | `proxy_http.rs` | Pingora's `ProxyHttp` phases around the pipeline |
//! | `finish.rs` | the finish step: metrics, usage, the access log and the request log of every finished request |
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
mod finish;
mod guard;
mod hop;
mod lease;
mod live;
mod local;
mod pipeline;
mod proxy_http;
mod respond;
pub(crate) mod retry;
mod servers;
mod websocket;
mod ws_conn;
mod ws_upgrade;

use crate::config::Loaded;
use crate::pools::Pools;
use crate::routes::matcher::Matcher;
use crate::rpc::Gateway;
use crate::state::shared::Shared;
use std::sync::Arc;

pub use live::Live;

// The servers' interface: the request's state and what the pipeline decided, the view of
// a client request the pipeline reads, the hop rules and the retry rule (`retry`) a
// passthrough follows, and the wire form of the edge's own headers.
pub(crate) use context::{Ctx, Outcome, Pass, PASS_READ_TIMEOUT};
pub(crate) use downstream::{payload_too_large, unreadable_body, Downstream, PreMatch};
pub(crate) use hop::{
    connection_options, forwarded_for, has_underscore, listed, sets_console_cookie, Listed,
};
// `listed` matches these names itself; the lean front's test holds the two equal.
#[cfg(test)]
pub(crate) use hop::CALLER_ONLY_HEADERS;
pub(crate) use respond::each_header;
pub(crate) use ws_upgrade::{handshake_headers, WsUpgrade};

/// The edge's snapshot of the configuration: what a reload rebuilds (routes, the
/// OpenAPI document, the configuration, pools, the gateway and its settings, limits,
/// costs), around the long-lived services it shares with every other snapshot
/// (`state::shared::Shared`, which it dereferences to). Built at start-up
/// (`app::edge_state`) and by each reload (`app::reloaded_state`).
pub struct State {
    pub shared: Arc<Shared>,
    pub matcher: Matcher,
    /// The API's OpenAPI document (`src/contract/`), served at `/openapi.json`.
    pub openapi: bytes::Bytes,
    pub config: Loaded,
    pub pools: Arc<Pools>,
    pub gateway: Arc<Gateway>,
    pub limiter: crate::limits::Limiter,
    /// What calls and routes cost, for compute-unit limits and usage.
    pub compute_units: crate::rpc::compute_units::ComputeUnits,
}

impl std::ops::Deref for State {
    type Target = Shared;

    fn deref(&self) -> &Shared {
        &self.shared
    }
}

pub struct Edge {
    pub state: Arc<State>,
    /// Where the current state is, for an edge that serves many requests (the servers'):
    /// each request takes its own view (`now`).
    pub live: Option<Arc<Live>>,
}
#[cfg(test)]
mod tests;

//! chainedge as a library. The facade is small and deliberate: `app` loads the
//! configuration and runs the server (the binary, `src/main.rs`, is its command line),
//! `cli` holds the operator subcommands, `config` and `store` are what the integration
//! tests and tools drive directly, and `parsers` gathers the pure parsers that face
//! untrusted input for the fuzz targets (`fuzz/`). Everything else is private to the
//! crate.
//!
//! The modules by layer, top to bottom (a module imports only from its own layer or
//! below; `docs/architecture.md` has the picture):
//!
//! - **Servers**: `front` (the lean HTTP/1.1 front of plain listeners), `edge` (the
//!   request pipeline over either server, and Pingora's `ProxyHttp` phases).
//! - **Surfaces**: `handlers` (local handlers: a plain `handlers::Request` in, a
//!   `reply::Reply` or `reply::EventStream` out), `console` (sign-in and keys), `rpc`
//!   (the JSON-RPC gateway), `streams` (shared node subscriptions), and the background
//!   producers behind product routes: `index` (the chain indexer), `mempool` (watchers),
//!   `capacity` (the consensus-layer capacity series), `sol_stake` (Solana epoch stake
//!   snapshots), `sol_watch` (Solana watchlist push), `mev_cache` (MEV-cache
//!   analytics samples), `sol_mempool` (the Solana senders' transactions until they land).
//! - **Fleet**: `pools` (hosts, health, order of attempts), `upstream` (the client to
//!   nodes).
//! - **Policy and data**: `routes` (manifests → the route table), `contract` (the
//!   route table and its schemas as OpenAPI), `auth`, `limits`,
//!   `usage` (per-key counts flushed to the store), `cluster` (limits and notices shared
//!   over Redis), `store`, `config`, `cli`.
//! - **Leaves** (importing at most each other): `reply`, `errors`, `jsonrpc`, `signed_tx`, `sol_tx`, `net_policy`, `crypto`, `address`,
//!   `shutdown`, `deadline`, `observe`.

/// The parsers that face untrusted input (request heads, node answers, chunked bodies,
/// JSON-RPC bodies, route manifests, metrics exposition), for the fuzz targets.
pub mod parsers {
    pub use crate::front::request::{Head, Parsed};
    pub use crate::handlers::beacon::policy as beacon_policy;
    pub use crate::handlers::relay::check as relay_check;
    pub use crate::jsonrpc::methods::{block_need, classify, MethodClass};
    pub use crate::jsonrpc::quantity::batch_len;
    pub use crate::routes::matcher::{Match, Matcher, NormalizedPath};
    pub use crate::routes::{load as load_routes, RouteContext};
    pub use crate::rpc::compute_units::{error_answers, ComputeUnits};
    pub use crate::rpc::{
        method_of, need_at, tx_hash, write_outcome, CallView, Need, WriteOutcome,
    };
    pub use crate::scrub::scrub;
    pub use crate::signed_tx::decode as decode_signed_tx;
    pub use crate::sol_tx::decode_wire as decode_sol_tx;
    pub use crate::upstream::chunked::{ChunkedScanner, Scan};
    pub use crate::upstream::h1::{parse_head, parse_head_visit, Framing};
}

// Top: the server assembled, and the operator's command line.
pub mod app;
pub mod cli;

// Servers.
mod edge;
mod front;

// Surfaces.
mod console;
mod handlers;

// Capture.
mod capacity;
mod index;
mod mempool;
mod mev_cache;
mod sol_mempool;
mod sol_stake;
mod sol_watch;

// Gateway.
mod rpc;
mod streams;

// Fleet.
mod pools;
mod upstream;

// Policy and data.
mod auth;
mod cluster;
pub mod config;
mod contract;
mod limits;
mod routes;
pub mod store;
mod usage;

// Leaves.
mod address;
mod crypto;
mod deadline;
mod errors;
mod jsonrpc;
mod net_policy;
mod observe;
mod reply;
mod scrub;
mod shutdown;
mod signed_tx;
mod sol_tx;

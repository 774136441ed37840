//! chainedge as a library. The facade is small and deliberate: `app` loads the
//! configuration and runs the server (the binary, `src/main.rs`, is its command line),
//! `cli` holds the operator subcommands, `config` and `store` are what the integration
//! tests and tools drive directly, and `parsers` gathers the pure parsers that face
//! untrusted input for the fuzz targets (`fuzz/`). Everything else is private to the
//! crate.
//!
//! The modules by layer, top to bottom, grouped below under `// <Layer>` comments. A
//! module imports only from its own layer or below, and no two modules import each
//! other, directly or around a circle; inside a folder, no two files do either.
//! `scripts/check_shape.py` (run by `make lint`) checks this against the groups below;
//! `docs/architecture.md` has the picture.
//!
//! - **Top**: `app` (the server assembled), `cli` (the operator's subcommands).
//! - **Servers**: `front` (the lean HTTP/1.1 front of plain listeners), `edge` (the
//!   request pipeline over either server, and Pingora's `ProxyHttp` phases).
//! - **Surfaces**: `handlers` (a plain `handlers::Request` in, a `reply::Reply` out;
//!   and the channels, `handlers::channels`: a plain `ChannelRequest` in, a generic
//!   outcome out, a passthrough's hosts and path, a `reply::EventStream` or a push feed).
//! - **Capture**: `capture`, every background producer behind one contract (indexers,
//!   mempool watchers, Solana's producers, the capacity series, the usage flusher).
//!   Only the top (`app`) imports it: what handlers read of what it wrote is in `state`.
//! - **State**: `state`, what handlers and producers share: the read models producers
//!   write (mempools, Solana's mempool and MEV-cache snapshots), the registries and
//!   push feeds both drive (watchlists, transaction webhooks and channels), and the
//!   handlers' long-lived services (sent transactions, caches, stream slots); `Shared`
//!   (`state::shared`), every long-lived service in one value; and `console` (sign-in
//!   and sessions).
//! - **Gateway**: `rpc` (the JSON-RPC gateway), `streams` (shared node subscriptions
//!   and event streams).
//! - **Fleet**: `pools` (hosts, health, order of attempts), `upstream` (the client to
//!   nodes).
//! - **Policy and data**: `routes` (manifests → the route table), `contract` (the
//!   route table and its schemas as OpenAPI), `auth`, `limits`, `usage` (per-key
//!   counts in memory), `cluster` (limits and notices shared over Redis), `store`,
//!   `config`, `tracking` (sent transactions followed to finality), `verify` (answers
//!   checked against themselves, proofs walked to a root).
//! - **Leaves** (importing at most each other): `reply`, `errors`, `jsonrpc` (with the
//!   method table), `signed_tx`, `sol_tx`, `net_policy`, `key_restrictions` (what an owner narrowed a key to), `crypto`, `address`, `scrub`,
//!   `shutdown`, `deadline`, `observe`, `clock` (wall-clock time, Unix seconds).

/// The parsers that face untrusted input (request heads, node answers, chunked bodies,
/// JSON-RPC bodies, route manifests, metrics exposition), for the fuzz targets.
pub mod parsers {
    pub use crate::front::proxy_protocol::{parse as parse_proxy_header, Parsed as ProxyHeader};
    pub use crate::front::request::{Head, Parsed};
    pub use crate::handlers::beacon::policy as beacon_policy;
    pub use crate::handlers::channels::traits as channel_traits;
    pub use crate::handlers::registry::names as handler_names;
    pub use crate::handlers::relay::check as relay_check;
    pub use crate::jsonrpc::methods::{block_need, classify, MethodClass};
    pub use crate::jsonrpc::quantity::batch_len;
    pub use crate::routes::matcher::{Match, Matcher, NormalizedPath};
    pub use crate::routes::{load as load_routes, RouteContext};
    pub use crate::rpc::compute_units::{error_answers, ComputeUnits};
    pub use crate::rpc::{
        method_of, need_at, tx_hash, write_outcome, CallView, Incoming, Need, WriteOutcome,
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
mod handlers;

// Capture: imported only by the top.
mod capture;

// State.
mod console;
mod state;

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
mod tracking;
mod usage;
mod verify;

// Leaves.
mod address;
mod clock;
mod crypto;
mod deadline;
mod errors;
pub mod heap_tidy;
mod jsonrpc;
mod key_restrictions;
mod net_policy;
mod observe;
mod reply;
mod scrub;
mod shutdown;
mod signed_tx;
mod sol_tx;

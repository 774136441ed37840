//! chainedge as a library: the binary (`src/main.rs`) wires these modules into a Pingora
//! server; fuzz targets (`fuzz/`) and benchmarks call the pure parts directly.
//!
//! The modules by layer, top to bottom (a module imports only from its own layer or
//! below; `docs/architecture.md` has the picture):
//!
//! - **Servers**: `front` (the lean HTTP/1.1 front of plain listeners), `edge` (the
//!   request pipeline over either server, and Pingora's `ProxyHttp` phases).
//! - **Surfaces**: `handlers` (local handlers: a plain `handlers::Request` in, a
//!   `reply::Reply` or `reply::EventStream` out), `console` (sign-in and keys), `rpc`
//!   (the JSON-RPC gateway), `streams` (shared node subscriptions), and the background
//!   producers behind product routes: `index` (the chain indexer), `mempool` (watchers).
//! - **Fleet**: `pools` (hosts, health, order of attempts), `upstream` (the client to
//!   nodes).
//! - **Policy and data**: `routes` (manifests → the route table), `auth`, `limits`,
//!   `cluster` (limits and notices shared over Redis), `store`, `config`, `cli`.
//! - **Leaves** (importing at most each other): `reply`, `errors`, `jsonrpc`, `crypto`, `address`,
//!   `shutdown`, `deadline`, `observe`.

// Servers.
pub mod edge;
pub mod front;

// Surfaces.
pub mod console;
pub mod handlers;
pub mod index;
pub mod mempool;
pub mod rpc;
pub mod streams;

// Fleet.
pub mod pools;
pub mod upstream;

// Policy and data.
pub mod auth;
pub mod cli;
pub mod cluster;
pub mod config;
pub mod limits;
pub mod routes;
pub mod store;

// Leaves.
pub mod address;
pub mod crypto;
pub mod deadline;
pub mod errors;
pub mod jsonrpc;
pub mod observe;
pub mod reply;
pub mod shutdown;

//! chainedge as a library: the binary (`src/main.rs`) wires these modules into a Pingora
//! server; fuzz targets (`fuzz/`) and benchmarks call the pure parts directly.

pub mod address;
pub mod auth;
pub mod cli;
pub mod config;
pub mod console;
pub mod crypto;
pub mod deadline;
pub mod edge;
pub mod errors;
pub mod front;
pub mod handlers;
pub mod limits;
pub mod observe;
pub mod pools;
pub mod reply;
pub mod routes;
pub mod rpc;
pub mod shutdown;
pub mod store;
pub mod streams;
pub mod upstream;

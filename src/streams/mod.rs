//! Streams held on nodes on behalf of clients: shared subscriptions, one node
//! subscription per (pool, kind, parameters) fanned out to every client that asked.

pub mod events;
pub mod first_host;
pub(crate) mod node_link;
pub mod push;
pub mod subscribe_params;
pub mod subscriptions;

//! Streams held on nodes on behalf of clients: today a WebSocket client's subscriptions
//! on a node's WebSocket (`node_ws`); shared upstream subscriptions and event streams
//! fanned out to many clients come next.

pub mod node_ws;

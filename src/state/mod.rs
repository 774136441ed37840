//! State shared by the handlers and the background producers: the in-memory read
//! models the producers write and the handlers read (mempools, Solana's mempool and
//! MEV-cache snapshots), the registries and push feeds both sides drive (Solana
//! watchlists, transaction webhooks and channels, their webhook sender), and the
//! handlers' own long-lived services (sent transactions, the metrics mirror's cache,
//! peer-graph snapshots, MEV-Share stream slots). Producers (`capture`) and handlers
//! import from here; nothing here imports either.

pub mod deliveries;
pub mod mempool;
pub mod metrics_cache;
pub mod mev_snapshots;
pub mod peer_graphs;
pub mod sent;
pub mod shared;
pub mod sol_mempool;
pub mod sol_watch;
pub mod stream_slots;
pub mod tx_push;
pub mod webhook;

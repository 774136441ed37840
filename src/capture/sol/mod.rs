//! Solana's producers: epoch stake snapshots (`stake`), watchlist push (`watch`), the
//! senders' transactions followed until they land (`mempool`), and MEV-cache samples
//! (`mev_cache`).

pub mod mempool;
pub mod mev_cache;
pub mod stake;
pub mod watch;

//! Local handlers: routes answered by the edge itself rather than passed through.

pub mod beacon;
pub mod mesh;
pub mod metrics_mirror;
pub mod mev_share;
pub mod relay;
pub mod scrub;
pub mod sender;

//! Prometheus metrics (own listener) and the structured access log.

pub mod access_log;
pub mod metrics;

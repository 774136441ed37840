//! `GET /v1/{eth,polygon}/mempool/snapshot` and `…/mempool/stats`, answered from what
//! the chain's mempool watcher keeps in memory (`src/capture/mempool/`): no node is called.
//!
//! - Snapshot: pending transactions, highest gas price first; `limit` 1–500 (default 100).
//! - Stats: over `window` (`1m` default, `5m`, `15m`, `1h`): arrivals per second, gas
//!   price percentiles in gwei (0 when nothing arrived), the top 10 senders by count.

use super::Request;
use crate::errors::ApiError;
use crate::reply::Reply;
use crate::state::mempool::{Mempools, WINDOWS};
use serde_json::json;

pub const DEFAULT_SNAPSHOT: usize = 100;
pub const MAX_SNAPSHOT: usize = 500;

pub const HANDLERS: &[super::Handler] = &[
    super::Handler::new("eth_mempool_snapshot", |s, r| {
        Box::pin(async move { serve(s.mempools(), "eth", false, r) })
    }),
    super::Handler::new("eth_mempool_stats", |s, r| {
        Box::pin(async move { serve(s.mempools(), "eth", true, r) })
    }),
    super::Handler::new("polygon_mempool_snapshot", |s, r| {
        Box::pin(async move { serve(s.mempools(), "polygon", false, r) })
    }),
    super::Handler::new("polygon_mempool_stats", |s, r| {
        Box::pin(async move { serve(s.mempools(), "polygon", true, r) })
    }),
];

/// A chain's snapshot, or its stats over a window (`stats`).
fn serve(
    mempools: &Mempools,
    chain: &str,
    stats: bool,
    req: &Request<'_>,
) -> Result<Reply, ApiError> {
    // Parameters first: a bad one is a 400 whether or not the chain is watched.
    let window = if stats {
        let name = req.query_param("window").unwrap_or_else(|| "1m".into());
        let secs = WINDOWS
            .iter()
            .find(|(w, _)| *w == name)
            .map(|w| w.1)
            .ok_or_else(|| {
                let names: Vec<&str> = WINDOWS.iter().map(|w| w.0).collect();
                ApiError::invalid_params(format!("window must be one of {}", names.join(", ")))
            })?;
        Some((name, secs))
    } else {
        None
    };
    let limit = match req.query_param("limit") {
        None => DEFAULT_SNAPSHOT,
        Some(raw) => raw
            .parse::<usize>()
            .ok()
            .filter(|n| (1..=MAX_SNAPSHOT).contains(n))
            .ok_or_else(|| {
                ApiError::invalid_params(format!(
                    "limit must be an integer from 1 to {MAX_SNAPSHOT}"
                ))
            })?,
    };
    if !mempools.watches(chain) {
        return Err(ApiError::new(
            503,
            "mempool_not_configured",
            format!("the {chain} mempool is not watched here (config `mempool.{chain}`)"),
        ));
    }
    let unavailable = || ApiError::internal("mempool view");
    let body = match window {
        Some((name, secs)) => {
            let s = mempools.stats(chain, secs).ok_or_else(unavailable)?;
            let top: Vec<_> = s
                .top_senders
                .iter()
                .map(|(address, count)| json!({"address": address, "count": count}))
                .collect();
            json!({
                "window": name,
                "tx_per_sec": s.tx_per_sec,
                "gas_p50_gwei": s.gas_p50_gwei,
                "gas_p95_gwei": s.gas_p95_gwei,
                "gas_p99_gwei": s.gas_p99_gwei,
                "top_senders": top,
                "samples": s.samples,
            })
        }
        None => {
            let (pending, age, txs) = mempools.snapshot(chain, limit).ok_or_else(unavailable)?;
            let txs: Vec<_> = txs
                .iter()
                .map(|t| {
                    json!({
                        "hash": t.hash,
                        "from": t.from,
                        "to": t.to,
                        "nonce": t.nonce,
                        "gas_price_gwei": t.gas_price_wei as f64 / 1e9,
                        "first_seen": t.first_seen,
                    })
                })
                .collect();
            json!({
                "chain": chain,
                "pending": pending,
                // How old the view is (null before the first successful poll).
                "age_ms": age.map(|a| a.as_millis() as u64),
                "txs": txs,
            })
        }
    };
    Ok(Reply::json(200, body.to_string()))
}

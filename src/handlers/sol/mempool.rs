//! `GET /v1/sol/mempool/snapshot` and `/stats`, from the transactions this instance's
//! senders accepted for the caller's own tenant (`src/capture/sol/mempool.rs`; Solana has no
//! public mempool).

use super::{int_param, Request};
use crate::errors::ApiError;
use crate::reply::Reply;
use crate::state::sol_mempool::{Fate, WINDOW};
use serde_json::json;

pub const SNAPSHOT_DEFAULT: i64 = 100;
pub const SNAPSHOT_MAX: i64 = 1000;

/// The value at rank `q` (0..1) of sorted `v`, nearest rank.
fn nearest_rank(v: &[i64], q: f64) -> Option<i64> {
    if v.is_empty() {
        return None;
    }
    let rank = ((q * v.len() as f64).ceil() as usize).clamp(1, v.len());
    Some(v[rank - 1])
}

pub const HANDLERS: &[super::super::Handler] = &[
    super::super::Handler::new("sol_mempool_snapshot", |s, r| {
        Box::pin(async move { serve(s, true, r) })
    })
    .pool("sol_rpc"),
    super::super::Handler::new("sol_mempool_stats", |s, r| {
        Box::pin(async move { serve(s, false, r) })
    })
    .pool("sol_rpc"),
];

/// What the senders' transactions came to: the pending ones (`snapshot`), or the stats.
fn serve(
    services: &super::super::Services<'_>,
    snapshot: bool,
    req: &Request<'_>,
) -> Result<Reply, ApiError> {
    // Without a Solana pool nothing is sent, so nothing is followed.
    services.pool()?;
    let mempool = services.sol_mempool();
    // A tenant sees what its own keys sent; an admin sees every tenant's.
    let seen = match req.caller {
        crate::auth::Principal::Admin => mempool.window_of(None),
        _ => mempool.window_of(Some(req.key().map_or("", |k| k.tenant_id.as_str()))),
    };
    let window_secs = WINDOW.as_secs();
    let body = if snapshot {
        let limit = int_param(req, "limit", SNAPSHOT_DEFAULT, 1, SNAPSHOT_MAX)? as usize;
        let now = crate::clock::now_ms();
        let pending: Vec<_> = seen.iter().filter(|s| s.fate == Fate::Pending).collect();
        let items: Vec<_> = pending
            .iter()
            .rev()
            .take(limit)
            .map(|s| {
                json!({
                    "signature": s.signature,
                    "fee_payer": s.fee_payer,
                    "source": s.source,
                    "first_seen": s.first_seen / 1000,
                    "age_ms": now - s.first_seen,
                })
            })
            .collect();
        json!({
            "source": "senders",
            "window_secs": window_secs,
            "count": pending.len(),
            "items": items,
        })
    } else {
        let mut land_ms: Vec<i64> = seen
            .iter()
            .filter_map(|s| match s.fate {
                Fate::Landed { after_ms, .. } => Some(after_ms),
                _ => None,
            })
            .collect();
        land_ms.sort_unstable();
        let failed = seen
            .iter()
            .filter(|s| matches!(s.fate, Fate::Failed { .. }))
            .count();
        let pending = seen.iter().filter(|s| s.fate == Fate::Pending).count();
        json!({
            "source": "senders",
            "window_secs": window_secs,
            "submitted": seen.len(),
            "tx_per_sec": (seen.len() as f64 / window_secs as f64 * 1000.0).round() / 1000.0,
            "pending": pending,
            "landed": land_ms.len(),
            "failed": failed,
            "land_ms": {
                "p50": nearest_rank(&land_ms, 0.5),
                "p90": nearest_rank(&land_ms, 0.9),
            },
        })
    };
    Ok(Reply::json(200, body.to_string()))
}

//! MEV-cache analytics (`/v1/sol/mev-cache/*`), from the samples `src/capture/sol/mev_cache.rs`
//! takes of the `sol_mev_cache` hosts' own metrics (the measure is defined there and in
//! docs/solana.md): the host list, the leaderboard by hits per second over a window, a
//! host's last scrape, and its series.

use super::{int_param, Request};
use crate::errors::ApiError;
use crate::pools::Pool;
use crate::reply::Reply;
use crate::state::mev_snapshots::Snapshots;
use crate::store::Store;
use serde_json::{json, Value};

/// Leaderboard window: default, least and most (seconds).
pub const WINDOW_DEFAULT: i64 = 300;
pub const WINDOW_MIN: i64 = 60;
pub const WINDOW_MAX: i64 = 86_400;
/// Series: default span (seconds), most span, most points.
pub const SERIES_SPAN_DEFAULT: i64 = 3600;
pub const SERIES_SPAN_MAX: i64 = 7 * 86_400;
pub const SERIES_POINTS_MAX: i64 = 1000;

fn store_error(e: crate::store::sql::StoreError) -> ApiError {
    log::warn!("mev-cache: {e}");
    ApiError::new(
        503,
        "store_unavailable",
        "MEV-cache samples cannot be read now",
    )
}

/// Hits per second from an increase over covered milliseconds (3 decimals).
fn rate(increase: i64, covered_ms: i64) -> Option<f64> {
    (covered_ms > 0)
        .then(|| (increase as f64 * 1000.0 / covered_ms as f64 * 1000.0).round() / 1000.0)
}

pub const HANDLERS: &[super::super::Handler] = &[
    super::super::Handler::new("sol_mev_cache_hosts", |s, _| {
        Box::pin(async move { json(hosts(s.store(), s.mev_cache(), s.pool()?).await) })
    })
    .pool("sol_mev_cache"),
    super::super::Handler::new("sol_mev_cache_leaderboard", |s, r| {
        Box::pin(async move { json(leaderboard(s.store(), s.pool()?, r).await) })
    })
    .pool("sol_mev_cache"),
    super::super::Handler::new("sol_mev_cache_host_metrics", |s, r| {
        Box::pin(async move { json(host_metrics(s.mev_cache(), s.pool()?, r)) })
    })
    .pool("sol_mev_cache"),
    super::super::Handler::new("sol_mev_cache_host_series", |s, r| {
        Box::pin(async move { json(host_series(s.store(), s.pool()?, r).await) })
    })
    .pool("sol_mev_cache"),
];

fn json(body: Result<Value, ApiError>) -> Result<Reply, ApiError> {
    Ok(Reply::json(200, body?.to_string()))
}

/// Every host with its state, last scrape and recent hit rate.
async fn hosts(store: &Store, snapshots: &Snapshots, pool: &Pool) -> Result<Value, ApiError> {
    let recent = store
        .mev_cache_hits_since(crate::clock::now_ms() - WINDOW_DEFAULT * 1000)
        .await
        .map_err(store_error)?;
    let hosts: Vec<Value> = pool
        .hosts
        .iter()
        .map(|h| {
            let r = recent.iter().find(|r| r.host == h.id);
            json!({
                "host_id": h.id,
                "family": h.family,
                "state": h.health.state().as_str(),
                "last_sampled_at": snapshots.get(&h.id).map(|s| s.sampled_at / 1000),
                "hits_per_sec_5m": r.and_then(|r| rate(r.increase, r.covered_ms)),
            })
        })
        .collect();
    Ok(json!({"hosts": hosts}))
}

/// The hosts ranked by hit rate over `window_secs`; those without samples unranked.
async fn leaderboard(store: &Store, pool: &Pool, req: &Request<'_>) -> Result<Value, ApiError> {
    let window = int_param(req, "window_secs", WINDOW_DEFAULT, WINDOW_MIN, WINDOW_MAX)?;
    let mut rows = store
        .mev_cache_hits_since(crate::clock::now_ms() - window * 1000)
        .await
        .map_err(store_error)?;
    rows.retain(|r| pool.host(&r.host).is_some() && r.covered_ms > 0);
    rows.sort_by(|a, b| {
        let (ra, rb) = (
            a.increase as f64 / a.covered_ms as f64,
            b.increase as f64 / b.covered_ms as f64,
        );
        rb.total_cmp(&ra).then_with(|| a.host.cmp(&b.host))
    });
    let items: Vec<Value> = rows
        .iter()
        .enumerate()
        .map(|(i, r)| {
            json!({
                "rank": i + 1,
                "host_id": r.host,
                "hits_per_sec": rate(r.increase, r.covered_ms),
                "hits": r.increase,
                "samples": r.samples,
                "covered_secs": r.covered_ms / 1000,
            })
        })
        .collect();
    let unranked: Vec<&str> = pool
        .hosts
        .iter()
        .filter(|h| !rows.iter().any(|r| r.host == h.id))
        .map(|h| h.id.as_str())
        .collect();
    Ok(json!({"window_secs": window, "items": items, "unranked": unranked}))
}

/// One host's last scrape.
fn host_metrics(snapshots: &Snapshots, pool: &Pool, req: &Request<'_>) -> Result<Value, ApiError> {
    let host = known_host(pool, req)?;
    let s = snapshots.get(host).ok_or_else(|| {
        ApiError::new(
            503,
            "not_sampled_yet",
            format!("no scrape of {host} has succeeded yet"),
        )
    })?;
    Ok(json!({
        "host_id": host,
        "sampled_at": s.sampled_at / 1000,
        "truncated": s.truncated,
        "metrics": s.series,
    }))
}

/// One host's hits over `[from, to)`.
async fn host_series(store: &Store, pool: &Pool, req: &Request<'_>) -> Result<Value, ApiError> {
    let host = known_host(pool, req)?;
    // `to` is exclusive: by default the next second, so the latest sample is in.
    let now = crate::clock::now_ms() / 1000 + 1;
    let to = int_param(req, "to", now, 0, i64::MAX / 2000)?;
    // A span longer than the samples are kept is cut to the kept part (the answer says
    // which `from` was read); `from >= to` is an empty span, not an error.
    let from = int_param(req, "from", to - SERIES_SPAN_DEFAULT, 0, i64::MAX / 2000)?
        .max(to - SERIES_SPAN_MAX);
    let samples = if from < to {
        store
            .mev_cache_series(host, from * 1000, to * 1000, SERIES_POINTS_MAX)
            .await
            .map_err(store_error)?
    } else {
        Vec::new()
    };
    let points: Vec<Value> = samples
        .iter()
        .map(|s| {
            json!({
                "at": s.at / 1000,
                "hits_total": s.hits_total,
                "hits_per_sec": rate(s.increase, s.interval_ms),
            })
        })
        .collect();
    Ok(json!({
        "host_id": host,
        "from": from,
        "to": to,
        "truncated": points.len() as i64 >= SERIES_POINTS_MAX,
        "points": points,
    }))
}

fn known_host<'a>(pool: &'a Pool, req: &Request<'_>) -> Result<&'a str, ApiError> {
    let id = req.params.first().map(String::as_str).unwrap_or("");
    pool.host(id).map(|h| h.id.as_str()).ok_or_else(|| {
        ApiError::new(
            404,
            "unknown_host",
            format!(
                "no MEV-cache host {}",
                id.chars().take(64).collect::<String>()
            ),
        )
    })
}

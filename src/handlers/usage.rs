//! Per-key usage read back from the store (`src/usage/` writes it): one key's series
//! for the console chart (`GET /v1/keys/{id}/usage`) and every key's counts for the
//! operator (`GET /v1/admin/usage`, JSON or CSV). Counts reach the store every
//! `usage.flush_interval_ms`, so the newest bucket lags by up to that much.

use super::Request;
use crate::errors::ApiError;
use crate::reply::Reply;
use crate::store::usage::{Counts, ExportQuery, Grain};
use crate::store::Store;
use serde_json::{json, Value};
use std::collections::HashMap;
use std::time::UNIX_EPOCH;

/// A chart's span, the width of each of its points, and the rows it reads.
pub(super) struct Window {
    pub name: &'static str,
    pub span: i64,
    pub step: i64,
    pub grain: Grain,
}

pub(super) const WINDOWS: &[Window] = &[
    Window {
        name: "1h",
        span: 3600,
        step: 60,
        grain: Grain::Minute,
    },
    Window {
        name: "24h",
        span: 86_400,
        step: 600,
        grain: Grain::Minute,
    },
    Window {
        name: "7d",
        span: 7 * 86_400,
        step: 3600,
        grain: Grain::Hour,
    },
    Window {
        name: "30d",
        span: 30 * 86_400,
        step: 86_400,
        grain: Grain::Hour,
    },
];

/// An export answers at most this many rows; a wider ask is refused with the bound.
pub const MAX_EXPORT_ROWS: i64 = 50_000;

pub(super) fn counts_json(c: &Counts) -> Value {
    json!({
        "calls": c.calls,
        "compute_units": c.compute_units,
        "errors": c.errors,
        "rate_limited": c.rate_limited,
    })
}

pub(super) fn store_failure(e: crate::store::sql::StoreError) -> ApiError {
    log::error!("usage: store read failed: {e}");
    ApiError::internal("store failure")
}

pub(super) fn no_store_cache(reply: Reply) -> Reply {
    reply.with_headers(vec![("Cache-Control", "no-store".into())])
}

/// One key's series over `window` (`1h`, `24h` (default), `7d`, `30d`): every point of
/// the window, empty ones as zeros, oldest first, and the window's totals.
pub async fn key_series(
    store: &Store,
    key_id: &str,
    window: Option<&str>,
    now: i64,
) -> Result<Reply, ApiError> {
    let (w, from, to) = window_at(window, now)?;
    let rows = store
        .key_usage(key_id, w.grain, from, to, w.step)
        .await
        .map_err(store_failure)?;
    let by_start: HashMap<i64, Counts> = rows.into_iter().collect();
    let mut totals = Counts::default();
    let points: Vec<Value> = (from..to)
        .step_by(w.step as usize)
        .map(|start| {
            let c = by_start.get(&start).copied().unwrap_or_default();
            totals.add(&c);
            let mut p = counts_json(&c);
            p["start"] = json!(super::rfc3339(start));
            p
        })
        .collect();
    let body = json!({
        "key_id": key_id,
        "window": w.name,
        "step_sec": w.step,
        "from": super::rfc3339(from),
        "to": super::rfc3339(to),
        "totals": counts_json(&totals),
        "points": points,
    });
    Ok(no_store_cache(Reply::json(
        200,
        serde_json::to_vec(&body).unwrap_or_default(),
    )))
}

/// The window named (`24h` when none) and its `[from, to)` at `now`: the current step
/// is the last point, and the window starts `span` before its end.
pub(super) fn window_at(
    window: Option<&str>,
    now: i64,
) -> Result<(&'static Window, i64, i64), ApiError> {
    let name = window.unwrap_or("24h");
    let w = WINDOWS.iter().find(|w| w.name == name).ok_or_else(|| {
        ApiError::new(400, "invalid_request", "window is one of 1h, 24h, 7d, 30d")
    })?;
    let to = (now / w.step + 1) * w.step;
    Ok((w, to - w.span, to))
}

/// A time as Unix seconds or RFC 3339.
fn parse_time(name: &str, v: &str) -> Result<i64, ApiError> {
    if let Ok(n) = v.parse::<i64>() {
        return Ok(n);
    }
    humantime::parse_rfc3339_weak(v)
        .ok()
        .and_then(|t| t.duration_since(UNIX_EPOCH).ok())
        .map(|d| d.as_secs() as i64)
        .ok_or_else(|| {
            ApiError::new(
                400,
                "invalid_request",
                format!("{name} is Unix seconds or an RFC 3339 time"),
            )
        })
}

/// `GET /v1/admin/usage?from&to&step&tenant&key&format`: counts per key and step
/// (`minute`, `hour` (default), `day`) in `[from, to)` (default: the last 24 hours),
/// as JSON or CSV (`format=csv`).
pub async fn export(store: &Store, req: &Request<'_>, now: i64) -> Result<Reply, ApiError> {
    let bad = |m: &str| ApiError::new(400, "invalid_request", m.to_string());
    let to = match req.query_param("to") {
        Some(v) => parse_time("to", &v)?,
        None => now + 1,
    };
    let from = match req.query_param("from") {
        Some(v) => parse_time("from", &v)?,
        None => to - 86_400,
    };
    if from >= to {
        return Err(bad("from must be before to"));
    }
    let step_name = req.query_param("step").unwrap_or_else(|| "hour".into());
    let (step, grain) = match step_name.as_str() {
        "minute" => (60, Grain::Minute),
        "hour" => (3600, Grain::Hour),
        "day" => (86_400, Grain::Hour),
        _ => return Err(bad("step is one of minute, hour, day")),
    };
    let csv = match req.query_param("format").as_deref() {
        None | Some("json") => false,
        Some("csv") => true,
        Some(_) => return Err(bad("format is json or csv")),
    };
    let tenant = req.query_param("tenant");
    let key = req.query_param("key");
    // Whole steps: a bucket is never cut by the range.
    let (from, to) = (
        from.div_euclid(step) * step,
        (to + step - 1).div_euclid(step) * step,
    );
    let rows = store
        .usage_export(&ExportQuery {
            grain,
            from,
            to,
            step,
            tenant: tenant.as_deref(),
            key: key.as_deref(),
            limit: MAX_EXPORT_ROWS + 1,
        })
        .await
        .map_err(store_failure)?;
    if rows.len() as i64 > MAX_EXPORT_ROWS {
        return Err(ApiError::new(
            400,
            "range_too_large",
            format!(
                "more than {MAX_EXPORT_ROWS} rows: narrow the range, name a tenant or key, or use a coarser step"
            ),
        )
        .with_field("max_rows", MAX_EXPORT_ROWS));
    }
    match csv {
        true => Ok(export_csv(&rows)),
        false => Ok(export_json(&rows, from, to, &step_name)),
    }
}

/// The export's rows as CSV, one line per key and step.
fn export_csv(rows: &[crate::store::usage::ExportRow]) -> Reply {
    let mut out = String::from("start,key_id,tenant_id,calls,compute_units,errors,rate_limited\n");
    for r in rows {
        let c = &r.counts;
        out.push_str(&format!(
            "{},{},{},{},{},{},{}\n",
            super::rfc3339(r.start),
            r.key_id,
            r.tenant_id,
            c.calls,
            c.compute_units,
            c.errors,
            c.rate_limited
        ));
    }
    let mut reply = Reply::json(200, out);
    reply.content_type = Some("text/csv; charset=utf-8");
    no_store_cache(reply)
}

/// The export's rows as JSON, with the whole steps the range was widened to.
fn export_json(rows: &[crate::store::usage::ExportRow], from: i64, to: i64, step: &str) -> Reply {
    let body = json!({
        "from": super::rfc3339(from),
        "to": super::rfc3339(to),
        "step": step,
        "rows": rows.iter().map(|r| {
            let mut v = counts_json(&r.counts);
            v["start"] = json!(super::rfc3339(r.start));
            v["key_id"] = json!(r.key_id);
            v["tenant_id"] = json!(r.tenant_id);
            v
        }).collect::<Vec<_>>(),
    });
    no_store_cache(Reply::json(
        200,
        serde_json::to_vec(&body).unwrap_or_default(),
    ))
}

pub const HANDLERS: &[super::Handler] = &[super::Handler::new("admin_usage", |s, r| {
    Box::pin(export(s.store(), r, crate::clock::now()))
})];

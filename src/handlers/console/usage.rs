//! `GET /v1/usage`: the account's usage to debug with: totals over every key of the
//! tenant (the billing counts), and calls, errors and latency percentiles by chain, by
//! method and by key (the breakdown the request log's writer keeps), as JSON or CSV.

use super::{member_of, not_found, session};
use crate::console::{db, Console};
use crate::errors::ApiError;
use crate::handlers::usage::{counts_json, no_store_cache, store_failure, window_at};
use crate::handlers::Request;
use crate::reply::Reply;
use crate::store::method_usage::{MethodCounts, MethodRow};
use crate::store::usage::{Counts, ExportQuery};
use crate::usage::breakdown::SLOT_SECS;
use serde_json::{json, Value};
use std::collections::BTreeMap;

/// Breakdown rows one answer reads: the busiest key, chain and method groups.
const MAX_ROWS: i64 = 1000;

fn latency_json(c: &MethodCounts) -> Value {
    let mean = (c.calls > 0).then(|| c.latency_us as f64 / c.calls as f64 / 1000.0);
    json!({
        "mean": mean.map(|m| (m * 100.0).round() / 100.0),
        "p50": c.quantile_ms(0.5),
        "p95": c.quantile_ms(0.95),
        "p99": c.quantile_ms(0.99),
    })
}

fn group_json(label: Value, c: &MethodCounts) -> Value {
    let mut v = label;
    v["calls"] = json!(c.calls);
    v["errors"] = json!(c.errors);
    v["latency_ms"] = latency_json(c);
    v
}

/// Rows summed under a label, busiest first.
fn summed<K: Ord + Clone>(
    rows: &[MethodRow],
    key: impl Fn(&MethodRow) -> K,
) -> Vec<(K, MethodCounts)> {
    let mut by: BTreeMap<K, MethodCounts> = BTreeMap::new();
    for r in rows {
        by.entry(key(r)).or_default().add(&r.counts);
    }
    let mut out: Vec<_> = by.into_iter().collect();
    out.sort_by_key(|(_, c)| std::cmp::Reverse(c.calls));
    out
}

/// `GET /v1/usage?window=1h|24h|7d|30d&key_id=&format=json|csv`.
pub(super) async fn breakdown(console: &Console, req: &Request<'_>) -> Result<Reply, ApiError> {
    let m = member_of(console, session(req)?).await?;
    let key = req.query_param("key_id").filter(|k| !k.is_empty());
    if let Some(k) = &key {
        if !db(console.store.key_of_tenant(k, &m.tenant_id)).await? {
            return Err(not_found());
        }
    }
    let csv = match req.query_param("format").as_deref() {
        None | Some("json") => false,
        Some("csv") => true,
        Some(_) => {
            return Err(ApiError::new(
                400,
                "invalid_request",
                "format is json or csv",
            ))
        }
    };
    let window = req.query_param("window");
    let (w, from, to) = window_at(window.as_deref(), crate::clock::now())?;
    let store = &console.store;
    let totals = store
        .usage_export(&ExportQuery {
            grain: w.grain,
            from,
            to,
            step: w.step,
            tenant: Some(&m.tenant_id),
            key: key.as_deref(),
            limit: super::super::usage::MAX_EXPORT_ROWS,
        })
        .await
        .map_err(store_failure)?
        .iter()
        .fold(Counts::default(), |mut t, r| {
            t.add(&r.counts);
            t
        });
    let slot_from = from.div_euclid(SLOT_SECS) * SLOT_SECS;
    let rows = store
        .method_usage(&m.tenant_id, key.as_deref(), slot_from, to, MAX_ROWS)
        .await
        .map_err(store_failure)?;
    if csv {
        return Ok(csv_reply(&rows));
    }
    let series = series(console, &m.tenant_id, key.as_deref(), w.step, slot_from, to).await?;
    let all = summed(&rows, |_| ())
        .pop()
        .map(|(_, c)| c)
        .unwrap_or_default();
    let by_chain = summed(&rows, |r| r.chain.clone());
    let by_method = summed(&rows, |r| (r.chain.clone(), r.method.clone()));
    let by_key = summed(&rows, |r| r.key_id.clone());
    let body = json!({
        "window": w.name,
        "from": super::super::rfc3339(from),
        "to": super::super::rfc3339(to),
        "key_id": key,
        "totals": counts_json(&totals),
        "latency_ms": latency_json(&all),
        "by_chain": by_chain.iter().map(|(c, n)| group_json(json!({"chain": c}), n)).collect::<Vec<_>>(),
        "by_method": by_method.iter().map(|((c, me), n)| group_json(json!({"chain": c, "method": me}), n)).collect::<Vec<_>>(),
        "by_key": by_key.iter().map(|(k, n)| group_json(json!({"key_id": k}), n)).collect::<Vec<_>>(),
        "series": series,
    });
    Ok(no_store_cache(Reply::json(
        200,
        serde_json::to_vec(&body).unwrap_or_default(),
    )))
}

/// Calls, errors and latency percentiles over the window, one point per step (the
/// window's own, at least the breakdown's ten-minute slot: 6 points for 1h, 144 for
/// 24h, 168 for 7d, 30 for 30d), every step present (no call: zeros and null latency).
async fn series(
    console: &Console,
    tenant: &str,
    key: Option<&str>,
    window_step: i64,
    from: i64,
    to: i64,
) -> Result<Value, ApiError> {
    let step = window_step.max(SLOT_SECS);
    let first = from.div_euclid(step) * step;
    let found: BTreeMap<i64, MethodCounts> = console
        .store
        .method_usage_series(tenant, key, first, to, step)
        .await
        .map_err(store_failure)?
        .into_iter()
        .collect();
    let points: Vec<Value> = (first..to)
        .step_by(step as usize)
        .map(|at| {
            let c = found.get(&at).cloned().unwrap_or_default();
            json!({
                "at": super::super::rfc3339(at),
                "calls": c.calls,
                "errors": c.errors,
                "latency_ms": latency_json(&c),
            })
        })
        .collect();
    Ok(json!({"step_secs": step, "points": points}))
}

/// One line per key, chain and method: what a spreadsheet needs to slice it again.
fn csv_reply(rows: &[MethodRow]) -> Reply {
    let mut out = String::from("key_id,chain,method,calls,errors,mean_ms,p50_ms,p95_ms,p99_ms\n");
    let opt = |v: Option<u64>| v.map(|x| x.to_string()).unwrap_or_default();
    for r in rows {
        let c = &r.counts;
        let mean = if c.calls > 0 {
            format!("{:.2}", c.latency_us as f64 / c.calls as f64 / 1000.0)
        } else {
            String::new()
        };
        // Method and chain names are plain words (`breakdown::method_label`): no quoting.
        out.push_str(&format!(
            "{},{},{},{},{},{},{},{},{}\n",
            r.key_id,
            r.chain,
            r.method,
            c.calls,
            c.errors,
            mean,
            opt(c.quantile_ms(0.5)),
            opt(c.quantile_ms(0.95)),
            opt(c.quantile_ms(0.99)),
        ));
    }
    let mut reply = Reply::json(200, out);
    reply.content_type = Some("text/csv; charset=utf-8");
    no_store_cache(reply.with_headers(vec![(
        "Content-Disposition",
        "attachment; filename=\"chainedge-usage.csv\"".into(),
    )]))
}

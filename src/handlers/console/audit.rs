//! The tenant's audit log as the console reads it (`GET /v1/audit`, paged), and the
//! budget on the one change that only adds entries (renames).

use super::{bad, json_reply, member_of, rfc3339_us, session, too_many};
use crate::console::{db, Console};
use crate::errors::ApiError;
use crate::handlers::Request;
use crate::reply::Reply;
use serde_json::{json, Value};

/// A tenant's renames are budgeted (`audit::RENAMES_PER_HOUR`): each is an audit entry.
pub(super) async fn renames_left(console: &Console, tenant: &str) -> Result<(), ApiError> {
    use crate::store::audit::RENAMES_PER_HOUR;
    let since = crate::clock::now_us() - 3_600_000_000;
    let made = db(console.store.audit_count_since(tenant, "key.rename", since)).await?;
    if made < RENAMES_PER_HOUR {
        return Ok(());
    }
    Err(too_many(
        "too_many_renames",
        &format!("a team renames keys at most {RENAMES_PER_HOUR} times an hour"),
        3600,
    ))
}

/// Audit entries one page shows at most (and by default).
const AUDIT_SHOWN: i64 = 200;

/// `GET /v1/audit?limit=&before=`: the session's tenant's audit log, newest first, a
/// page at a time; `next` (when the page is full) is the `before` of the next page.
pub(super) async fn audit(console: &Console, req: &Request<'_>) -> Result<Reply, ApiError> {
    let member = member_of(console, session(req)?).await?;
    let number = |name: &str, min: i64, max: i64| -> Result<Option<i64>, ApiError> {
        req.query_param(name)
            .map(|v| {
                v.parse::<i64>()
                    .ok()
                    .filter(|n| (min..=max).contains(n))
                    .ok_or_else(|| {
                        bad(
                            "invalid_request",
                            &format!("{name}: a number from {min} to {max}"),
                        )
                    })
            })
            .transpose()
    };
    let limit = number("limit", 1, AUDIT_SHOWN)?.unwrap_or(AUDIT_SHOWN);
    // A cursor past any time there is (more digits than i64 holds) bounds nothing.
    let before = match req.query_param("before") {
        Some(b) if !b.is_empty() && b.bytes().all(|c| c.is_ascii_digit()) => {
            Some(b.parse::<i64>().unwrap_or(i64::MAX))
        }
        Some(_) => {
            return Err(bad(
                "invalid_request",
                "before: a number, the previous page's next",
            ))
        }
        None => None,
    };
    let entries = db(console.store.audit_log(&member.tenant_id, limit, before)).await?;
    let next = (entries.len() as i64 == limit)
        .then(|| entries.last().map(|e| e.at_us.to_string()))
        .flatten();
    let events: Vec<Value> = entries
        .iter()
        .map(|e| {
            json!({
                "at": rfc3339_us(e.at_us),
                "user_id": e.user_id,
                "user": e.user,
                "action": e.action,
                "target": e.target,
                "detail": e.detail,
            })
        })
        .collect();
    json_reply(200, json!({ "events": events, "next": next }))
}

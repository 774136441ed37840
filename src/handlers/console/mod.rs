//! The console's routes: the page, `/v1/auth/*` and `/v1/keys*`, over the sign-in
//! machinery of `crate::console`. Errors use the console envelope (`{"error": code}`);
//! see docs/api.md for each route's payloads.

use super::Handler;
use super::Request;
use crate::auth::keys::KeyAuth;
use crate::console::{clear_cookies, db, Console, ConsoleSession};
use crate::errors::ApiError;
use crate::key_restrictions::RestrictionsDoc;
use crate::reply::{HeaderText, Reply};
use crate::store::console::UserRow;
use crate::store::team::{Member, Role};
use crate::store::{self, KeyInfo};
use bytes::Bytes;
use serde::Deserialize;
use serde_json::{json, Value};

/// Scopes a console user may put on a key, and those of the default key made by
/// `/v1/auth/me`.
pub use crate::auth::{DEFAULT_SCOPES, SCOPES};

mod audit;
mod keys;
mod plans;
pub mod pushes;
mod sign_in;
mod team;
mod usage;

use keys::*;
use sign_in::*;

pub const HANDLERS: &[Handler] = &[
    Handler::new("console_page", |_, r| {
        Box::pin(async move { crate::console::page::serve(r.tail()) })
    }),
    Handler::new("console_me", |s, r| {
        Box::pin(async move { me(s.console(), &s.config.app.limits, session(r)?).await })
    })
    .form(),
    Handler::new("console_logout", |s, r| Box::pin(logout(s.console(), r))).form(),
    Handler::new("console_keys_list", |s, r| {
        Box::pin(keys_list(s.console(), r))
    })
    .form(),
    Handler::new("console_keys_create", |s, r| {
        Box::pin(create_key(s.console(), r))
    })
    .form(),
    Handler::new("console_keys_rename", |s, r| {
        Box::pin(keys_update(s.console(), s.keys(), r))
    })
    .form(),
    Handler::new("console_keys_revoke", |s, r| {
        Box::pin(keys_revoke(s.console(), s.keys(), r))
    })
    .form(),
    Handler::new("console_keys_rotate", |s, r| {
        Box::pin(keys_rotate(s.console(), s.keys(), r))
    })
    .form(),
    Handler::new("console_keys_txs", |s, r| Box::pin(key_txs(s, r))).form(),
    Handler::new("console_keys_requests", |s, r| {
        Box::pin(key_requests(
            s.console(),
            s.config.app.usage.request_log_per_key,
            r,
        ))
    })
    .form(),
    Handler::new("console_keys_usage", |s, r| {
        Box::pin(keys_usage(s.console(), r))
    })
    .form(),
    Handler::new("console_plans", |s, _| {
        Box::pin(async move { plans::list(s.config, s.routes) })
    }),
    Handler::new("console_plan_request", |s, r| {
        Box::pin(plans::ask(s.config, s.console(), s.keys(), r))
    })
    .form(),
    Handler::new("console_plan_request_get", |s, r| {
        Box::pin(plans::current(s.console(), r))
    })
    .form(),
    Handler::new("console_audit", |s, r| {
        Box::pin(audit::audit(s.console(), r))
    })
    .form(),
    Handler::new("console_usage", |s, r| {
        Box::pin(usage::breakdown(s.console(), r))
    })
    .form(),
    Handler::new("console_team", |s, r| Box::pin(team::show(s.console(), r))).form(),
    Handler::new("console_team_invite", |s, r| {
        Box::pin(team::invite(s.console(), r))
    })
    .form(),
    Handler::new("console_team_invite_revoke", |s, r| {
        Box::pin(team::revoke_invite(s.console(), r))
    })
    .form(),
    Handler::new("console_team_join", |s, r| {
        Box::pin(team::join(s.console(), r))
    })
    .form(),
    Handler::new("console_team_role", |s, r| {
        Box::pin(team::set_role(s.console(), r))
    })
    .form(),
    Handler::new("console_team_remove", |s, r| {
        Box::pin(team::remove(s.console(), r))
    })
    .form(),
    Handler::new("console_team_switch", |s, r| {
        Box::pin(team::switch(s.console(), r))
    })
    .form(),
    Handler::new("console_providers", |s, _| {
        Box::pin(async move { providers(s.console()) })
    }),
    Handler::new("console_email_start", |s, r| {
        Box::pin(email_start(s.console(), r))
    })
    .form(),
    Handler::new("console_email_verify", |s, r| {
        Box::pin(email_verify(s.console(), r))
    })
    .form(),
    Handler::new("console_wallet_challenge", |s, r| {
        Box::pin(wallet_challenge(s.console(), r))
    })
    .form(),
    Handler::new("console_wallet_verify", |s, r| {
        Box::pin(wallet_verify(s.console(), r))
    })
    .form(),
    Handler::new("console_google_start", |s, r| {
        Box::pin(google_start(s.console(), r))
    })
    .form(),
    Handler::new("console_google_callback", |s, r| {
        Box::pin(google_callback(s.console(), r))
    })
    .form(),
];

async fn logout(console: &Console, req: &Request<'_>) -> Result<Reply, ApiError> {
    let hash = session(req)?.token_hash;
    db(console.store.revoke_session(&hash)).await?;
    Ok(Reply::empty(204).with_headers(set_cookies(clear_cookies(req.secure))))
}

/// Microseconds since the epoch as RFC 3339 with microseconds.
pub(super) fn rfc3339_us(us: i64) -> String {
    let at = std::time::UNIX_EPOCH + std::time::Duration::from_micros(us.max(0) as u64);
    humantime::format_rfc3339_micros(at).to_string()
}

pub(super) fn session<'a>(req: &'a Request<'_>) -> Result<&'a ConsoleSession, ApiError> {
    req.session()
        .ok_or_else(|| ApiError::new(401, "unauthenticated", "no valid session"))
}

pub(super) fn not_found() -> ApiError {
    ApiError::new(404, "not_found", "no such key")
}

/// A 400 in the console's envelope (the code only, as SPEC has it); what is wrong, for
/// the page to show beside the field (`restrictions.allowed_ips[2]: ...`), goes in
/// `X-Chainedge-Error-Detail`: printable ASCII, at most 300 characters.
pub(super) fn bad(code: &'static str, message: &str) -> ApiError {
    explained(ApiError::new(400, code, message))
}

/// A console error the caller can mend (4xx) with its message in
/// `X-Chainedge-Error-Detail` (printable ASCII, at most 300 characters), for the page to
/// say what went wrong and where; a server's own failure keeps its words to its log.
pub(super) fn explained(e: ApiError) -> ApiError {
    if e.status >= 500 {
        return e;
    }
    let detail: String = e
        .message
        .chars()
        .map(|c| if (' '..='~').contains(&c) { c } else { '?' })
        .take(300)
        .collect();
    e.with_header("X-Chainedge-Error-Detail", detail)
}

/// A budget spent: 429 with `Retry-After` (the console's envelope carries the code only).
pub(super) fn too_many(code: &'static str, message: &str, retry_after: i64) -> ApiError {
    ApiError::new(429, code, message).with_header("Retry-After", retry_after.max(1).to_string())
}

/// 429 with `Retry-After`: a sign-in bound was reached.
pub(super) fn json_reply(status: u16, v: Value) -> Result<Reply, ApiError> {
    Ok(
        Reply::json(status, serde_json::to_vec(&v).unwrap_or_default())
            .with_headers(vec![("Cache-Control", "no-store".into())]),
    )
}

pub(super) fn set_cookies(cookies: Vec<String>) -> Vec<(&'static str, HeaderText)> {
    cookies
        .into_iter()
        .map(|c| ("Set-Cookie", c.into()))
        .collect()
}

/// A console body: a JSON object of the route's shape. (serde would also read a struct
/// from an array of its members in order, which no console contract allows.)
pub(super) fn parse<T: for<'de> Deserialize<'de>>(body: &Bytes) -> Result<T, ApiError> {
    let bad_body = || bad("invalid_request", "body is not the expected JSON");
    if !crate::handlers::is_object(body) {
        return Err(bad_body());
    }
    serde_json::from_slice(body).map_err(|_| bad_body())
}

pub(super) fn key_json(k: &KeyInfo) -> Value {
    json!({
        "id": k.id,
        "name": k.name,
        "key_prefix": k.key_prefix,
        "scopes": k.scopes,
        "is_default": k.is_default,
        "created_at": super::rfc3339(k.created_at),
        "last_used_at": k.last_used_at.map(super::rfc3339),
        "restrictions": k.restrictions,
        "created_by": k.created_by,
    })
}

pub(super) fn user_json(u: &UserRow) -> Value {
    let mut v = json!({
        "id": u.id,
        "created_at": super::rfc3339(u.created_at),
        "updated_at": super::rfc3339(u.updated_at),
    });
    for (k, val) in [
        ("email", &u.email),
        ("display_name", &u.display_name),
        ("avatar_url", &u.avatar_url),
    ] {
        if let Some(x) = val {
            v[k] = json!(x);
        }
    }
    v
}

/// The session's user in the tenant it acts in (its own unless it switched to a team
/// it still belongs to).
pub(super) async fn member_of(console: &Console, s: &ConsoleSession) -> Result<Member, ApiError> {
    db(console.store.member(&s.user_id, s.tenant_id.as_deref()))
        .await?
        .ok_or_else(|| ApiError::internal("session without a user"))
}

/// 403 `role_insufficient` unless the member's role allows `doing`.
pub(super) fn require(m: &Member, allowed: fn(Role) -> bool, doing: &str) -> Result<(), ApiError> {
    if allowed(m.role) {
        return Ok(());
    }
    let message = format!("a {} cannot {doing}", m.role.as_str());
    Err(ApiError::new(403, "role_insufficient", &message))
}

/// `GET /v1/auth/me`: the user, the sign-in provider, the tenant's plan and what it
/// allows, and the default key — created on the first call (and after the default was
/// revoked or rotated), with `raw` once.
pub(super) async fn me(
    console: &Console,
    limits: &crate::config::limits::LimitsConf,
    s: &ConsoleSession,
) -> Result<Reply, ApiError> {
    let member = member_of(console, s).await?;
    let user = &member.user;
    let mut body = json!({"user": user_json(user), "provider": s.provider});
    let tenants = db(console.store.memberships(&user.id)).await?;
    if let Some(tenant) = db(console.store.tenant(&member.tenant_id)).await? {
        body["plan"] = plan_json(limits, &tenant);
        body["tenant"] = json!({"id": tenant.id, "name": tenant.name, "role": member.role});
    }
    body["tenants"] = json!(tenants);
    // The default key is the user's own, made in its own tenant; in a team the team's
    // keys are listed instead.
    if !member.at_home() {
        return json_reply(200, body);
    }
    let scopes: Vec<String> = DEFAULT_SCOPES.iter().map(|s| s.to_string()).collect();
    // A failed bootstrap leaves `default_key` out; a later call returns it. So does a
    // user without a default who holds as many keys as a user may.
    if let Ok(Some((k, raw))) = db(console.store.bootstrap_default_key(user, &scopes)).await {
        let mut dk = json!({
            "id": k.id,
            "key_prefix": k.key_prefix,
            "scopes": k.scopes,
            "is_default": true,
        });
        if let Some(raw) = raw {
            dk["raw"] = json!(raw);
            dk["created"] = json!(true);
        }
        body["default_key"] = dk;
    }
    json_reply(200, body)
}

/// A tenant's plan as the console shows it: its limits (`plans::plan_limits`), the
/// trial's end and the features switched on.
fn plan_json(limits: &crate::config::limits::LimitsConf, t: &store::tenants::TenantInfo) -> Value {
    let mut v = plans::plan_limits(limits, &t.plan);
    v["trial_ends_at"] = json!(t.trial_ends_at.map(super::rfc3339));
    v["features"] = json!(t.features);
    v
}

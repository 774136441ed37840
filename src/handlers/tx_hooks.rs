//! A tenant's webhooks for the status changes of the transactions its keys sent:
//! `GET/POST /v1/tx/hooks`, `DELETE /v1/tx/hooks/{id}` and
//! `GET /v1/tx/hooks/{id}/dead-letters`. One hook hears every followed chain. The
//! tenant is the key's; another tenant's hook is 404, as an unknown one is. Delivery
//! itself is `capture::txs::push`.

use super::{Request, Services};
use crate::errors::ApiError;
use crate::reply::Reply;
use crate::state::tx_push::TxPush;
use crate::state::webhook;
use crate::store::sol_watchlist::Letters;
use crate::store::tx_push::TxHook;
use serde::Deserialize;
use serde_json::{json, Value};

pub const HANDLERS: &[super::Handler] = &[
    super::Handler::new("tx_hooks_list", |s, r| Box::pin(list(s, r))),
    super::Handler::new("tx_hooks_create", |s, r| Box::pin(create(s, r))),
    super::Handler::new("tx_hooks_delete", |s, r| Box::pin(delete(s, r))),
    super::Handler::new("tx_hooks_dead_letters", |s, r| Box::pin(dead_letters(s, r))),
];

#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
struct Create {
    callback_url: String,
}

fn tenant<'a>(req: &'a Request<'_>) -> Result<&'a str, ApiError> {
    req.key()
        .map(|k| k.tenant_id.as_str())
        .ok_or_else(|| ApiError::new(401, "unauthorized", "an API key is required"))
}

fn hook_id<'a>(req: &'a Request<'_>) -> &'a str {
    req.params.first().map(String::as_str).unwrap_or("")
}

fn not_found(id: &str) -> ApiError {
    let shown: String = id.chars().take(40).collect();
    ApiError::new(404, "not_found", format!("no transaction hook {shown}"))
}

fn hook_json(h: &TxHook) -> Value {
    json!({
        "id": h.id,
        "callback_url": h.callback_url,
        "created_at": super::rfc3339(h.created_at),
    })
}

async fn list(s: &Services<'_>, req: &Request<'_>) -> Result<Reply, ApiError> {
    let hooks = s
        .store()
        .tx_hooks(tenant(req)?)
        .await
        .map_err(|e| e.to_api_error())?;
    let list: Vec<Value> = hooks.iter().map(hook_json).collect();
    Ok(Reply::json(200, Value::Array(list).to_string()))
}

/// Checked whole before anything is stored: the URL must be https and resolve to public
/// addresses now (and is checked again at every delivery). The answer carries the hook's
/// signing secret, this once.
async fn create(s: &Services<'_>, req: &Request<'_>) -> Result<Reply, ApiError> {
    let tenant = tenant(req)?;
    let c: Create = crate::handlers::object_body(&req.body)?;
    let push: &TxPush = s.tx_push();
    if !push.webhooks_enabled() {
        return Err(ApiError::new(
            503,
            "webhooks_not_configured",
            "webhook delivery is not configured here (tx_tracking.signing_secret); the /ws/txs channel carries the same changes",
        ));
    }
    webhook::check_callback(&c.callback_url, push.allow())
        .await
        .map_err(|why| ApiError::new(400, "callback_not_allowed", why))?;
    let hook = TxHook {
        id: uuid::Uuid::new_v4().to_string(),
        tenant_id: tenant.to_string(),
        callback_url: c.callback_url,
        created_at: crate::clock::now(),
    };
    let max = push.conf().max_hooks_per_tenant;
    let added = s.store().add_tx_hook(&hook, max).await;
    if !added.map_err(|e| e.to_api_error())? {
        return Err(ApiError::new(
            409,
            "too_many_entries",
            format!("a tenant holds at most {max} transaction hooks"),
        )
        .with_field("max_entries", max));
    }
    let mut body = hook_json(&hook);
    body["signing_secret"] = json!(push.hook_secret(&hook.id));
    Ok(Reply::json(201, body.to_string()))
}

async fn delete(s: &Services<'_>, req: &Request<'_>) -> Result<Reply, ApiError> {
    let id = hook_id(req);
    let deleted = s.store().delete_tx_hook(tenant(req)?, id).await;
    if !deleted.map_err(|e| e.to_api_error())? {
        return Err(not_found(id));
    }
    Ok(Reply::empty(204))
}

async fn dead_letters(s: &Services<'_>, req: &Request<'_>) -> Result<Reply, ApiError> {
    let id = hook_id(req);
    let owned = s.store().tx_hook(tenant(req)?, id).await;
    owned
        .map_err(|e| e.to_api_error())?
        .ok_or_else(|| not_found(id))?;
    let letters = s.store().dead_letters(Letters::TxHooks, id).await;
    let letters = letters.map_err(|e| e.to_api_error())?;
    let answer = super::dead_letters_json(id, &letters);
    Ok(Reply::json(200, answer.to_string()))
}

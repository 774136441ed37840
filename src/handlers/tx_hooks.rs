//! A tenant's webhooks for the status changes of the transactions its keys sent:
//! `GET/POST /v1/tx/hooks`, `DELETE /v1/tx/hooks/{id}`, `GET /v1/tx/hooks/{id}/deliveries`,
//! `GET /v1/tx/hooks/{id}/dead-letters`, `POST /v1/tx/hooks/{id}/test` and
//! `POST /v1/tx/hooks/{id}/dead-letters/{letter_id}/retry`. One hook hears every
//! followed chain. The tenant is the key's (the console's routes call the same
//! functions with the session's); another tenant's hook is 404, as an unknown one is.
//! Delivery itself is `state::tx_push`.

use super::{Request, Services};
use crate::errors::ApiError;
use crate::reply::Reply;
use crate::state::deliveries::{self, Endpoint};
use crate::state::tx_push::TxPush;
use crate::state::webhook;
use crate::store::sol_watchlist::Letters;
use crate::store::tx_push::TxHook;
use serde::Deserialize;
use serde_json::{json, Value};

pub const HANDLERS: &[super::Handler] = &[
    super::Handler::new("tx_hooks_list", |s, r| Box::pin(by_key(s, r, Asked::List))),
    super::Handler::new("tx_hooks_create", |s, r| {
        Box::pin(by_key(s, r, Asked::Create))
    }),
    super::Handler::new("tx_hooks_delete", |s, r| {
        Box::pin(by_key(s, r, Asked::Delete))
    }),
    super::Handler::new("tx_hooks_deliveries", |s, r| {
        Box::pin(by_key(s, r, Asked::Deliveries))
    }),
    super::Handler::new("tx_hooks_dead_letters", |s, r| {
        Box::pin(by_key(s, r, Asked::DeadLetters))
    }),
    super::Handler::new("tx_hooks_test", |s, r| Box::pin(by_key(s, r, Asked::Test))),
    super::Handler::new("tx_hooks_retry", |s, r| {
        Box::pin(by_key(s, r, Asked::Retry))
    }),
];

/// What a hook route asks (the key's routes and the console's ask the same).
#[derive(Clone, Copy, PartialEq, Eq)]
pub enum Asked {
    List,
    Create,
    Delete,
    Deliveries,
    DeadLetters,
    Test,
    Retry,
}

#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
struct Create {
    callback_url: String,
}

async fn by_key(s: &Services<'_>, req: &Request<'_>, asked: Asked) -> Result<Reply, ApiError> {
    let tenant = req
        .key()
        .map(|k| k.tenant_id.as_str())
        .ok_or_else(|| ApiError::new(401, "unauthorized", "an API key is required"))?;
    serve(s, req, tenant, asked).await
}

/// One hook route for `tenant`: `{id}` is the route's first parameter, a dead letter's
/// id its second.
pub async fn serve(
    s: &Services<'_>,
    req: &Request<'_>,
    tenant: &str,
    asked: Asked,
) -> Result<Reply, ApiError> {
    let db = |e: crate::store::sql::StoreError| e.to_api_error();
    let id = req.params.first().map(String::as_str).unwrap_or("");
    let hook = match asked {
        Asked::List => {
            let hooks = s.store().tx_hooks(tenant).await.map_err(db)?;
            let list: Vec<Value> = hooks.iter().map(hook_json).collect();
            return Ok(Reply::json(200, Value::Array(list).to_string()));
        }
        Asked::Create => return create(s, tenant, req).await,
        Asked::Delete => {
            if !s.store().delete_tx_hook(tenant, id).await.map_err(db)? {
                return Err(not_found(id));
            }
            return Ok(Reply::empty(204));
        }
        _ => s
            .store()
            .tx_hook(tenant, id)
            .await
            .map_err(db)?
            .ok_or_else(|| not_found(id))?,
    };
    let store = s.store();
    let of = Letters::TxHooks;
    let answer = match asked {
        Asked::Deliveries => {
            let log = store.deliveries(of, id).await.map_err(db)?;
            super::deliveries_json(id, &log)
        }
        Asked::DeadLetters => {
            let letters = store.dead_letters(of, id).await.map_err(db)?;
            super::dead_letters_json(id, &letters)
        }
        Asked::Test => {
            let push = s.tx_push();
            let secret = signing_secret(push, &hook)?;
            let to = Endpoint {
                url: &hook.callback_url,
                secret: &secret,
            };
            let body = json!({
                "type": "test",
                "hook_id": hook.id,
                "delivery_id": format!("test-{}", uuid::Uuid::new_v4()),
                "sent_at": crate::clock::now(),
            });
            deliveries::test(push.sender(), store, of, id, to, &body)
                .await
                .json()
        }
        _ => {
            let push = s.tx_push();
            let letter_id = req.params.get(1).map(String::as_str).unwrap_or("");
            let letter = store.dead_letter(of, id, letter_id).await.map_err(db)?;
            let letter = letter.ok_or_else(|| super::no_dead_letter(letter_id))?;
            let secret = signing_secret(push, &hook)?;
            let to = Endpoint {
                url: &hook.callback_url,
                secret: &secret,
            };
            let sent = deliveries::retry(push.sender(), store, of, letter, to).await;
            sent.map_err(db)?
                .ok_or_else(|| super::no_dead_letter(letter_id))?
                .json()
        }
    };
    Ok(Reply::json(200, answer.to_string()))
}

fn signing_secret(push: &TxPush, hook: &TxHook) -> Result<String, ApiError> {
    push.hook_secret(&hook.id).ok_or_else(not_configured)
}

fn not_configured() -> ApiError {
    ApiError::new(
        503,
        "webhooks_not_configured",
        "webhook delivery is not configured here (tx_tracking.signing_secret); the /ws/txs channel carries the same changes",
    )
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

/// Checked whole before anything is stored: the URL must be https and resolve to public
/// addresses now (and is checked again at every delivery). The answer carries the hook's
/// signing secret, this once.
async fn create(s: &Services<'_>, tenant: &str, req: &Request<'_>) -> Result<Reply, ApiError> {
    let c: Create = crate::handlers::object_body(&req.body)?;
    let push: &TxPush = s.tx_push();
    if !push.webhooks_enabled() {
        return Err(not_configured());
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

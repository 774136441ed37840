//! Watchlist entries (SPEC "SolWatchlistEntry"): `GET/POST /v1/sol/watchlist`,
//! `GET/DELETE /v1/sol/watchlist/{id}`, and (not in SPEC) an entry's
//! `.../deliveries`, `.../dead-letters`, `POST .../test` and
//! `POST .../dead-letters/{letter_id}/retry`. The tenant is the credential's (the
//! console's routes call the same with the session's); another tenant's id is 404, as
//! an unknown one is. Push itself is `src/capture/sol/watch/` and `state::sol_watch`.

use super::Request;
use crate::errors::ApiError;
use crate::reply::Reply;
use crate::sol_tx;
use crate::state::deliveries::{self, Endpoint};
use crate::state::sol_watch::SolWatch;
use crate::state::webhook;
use crate::store::sol_watchlist::{Letters, WatchEntry};
use crate::store::Store;
use serde::Deserialize;
use serde_json::{json, Value};

#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
struct Create {
    pubkey: String,
    #[serde(default, deserialize_with = "crate::handlers::not_null")]
    commitment: Option<String>,
    callback_type: String,
    callback_url: String,
}

fn store_error(e: crate::store::sql::StoreError) -> ApiError {
    log::warn!("watchlist: {e}");
    ApiError::new(
        503,
        "store_unavailable",
        "the watchlist cannot be read or written now",
    )
}

fn entry_json(e: &WatchEntry) -> Value {
    json!({
        "id": e.id,
        "tenant_id": e.tenant_id,
        "pubkey": e.pubkey,
        "commitment": e.commitment,
        "callback_type": e.callback_type,
        "callback_url": e.callback_url,
        "created_at": super::super::rfc3339(e.created_at),
    })
}

/// A `ws` entry's client identifier: what the tenant's channel connects with.
fn is_client_id(s: &str) -> bool {
    (1..=64).contains(&s.len())
        && s.bytes()
            .all(|b| b.is_ascii_alphanumeric() || b"._-".contains(&b))
}

fn tenant<'a>(req: &'a Request<'_>) -> Result<&'a str, ApiError> {
    req.key()
        .map(|k| k.tenant_id.as_str())
        .ok_or_else(|| ApiError::new(401, "unauthorized", "an API key is required"))
}

fn not_found(id: &str) -> ApiError {
    ApiError::new(
        404,
        "not_found",
        format!(
            "no watchlist entry {}",
            id.chars().take(40).collect::<String>()
        ),
    )
}

pub const HANDLERS: &[super::super::Handler] = &[
    super::super::Handler::new("sol_watchlist_list", |s, r| {
        Box::pin(by_key(s, r, Asked::List))
    }),
    super::super::Handler::new("sol_watchlist_create", |s, r| {
        Box::pin(by_key(s, r, Asked::Create))
    }),
    super::super::Handler::new("sol_watchlist_get", |s, r| {
        Box::pin(by_key(s, r, Asked::Get))
    }),
    super::super::Handler::new("sol_watchlist_delete", |s, r| {
        Box::pin(by_key(s, r, Asked::Delete))
    }),
    super::super::Handler::new("sol_watchlist_deliveries", |s, r| {
        Box::pin(by_key(s, r, Asked::Deliveries))
    }),
    super::super::Handler::new("sol_watchlist_dead_letters", |s, r| {
        Box::pin(by_key(s, r, Asked::DeadLetters))
    }),
    super::super::Handler::new("sol_watchlist_test", |s, r| {
        Box::pin(by_key(s, r, Asked::Test))
    }),
    super::super::Handler::new("sol_watchlist_retry", |s, r| {
        Box::pin(by_key(s, r, Asked::Retry))
    }),
];

/// What a watchlist route asks (the key's routes and the console's ask the same).
#[derive(Clone, Copy, PartialEq, Eq)]
pub enum Asked {
    List,
    Create,
    Get,
    Delete,
    Deliveries,
    DeadLetters,
    Test,
    Retry,
}

async fn by_key(
    s: &crate::handlers::Services<'_>,
    req: &Request<'_>,
    asked: Asked,
) -> Result<Reply, ApiError> {
    serve(s.store(), s.sol_watch(), asked, tenant(req)?, req).await
}

/// One watchlist route for `tenant`: `{id}` is the route's first parameter, a dead
/// letter's id its second.
pub async fn serve(
    store: &Store,
    watch: &SolWatch,
    asked: Asked,
    tenant: &str,
    req: &Request<'_>,
) -> Result<Reply, ApiError> {
    let id = req.params.first().map(String::as_str).unwrap_or("");
    match asked {
        Asked::List => {
            let entries = store.watch_entries(tenant).await.map_err(store_error)?;
            let list: Vec<Value> = entries.iter().map(entry_json).collect();
            Ok(Reply::json(200, Value::Array(list).to_string()))
        }
        Asked::Create => create(store, watch, tenant, req).await,
        Asked::Get => {
            let e = store
                .watch_entry(tenant, id)
                .await
                .map_err(store_error)?
                .ok_or_else(|| not_found(id))?;
            Ok(Reply::json(200, entry_json(&e).to_string()))
        }
        Asked::Delete => {
            if !store
                .delete_watch_entry(tenant, id)
                .await
                .map_err(store_error)?
            {
                return Err(not_found(id));
            }
            watch.removed(id);
            Ok(Reply::empty(204))
        }
        _ => {
            let entry = store
                .watch_entry(tenant, id)
                .await
                .map_err(store_error)?
                .ok_or_else(|| not_found(id))?;
            let answer = by_hand(store, watch, asked, &entry, req).await?;
            Ok(Reply::json(200, answer.to_string()))
        }
    }
}

/// An entry's delivery log and dead letters, and the deliveries made by hand: a test,
/// a dead letter's retry (webhook entries only: a `ws` entry has no endpoint to call).
async fn by_hand(
    store: &Store,
    watch: &SolWatch,
    asked: Asked,
    entry: &WatchEntry,
    req: &Request<'_>,
) -> Result<Value, ApiError> {
    let (of, id) = (Letters::SolWatchlist, entry.id.as_str());
    if asked == Asked::Deliveries {
        let log = store.deliveries(of, id).await.map_err(store_error)?;
        return Ok(crate::handlers::deliveries_json(id, &log));
    }
    if asked == Asked::DeadLetters {
        let letters = store.dead_letters(of, id).await.map_err(store_error)?;
        return Ok(crate::handlers::dead_letters_json(id, &letters));
    }
    if entry.callback_type != "webhook" {
        return Err(ApiError::new(
            409,
            "not_a_webhook",
            "this entry pushes over the ws channel: there is no endpoint to deliver to",
        ));
    }
    let secret = watch.entry_secret(id).ok_or_else(|| {
        ApiError::new(
            503,
            "webhooks_not_configured",
            "webhook delivery is not configured here (solana.watchlist.signing_secret)",
        )
    })?;
    let to = Endpoint {
        url: &entry.callback_url,
        secret: &secret,
    };
    if asked == Asked::Test {
        let body = json!({
            "type": "test",
            "delivery_id": format!("test-{}", uuid::Uuid::new_v4()),
            "entry_id": id,
            "pubkey": entry.pubkey,
            "commitment": entry.commitment,
            "sent_at": crate::clock::now(),
        });
        return Ok(deliveries::test(watch.sender(), store, of, id, to, &body)
            .await
            .json());
    }
    let letter_id = req.params.get(1).map(String::as_str).unwrap_or("");
    let letter = store
        .dead_letter(of, id, letter_id)
        .await
        .map_err(store_error)?;
    let letter = letter.ok_or_else(|| crate::handlers::no_dead_letter(letter_id))?;
    let sent = deliveries::retry(watch.sender(), store, of, letter, to).await;
    Ok(sent
        .map_err(store_error)?
        .ok_or_else(|| crate::handlers::no_dead_letter(letter_id))?
        .json())
}

/// `POST /v1/sol/watchlist`: checked whole before anything is stored; a webhook's URL
/// must be https and resolve to public addresses now (and is checked again at every
/// delivery). The answer carries the entry's webhook signing secret, this once.
async fn create(
    store: &Store,
    watch: &SolWatch,
    tenant: &str,
    req: &Request<'_>,
) -> Result<Reply, ApiError> {
    let c: Create = crate::handlers::object_body(&req.body)?;
    if !sol_tx::is_address(&c.pubkey) {
        return Err(ApiError::invalid_params(
            "pubkey must be a base58 Solana address (32 to 44 characters, 32 bytes)",
        ));
    }
    let commitment = match c.commitment.as_deref() {
        None | Some("confirmed") => "confirmed",
        Some("processed") => "processed",
        Some("finalized") => "finalized",
        Some(_) => {
            return Err(ApiError::invalid_params(
                "commitment must be processed, confirmed or finalized",
            ))
        }
    };
    match c.callback_type.as_str() {
        "webhook" => {
            if !watch.webhooks_enabled() {
                return Err(ApiError::new(
                    503,
                    "webhooks_not_configured",
                    "webhook delivery is not configured here (solana.watchlist.signing_secret); use callback_type ws",
                ));
            }
            webhook::check_callback(&c.callback_url, watch.allow())
                .await
                .map_err(|why| ApiError::new(400, "callback_not_allowed", why))?;
        }
        "ws" => {
            if !is_client_id(&c.callback_url) {
                return Err(ApiError::invalid_params(
                    "for callback_type ws, callback_url is the client identifier the channel connects with: 1 to 64 of A-Z a-z 0-9 . _ -",
                ));
            }
        }
        _ => {
            return Err(ApiError::invalid_params(
                "callback_type must be webhook or ws",
            ))
        }
    }
    let entry = WatchEntry {
        id: uuid::Uuid::new_v4().to_string(),
        tenant_id: tenant.to_string(),
        pubkey: c.pubkey,
        commitment: commitment.to_string(),
        callback_type: c.callback_type,
        callback_url: c.callback_url,
        created_at: crate::clock::now(),
    };
    let max = watch.conf().max_entries_per_tenant;
    if !store
        .add_watch_entry(&entry, max)
        .await
        .map_err(store_error)?
    {
        return Err(ApiError::new(
            409,
            "too_many_entries",
            format!("a tenant holds at most {max} watchlist entries"),
        )
        .with_field("max_entries", max));
    }
    let mut body = entry_json(&entry);
    if entry.callback_type == "webhook" {
        body["signing_secret"] = json!(watch.entry_secret(&entry.id));
    }
    watch.added(entry);
    Ok(Reply::json(201, body.to_string()))
}

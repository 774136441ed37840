//! The console's key routes (`/v1/keys*`): list, create, rename and restrict, revoke,
//! rotate, and what a key did (usage, its request log, its transactions), each on one of
//! the session's tenant's keys.

use super::*;

pub(super) async fn keys_list(console: &Console, req: &Request<'_>) -> Result<Reply, ApiError> {
    let member = member_of(console, session(req)?).await?;
    let list = db(console.store.tenant_keys(&member.tenant_id)).await?;
    json_reply(
        200,
        json!({"keys": list.iter().map(key_json).collect::<Vec<_>>()}),
    )
}

/// A key PATCH's members: the outer `Option` says whether the member was sent, the
/// inner one whether it was `null` (which changes nothing).
#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
struct KeyChange {
    #[serde(default, deserialize_with = "sent")]
    name: Option<Option<String>>,
    #[serde(default, deserialize_with = "sent")]
    restrictions: Option<Option<RestrictionsDoc>>,
}

/// A member that is present, `null` or not (an absent one stays `None` by `default`).
fn sent<'de, D, T>(d: D) -> Result<Option<Option<T>>, D::Error>
where
    D: serde::Deserializer<'de>,
    T: Deserialize<'de>,
{
    Option::<T>::deserialize(d).map(Some)
}

/// `PATCH /v1/keys/{id}` `{"name", "restrictions"}`: a new name and/or new restrictions
/// (replacing the old ones whole) for one of the tenant's active keys. A restriction
/// change applies at once on every instance: the key leaves the key caches, and its
/// open WebSocket sessions end so they reconnect under the new rules.
pub(super) async fn keys_update(
    console: &Console,
    keys: &KeyAuth,
    req: &Request<'_>,
) -> Result<Reply, ApiError> {
    let member = member_of(console, session(req)?).await?;
    require(&member, Role::writes_keys, "change keys")?;
    let id = req.params.first().cloned().unwrap_or_default();
    let change = parse::<KeyChange>(&req.body)?;
    // `{}` names nothing to change; members that are all null change nothing (the key
    // is answered as it is).
    if change.name.is_none() && change.restrictions.is_none() {
        return Err(bad("invalid_request", "give a name or restrictions"));
    }
    let name = change.name.flatten().as_deref().map(key_name).transpose()?;
    if name.is_some() {
        audit::renames_left(console, &member.tenant_id).await?;
    }
    let restrictions = change
        .restrictions
        .flatten()
        .as_ref()
        .map(|r| restrictions_of(r, crate::clock::now()))
        .transpose()?;
    match db(console.store.update_user_key(
        &member.tenant_id,
        &member.user.id,
        &id,
        name.as_deref(),
        restrictions.as_ref(),
    ))
    .await?
    {
        Some((k, hash)) => {
            if restrictions.is_some() {
                keys.revoked(&hash);
            }
            json_reply(200, key_json(&k))
        }
        None => Err(not_found()),
    }
}

/// Restrictions as asked for, checked and normalised (`RestrictionsDoc::checked`).
fn restrictions_of(asked: &RestrictionsDoc, now: i64) -> Result<RestrictionsDoc, ApiError> {
    asked
        .checked(now)
        .map_err(|m| bad("invalid_request", &format!("restrictions.{m}")))
}

/// A key's name: at most 64 characters as sent, none a control character, and something
/// besides white space (which is trimmed off its ends).
fn key_name(raw: &str) -> Result<String, ApiError> {
    let name = raw.trim().to_string();
    if name.is_empty() || raw.chars().count() > 64 || raw.chars().any(char::is_control) {
        return Err(bad(
            "invalid_request",
            "name must be 1 to 64 printable characters",
        ));
    }
    Ok(name)
}

pub(super) async fn keys_revoke(
    console: &Console,
    keys: &KeyAuth,
    req: &Request<'_>,
) -> Result<Reply, ApiError> {
    let m = member_of(console, session(req)?).await?;
    require(&m, Role::writes_keys, "revoke keys")?;
    let id = req.params.first().cloned().unwrap_or_default();
    match db(console.store.revoke_user_key(&m.tenant_id, &m.user.id, &id)).await? {
        Some(hash) => {
            keys.revoked(&hash);
            Ok(Reply::empty(204))
        }
        None => Err(not_found()),
    }
}

pub(super) async fn keys_rotate(
    console: &Console,
    keys: &KeyAuth,
    req: &Request<'_>,
) -> Result<Reply, ApiError> {
    let m = member_of(console, session(req)?).await?;
    require(&m, Role::writes_keys, "rotate keys")?;
    let id = req.params.first().cloned().unwrap_or_default();
    match db(console.store.rotate_user_key(&m.tenant_id, &m.user.id, &id)).await? {
        Some((k, raw, old_hash)) => {
            keys.revoked(&old_hash);
            let mut v = key_json(&k);
            v["raw"] = json!(raw);
            json_reply(200, v)
        }
        None => Err(not_found()),
    }
}

pub(super) async fn keys_usage(console: &Console, req: &Request<'_>) -> Result<Reply, ApiError> {
    let id = tenant_key(console, req).await?;
    let window = req.query_param("window");
    super::super::usage::key_series(&console.store, &id, window.as_deref(), crate::clock::now())
        .await
}

/// `GET /v1/keys/{id}/requests`: one of the tenant's keys' newest requests.
pub(super) async fn key_requests(
    console: &Console,
    kept: usize,
    req: &Request<'_>,
) -> Result<Reply, ApiError> {
    let id = tenant_key(console, req).await?;
    let rows = db(console.store.key_requests(&id, kept)).await?;
    let requests: Vec<Value> = rows
        .iter()
        .map(|r| {
            let mut v = json!({
                "at": rfc3339_us(r.at_us),
                "route": r.route,
                "method": r.method,
                "status": r.status,
                "latency_ms": r.latency_us as f64 / 1000.0,
            });
            if let Some(e) = &r.error {
                v["error"] = json!(e);
            }
            if let Some(u) = &r.upstream {
                v["upstream"] = json!(u);
            }
            v
        })
        .collect();
    json_reply(200, json!({ "requests": requests }))
}

/// Transactions one key sent, newest first, in a console list.
const KEY_TXS_SHOWN: i64 = 50;

/// `GET /v1/keys/{id}/txs`: one of the tenant's keys' recent transactions.
pub(super) async fn key_txs(
    s: &crate::handlers::Services<'_>,
    req: &Request<'_>,
) -> Result<Reply, ApiError> {
    let id = tenant_key(s.console(), req).await?;
    let store_error = |e: crate::store::sql::StoreError| e.to_api_error();
    let txs = s
        .store()
        .key_txs(&id, KEY_TXS_SHOWN)
        .await
        .map_err(store_error)?;
    let head = |chain: &str| {
        crate::tracking::pool_of_chain(chain)
            .and_then(|p| s.pools.get(p))
            .map(|p| p.head.load(std::sync::atomic::Ordering::Relaxed))
            .filter(|h| *h > 0)
    };
    let items: Vec<_> = txs
        .iter()
        .map(|t| crate::handlers::tx::answer(t, head(&t.chain)))
        .collect();
    Ok(Reply::json(200, json!({ "txs": items }).to_string())
        .with_headers(vec![("Cache-Control", "no-store".into())]))
}

/// The `{id}` of a key route, when it is one of the session's tenant's console keys.
pub(super) async fn tenant_key(console: &Console, req: &Request<'_>) -> Result<String, ApiError> {
    let member = member_of(console, session(req)?).await?;
    let id = req.params.first().cloned().unwrap_or_default();
    if !db(console.store.key_of_tenant(&id, &member.tenant_id)).await? {
        return Err(not_found());
    }
    Ok(id)
}

#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
struct NewKey {
    name: String,
    #[serde(default)]
    scopes: Option<Vec<String>>,
    #[serde(default)]
    restrictions: Option<RestrictionsDoc>,
}

pub(super) async fn create_key(console: &Console, req: &Request<'_>) -> Result<Reply, ApiError> {
    let member = member_of(console, session(req)?).await?;
    require(&member, Role::writes_keys, "create keys")?;
    let new: NewKey = parse(&req.body)?;
    let name = key_name(&new.name)?;
    let scopes = new.scopes.unwrap_or_else(|| vec!["rpc:read".into()]);
    if scopes.len() > SCOPES.len() || scopes.iter().any(|s| !SCOPES.contains(&s.as_str())) {
        return Err(bad("invalid_request", "unknown scope"));
    }
    let restrictions = new
        .restrictions
        .as_ref()
        .map(|r| restrictions_of(r, crate::clock::now()))
        .transpose()?
        .unwrap_or_default();
    match db(console.store.create_user_key(
        &member.tenant_id,
        &member.user.id,
        &name,
        &scopes,
        &restrictions,
    ))
    .await?
    {
        Some((k, raw)) => {
            let mut v = key_json(&k);
            v["raw"] = json!(raw);
            json_reply(201, v)
        }
        None => Err(ApiError::new(409, "too_many_keys", "revoke a key first")),
    }
}

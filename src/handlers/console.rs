//! The console's routes: the page, `/v1/auth/*` and `/v1/keys*`, over the sign-in
//! machinery of `crate::console`. Errors use the console envelope (`{"error": code}`);
//! see docs/api.md for each route's payloads.

use super::Handler;
use super::Request;
use crate::address::client_bucket;
use crate::auth::keys::KeyAuth;
use crate::console::{clear_cookies, db, email, wallet, Console, ConsoleSession};
use crate::errors::ApiError;
use crate::reply::Reply;
use crate::store::console::{
    Challenge, ChallengeBounds, CodeBounds, CodeCheck, GuessGuard, Identity, Issued, UserRow,
};
use crate::store::{self, KeyInfo};
use bytes::Bytes;
use serde::Deserialize;
use serde_json::{json, Value};
use std::time::{Duration, UNIX_EPOCH};

/// Scopes a console user may put on a key, and those of the default key made by
/// `/v1/auth/me`.
pub use crate::auth::{DEFAULT_SCOPES, SCOPES};

pub const HANDLERS: &[Handler] = &[
    Handler::new("console_page", |_, r| {
        Box::pin(async move { crate::console::page::serve(r.tail()) })
    }),
    Handler::new("console_me", |s, r| {
        Box::pin(async move { me(s.console, session(r)?).await })
    })
    .form(),
    Handler::new("console_logout", |s, r| Box::pin(logout(s.console, r))).form(),
    Handler::new("console_keys_list", |s, r| {
        Box::pin(keys_list(s.console, r))
    })
    .form(),
    Handler::new("console_keys_create", |s, r| {
        Box::pin(create_key(s.console, r))
    })
    .form(),
    Handler::new("console_keys_revoke", |s, r| {
        Box::pin(keys_revoke(s.console, s.keys, r))
    })
    .form(),
    Handler::new("console_keys_rotate", |s, r| {
        Box::pin(keys_rotate(s.console, s.keys, r))
    })
    .form(),
    Handler::new("console_keys_usage", |s, r| {
        Box::pin(keys_usage(s.console, r))
    })
    .form(),
    Handler::new("console_email_start", |s, r| {
        Box::pin(email_start(s.console, r))
    })
    .form(),
    Handler::new("console_email_verify", |s, r| {
        Box::pin(email_verify(s.console, r))
    })
    .form(),
    Handler::new("console_wallet_challenge", |s, r| {
        Box::pin(wallet_challenge(s.console, r))
    })
    .form(),
    Handler::new("console_wallet_verify", |s, r| {
        Box::pin(wallet_verify(s.console, r))
    })
    .form(),
    Handler::new("console_google_start", |s, r| {
        Box::pin(google_start(s.console, r))
    })
    .form(),
    Handler::new("console_google_callback", |s, r| {
        Box::pin(google_callback(s.console, r))
    })
    .form(),
];

async fn logout(console: &Console, req: &Request<'_>) -> Result<Reply, ApiError> {
    let hash = session(req)?.token_hash;
    db(console.store.revoke_session(&hash)).await?;
    Ok(Reply::empty(204).with_headers(set_cookies(clear_cookies(req.secure))))
}

async fn keys_list(console: &Console, req: &Request<'_>) -> Result<Reply, ApiError> {
    let uid = session(req)?.user_id.clone();
    let list = db(console.store.user_keys(&uid)).await?;
    json_reply(
        200,
        json!({"keys": list.iter().map(key_json).collect::<Vec<_>>()}),
    )
}

async fn keys_revoke(
    console: &Console,
    keys: &KeyAuth,
    req: &Request<'_>,
) -> Result<Reply, ApiError> {
    let uid = session(req)?.user_id.clone();
    let id = req.params.first().cloned().unwrap_or_default();
    match db(console.store.revoke_user_key(&uid, &id)).await? {
        Some(hash) => {
            keys.revoked(&hash);
            Ok(Reply::empty(204))
        }
        None => Err(not_found()),
    }
}

async fn keys_rotate(
    console: &Console,
    keys: &KeyAuth,
    req: &Request<'_>,
) -> Result<Reply, ApiError> {
    let user = user_of(console, session(req)?).await?;
    let id = req.params.first().cloned().unwrap_or_default();
    match db(console.store.rotate_user_key(&user, &id)).await? {
        Some((k, raw, old_hash)) => {
            keys.revoked(&old_hash);
            let mut v = key_json(&k);
            v["raw"] = json!(raw);
            json_reply(200, v)
        }
        None => Err(not_found()),
    }
}

async fn keys_usage(console: &Console, req: &Request<'_>) -> Result<Reply, ApiError> {
    let uid = session(req)?.user_id.clone();
    let id = req.params.first().cloned().unwrap_or_default();
    if !db(console.store.key_of_user(&id, &uid)).await? {
        return Err(not_found());
    }
    let window = req.query_param("window");
    super::usage::key_series(&console.store, &id, window.as_deref(), store::now()).await
}

fn session<'a>(req: &'a Request<'_>) -> Result<&'a ConsoleSession, ApiError> {
    req.session()
        .ok_or_else(|| ApiError::new(401, "unauthenticated", "no valid session"))
}

fn not_found() -> ApiError {
    ApiError::new(404, "not_found", "no such key")
}

fn bad(code: &'static str, message: &str) -> ApiError {
    ApiError::new(400, code, message)
}

/// 429 with `Retry-After`: a sign-in bound was reached.
fn too_many(code: &'static str, message: &str, retry_after: i64) -> ApiError {
    ApiError::new(429, code, message).with_header("Retry-After", retry_after.max(1).to_string())
}

fn challenge_bounds(console: &Console) -> ChallengeBounds {
    ChallengeBounds {
        per_client: console.max_challenges_per_client,
        per_subject: console.max_challenges_per_subject,
    }
}

/// A challenge the bounds refused: 429, nothing stored.
fn issued(i: Issued) -> Result<(), ApiError> {
    match i {
        Issued::Stored => Ok(()),
        Issued::TooManyForAddress => Err(too_many(
            "too_many_challenges",
            "too many open challenges for this address; use one or wait until they expire",
            60,
        )),
        Issued::TooManyForClient => Err(too_many(
            "too_many_challenges",
            "too many open challenges from this network address; wait until they expire",
            60,
        )),
    }
}

fn json_reply(status: u16, v: Value) -> Result<Reply, ApiError> {
    Ok(
        Reply::json(status, serde_json::to_vec(&v).unwrap_or_default())
            .with_headers(vec![("Cache-Control", "no-store".into())]),
    )
}

fn set_cookies(cookies: Vec<String>) -> Vec<(&'static str, String)> {
    cookies.into_iter().map(|c| ("Set-Cookie", c)).collect()
}

fn parse<T: for<'de> Deserialize<'de>>(body: &Bytes) -> Result<T, ApiError> {
    serde_json::from_slice(body)
        .map_err(|_| bad("invalid_request", "body is not the expected JSON"))
}

fn rfc3339(unix: i64) -> String {
    humantime::format_rfc3339_seconds(UNIX_EPOCH + Duration::from_secs(unix.max(0) as u64))
        .to_string()
}

fn key_json(k: &KeyInfo) -> Value {
    json!({
        "id": k.id,
        "name": k.name,
        "key_prefix": k.key_prefix,
        "scopes": k.scopes,
        "is_default": k.is_default,
        "created_at": rfc3339(k.created_at),
    })
}

fn user_json(u: &UserRow) -> Value {
    let mut v = json!({
        "id": u.id,
        "created_at": rfc3339(u.created_at),
        "updated_at": rfc3339(u.updated_at),
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

async fn user_of(console: &Console, s: &ConsoleSession) -> Result<UserRow, ApiError> {
    let uid = s.user_id.clone();
    db(console.store.user(&uid))
        .await?
        .ok_or_else(|| ApiError::internal("session without a user"))
}

/// `GET /v1/auth/me`: the user, the sign-in provider, and the default key — created on
/// the first call (and after the default was revoked or rotated), with `raw` once.
async fn me(console: &Console, s: &ConsoleSession) -> Result<Reply, ApiError> {
    let user = user_of(console, s).await?;
    let mut body = json!({"user": user_json(&user), "provider": s.provider});
    let u = user.clone();
    let scopes: Vec<String> = DEFAULT_SCOPES.iter().map(|s| s.to_string()).collect();
    // A failed bootstrap leaves `default_key` out; a later call returns it.
    if let Ok((k, raw)) = db(console.store.bootstrap_default_key(&u, &scopes)).await {
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

#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
struct NewKey {
    name: String,
    #[serde(default)]
    scopes: Option<Vec<String>>,
}

async fn create_key(console: &Console, req: &Request<'_>) -> Result<Reply, ApiError> {
    let user = user_of(console, session(req)?).await?;
    let new: NewKey = parse(&req.body)?;
    let name = new.name.trim().to_string();
    if name.is_empty() || name.chars().count() > 64 || name.chars().any(char::is_control) {
        return Err(bad(
            "invalid_request",
            "name must be 1 to 64 printable characters",
        ));
    }
    let scopes = new.scopes.unwrap_or_else(|| vec!["rpc:read".into()]);
    if scopes.len() > SCOPES.len() || scopes.iter().any(|s| !SCOPES.contains(&s.as_str())) {
        return Err(bad("invalid_request", "unknown scope"));
    }
    match db(console.store.create_user_key(&user, &name, &scopes)).await? {
        Some((k, raw)) => {
            let mut v = key_json(&k);
            v["raw"] = json!(raw);
            json_reply(201, v)
        }
        None => Err(ApiError::new(409, "too_many_keys", "revoke a key first")),
    }
}

#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
struct EmailStart {
    email: String,
}

async fn email_start(console: &Console, req: &Request<'_>) -> Result<Reply, ApiError> {
    let start: EmailStart = parse(&req.body)?;
    if !console.mailer.enabled() {
        return Err(ApiError::new(
            503,
            "email_disabled",
            "email sign-in is not configured",
        ));
    }
    let addr = email::normalize(&start.email)
        .ok_or_else(|| bad("invalid_email", "not an email address"))?;
    let code = email::new_code();
    let hash = email::code_hash(&addr, &code);
    let ttl = console.email.code_ttl_secs;
    let (a, client) = (addr.clone(), client_bucket(req.client));
    let bounds = CodeBounds {
        window: 900,
        per_address: console.email.max_codes_per_15min,
        per_client: console.email.max_codes_per_client_15min,
    };
    match db(console.store.store_code(&a, &client, &hash, ttl, &bounds)).await? {
        Issued::Stored => {}
        Issued::TooManyForAddress => {
            return Err(too_many(
                "too_many_codes",
                "too many codes for this address; wait a while",
                900,
            ))
        }
        Issued::TooManyForClient => {
            return Err(too_many(
                "too_many_codes",
                "too many codes asked from this network address; wait a while",
                900,
            ))
        }
    }
    console
        .mailer
        .send_code(&addr, &code, ttl)
        .await
        .map_err(|e| {
            log::warn!("console: code delivery failed: {e}");
            ApiError::new(502, "email_delivery_failed", "the code could not be sent")
        })?;
    json_reply(202, json!({"sent": true, "expires_in_sec": ttl}))
}

#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
struct EmailVerify {
    email: String,
    code: String,
}

async fn email_verify(console: &Console, req: &Request<'_>) -> Result<Reply, ApiError> {
    let v: EmailVerify = parse(&req.body)?;
    let addr =
        email::normalize(&v.email).ok_or_else(|| bad("invalid_email", "not an email address"))?;
    let code = v.code.trim();
    if code.len() != 6 || !code.bytes().all(|b| b.is_ascii_digit()) {
        return Err(bad("invalid_code", "the code is 6 digits"));
    }
    let hash = email::code_hash(&addr, code);
    let guard = GuessGuard {
        max_attempts: console.email.max_attempts,
        lockout_secs: console.email.lockout_secs,
        max_lockout_secs: console.email.max_lockout_secs,
        // Longer than the longest lock-out: waiting one out never resets the budget.
        forget_after: 7 * 86400,
    };
    let a = addr.clone();
    match db(console.store.check_code(&a, &hash, &guard)).await? {
        CodeCheck::Ok => sign_in(console, Identity::Email(addr), req.secure).await,
        CodeCheck::Wrong | CodeCheck::NoCode => Err(bad("invalid_code", "wrong or unknown code")),
        CodeCheck::Expired => Err(bad(
            "code_expired",
            "the code has expired; ask for a new one",
        )),
        CodeCheck::TooManyAttempts => Err(ApiError::new(
            429,
            "too_many_attempts",
            "too many wrong codes; ask for a new one",
        )),
        CodeCheck::LockedOut(secs) => {
            log::warn!("console: email sign-in locked out for {secs} s after wrong codes");
            Err(too_many(
                "too_many_attempts",
                "too many wrong codes for this address; wait before trying again",
                secs,
            ))
        }
    }
}

/// Find or create the user, start a session, answer with the user and the cookies.
async fn sign_in(console: &Console, id: Identity, secure: bool) -> Result<Reply, ApiError> {
    let provider = id.provider();
    let plan = console.signup_plan.clone();
    let user_id = db(console.store.user_for(&id, &plan)).await?;
    let cookies = console
        .start_session(user_id.clone(), provider, secure)
        .await?;
    let user = db(console.store.user(&user_id))
        .await?
        .ok_or_else(|| ApiError::internal("user vanished"))?;
    Ok(
        json_reply(200, json!({"user": user_json(&user), "provider": provider}))?
            .with_headers(set_cookies(cookies)),
    )
}

fn wallet_chain(req: &Request<'_>) -> Result<wallet::Chain, ApiError> {
    req.params
        .first()
        .and_then(|c| wallet::Chain::parse(c))
        .ok_or_else(|| ApiError::new(404, "not_found", "wallet chain is evm or solana"))
}

#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
struct ChallengeReq {
    address: String,
}

async fn wallet_challenge(console: &Console, req: &Request<'_>) -> Result<Reply, ApiError> {
    let chain = wallet_chain(req)?;
    let c: ChallengeReq = parse(&req.body)?;
    let address = wallet::canonical_address(chain, c.address.trim())
        .ok_or_else(|| bad("invalid_address", "not a wallet address"))?;
    let origin = console
        .origin
        .clone()
        .unwrap_or_else(|| "http://localhost".into());
    let domain = origin
        .split_once("://")
        .map(|(_, d)| d.to_string())
        .unwrap_or(origin.clone());
    let nonce = hex::encode(rand::random::<[u8; 16]>());
    let now = store::now();
    let expires_at = now + console.challenge_ttl;
    let message = wallet::message(
        chain,
        &domain,
        &origin,
        &address,
        &nonce,
        &rfc3339(now),
        &rfc3339(expires_at),
    );
    let challenge = Challenge {
        kind: chain.as_str().into(),
        subject: address,
        message: message.clone(),
        expires_at,
    };
    let n = nonce.clone();
    issued(
        db(console.store.store_challenge(
            &n,
            &client_bucket(req.client),
            &challenge,
            &challenge_bounds(console),
        ))
        .await?,
    )?;
    json_reply(
        200,
        json!({"message": message, "nonce": nonce, "expires_at": rfc3339(expires_at)}),
    )
}

#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
struct VerifyReq {
    message: String,
    signature: String,
}

async fn wallet_verify(console: &Console, req: &Request<'_>) -> Result<Reply, ApiError> {
    let chain = wallet_chain(req)?;
    let v: VerifyReq = parse(&req.body)?;
    let nonce = wallet::nonce_of(&v.message)
        .ok_or_else(|| bad("invalid_nonce", "the message carries no nonce"))?
        .to_string();
    // Single use: the challenge is consumed whether or not the signature is good.
    let c = db(console.store.take_challenge(&nonce))
        .await?
        .filter(|c| c.kind == chain.as_str())
        .ok_or_else(|| bad("invalid_nonce", "unknown or already used nonce"))?;
    if c.message != v.message {
        return Err(bad(
            "message_mismatch",
            "the message differs from the challenge",
        ));
    }
    if c.expires_at <= store::now() {
        return Err(bad("challenge_expired", "the challenge has expired"));
    }
    let ok = match chain {
        wallet::Chain::Evm => {
            wallet::recover_evm(&v.message, &v.signature).as_deref() == Some(c.subject.as_str())
        }
        wallet::Chain::Solana => wallet::verify_solana(&v.message, &c.subject, &v.signature),
    };
    if !ok {
        return Err(bad(
            "invalid_signature",
            "the signature does not match the address",
        ));
    }
    let id = match chain {
        wallet::Chain::Evm => Identity::WalletEvm(c.subject),
        wallet::Chain::Solana => Identity::WalletSolana(c.subject),
    };
    sign_in(console, id, req.secure).await
}

fn oidc(console: &Console) -> Result<&crate::console::google::Oidc, ApiError> {
    console
        .oidc
        .as_ref()
        .ok_or_else(|| ApiError::new(503, "google_disabled", "Google sign-in is not configured"))
}

fn state_cookie(value: &str, max_age: i64, secure: bool) -> String {
    let sec = if secure { "; Secure" } else { "" };
    format!(
        "{}={value}; Path=/v1/auth/google; Max-Age={max_age}; HttpOnly; SameSite=Lax{sec}",
        crate::console::google::STATE_COOKIE
    )
}

/// `GET /v1/auth/google/start`: 302 to the provider with state, nonce and a PKCE challenge.
async fn google_start(console: &Console, req: &Request<'_>) -> Result<Reply, ApiError> {
    let oidc = oidc(console)?;
    let state = crate::console::random_token(16);
    let nonce = crate::console::random_token(16);
    let verifier = crate::console::random_token(32);
    let location = oidc.authorize_url(&state, &nonce, &verifier);
    let flow = Challenge {
        kind: "google".into(),
        subject: nonce,
        message: verifier,
        expires_at: store::now() + crate::console::google::FLOW_TTL_SECS,
    };
    let s = state.clone();
    issued(
        db(console.store.store_challenge(
            &s,
            &client_bucket(req.client),
            &flow,
            &challenge_bounds(console),
        ))
        .await?,
    )?;
    Ok(Reply::empty(302).with_headers(vec![
        ("Location", location),
        ("Cache-Control", "no-store".into()),
        (
            "Set-Cookie",
            state_cookie(&state, crate::console::google::FLOW_TTL_SECS, req.secure),
        ),
    ]))
}

/// `GET /v1/auth/google/callback?code&state`: check the state against the browser's
/// cookie, exchange the code, verify the ID token, sign in, 302 to the console.
async fn google_callback(console: &Console, req: &Request<'_>) -> Result<Reply, ApiError> {
    use crate::console::google::query_param;
    let oidc = oidc(console)?;
    if query_param(req.query, "error").is_some() {
        return Err(bad("oauth_denied", "the provider did not grant sign-in"));
    }
    let state = query_param(req.query, "state").unwrap_or_default();
    let code = query_param(req.query, "code").unwrap_or_default();
    let bound =
        crate::console::cookie(req.cookies, crate::console::google::STATE_COOKIE).unwrap_or("");
    if state.is_empty()
        || code.is_empty()
        || !crate::crypto::secret_eq(state.as_bytes(), bound.as_bytes())
    {
        return Err(bad(
            "invalid_state",
            "this sign-in was not started by this browser",
        ));
    }
    let flow = db(console.store.take_challenge(&state))
        .await?
        .filter(|c| c.kind == "google" && c.expires_at > store::now())
        .ok_or_else(|| bad("invalid_state", "unknown, used or expired sign-in"))?;
    let identity = oidc
        .sign_in(&code, &flow.message, &flow.subject, req.request_id)
        .await?;
    let provider = identity.provider();
    let plan = console.signup_plan.clone();
    let user_id = db(console.store.user_for(&identity, &plan)).await?;
    let mut headers = set_cookies(console.start_session(user_id, provider, req.secure).await?);
    headers.push(("Set-Cookie", state_cookie("", 0, req.secure)));
    headers.push(("Location", oidc.after_login.clone()));
    headers.push(("Cache-Control", "no-store".into()));
    Ok(Reply::empty(302).with_headers(headers))
}

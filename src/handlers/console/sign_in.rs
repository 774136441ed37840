//! Sign-in routes: email codes, wallet challenges and signatures, Google OIDC. Each ends
//! in a session cookie (`sign_in`).

use super::*;
use crate::address::client_bucket;
use crate::console::{db, email, wallet, Console};
use crate::errors::ApiError;
use crate::handlers::Request;
use crate::reply::Reply;
use crate::store::console::{
    Challenge, ChallengeBounds, CodeBounds, CodeCheck, GuessGuard, Identity, Issued,
};
use serde::Deserialize;
use serde_json::json;

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

#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
struct EmailStart {
    email: String,
}

pub(super) async fn email_start(console: &Console, req: &Request<'_>) -> Result<Reply, ApiError> {
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

pub(super) async fn email_verify(console: &Console, req: &Request<'_>) -> Result<Reply, ApiError> {
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
    let (a, client) = (addr.clone(), client_bucket(req.client));
    match db(console.store.check_code(&a, &client, &hash, &guard)).await? {
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

pub(super) async fn wallet_challenge(
    console: &Console,
    req: &Request<'_>,
) -> Result<Reply, ApiError> {
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
    let now = crate::clock::now();
    let expires_at = now + console.challenge_ttl;
    let message = wallet::message(
        chain,
        &domain,
        &origin,
        &address,
        &nonce,
        &crate::handlers::rfc3339(now),
        &crate::handlers::rfc3339(expires_at),
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
        json!({"message": message, "nonce": nonce, "expires_at": crate::handlers::rfc3339(expires_at)}),
    )
}

#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
struct VerifyReq {
    message: String,
    signature: String,
}

pub(super) async fn wallet_verify(console: &Console, req: &Request<'_>) -> Result<Reply, ApiError> {
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
    if c.expires_at <= crate::clock::now() {
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

/// `GET /v1/auth/providers`: which ways to sign in this gateway offers, for the page's
/// buttons (wallets need no configuration; email needs delivery, Google its client).
pub(super) fn providers(console: &Console) -> Result<Reply, ApiError> {
    json_reply(
        200,
        json!({
            "email": console.mailer.enabled(),
            "google": console.oidc.is_some(),
            "wallet_evm": true,
            "wallet_solana": true,
        }),
    )
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
pub(super) async fn google_start(console: &Console, req: &Request<'_>) -> Result<Reply, ApiError> {
    let oidc = oidc(console)?;
    let state = crate::console::random_token(16);
    let nonce = crate::console::random_token(16);
    let verifier = crate::console::random_token(32);
    let location = oidc.authorize_url(&state, &nonce, &verifier);
    let flow = Challenge {
        kind: "google".into(),
        subject: nonce,
        message: verifier,
        expires_at: crate::clock::now() + crate::console::google::FLOW_TTL_SECS,
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
        ("Location", location.into()),
        ("Cache-Control", "no-store".into()),
        (
            "Set-Cookie",
            state_cookie(&state, crate::console::google::FLOW_TTL_SECS, req.secure).into(),
        ),
    ]))
}

/// `GET /v1/auth/google/callback?code&state`: check the state against the browser's
/// cookie, exchange the code, verify the ID token, sign in, 302 to the console.
pub(super) async fn google_callback(
    console: &Console,
    req: &Request<'_>,
) -> Result<Reply, ApiError> {
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
        .filter(|c| c.kind == "google" && c.expires_at > crate::clock::now())
        .ok_or_else(|| bad("invalid_state", "unknown, used or expired sign-in"))?;
    let identity = oidc
        .sign_in(&code, &flow.message, &flow.subject, req.request_id)
        .await?;
    let provider = identity.provider();
    let plan = console.signup_plan.clone();
    let user_id = db(console.store.user_for(&identity, &plan)).await?;
    let mut headers = set_cookies(console.start_session(user_id, provider, req.secure).await?);
    headers.push(("Set-Cookie", state_cookie("", 0, req.secure).into()));
    headers.push(("Location", oidc.after_login.clone().into()));
    headers.push(("Cache-Control", "no-store".into()));
    Ok(Reply::empty(302).with_headers(headers))
}

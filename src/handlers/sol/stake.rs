//! Stake snapshots, read from the store (captured per epoch by `src/capture/sol/stake.rs`, never
//! the live chain): `GET /v1/sol/snapshot/stake/latest`, `/epoch/{epoch}`,
//! `/by-voter/{vote_pubkey}` (SPEC's page) and `/account/{pubkey}/history`.

use super::{address_param, int_param, Request};
use crate::errors::ApiError;
use crate::reply::Reply;
use crate::store::sol_stake::{EpochCapture, StakeRow};
use crate::store::Store;
use serde_json::{json, Value};

/// Page size: default and most.
pub const PAGE_DEFAULT: i64 = 100;
pub const PAGE_MAX: i64 = 1000;
/// Most epochs in one stake account's history (about 5 years of 2-day epochs).
pub const HISTORY_MAX: i64 = 1000;

fn store_error(e: crate::store::sql::StoreError) -> ApiError {
    log::warn!("stake snapshots: {e}");
    ApiError::new(
        503,
        "store_unavailable",
        "stake snapshots cannot be read now",
    )
}

fn account(r: &StakeRow) -> Value {
    json!({
        "pubkey": r.pubkey,
        "voter": r.voter,
        "stake": r.stake,
        "activation_epoch": r.activation_epoch,
        "deactivation_epoch": r.deactivation_epoch,
        "epoch": r.epoch,
    })
}

fn paging(req: &Request<'_>) -> Result<(i64, i64), ApiError> {
    Ok((
        int_param(req, "limit", PAGE_DEFAULT, 1, PAGE_MAX)?,
        int_param(req, "offset", 0, 0, i64::MAX / 2)?,
    ))
}

fn no_snapshot(what: String) -> ApiError {
    ApiError::new(404, "snapshot_not_found", what)
}

pub const HANDLERS: &[super::super::Handler] = &[
    super::super::Handler::new("sol_stake_latest", |s, r| {
        Box::pin(serve(s.store(), Asked::Latest, r))
    }),
    super::super::Handler::new("sol_stake_epoch", |s, r| {
        Box::pin(serve(s.store(), Asked::Epoch, r))
    }),
    super::super::Handler::new("sol_stake_by_voter", |s, r| {
        Box::pin(serve(s.store(), Asked::ByVoter, r))
    }),
    super::super::Handler::new("sol_stake_history", |s, r| {
        Box::pin(serve(s.store(), Asked::History, r))
    }),
];

/// What a stake route asks.
#[derive(Clone, Copy)]
enum Asked {
    Latest,
    Epoch,
    ByVoter,
    History,
}

async fn serve(store: &Store, asked: Asked, req: &Request<'_>) -> Result<Reply, ApiError> {
    let body = match asked {
        Asked::Latest => {
            let (limit, offset) = paging(req)?;
            let epoch = store.stake_epoch(None).await.map_err(store_error)?;
            let epoch =
                epoch.ok_or_else(|| no_snapshot("no epoch has been captured yet".into()))?;
            snapshot(store, &epoch, limit, offset).await?
        }
        Asked::Epoch => {
            let raw = req.params.first().map(String::as_str).unwrap_or("");
            let n = raw
                .parse::<i64>()
                .ok()
                .filter(|n| *n >= 0 && raw.len() <= 12)
                .ok_or_else(|| {
                    ApiError::invalid_params(format!(
                        "epoch must be a decimal epoch number (got '{}')",
                        raw.chars().take(20).collect::<String>()
                    ))
                })?;
            let (limit, offset) = paging(req)?;
            let epoch = store.stake_epoch(Some(n)).await.map_err(store_error)?;
            let epoch =
                epoch.ok_or_else(|| no_snapshot(format!("epoch {n} has no complete snapshot")))?;
            snapshot(store, &epoch, limit, offset).await?
        }
        Asked::ByVoter => {
            let voter = address_param(req, 0, "vote_pubkey")?;
            let (limit, offset) = paging(req)?;
            let (rows, total) = store
                .stake_by_voter(&voter, limit, offset)
                .await
                .map_err(store_error)?;
            json!({
                "voter": voter,
                "accounts": rows.iter().map(account).collect::<Vec<_>>(),
                "total": total,
                "limit": limit,
                "offset": offset,
            })
        }
        Asked::History => {
            let pubkey = address_param(req, 0, "pubkey")?;
            let rows = store
                .stake_history(&pubkey, HISTORY_MAX)
                .await
                .map_err(store_error)?;
            if rows.is_empty() {
                return Err(no_snapshot(format!(
                    "stake account {pubkey} is in no captured snapshot"
                )));
            }
            json!({
                "pubkey": pubkey,
                "history": rows.iter().map(|r| json!({
                    "epoch": r.epoch,
                    "voter": r.voter,
                    "stake": r.stake,
                    "activation_epoch": r.activation_epoch,
                    "deactivation_epoch": r.deactivation_epoch,
                })).collect::<Vec<_>>(),
            })
        }
    };
    Ok(Reply::json(200, body.to_string()))
}

/// A page of one epoch's snapshot.
async fn snapshot(
    store: &Store,
    epoch: &EpochCapture,
    limit: i64,
    offset: i64,
) -> Result<Value, ApiError> {
    let rows = store
        .stake_page(epoch.epoch, limit, offset)
        .await
        .map_err(store_error)?;
    Ok(json!({
        "epoch": epoch.epoch,
        "slot": epoch.slot,
        "captured_at": epoch.completed_at,
        "total": epoch.accounts,
        "limit": limit,
        "offset": offset,
        "accounts": rows.iter().map(account).collect::<Vec<_>>(),
    }))
}

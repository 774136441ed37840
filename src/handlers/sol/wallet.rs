//! Solana wallet and account reads, live from the `sol_rpc` pool:
//! `GET /v1/sol/snapshot/account/{address}`, `GET /v1/sol/wallet/{address}/balance`,
//! `/tokens`, `/nfts` and `/history`. Shapes in docs/api/sol.md.

use super::{address_param, commitment, context_slot, int_param, read, unexpected};
use super::{Request, Served, LAMPORTS_PER_SOL};
use crate::errors::ApiError;
use crate::pools::Pool;
use crate::reply::Reply;
use crate::rpc::Gateway;
use crate::sol_tx;
use serde_json::{json, Value};

/// The SPL Token programs a wallet's tokens live under, with the name answers use.
pub const TOKEN_PROGRAMS: &[(&str, &str)] = &[
    ("TokenkegQfeZyiNwAJbNbGKPFXCWuBvf9Ss623VQ5DA", "spl-token"),
    (
        "TokenzQdBNbLqP5VEhdkAS6EPFLC1PHnBqCXEpPxuEb",
        "spl-token-2022",
    ),
];
/// History page size: default and most.
pub const HISTORY_DEFAULT: i64 = 100;
pub const HISTORY_MAX: i64 = 1000;
/// The capability a `sol_rpc` host declares when it serves the DAS API (compressed NFTs).
pub const DAS: &str = "das";

fn reply(v: Value, served: Served) -> Reply {
    Reply::json(200, v.to_string())
        .served_by(served.host)
        .with_headers(vec![(
            "x-chainedge-verified",
            served.verified.as_str().into(),
        )])
}

/// `GET /v1/sol/snapshot/account/{address}`: the account as the node holds it now.
pub async fn account(gateway: &Gateway, pool: &Pool, req: &Request<'_>) -> Result<Reply, ApiError> {
    let address = address_param(req, 0, "address")?;
    let commitment = commitment(req)?;
    let (answer, served) = read(
        gateway,
        pool,
        "getAccountInfo",
        json!([address, {"encoding": "base64", "commitment": commitment}]),
        req.request_id,
    )
    .await?;
    let slot = context_slot(&answer).ok_or_else(|| unexpected("getAccountInfo"))?;
    let value = &answer["value"];
    if value.is_null() {
        return Err(ApiError::new(
            404,
            "not_found",
            format!("no account {address} at slot {slot}"),
        ));
    }
    let data = value["data"]
        .get(0)
        .and_then(Value::as_str)
        .ok_or_else(|| unexpected("getAccountInfo"))?;
    let lamports = value["lamports"]
        .as_u64()
        .ok_or_else(|| unexpected("getAccountInfo"))?;
    Ok(reply(
        json!({
            "address": address,
            "lamports": lamports,
            "owner": value["owner"],
            "executable": value["executable"].as_bool().unwrap_or(false),
            // u64, often u64::MAX ("rent exempt"): a string so no client rounds it.
            "rent_epoch": value["rentEpoch"].as_u64().map(|e| e.to_string()),
            "space": value["space"].as_u64().unwrap_or((data.len() / 4 * 3) as u64),
            "data": data,
            "data_encoding": "base64",
            "slot": slot,
            "commitment": commitment,
        }),
        served,
    ))
}

/// `GET /v1/sol/wallet/{address}/balance`: lamports (exact) and SOL (convenience).
pub async fn balance(gateway: &Gateway, pool: &Pool, req: &Request<'_>) -> Result<Reply, ApiError> {
    let address = address_param(req, 0, "address")?;
    let commitment = commitment(req)?;
    let (answer, served) = read(
        gateway,
        pool,
        "getBalance",
        json!([address, {"commitment": commitment}]),
        req.request_id,
    )
    .await?;
    let (Some(slot), Some(lamports)) = (context_slot(&answer), answer["value"].as_u64()) else {
        return Err(unexpected("getBalance"));
    };
    Ok(reply(
        json!({
            "address": address,
            "lamports": lamports,
            "sol": lamports as f64 / LAMPORTS_PER_SOL as f64,
            "slot": slot,
            "commitment": commitment,
        }),
        served,
    ))
}

/// One SPL token account a wallet owns, as the node's `jsonParsed` gives it.
#[derive(Debug, Clone, PartialEq)]
struct TokenHolding {
    mint: String,
    token_account: String,
    program: &'static str,
    amount: String,
    decimals: u64,
    ui_amount_string: String,
}

/// The wallet's token accounts under both token programs, read in one batch (one host,
/// one view of the chain), with the slot they were read at.
async fn holdings(
    gateway: &Gateway,
    pool: &Pool,
    address: &str,
    commitment: &str,
    rid: &str,
) -> Result<(Vec<TokenHolding>, u64, Option<String>), ApiError> {
    let calls: Vec<(&str, Value)> = TOKEN_PROGRAMS
        .iter()
        .map(|(program, _)| {
            (
                "getTokenAccountsByOwner",
                json!([address, {"programId": program},
                       {"encoding": "jsonParsed", "commitment": commitment}]),
            )
        })
        .collect();
    let (answers, host) = gateway.read_batch(pool, &calls, rid).await?;
    let mut out = Vec::new();
    let mut slot = 0;
    for (answer, (_, program)) in answers.iter().zip(TOKEN_PROGRAMS) {
        slot = slot.max(context_slot(answer).ok_or_else(|| unexpected("getTokenAccountsByOwner"))?);
        let accounts = answer["value"]
            .as_array()
            .ok_or_else(|| unexpected("getTokenAccountsByOwner"))?;
        for a in accounts {
            let info = &a["account"]["data"]["parsed"]["info"];
            let amount = &info["tokenAmount"];
            let (Some(pubkey), Some(mint), Some(raw), Some(decimals)) = (
                a["pubkey"].as_str(),
                info["mint"].as_str(),
                amount["amount"].as_str(),
                amount["decimals"].as_u64(),
            ) else {
                return Err(unexpected("getTokenAccountsByOwner"));
            };
            out.push(TokenHolding {
                mint: mint.to_string(),
                token_account: pubkey.to_string(),
                program,
                amount: raw.to_string(),
                decimals,
                ui_amount_string: amount["uiAmountString"]
                    .as_str()
                    .map(str::to_string)
                    .unwrap_or_else(|| ui_amount(raw, decimals)),
            });
        }
    }
    out.sort_by(|a, b| (&a.mint, &a.token_account).cmp(&(&b.mint, &b.token_account)));
    Ok((out, slot, host))
}

/// A raw token amount with `decimals` applied, as a decimal string without trailing zeros.
fn ui_amount(raw: &str, decimals: u64) -> String {
    let d = decimals as usize;
    if d == 0 || raw.is_empty() {
        return raw.to_string();
    }
    let padded = format!("{raw:0>width$}", width = d + 1);
    let (int, frac) = padded.split_at(padded.len() - d);
    let frac = frac.trim_end_matches('0');
    if frac.is_empty() {
        int.to_string()
    } else {
        format!("{int}.{frac}")
    }
}

/// A regular NFT: a token account holding exactly one unit of a mint with no decimals.
fn is_nft(h: &TokenHolding) -> bool {
    h.decimals == 0 && h.amount == "1"
}

/// `GET /v1/sol/wallet/{address}/tokens`: fungible holdings with a non-zero amount
/// (NFTs are listed by `/nfts`), decimals applied.
pub async fn tokens(gateway: &Gateway, pool: &Pool, req: &Request<'_>) -> Result<Reply, ApiError> {
    let address = address_param(req, 0, "address")?;
    let commitment = commitment(req)?;
    let (all, slot, host) = holdings(gateway, pool, &address, commitment, req.request_id).await?;
    let tokens: Vec<Value> = all
        .iter()
        .filter(|h| h.amount != "0" && !is_nft(h))
        .map(|h| {
            json!({
                "mint": h.mint,
                "token_account": h.token_account,
                "program": h.program,
                "amount": h.amount,
                "decimals": h.decimals,
                "ui_amount_string": h.ui_amount_string,
            })
        })
        .collect();
    Ok(reply(
        json!({"address": address, "slot": slot, "commitment": commitment, "tokens": tokens}),
        Served::by(host),
    ))
}

/// `GET /v1/sol/wallet/{address}/nfts`: regular NFTs from the token accounts; compressed
/// ones from a host that serves the DAS API (capability `das`), otherwise a capability
/// state saying why they are absent.
pub async fn nfts(gateway: &Gateway, pool: &Pool, req: &Request<'_>) -> Result<Reply, ApiError> {
    let address = address_param(req, 0, "address")?;
    let commitment = commitment(req)?;
    let (all, slot, host) = holdings(gateway, pool, &address, commitment, req.request_id).await?;
    let regular: Vec<Value> = all
        .iter()
        .filter(|h| is_nft(h))
        .map(|h| {
            json!({
                "mint": h.mint,
                "token_account": h.token_account,
                "program": h.program,
                "compressed": false,
            })
        })
        .collect();
    let compressed = if pool.candidates(Some(DAS)).is_empty() {
        json!({
            "state": "unavailable",
            "reason": format!("no host in pool {} serves the DAS API (capability `{DAS}`)", pool.name),
            "items": [],
        })
    } else {
        compressed_nfts(gateway, pool, &address, req.request_id).await?
    };
    Ok(reply(
        json!({
            "address": address,
            "slot": slot,
            "commitment": commitment,
            "nfts": regular,
            "compressed": compressed,
        }),
        Served::by(host),
    ))
}

/// Most compressed NFTs listed (the DAS page size).
const DAS_PAGE: usize = 1000;

/// Compressed NFTs by the DAS API's `getAssetsByOwner` (first page).
async fn compressed_nfts(
    gateway: &Gateway,
    pool: &Pool,
    address: &str,
    rid: &str,
) -> Result<Value, ApiError> {
    let (answer, _) = gateway
        .read_call_with(
            pool,
            Some(DAS),
            "getAssetsByOwner",
            json!({"ownerAddress": address, "page": 1, "limit": DAS_PAGE}),
            rid,
        )
        .await?;
    let items = answer["items"]
        .as_array()
        .ok_or_else(|| unexpected("getAssetsByOwner"))?;
    let list: Vec<Value> = items
        .iter()
        .filter(|a| a["compression"]["compressed"].as_bool() == Some(true))
        .map(|a| {
            json!({
                "id": a["id"],
                "tree": a["compression"]["tree"],
                "leaf_id": a["compression"]["leaf_id"],
                "name": a["content"]["metadata"]["name"],
                "compressed": true,
            })
        })
        .collect();
    Ok(json!({
        "state": "available",
        "truncated": items.len() >= DAS_PAGE,
        "items": list,
    }))
}

/// `GET /v1/sol/wallet/{address}/history?limit=&before=`: the address's transactions,
/// newest first, `before` the cursor (a signature from the previous page).
pub async fn history(gateway: &Gateway, pool: &Pool, req: &Request<'_>) -> Result<Reply, ApiError> {
    let address = address_param(req, 0, "address")?;
    let limit = int_param(req, "limit", HISTORY_DEFAULT, 1, HISTORY_MAX)?;
    let commitment = match commitment(req)? {
        // getSignaturesForAddress takes confirmed or finalized only.
        "processed" => {
            return Err(ApiError::invalid_params(
                "history is read at confirmed or finalized commitment",
            ))
        }
        c => c,
    };
    let before = req.query_param("before");
    let mut opts = json!({"limit": limit, "commitment": commitment});
    if let Some(b) = &before {
        if !sol_tx::is_signature(b) {
            return Err(ApiError::invalid_params(
                "before must be a transaction signature (base58, 64 bytes) from a previous page",
            ));
        }
        opts["before"] = json!(b);
    }
    let (answer, served) = read(
        gateway,
        pool,
        "getSignaturesForAddress",
        json!([address, opts]),
        req.request_id,
    )
    .await?;
    let entries = answer
        .as_array()
        .ok_or_else(|| unexpected("getSignaturesForAddress"))?;
    let mut items = Vec::with_capacity(entries.len());
    for e in entries {
        let (Some(signature), Some(slot)) = (e["signature"].as_str(), e["slot"].as_u64()) else {
            return Err(unexpected("getSignaturesForAddress"));
        };
        items.push(json!({
            "signature": signature,
            "slot": slot,
            "block_time": e["blockTime"],
            "status": if e["err"].is_null() { "success" } else { "failed" },
            "error": e["err"],
            "memo": e["memo"],
            "confirmation_status": e["confirmationStatus"],
        }));
    }
    let next = (items.len() as i64 == limit)
        .then(|| items.last().map(|i| i["signature"].clone()))
        .flatten();
    Ok(reply(
        json!({"address": address, "items": items, "next_cursor": next}),
        served,
    ))
}

pub const HANDLERS: &[super::super::Handler] = &[
    super::super::Handler::new("sol_account_snapshot", |s, r| {
        Box::pin(async move { account(s.gateway, s.pool()?, r).await })
    })
    .pool("sol_rpc"),
    super::super::Handler::new("sol_wallet_balance", |s, r| {
        Box::pin(async move { balance(s.gateway, s.pool()?, r).await })
    })
    .pool("sol_rpc"),
    super::super::Handler::new("sol_wallet_tokens", |s, r| {
        Box::pin(async move { tokens(s.gateway, s.pool()?, r).await })
    })
    .pool("sol_rpc"),
    super::super::Handler::new("sol_wallet_nfts", |s, r| {
        Box::pin(async move { nfts(s.gateway, s.pool()?, r).await })
    })
    .pool("sol_rpc"),
    super::super::Handler::new("sol_wallet_history", |s, r| {
        Box::pin(async move { history(s.gateway, s.pool()?, r).await })
    })
    .pool("sol_rpc"),
];

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn token_amounts_get_their_decimals() {
        assert_eq!(ui_amount("1500000", 6), "1.5");
        assert_eq!(ui_amount("12345", 2), "123.45");
        assert_eq!(ui_amount("5", 3), "0.005");
        assert_eq!(ui_amount("7000", 3), "7");
        assert_eq!(ui_amount("42", 0), "42");
        assert_eq!(ui_amount("0", 9), "0");
    }
}

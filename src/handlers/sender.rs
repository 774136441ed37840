//! REST senders over the JSON-RPC machinery: `POST /v1/eth/sender/raw` and
//! `POST /v1/polygon/sender/raw` (a signed transaction → its hash and the route that
//! took it) and `POST /v1/eth/sender/bundle` (ordered signed transactions → a bundle
//! hash from the builder pool). Every transaction is decoded and its signer recovered
//! first (`signed_tx`), so what is not one is a 400 before any node sees it; resends
//! are answered once (`sent`).

use super::Request;
use crate::errors::ApiError;
use crate::jsonrpc::{self, ErrorObject, Id, Response};
use crate::pools::{Pool, Pools};
use crate::reply::Reply;
use crate::rpc::{Gateway, BUILDER_METHODS, PRIVATE_TX_METHODS};
use crate::signed_tx::{self, SignedTx};
use crate::state::sent::{Accepted, SentTransactions};
use crate::tracking;
use serde::Deserialize;
use serde_json::{json, Value};

/// Dispatch routes of the Ethereum raw sender.
pub const ETH_PATHS: &[&str] = &["auto", "public", "private"];

/// Dispatch routes of the Polygon raw sender and the pool behind each, in the order
/// `auto` tries them: our own bor nodes, then an anonymising relay, then public
/// endpoints that take no provider credential.
pub const POLYGON_ROUTES: &[(&str, &str)] = &[
    ("upstreama_own", "polygon_bor"),
    ("upstreamb_anon", "polygon_sender_anon"),
    ("upstreamc_no_auth", "polygon_sender_no_auth"),
];

/// `POST /v1/eth/sender/raw`: the transaction to the public pool (by the gateway's write
/// policy) or to the private relay, as asked.
pub async fn raw(
    gateway: &Gateway,
    pools: &Pools,
    sent: &SentTransactions,
    req: &Request<'_>,
) -> Result<Reply, ApiError> {
    let (tx, raw, preferred) = parse_raw(&req.body, ETH_PATHS)?;
    restricted(req, "eth_sendRawTransaction", &[&tx])?;
    let call = send_call(&raw);
    let accepted = sent
        .send_once(&tx.hash, || async {
            if preferred == "private" {
                let pool = pool(pools, "eth_private_rpc")?;
                let r = gateway
                    .forward(
                        pool.candidates(None),
                        &call.to_bytes(),
                        PRIVATE_TX_METHODS,
                        req.request_id,
                    )
                    .await?;
                accepted_or_refused(node_answer(&r.body), "private", r.upstream)
            } else {
                let (answer, host) = gateway
                    .write(
                        pool(pools, "eth_el")?,
                        &call,
                        req.request_id,
                        req.submitter(),
                    )
                    .await?;
                accepted_or_refused(answer, "public", host)
            }
        })
        .await?;
    // The public path was queued by the gateway's write; the private one is queued here.
    if let (Some(by), "private") = (req.submitter(), accepted.path_used) {
        let log = &gateway.txlog;
        log.accepted_on("eth", tracking::PRIVATE, &tx.hash, &raw, by);
    }
    Ok(sender_result(&tx, accepted))
}

/// `POST /v1/polygon/sender/raw`: the routes of [`POLYGON_ROUTES`] in order until one
/// accepts (`auto`), or the one route asked for. A route whose pool is not configured
/// is skipped by `auto`; pinned, it is a 503.
pub async fn polygon_raw(
    gateway: &Gateway,
    pools: &Pools,
    sent: &SentTransactions,
    req: &Request<'_>,
) -> Result<Reply, ApiError> {
    let paths: Vec<&str> = std::iter::once("auto")
        .chain(POLYGON_ROUTES.iter().map(|(p, _)| *p))
        .collect();
    let (tx, raw, preferred) = parse_raw(&req.body, &paths)?;
    restricted(req, "eth_sendRawTransaction", &[&tx])?;
    let routes: Vec<(&'static str, &Pool)> = if preferred == "auto" {
        POLYGON_ROUTES
            .iter()
            .filter_map(|(path, name)| pools.get(name).map(|p| (*path, &**p)))
            .collect()
    } else {
        let (path, name) = POLYGON_ROUTES
            .iter()
            .find(|(p, _)| *p == preferred)
            .expect("parse_raw checked the path");
        let pool = pools.get(name).ok_or_else(|| {
            ApiError::new(
                503,
                "pool_not_configured",
                format!("the {path} route has no pool here (pools.{name})"),
            )
        })?;
        vec![(*path, &**pool)]
    };
    if routes.is_empty() {
        return Err(ApiError::new(
            503,
            "pool_not_configured",
            "no Polygon sender route is configured (pools.polygon_bor)",
        ));
    }
    let call = send_call(&raw);
    let accepted = sent
        .send_once(&tx.hash, || async {
            // A route that refuses or cannot be reached hands over to the next; when
            // none accepts, a node's refusal says more than a transport error.
            let mut refusal = None;
            let mut unreachable = None;
            for (path, pool) in routes {
                match gateway
                    .write(pool, &call, req.request_id, req.submitter())
                    .await
                {
                    Ok((answer, host)) => match accepted_or_refused(answer, path, host) {
                        Ok(a) => return Ok(a),
                        Err(e) => refusal = Some(e),
                    },
                    Err(e) => unreachable = Some(e),
                }
            }
            Err(refusal.or(unreachable).unwrap_or_else(|| {
                ApiError::bad_gateway("upstream_unavailable", "no route answered")
            }))
        })
        .await?;
    Ok(sender_result(&tx, accepted))
}

fn send_call(raw: &str) -> jsonrpc::Request {
    jsonrpc::Request::new(Id::index(1), "eth_sendRawTransaction", json!([raw]))
}

/// A node's answer to `eth_sendRawTransaction`: accepted on `path` (the gateway already
/// counted "already known" and a mined resend as accepted), or a 400 with its reason.
fn accepted_or_refused(
    answer: Response,
    path: &'static str,
    upstream: Option<String>,
) -> Result<Accepted, ApiError> {
    match answer.into_result() {
        Ok(Value::String(_)) => Ok(Accepted {
            path_used: path,
            upstream,
        }),
        refused => Err(ApiError::new(
            400,
            "tx_rejected",
            error_message(refused, "the node refused the transaction"),
        )),
    }
}

/// The sender result: the hash computed from the transaction itself (a node cannot
/// substitute another) and the route that took it.
fn sender_result(tx: &SignedTx, accepted: Accepted) -> Reply {
    json_reply(json!({"tx_hash": tx.hash, "path_used": accepted.path_used}))
        .served_by(accepted.upstream)
}

/// `POST /v1/eth/sender/bundle`: `eth_sendBundle` to the builder pool.
pub async fn bundle(
    gateway: &Gateway,
    pools: &Pools,
    req: &Request<'_>,
) -> Result<Reply, ApiError> {
    let (call, txs) = bundle_call(&req.body)?;
    restricted(
        req,
        "eth_sendBundle",
        &txs.iter().map(|(tx, _)| tx).collect::<Vec<_>>(),
    )?;
    let pool = pool(pools, "eth_mev_builder")?;
    let r = gateway
        .forward(
            pool.candidates(None),
            &call.to_bytes(),
            BUILDER_METHODS,
            req.request_id,
        )
        .await?;
    let answer = node_answer(&r.body).into_result();
    match answer
        .as_ref()
        .ok()
        .and_then(|v| v.get("bundleHash"))
        .and_then(Value::as_str)
    {
        Some(h) => {
            if let Some(by) = req.submitter() {
                for (tx, raw) in &txs {
                    let log = &gateway.txlog;
                    log.accepted_on("eth", tracking::BUNDLE, &tx.hash, raw, by);
                }
            }
            Ok(json_reply(json!({"bundle_hash": h})).served_by(r.upstream))
        }
        None => Err(ApiError::new(
            400,
            "bundle_rejected",
            error_message(answer, "the builder refused the bundle"),
        )),
    }
}

/// `/rpc/eth-builder` and `/rpc/eth-private`: JSON-RPC whose every method is on the
/// endpoint's own list, to the builder or private-relay pool.
pub async fn endpoint(
    gateway: &Gateway,
    pools: &Pools,
    builder: bool,
    req: &Request<'_>,
) -> Result<Reply, ApiError> {
    let (pool_name, allow) = if builder {
        ("eth_mev_builder", BUILDER_METHODS)
    } else {
        ("eth_private_rpc", PRIVATE_TX_METHODS)
    };
    // The call first (SPEC's order): an unknown method is a 403 with or without a pool.
    let restrictions = req.key().and_then(|k| k.restrictions.as_deref());
    let checked = gateway.check_forwarded(&req.body, allow, restrictions)?;
    let pool = pool(pools, pool_name)?;
    let r = gateway
        .forward(pool.candidates(None), &checked, allow, req.request_id)
        .await?;
    Ok(Reply::json(200, r.body).served_by(r.upstream))
}

/// What the key's owner allowed: a sender counts as `eth_sendRawTransaction` (a
/// bundle as `eth_sendBundle`), and each transaction's recipient as the contract it
/// reaches.
fn restricted(req: &Request<'_>, method: &str, txs: &[&SignedTx]) -> Result<(), ApiError> {
    let Some(r) = req.key().and_then(|k| k.restrictions.as_deref()) else {
        return Ok(());
    };
    r.method(method)?;
    txs.iter().try_for_each(|tx| r.transaction(tx.to))
}

fn pool<'p>(pools: &'p Pools, name: &str) -> Result<&'p Pool, ApiError> {
    pools.get(name).map(|p| &**p).ok_or_else(|| {
        ApiError::new(
            503,
            "pool_not_configured",
            format!("no {name} pool is configured"),
        )
    })
}

fn json_reply(v: Value) -> Reply {
    Reply::json(200, serde_json::to_vec(&v).unwrap_or_default())
}

/// A node's JSON-RPC answer (one that is not one reads as an error).
fn node_answer(body: &[u8]) -> Response {
    serde_json::from_slice(body).unwrap_or_else(|_| {
        Response::error(
            Id::Null,
            ErrorObject::new(-32603, "the node answered non-JSON-RPC"),
        )
    })
}

/// A refused answer's error message, or `fallback`.
fn error_message(answer: Result<Value, ErrorObject>, fallback: &str) -> String {
    match answer {
        Err(e) if !e.message.is_empty() => e.message,
        _ => fallback.to_string(),
    }
}

/// Most transactions in one bundle.
pub const MAX_BUNDLE: usize = 16;

#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
pub struct RawRequest {
    pub raw_tx: String,
    #[serde(default, deserialize_with = "crate::handlers::not_null")]
    pub preferred_path: Option<String>,
}

#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
pub struct BundleRequest {
    pub txs: Vec<String>,
    /// Target block, decimal or 0x-hex.
    pub block_number: Value,
}

/// A signed transaction, decoded; what is not one is `invalid_params`.
pub fn check_raw(raw: &str) -> Result<SignedTx, ApiError> {
    signed_tx::decode(raw).map_err(ApiError::invalid_params)
}

/// A raw sender's body: the decoded transaction, its hex, and the route asked for
/// (one of `paths`, default `auto`).
pub fn parse_raw<'p>(
    body: &[u8],
    paths: &[&'p str],
) -> Result<(SignedTx, String, &'p str), ApiError> {
    let r: RawRequest = crate::handlers::object_body(body)?;
    let tx = check_raw(&r.raw_tx)?;
    let wanted = r.preferred_path.as_deref().unwrap_or("auto");
    let path = paths
        .iter()
        .find(|x| **x == wanted)
        .copied()
        .ok_or_else(|| {
            ApiError::invalid_params(format!("preferred_path is one of {}", paths.join(", ")))
        })?;
    Ok((tx, r.raw_tx, path))
}

/// The `eth_sendBundle` call for a bundle request.
/// `eth_sendBundle` for a bundle body, with each of its transactions decoded.
pub fn bundle_call(body: &[u8]) -> Result<(jsonrpc::Request, Vec<(SignedTx, String)>), ApiError> {
    let b: BundleRequest = crate::handlers::object_body(body)?;
    if b.txs.is_empty() || b.txs.len() > MAX_BUNDLE {
        return Err(ApiError::invalid_params(format!(
            "a bundle holds 1 to {MAX_BUNDLE} signed transactions"
        )));
    }
    let decoded = b
        .txs
        .iter()
        .map(|raw| Ok((check_raw(raw)?, raw.clone())))
        .collect::<Result<Vec<_>, ApiError>>()?;
    let block = match &b.block_number {
        Value::Number(n) => n.as_u64().map(|n| format!("0x{n:x}")),
        Value::String(s) if s.starts_with("0x") => u64::from_str_radix(&s[2..], 16)
            .ok()
            .map(|n| format!("0x{n:x}")),
        Value::String(s) => s.parse::<u64>().ok().map(|n| format!("0x{n:x}")),
        _ => None,
    }
    .ok_or_else(|| ApiError::invalid_params("block_number is a block number"))?;
    let call = jsonrpc::Request::new(
        Id::index(1),
        "eth_sendBundle",
        json!([{"txs": b.txs, "blockNumber": block}]),
    );
    Ok((call, decoded))
}

pub const HANDLERS: &[super::Handler] = &[
    super::Handler::new("eth_sender_raw", |s, r| {
        Box::pin(raw(s.gateway, s.pools, s.sent(), r))
    }),
    super::Handler::new("polygon_sender_raw", |s, r| {
        Box::pin(polygon_raw(s.gateway, s.pools, s.sent(), r))
    }),
    super::Handler::new("eth_sender_bundle", |s, r| {
        Box::pin(bundle(s.gateway, s.pools, r))
    }),
    super::Handler::new("builder_rpc", |s, r| {
        Box::pin(endpoint(s.gateway, s.pools, true, r))
    }),
    super::Handler::new("private_rpc", |s, r| {
        Box::pin(endpoint(s.gateway, s.pools, false, r))
    }),
];

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn raw_transactions_and_bundles() {
        // A type-2 transfer signed by eth-account (anvil's first key, chain 137).
        let typed = "0x02f86b818903843b9aca0084773594008252089470997970c51812dc3a010c7d01b50e0d17dc79c80180c001a09eab01e4c96cd3d89037e2c8f5fcfd52d3b2e4614209eba4735d5d142d2724f8a02fa182ed1afd259667f3ed4efc2d3aa10b517e55bb89a992fed84f7b8087f249";
        assert!(check_raw(typed).is_ok());
        // The shape of a transaction without one inside is not one.
        let filler = format!("0x02f8{}", "ab".repeat(20));
        assert!(check_raw(&filler).is_err());
        let (tx, _, path) =
            parse_raw(format!(r#"{{"raw_tx":"{typed}"}}"#).as_bytes(), ETH_PATHS).unwrap();
        assert_eq!(path, "auto");
        assert_eq!(tx.nonce, 3);
        let polygon = [
            "auto",
            "upstreama_own",
            "upstreamb_anon",
            "upstreamc_no_auth",
        ];
        let body = format!(r#"{{"raw_tx":"{typed}","preferred_path":"upstreamb_anon"}}"#);
        assert_eq!(
            parse_raw(body.as_bytes(), &polygon).unwrap().2,
            "upstreamb_anon"
        );
        assert!(parse_raw(body.as_bytes(), ETH_PATHS).is_err());
        let moon = format!(r#"{{"raw_tx":"{typed}","preferred_path":"moon"}}"#);
        assert!(parse_raw(moon.as_bytes(), &polygon).is_err());
        let extra = format!(r#"{{"raw_tx":"{typed}","gas":1}}"#);
        assert!(parse_raw(extra.as_bytes(), &polygon).is_err());
        let (call, txs) =
            bundle_call(format!(r#"{{"txs":["{typed}"],"block_number":17}}"#).as_bytes()).unwrap();
        assert_eq!(call.param(0).unwrap()["blockNumber"], "0x11");
        assert_eq!((txs.len(), txs[0].1.as_str()), (1, typed));
        assert!(bundle_call(br#"{"txs":[],"block_number":1}"#).is_err());
        let filler_bundle = format!(r#"{{"txs":["{filler}"],"block_number":17}}"#);
        assert!(bundle_call(filler_bundle.as_bytes()).is_err());
    }
}

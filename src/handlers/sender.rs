//! REST senders over the JSON-RPC machinery: `POST /v1/eth/sender/raw` (a signed
//! transaction → its hash) and `POST /v1/eth/sender/bundle` (ordered signed transactions
//! → a bundle hash from the builder pool).

use super::Request;
use crate::errors::ApiError;
use crate::jsonrpc::{self, ErrorObject, Id, Response};
use crate::pools::{Pool, Pools};
use crate::reply::Reply;
use crate::routes::spec::HandlerKind;
use crate::rpc::{Gateway, BUILDER_METHODS, PRIVATE_TX_METHODS};
use serde::Deserialize;
use serde_json::{json, Value};

/// `POST /v1/eth/sender/raw`: the transaction to the public pool (by the gateway's write
/// policy) or to the private relay, as asked.
pub async fn raw(gateway: &Gateway, pools: &Pools, req: &Request<'_>) -> Result<Reply, ApiError> {
    let (raw, preferred) = parse_raw(&req.body)?;
    let call = jsonrpc::Request::new(Id::index(1), "eth_sendRawTransaction", json!([raw]));
    let (answer, path, upstream) = if preferred == "private" {
        let pool = pool(pools, "eth_private_rpc")?;
        let r = gateway
            .forward(
                pool.candidates(None),
                &call.to_bytes(),
                PRIVATE_TX_METHODS,
                req.request_id,
            )
            .await?;
        (node_answer(&r.body), "private", r.upstream)
    } else {
        let (answer, host) = gateway
            .write(pool(pools, "eth_el")?, &call, req.request_id)
            .await?;
        (answer, "public", host)
    };
    match answer.into_result() {
        Ok(Value::String(hash)) => {
            Ok(json_reply(json!({"tx_hash": hash, "path_used": path})).served_by(upstream))
        }
        refused => Err(ApiError::new(
            400,
            "tx_rejected",
            error_message(refused, "the node refused the transaction"),
        )),
    }
}

/// `POST /v1/eth/sender/bundle`: `eth_sendBundle` to the builder pool.
pub async fn bundle(
    gateway: &Gateway,
    pools: &Pools,
    req: &Request<'_>,
) -> Result<Reply, ApiError> {
    let call = bundle_call(&req.body)?;
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
        Some(h) => Ok(json_reply(json!({"bundle_hash": h})).served_by(r.upstream)),
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
    req: &Request<'_>,
) -> Result<Reply, ApiError> {
    let (pool_name, allow) = if req.kind == HandlerKind::BuilderRpc {
        ("eth_mev_builder", BUILDER_METHODS)
    } else {
        ("eth_private_rpc", PRIVATE_TX_METHODS)
    };
    let pool = pool(pools, pool_name)?;
    let r = gateway
        .forward(pool.candidates(None), &req.body, allow, req.request_id)
        .await?;
    Ok(Reply::json(200, r.body).served_by(r.upstream))
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

/// Dispatch routes of the raw sender.
pub const RAW_PATHS: &[&str] = &["auto", "public", "private"];
/// Most transactions in one bundle.
pub const MAX_BUNDLE: usize = 16;

#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
pub struct RawRequest {
    pub raw_tx: String,
    #[serde(default)]
    pub preferred_path: Option<String>,
}

#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
pub struct BundleRequest {
    pub txs: Vec<String>,
    /// Target block, decimal or 0x-hex.
    pub block_number: Value,
}

/// A signed transaction as the wire carries it: 0x-hex of either a legacy RLP list or an
/// EIP-2718 typed envelope (type byte 0x01..=0x7f, then an RLP list).
pub fn check_raw(raw: &str) -> Result<(), ApiError> {
    let bytes = raw
        .strip_prefix("0x")
        .filter(|h| !h.is_empty() && h.len() % 2 == 0)
        .and_then(|h| hex::decode(h).ok())
        .ok_or_else(|| ApiError::invalid_params("raw_tx must be 0x-prefixed hex"))?;
    let list_at = match bytes[0] {
        0xc0..=0xff => 0,
        0x01..=0x7f => 1,
        _ => {
            return Err(ApiError::invalid_params(
                "raw_tx is not a signed transaction",
            ))
        }
    };
    if bytes.get(list_at).is_none_or(|b| *b < 0xc0) || bytes.len() < list_at + 10 {
        return Err(ApiError::invalid_params(
            "raw_tx is not a signed transaction",
        ));
    }
    Ok(())
}

pub fn parse_raw(body: &[u8]) -> Result<(String, &'static str), ApiError> {
    let r: RawRequest =
        serde_json::from_slice(body).map_err(|e| ApiError::invalid_params(format!("body: {e}")))?;
    check_raw(&r.raw_tx)?;
    let wanted = r.preferred_path.as_deref().unwrap_or("auto");
    let path = RAW_PATHS
        .iter()
        .find(|x| **x == wanted)
        .copied()
        .ok_or_else(|| ApiError::invalid_params("preferred_path is auto, public or private"))?;
    Ok((r.raw_tx, path))
}

/// The `eth_sendBundle` call for a bundle request.
pub fn bundle_call(body: &[u8]) -> Result<jsonrpc::Request, ApiError> {
    let b: BundleRequest =
        serde_json::from_slice(body).map_err(|e| ApiError::invalid_params(format!("body: {e}")))?;
    if b.txs.is_empty() || b.txs.len() > MAX_BUNDLE {
        return Err(ApiError::invalid_params(format!(
            "a bundle holds 1 to {MAX_BUNDLE} signed transactions"
        )));
    }
    for tx in &b.txs {
        check_raw(tx)?;
    }
    let block = match &b.block_number {
        Value::Number(n) => n.as_u64().map(|n| format!("0x{n:x}")),
        Value::String(s) if s.starts_with("0x") => u64::from_str_radix(&s[2..], 16)
            .ok()
            .map(|n| format!("0x{n:x}")),
        Value::String(s) => s.parse::<u64>().ok().map(|n| format!("0x{n:x}")),
        _ => None,
    }
    .ok_or_else(|| ApiError::invalid_params("block_number is a block number"))?;
    Ok(jsonrpc::Request::new(
        Id::index(1),
        "eth_sendBundle",
        json!([{"txs": b.txs, "blockNumber": block}]),
    ))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn raw_transactions_and_bundles() {
        let typed = format!("0x02f8{}", "ab".repeat(20));
        let legacy = format!("0xf86c{}", "ab".repeat(20));
        assert!(check_raw(&typed).is_ok() && check_raw(&legacy).is_ok());
        for bad in [
            "",
            "0x",
            "0x0",
            "02f8",
            "0xzz",
            "0x00f8abababababababababab",
            "0x02aa0000000000000000000000",
        ] {
            assert!(check_raw(bad).is_err(), "{bad}");
        }
        assert_eq!(
            parse_raw(format!(r#"{{"raw_tx":"{typed}"}}"#).as_bytes())
                .unwrap()
                .1,
            "auto"
        );
        assert!(
            parse_raw(format!(r#"{{"raw_tx":"{typed}","preferred_path":"moon"}}"#).as_bytes())
                .is_err()
        );
        let call =
            bundle_call(format!(r#"{{"txs":["{typed}"],"block_number":17}}"#).as_bytes()).unwrap();
        assert_eq!(call.param(0).unwrap()["blockNumber"], "0x11");
        assert!(bundle_call(br#"{"txs":[],"block_number":1}"#).is_err());
    }
}

//! REST senders over the JSON-RPC machinery: `POST /v1/eth/sender/raw` (a signed
//! transaction → its hash) and `POST /v1/eth/sender/bundle` (ordered signed transactions
//! → a bundle hash from the builder pool).

use crate::errors::ApiError;
use serde::Deserialize;
use serde_json::{json, Value};

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
pub fn bundle_call(body: &[u8]) -> Result<Value, ApiError> {
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
    Ok(
        json!({"jsonrpc": "2.0", "id": 1, "method": "eth_sendBundle", "params": [{"txs": b.txs, "blockNumber": block}]}),
    )
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
        assert_eq!(call["params"][0]["blockNumber"], "0x11");
        assert!(bundle_call(br#"{"txs":[],"block_number":1}"#).is_err());
    }
}

//! Wallet endpoints answered live from the chain's pool: the native balance of an
//! address at a block (`GET /v1/eth/wallet/{address}/balance`,
//! `GET /v1/polygon/wallet/balance/{address}`).
//!
//! Every parameter is checked before any node is called. The block is resolved to its
//! number first and the balance read at that number, so `block` in the answer is the
//! block the balance belongs to (a tag would race the head between two calls).

use super::Request;
use crate::errors::ApiError;
use crate::index::decode::quantity;
use crate::pools::Pool;
use crate::reply::Reply;
use crate::rpc::Gateway;
use serde_json::{json, Value};

/// Which block a read is at, as the `block` query parameter names it.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum BlockParam {
    Latest,
    Pending,
    Safe,
    Finalized,
    Number(u64),
}

impl BlockParam {
    /// `latest` (default), `pending`, `safe`, `finalized`, `0x`-hex or decimal.
    pub fn parse(raw: Option<&str>) -> Result<BlockParam, ApiError> {
        let Some(raw) = raw else {
            return Ok(BlockParam::Latest);
        };
        let bad = || {
            ApiError::invalid_params(format!(
                "block must be latest, pending, safe, finalized, or a hex or decimal block number (got '{}')",
                raw.chars().take(40).collect::<String>()
            ))
        };
        let number = |n: u64| {
            // Block heights are int64 in every answer.
            if n > i64::MAX as u64 {
                Err(bad())
            } else {
                Ok(BlockParam::Number(n))
            }
        };
        match raw {
            "latest" => Ok(BlockParam::Latest),
            "pending" => Ok(BlockParam::Pending),
            "safe" => Ok(BlockParam::Safe),
            "finalized" => Ok(BlockParam::Finalized),
            _ => {
                if let Some(hex) = raw.strip_prefix("0x") {
                    if hex.is_empty() || hex.len() > 16 {
                        return Err(bad());
                    }
                    number(u64::from_str_radix(hex, 16).map_err(|_| bad())?)
                } else if !raw.is_empty()
                    && raw.len() <= 19
                    && raw.bytes().all(|b| b.is_ascii_digit())
                {
                    number(raw.parse().map_err(|_| bad())?)
                } else {
                    Err(bad())
                }
            }
        }
    }

    /// The JSON-RPC block parameter.
    pub fn tag(self) -> String {
        match self {
            BlockParam::Latest => "latest".into(),
            BlockParam::Pending => "pending".into(),
            BlockParam::Safe => "safe".into(),
            BlockParam::Finalized => "finalized".into(),
            BlockParam::Number(n) => format!("0x{n:x}"),
        }
    }
}

/// A block parameter resolved to the number it names now, and what to read at: that
/// number, or `pending` (which has no number of its own to read at).
pub async fn resolve_block(
    gateway: &Gateway,
    pool: &Pool,
    block: BlockParam,
    rid: &str,
) -> Result<(u64, String), ApiError> {
    let (header, _) = gateway
        .read_call(
            pool,
            "eth_getBlockByNumber",
            json!([block.tag(), false]),
            rid,
        )
        .await?;
    let Some(number) = header
        .get("number")
        .and_then(Value::as_str)
        .and_then(quantity)
    else {
        return Err(match block {
            BlockParam::Number(n) => {
                ApiError::invalid_params(format!("block {n} is not on the chain yet"))
            }
            _ => ApiError::new(
                502,
                "upstream_unavailable",
                format!("the node has no '{}' block", block.tag()),
            ),
        });
    };
    let at = match block {
        BlockParam::Pending => block.tag(),
        _ => format!("0x{number:x}"),
    };
    Ok((number, at))
}

/// `^0x[0-9a-fA-F]{40}$`, the address as given (checksummed case is kept).
pub fn address(raw: &str) -> Result<&str, ApiError> {
    let ok =
        raw.len() == 42 && raw.starts_with("0x") && raw[2..].bytes().all(|b| b.is_ascii_hexdigit());
    if ok {
        Ok(raw)
    } else {
        Err(ApiError::invalid_params(
            "address must match ^0x[0-9a-fA-F]{40}$",
        ))
    }
}

/// The native balance: `{address, wei, <unit>, block}`, `unit` being `eth` or `matic`.
pub async fn balance(
    gateway: &Gateway,
    pool: &Pool,
    unit: &str,
    req: &Request<'_>,
) -> Result<Reply, ApiError> {
    let addr = address(req.params.first().map(String::as_str).unwrap_or(""))?;
    let block = BlockParam::parse(req.query_param("block").as_deref())?;
    let (number, at) = resolve_block(gateway, pool, block, req.request_id).await?;
    let (wei, upstream) = gateway
        .read_call(pool, "eth_getBalance", json!([addr, at]), req.request_id)
        .await?;
    let wei = wei.as_str().and_then(u256_decimal).ok_or_else(|| {
        ApiError::new(
            502,
            "upstream_unavailable",
            "the node's balance is not a quantity",
        )
    })?;
    let whole = wei.parse::<f64>().unwrap_or(0.0) / 1e18;
    let mut body = serde_json::Map::new();
    body.insert("address".into(), json!(addr));
    body.insert("wei".into(), json!(wei));
    body.insert(unit.into(), json!(whole));
    body.insert("block".into(), json!(number));
    Ok(Reply::json(200, Value::Object(body).to_string()).served_by(upstream))
}

/// A JSON-RPC quantity of up to 256 bits as an exact decimal string.
pub fn u256_decimal(hex: &str) -> Option<String> {
    let digits = hex.strip_prefix("0x")?;
    if digits.is_empty() || digits.len() > 64 || !digits.bytes().all(|b| b.is_ascii_hexdigit()) {
        return None;
    }
    // Four 64-bit limbs, most significant first.
    let padded = format!("{digits:0>64}");
    let mut limbs = [0u64; 4];
    for (i, limb) in limbs.iter_mut().enumerate() {
        *limb = u64::from_str_radix(&padded[i * 16..(i + 1) * 16], 16).ok()?;
    }
    // Divide by 10^19 repeatedly; each remainder is 19 decimal digits.
    const CHUNK: u64 = 10_000_000_000_000_000_000;
    let mut parts = Vec::new();
    while limbs.iter().any(|&l| l != 0) {
        let mut rem: u128 = 0;
        for limb in limbs.iter_mut() {
            let cur = (rem << 64) | *limb as u128;
            *limb = (cur / CHUNK as u128) as u64;
            rem = cur % CHUNK as u128;
        }
        parts.push(rem as u64);
    }
    let Some((last, rest)) = parts.split_last() else {
        return Some("0".into());
    };
    let mut out = last.to_string();
    for p in rest.iter().rev() {
        out.push_str(&format!("{p:019}"));
    }
    Some(out)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn u256_to_decimal_is_exact() {
        assert_eq!(u256_decimal("0x0").as_deref(), Some("0"));
        assert_eq!(
            u256_decimal("0xde0b6b3a7640000").as_deref(),
            Some("1000000000000000000")
        );
        assert_eq!(
            u256_decimal(&format!("0x{}", "f".repeat(64))).as_deref(),
            Some("115792089237316195423570985008687907853269984665640564039457584007913129639935")
        );
        assert_eq!(
            u256_decimal("0x10000000000000000").as_deref(),
            Some("18446744073709551616")
        );
        assert_eq!(u256_decimal("0x"), None);
        assert_eq!(u256_decimal("12"), None);
        assert_eq!(u256_decimal(&format!("0x1{}", "0".repeat(64))), None);
    }

    #[test]
    fn block_parameter_forms() {
        assert_eq!(BlockParam::parse(None).unwrap(), BlockParam::Latest);
        assert_eq!(
            BlockParam::parse(Some("finalized")).unwrap(),
            BlockParam::Finalized
        );
        assert_eq!(
            BlockParam::parse(Some("0x10")).unwrap(),
            BlockParam::Number(16)
        );
        assert_eq!(
            BlockParam::parse(Some("16")).unwrap(),
            BlockParam::Number(16)
        );
        for bad in [
            "",
            "0x",
            "earliest",
            "-1",
            "1.5",
            "0xzz",
            "99999999999999999999",
            "0x8000000000000000",
        ] {
            assert!(BlockParam::parse(Some(bad)).is_err(), "{bad}");
        }
    }

    #[test]
    fn addresses() {
        assert!(address("0x52908400098527886E0F7030069857D2E4169EE7").is_ok());
        for bad in [
            "",
            "0x",
            "52908400098527886E0F7030069857D2E4169EE7",
            "0x52908400098527886E0F7030069857D2E4169EE",
            "0xg2908400098527886E0F7030069857D2E4169EE7",
        ] {
            assert!(address(bad).is_err(), "{bad}");
        }
    }
}

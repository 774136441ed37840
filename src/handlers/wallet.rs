//! Wallet endpoints answered live from the chain's pool: the native balance of an
//! address at a block (`GET /v1/eth/wallet/{address}/balance`,
//! `GET /v1/polygon/wallet/balance/{address}`).
//!
//! Every parameter is checked before any node is called. The block is resolved to its
//! number first and the balance read at that number, so `block` in the answer is the
//! block the balance belongs to (a tag would race the head between two calls).

use super::Request;
use crate::errors::ApiError;
use crate::jsonrpc::quantity::{quantity, u256_decimal};
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
            BlockParam::Number(n) => ApiError::new(
                404,
                "not_found",
                format!("block {n} is not on the chain yet"),
            ),
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

pub const HANDLERS: &[super::Handler] = &[
    super::Handler::new("eth_wallet_balance", |s, r| {
        Box::pin(async move { balance(s.gateway, s.pool()?, "eth", r).await })
    })
    .pool("eth_el"),
    super::Handler::new("polygon_wallet_balance", |s, r| {
        Box::pin(async move { balance(s.gateway, s.pool()?, "matic", r).await })
    })
    .pool("polygon_bor"),
];

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

#[cfg(test)]
mod tests {
    use super::*;

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

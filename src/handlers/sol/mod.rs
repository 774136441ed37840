//! The Solana REST layer (`/v1/sol/...`): wallet and account reads answered live from the
//! `sol_rpc` pool, transaction and bundle senders, and stake snapshots read from the
//! store. What every Solana handler shares is here: the parameters (addresses,
//! commitment, paging) checked before any node is called, and one call to the pool.

pub mod mempool;
pub mod mev_cache;
pub mod sender;
pub mod stake;
pub mod wallet;
pub mod watchlist;

use super::Request;
use crate::errors::ApiError;
use crate::pools::Pool;
use crate::rpc::Gateway;
use crate::sol_tx;
use crate::verify::Verified;
use serde_json::Value;

/// Lamports in one SOL.
pub const LAMPORTS_PER_SOL: u64 = 1_000_000_000;

/// The `{address}`-like path parameter `i`, checked as a base58 account address.
pub fn address_param(req: &Request<'_>, i: usize, what: &str) -> Result<String, ApiError> {
    let raw = req.params.get(i).map(String::as_str).unwrap_or("");
    if sol_tx::is_address(raw) {
        Ok(raw.to_string())
    } else {
        Err(ApiError::invalid_params(format!(
            "{what} must be a base58 Solana address (32 to 44 characters, 32 bytes; got '{}')",
            raw.chars().take(50).collect::<String>()
        )))
    }
}

/// The `commitment` query parameter: `processed`, `confirmed` (default) or `finalized`.
pub fn commitment(req: &Request<'_>) -> Result<&'static str, ApiError> {
    match req.query_param("commitment").as_deref() {
        None | Some("confirmed") => Ok("confirmed"),
        Some("processed") => Ok("processed"),
        Some("finalized") => Ok("finalized"),
        Some(other) => Err(ApiError::invalid_params(format!(
            "commitment must be processed, confirmed or finalized (got '{}')",
            other.chars().take(20).collect::<String>()
        ))),
    }
}

/// An integer query parameter within `[min, max]`, `default` when absent.
pub fn int_param(
    req: &Request<'_>,
    name: &str,
    default: i64,
    min: i64,
    max: i64,
) -> Result<i64, ApiError> {
    let Some(raw) = req.query_param(name) else {
        return Ok(default);
    };
    match raw.parse::<i64>() {
        Ok(n) if (min..=max).contains(&n) => Ok(n),
        _ => Err(ApiError::invalid_params(format!(
            "{name} must be an integer from {min} to {max} (got '{}')",
            raw.chars().take(20).collect::<String>()
        ))),
    }
}

/// Who answered a read, and how the answer was checked (a vote, when
/// `rpc.verify.quorum` names the method).
pub struct Served {
    pub host: Option<String>,
    pub verified: Verified,
}

impl Served {
    pub fn by(host: Option<String>) -> Served {
        Served {
            host,
            verified: Verified::None,
        }
    }
}

/// One JSON-RPC read on the pool's healthy hosts (put to a vote where configured): its
/// `result` and who served it. A node's own error is a 502 (`upstream_unavailable`)
/// with its message: the calls made here are checked first, so a node refusing one is
/// the node's failure, not the caller's.
pub async fn read(
    gateway: &Gateway,
    pool: &Pool,
    method: &str,
    params: Value,
    rid: &str,
) -> Result<(Value, Served), ApiError> {
    let (result, host, verified) = gateway.read_call_voted(pool, method, params, rid).await?;
    Ok((result, Served { host, verified }))
}

/// The slot of an answer with a `context` (`{"context":{"slot":N},"value":...}`).
pub fn context_slot(answer: &Value) -> Option<u64> {
    answer.get("context")?.get("slot")?.as_u64()
}

/// A node's answer that is not in Solana's shape: the node's failure.
pub fn unexpected(method: &str) -> ApiError {
    ApiError::new(
        502,
        "upstream_unavailable",
        format!("{method}: the node's answer is not in Solana's shape"),
    )
}

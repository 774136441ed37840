//! What became of a transaction sent through the edge: `GET /v1/eth/tx/{hash}`,
//! `GET /v1/polygon/tx/{hash}` and `GET /v1/sol/tx/{signature}`, answered from what
//! `capture::txs` followed, for the
//! tenant whose key sent it. Another tenant's transaction is not found, as an unknown
//! hash is: the answer does not tell whether anyone sent it. The console lists a key's
//! recent ones in the same shape (`console::key_txs`).

use super::{Request, Services};
use crate::auth::Principal;
use crate::errors::ApiError;
use crate::reply::Reply;
use crate::store::txs::TrackedTx;

pub const HANDLERS: &[super::Handler] = &[
    super::Handler::new("eth_tx_status", |s, r| Box::pin(status(s, r, "eth"))).pool("eth_el"),
    super::Handler::new("polygon_tx_status", |s, r| {
        Box::pin(status(s, r, "polygon"))
    })
    .pool("polygon_bor"),
    super::Handler::new("sol_tx_status", |s, r| Box::pin(status(s, r, "sol"))).pool("sol_rpc"),
];

async fn status(s: &Services<'_>, req: &Request<'_>, chain: &str) -> Result<Reply, ApiError> {
    let raw = req.params.first().map(String::as_str).unwrap_or("");
    let hash = match chain {
        "sol" => sol_signature(raw)?,
        _ => tx_hash(raw)?,
    };
    let Principal::Key(key) = req.caller else {
        return Err(ApiError::new(401, "unauthorized", "an API key is required"));
    };
    let tx = s
        .store()
        .tracked_tx(chain, &hash, &key.tenant_id)
        .await
        .map_err(|e| e.to_api_error())?
        .ok_or_else(|| {
            ApiError::new(
                404,
                "tx_not_found",
                format!(
                    "no transaction {hash} sent with this tenant's keys is followed on {chain}"
                ),
            )
        })?;
    // Confirmations against the head the pool's health checks saw last (blocks; a
    // Solana slot count is not a confirmation count).
    let head = s
        .pool_name
        .filter(|_| chain != "sol")
        .and_then(|p| s.pools.get(p))
        .map(|p| p.head.load(std::sync::atomic::Ordering::Relaxed))
        .filter(|h| *h > 0);
    Ok(Reply::json(200, answer(&tx, head).to_string()))
}

/// `0x` and 64 hex digits, lower-cased.
fn tx_hash(raw: &str) -> Result<String, ApiError> {
    let ok =
        raw.len() == 66 && raw.starts_with("0x") && raw[2..].bytes().all(|b| b.is_ascii_hexdigit());
    if !ok {
        return Err(ApiError::invalid_params(
            "hash must be a transaction hash: 0x and 64 hex digits",
        ));
    }
    Ok(raw.to_ascii_lowercase())
}

/// A Solana transaction's id: its first signature, base58 (64 bytes).
fn sol_signature(raw: &str) -> Result<String, ApiError> {
    if !crate::sol_tx::is_signature(raw) {
        return Err(ApiError::invalid_params(
            "signature must be a transaction signature: base58, 64 bytes",
        ));
    }
    Ok(raw.to_string())
}

/// A followed transaction as the API answers it (`confirmations` from `head`).
pub(super) fn answer(tx: &TrackedTx, head: Option<u64>) -> serde_json::Value {
    crate::tracking::status_json(tx, head)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn hashes_are_checked_before_the_store_is_asked() {
        let h = format!("0x{}", "Ab".repeat(32));
        assert_eq!(tx_hash(&h).unwrap(), h.to_ascii_lowercase());
        for bad in [
            "",
            "0x",
            "0xzz",
            &h[..65],
            &format!("{h}0"),
            &h.replace("0x", "00"),
        ] {
            assert_eq!(tx_hash(bad).unwrap_err().code, "invalid_params", "{bad}");
        }
    }
}

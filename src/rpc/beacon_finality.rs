//! A second source of finality for the response cache: the beacon chain's finalized
//! checkpoint, where a beacon pool (`eth_cl`) stands beside the execution pool
//! (`eth_el`). Useful when execution nodes do not answer the `finalized` tag, or lag
//! behind the consensus layer in reporting it.
//!
//! Each tracker round asks one beacon host for the finalized header
//! (`GET /eth/v1/beacon/headers/finalized`, a few hundred bytes). Only when its root
//! changes (once an epoch, 6.4 minutes on mainnet) is the block itself read
//! (`GET /eth/v2/beacon/blocks/{root}`) for its execution payload's number and hash.
//! The cache takes that number as final only after an execution node answers the same
//! hash at that number: a beacon pool following another chain, or a fork the execution
//! nodes are not on, never makes anything final.

use crate::pools::Pools;
use crate::upstream::UpstreamClient;
use serde_json::Value;
use std::time::Duration;

/// The execution pool the beacon pool tells finality for, and the beacon pool.
pub const EXECUTION_POOL: &str = "eth_el";
pub const BEACON_POOL: &str = "eth_cl";

const TIMEOUT: Duration = Duration::from_secs(5);
/// A header answer is small; a whole block (with its transactions) is not.
const MAX_HEADER: usize = 64 * 1024;
const MAX_BLOCK: usize = 32 * 1024 * 1024;

/// What the beacon pool last said was finalized.
#[derive(Debug, Default)]
pub struct BeaconFinality {
    root: Option<String>,
    /// The execution block of that checkpoint: (number, hash).
    block: Option<(u64, String)>,
    /// The execution block already checked against the execution pool (and its verdict).
    pub checked: Option<((u64, String), bool)>,
}

impl BeaconFinality {
    /// The execution block the beacon pool says is finalized now, if one of its hosts
    /// answers (`None` without a beacon pool or an answer).
    pub async fn poll(&mut self, pools: &Pools, client: &UpstreamClient) -> Option<(u64, String)> {
        let pool = pools.get(BEACON_POOL)?;
        for host in pool.candidates(None) {
            let base = host.addr.path.trim_end_matches('/');
            let Some(root) = get(
                client,
                &host,
                &format!("{base}/eth/v1/beacon/headers/finalized"),
                MAX_HEADER,
            )
            .await
            .and_then(|v| {
                v.pointer("/data/root")
                    .and_then(Value::as_str)
                    .map(str::to_string)
            }) else {
                continue;
            };
            if self.root.as_deref() == Some(root.as_str()) {
                return self.block.clone();
            }
            let path = format!("{base}/eth/v2/beacon/blocks/{root}");
            let Some(block) = get(client, &host, &path, MAX_BLOCK)
                .await
                .and_then(|v| execution_block(&v))
            else {
                continue;
            };
            self.root = Some(root);
            self.block = Some(block);
            return self.block.clone();
        }
        None
    }
}

async fn get(
    client: &UpstreamClient,
    host: &crate::pools::Host,
    path: &str,
    max: usize,
) -> Option<Value> {
    let r = client
        .send(host.call("GET", path, "cache-tracker"), TIMEOUT, max)
        .await
        .ok()?;
    (r.status == 200)
        .then(|| serde_json::from_slice(&r.body).ok())
        .flatten()
}

/// A signed beacon block's execution payload: (block number, block hash). Numbers come
/// as decimal strings in the beacon API.
pub fn execution_block(answer: &Value) -> Option<(u64, String)> {
    let payload = answer.pointer("/data/message/body/execution_payload")?;
    let number = match payload.get("block_number")? {
        Value::String(s) => s.parse().ok()?,
        Value::Number(n) => n.as_u64()?,
        _ => return None,
    };
    let hash = payload.get("block_hash")?.as_str()?;
    let hex = hash.strip_prefix("0x")?;
    (hex.len() == 64 && hex.bytes().all(|b| b.is_ascii_hexdigit()))
        .then(|| (number, hash.to_ascii_lowercase()))
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    #[test]
    fn the_execution_payload_is_read_strictly() {
        let hash = format!("0x{}", "Ab".repeat(32));
        let block = |number: Value, hash: &str| {
            json!({"version": "deneb", "data": {"message": {"slot": "1", "body": {
                "execution_payload": {"block_number": number, "block_hash": hash}}}}})
        };
        assert_eq!(
            execution_block(&block(json!("90"), &hash)),
            Some((90, hash.to_ascii_lowercase()))
        );
        assert_eq!(
            execution_block(&block(json!(90), &hash)).map(|b| b.0),
            Some(90)
        );
        assert_eq!(execution_block(&block(json!("x"), &hash)), None);
        assert_eq!(execution_block(&block(json!("90"), "0x12")), None);
        // A pre-merge block has no execution payload.
        assert_eq!(
            execution_block(&json!({"data": {"message": {"body": {}}}})),
            None
        );
    }
}

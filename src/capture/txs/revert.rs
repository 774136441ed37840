//! Why a followed transaction reverted: replayed with `eth_call` on the state its block
//! started from, the node's revert data decoded (`Error(string)`, `Panic(uint256)`, a
//! Vyper string; any other error by its selector). The replay misses what earlier
//! transactions of the same block changed, as every wallet's replay does; nodes without
//! the state (pruned) give no reason, and none is shown.

use crate::jsonrpc::quantity::quantity;
use crate::pools::Pool;
use crate::rpc::Gateway;
use serde_json::{json, Value};

/// Revert data longer than this is not decoded (a reason is a short string).
const MAX_DATA: usize = 4096;

/// The reason `hash`, mined in `block` and reverted, gives when replayed; `None` when
/// the node gives none.
pub async fn reason(
    gateway: &Gateway,
    pool: &Pool,
    hash: &str,
    block: u64,
    rid: &str,
) -> Option<String> {
    let (tx, _) = gateway
        .read_call(pool, "eth_getTransactionByHash", json!([hash]), rid)
        .await
        .ok()?;
    let field = |k: &str| tx.get(k).cloned().unwrap_or(Value::Null);
    let call = json!({
        "from": field("from"),
        "to": field("to"),
        "data": field("input"),
        "value": field("value"),
        "gas": field("gas"),
    });
    let parent = format!("0x{:x}", block.saturating_sub(1));
    let (answer, _) = gateway
        .node_call(pool, None, "eth_call", json!([call, parent]), rid)
        .await
        .ok()?;
    // A replay that succeeds says nothing about why the transaction did not.
    let refused = answer.err()?;
    let data = refused.data.as_ref().and_then(revert_data)?;
    describe(&data)
}

/// The revert bytes a node put in its error's `data` (a hex string, or an object
/// carrying one, as some clients nest it).
fn revert_data(data: &Value) -> Option<Vec<u8>> {
    let text = match data {
        Value::String(s) => s.as_str(),
        Value::Object(o) => o.get("data").and_then(Value::as_str)?,
        _ => return None,
    };
    let digits = text.strip_prefix("0x")?;
    if digits.len() > 2 * MAX_DATA {
        return None;
    }
    hex::decode(digits).ok()
}

/// Revert data in words.
pub fn describe(data: &[u8]) -> Option<String> {
    if data.is_empty() {
        return None;
    }
    if let Some(reason) = alloy_sol_types::decode_revert_reason(data) {
        let printable = reason.chars().all(|c| !c.is_control());
        if printable && !reason.is_empty() {
            return Some(reason.chars().take(256).collect());
        }
    }
    (data.len() >= 4).then(|| format!("custom error 0x{}", hex::encode(&data[..4])))
}

/// Whether `receipt` says the transaction reverted.
pub fn reverted(receipt: &Value) -> bool {
    receipt
        .get("status")
        .and_then(Value::as_str)
        .and_then(quantity)
        == Some(0)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn revert_data_in_words() {
        let error_string = hex::decode(
            "08c379a0\
             0000000000000000000000000000000000000000000000000000000000000020\
             0000000000000000000000000000000000000000000000000000000000000004\
             6e6f706500000000000000000000000000000000000000000000000000000000",
        )
        .unwrap();
        assert_eq!(describe(&error_string).as_deref(), Some("revert: nope"));
        let panic = hex::decode(
            "4e487b71\
             0000000000000000000000000000000000000000000000000000000000000011",
        )
        .unwrap();
        assert!(
            describe(&panic).unwrap().contains("0x11"),
            "{:?}",
            describe(&panic)
        );
        let custom = hex::decode("deadbeef00ff").unwrap();
        assert_eq!(
            describe(&custom).as_deref(),
            Some("custom error 0xdeadbeef")
        );
        assert_eq!(describe(&[]), None);
        assert_eq!(describe(&[1, 2]), None);
        assert_eq!(revert_data(&json!("0x0102")), Some(vec![1, 2]));
        assert_eq!(revert_data(&json!({"data": "0x01"})), Some(vec![1]));
        assert_eq!(revert_data(&json!("zz")), None);
        assert_eq!(
            revert_data(&json!(format!("0x{}", "00".repeat(MAX_DATA + 1)))),
            None
        );
    }
}

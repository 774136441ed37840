//! A block and its receipts → the transfers the index keeps: a transaction's own value
//! (successful transactions only), ERC-20 / ERC-721 `Transfer`, ERC-1155
//! `TransferSingle` / `TransferBatch` (logs of successful transactions; a log that does
//! not have the standard shape is skipped, never fatal to the block).

pub use crate::jsonrpc::quantity::{quantity, u256_decimal};
use crate::store::index::{IndexedBlock, Transfer};
use serde_json::Value;

/// `Transfer(address,address,uint256)`: ERC-20 (3 topics) and ERC-721 (4 topics).
pub const TRANSFER: &str = "0xddf252ad1be2c89b69c2b068fc378daa952ba7f163c4a11628f55a4df523b3ef";
/// `TransferSingle(address,address,address,uint256,uint256)`.
pub const TRANSFER_SINGLE: &str =
    "0xc3d58168c5ae7397731d063d5bbf3d657854427343f4c083240f7aacaa2d0f62";
/// `TransferBatch(address,address,address,uint256[],uint256[])`.
pub const TRANSFER_BATCH: &str =
    "0x4a39dc06d4c0dbc64b70af90fd698a233a518aa5d07e595d983b8c0526c8f7fb";
/// Most entries taken from one `TransferBatch` (a log could claim millions).
pub const MAX_BATCH_ENTRIES: usize = 1024;

/// Why a block could not be read (the node's answer is not a block).
#[derive(Debug)]
pub struct NotABlock(pub String);

/// The block's identity and transfers; `receipts` as `eth_getBlockReceipts` answered.
pub fn block(block: &Value, receipts: &Value) -> Result<IndexedBlock, NotABlock> {
    let field = |k: &str| {
        block
            .get(k)
            .and_then(Value::as_str)
            .ok_or_else(|| NotABlock(format!("block has no {k}")))
    };
    let number = quantity(field("number")?).ok_or_else(|| NotABlock("bad number".into()))?;
    let hash = field("hash")?.to_ascii_lowercase();
    let parent_hash = field("parentHash")?.to_ascii_lowercase();
    let timestamp = quantity(field("timestamp")?).unwrap_or(0);
    let txs = block
        .get("transactions")
        .and_then(Value::as_array)
        .ok_or_else(|| NotABlock("block has no transactions".into()))?;
    let receipts = receipts
        .as_array()
        .ok_or_else(|| NotABlock("receipts are not a list".into()))?;
    if receipts.len() != txs.len() {
        return Err(NotABlock(format!(
            "{} receipts for {} transactions",
            receipts.len(),
            txs.len()
        )));
    }
    let mut transfers = Vec::new();
    for (i, (tx, receipt)) in txs.iter().zip(receipts).enumerate() {
        // Failed transactions moved nothing (their logs are gone too).
        if receipt.get("status").and_then(Value::as_str) == Some("0x0") {
            continue;
        }
        let tx_hash = tx
            .get("hash")
            .and_then(Value::as_str)
            .unwrap_or_default()
            .to_ascii_lowercase();
        let value = tx.get("value").and_then(Value::as_str).unwrap_or("0x0");
        let to = tx.get("to").and_then(Value::as_str);
        let from = tx.get("from").and_then(Value::as_str);
        if let (Some(from), Some(to), Some(amount)) = (from, to, u256_decimal(value)) {
            if amount != "0" {
                transfers.push(Transfer {
                    tx_index: i as u64,
                    log_index: -1,
                    seq: 0,
                    kind: "native",
                    token: String::new(),
                    from: from.to_ascii_lowercase(),
                    to: to.to_ascii_lowercase(),
                    token_id: None,
                    amount,
                    tx_hash: tx_hash.clone(),
                });
            }
        }
        for log in receipt
            .get("logs")
            .and_then(Value::as_array)
            .into_iter()
            .flatten()
        {
            transfers.extend(log_transfers(i as u64, &tx_hash, log));
        }
    }
    Ok(IndexedBlock {
        number,
        hash,
        parent_hash,
        timestamp,
        transfers,
    })
}

/// The transfers one log records (none if it is not a standard transfer event).
fn log_transfers(tx_index: u64, tx_hash: &str, log: &Value) -> Vec<Transfer> {
    let topics: Vec<&str> = log
        .get("topics")
        .and_then(Value::as_array)
        .map(|t| t.iter().filter_map(Value::as_str).collect())
        .unwrap_or_default();
    let (Some(token), Some(log_index), Some(data)) = (
        log.get("address").and_then(Value::as_str),
        log.get("logIndex")
            .and_then(Value::as_str)
            .and_then(quantity),
        log.get("data").and_then(Value::as_str).and_then(hex_bytes),
    ) else {
        return Vec::new();
    };
    let token = token.to_ascii_lowercase();
    let one = |kind, from: String, to: String, token_id, amount| Transfer {
        tx_index,
        log_index: log_index as i64,
        seq: 0,
        kind,
        token: token.clone(),
        from,
        to,
        token_id,
        amount,
        tx_hash: tx_hash.to_string(),
    };
    let topic0 = topics.first().map(|t| t.to_ascii_lowercase());
    match (topic0.as_deref(), topics.len()) {
        (Some(TRANSFER), 3) if data.len() == 32 => {
            let (Some(from), Some(to)) = (topic_address(topics[1]), topic_address(topics[2]))
            else {
                return Vec::new();
            };
            vec![one("erc20", from, to, None, word_decimal(&data[..32]))]
        }
        (Some(TRANSFER), 4) if data.is_empty() => {
            let (Some(from), Some(to), Some(id)) = (
                topic_address(topics[1]),
                topic_address(topics[2]),
                u256_decimal(topics[3]),
            ) else {
                return Vec::new();
            };
            vec![one("erc721", from, to, Some(id), "1".into())]
        }
        (Some(TRANSFER_SINGLE), 4) if data.len() == 64 => {
            let (Some(from), Some(to)) = (topic_address(topics[2]), topic_address(topics[3]))
            else {
                return Vec::new();
            };
            let id = word_decimal(&data[..32]);
            vec![one(
                "erc1155",
                from,
                to,
                Some(id),
                word_decimal(&data[32..64]),
            )]
        }
        (Some(TRANSFER_BATCH), 4) => {
            let (Some(from), Some(to)) = (topic_address(topics[2]), topic_address(topics[3]))
            else {
                return Vec::new();
            };
            let (Some(ids), Some(values)) = (word_array(&data, 0), word_array(&data, 1)) else {
                return Vec::new();
            };
            if ids.len() != values.len() {
                return Vec::new();
            }
            ids.iter()
                .zip(&values)
                .enumerate()
                .map(|(seq, (id, value))| Transfer {
                    seq: seq as u64,
                    ..one(
                        "erc1155",
                        from.clone(),
                        to.clone(),
                        Some(word_decimal(id)),
                        word_decimal(value),
                    )
                })
                .collect()
        }
        _ => Vec::new(),
    }
}

pub fn hex_bytes(hex: &str) -> Option<Vec<u8>> {
    hex::decode(hex.strip_prefix("0x")?).ok()
}

/// An address in a 32-byte topic (its 12 leading bytes zero).
fn topic_address(topic: &str) -> Option<String> {
    let b = hex_bytes(topic)?;
    if b.len() != 32 || b[..12].iter().any(|&x| x != 0) {
        return None;
    }
    Some(format!("0x{}", hex::encode(&b[12..])))
}

fn word_decimal(word: &[u8]) -> String {
    u256_decimal(&format!("0x{}", hex::encode(word))).unwrap_or_else(|| "0".into())
}

/// A 32-byte word as a bounded offset or length.
fn word_usize(word: &[u8]) -> Option<usize> {
    if word.len() != 32 || word[..24].iter().any(|&x| x != 0) {
        return None;
    }
    usize::try_from(u64::from_be_bytes(word[24..].try_into().ok()?)).ok()
}

/// The `n`th head word of ABI data, taken as the offset of a `uint256[]`.
fn word_array(data: &[u8], n: usize) -> Option<Vec<&[u8]>> {
    let offset = word_usize(data.get(n * 32..n * 32 + 32)?)?;
    let len = word_usize(data.get(offset..offset.checked_add(32)?)?)?;
    if len > MAX_BATCH_ENTRIES {
        return None;
    }
    let start = offset + 32;
    let body = data.get(start..start.checked_add(len * 32)?)?;
    Some(body.chunks(32).collect())
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    fn topic(addr: &str) -> String {
        format!("0x{:0>64}", addr.trim_start_matches("0x"))
    }

    #[test]
    fn standard_events_and_odd_logs() {
        let a = "0x1111111111111111111111111111111111111111";
        let b = "0x2222222222222222222222222222222222222222";
        let word = |n: u64| format!("{n:064x}");
        let batch_data = format!(
            "0x{}{}{}{}{}{}{}{}",
            word(64),
            word(160),
            word(2),
            word(7),
            word(8),
            word(2),
            word(2),
            word(5)
        );
        let block_v = json!({"number": "0x10", "hash": "0xAB", "parentHash": "0xaa", "timestamp": "0x5",
            "transactions": [{"hash": "0xt1", "from": a, "to": b, "value": "0x3"},
                             {"hash": "0xt2", "from": a, "to": b, "value": "0x9"}]});
        let receipts = json!([
            {"status": "0x1", "logs": [
                {"address": "0xC0", "logIndex": "0x0", "topics": [TRANSFER, topic(a), topic(b)], "data": format!("0x{}", word(42))},
                {"address": "0xC1", "logIndex": "0x1", "topics": [TRANSFER, topic(a), topic(b), format!("0x{}", word(9))], "data": "0x"},
                {"address": "0xC2", "logIndex": "0x2", "topics": [TRANSFER_SINGLE, topic(a), topic(a), topic(b)], "data": format!("0x{}{}", word(3), word(4))},
                {"address": "0xC2", "logIndex": "0x3", "topics": [TRANSFER_BATCH, topic(a), topic(a), topic(b)], "data": batch_data},
                // Not standard: wrong data length, a topic that is not an address.
                {"address": "0xC3", "logIndex": "0x4", "topics": [TRANSFER, topic(a), topic(b)], "data": "0x01"},
                {"address": "0xC3", "logIndex": "0x5", "topics": [TRANSFER, format!("0x{}", "f".repeat(64)), topic(b)], "data": format!("0x{}", word(1))},
            ]},
            {"status": "0x0", "logs": []}
        ]);
        let b0 = block(&block_v, &receipts).unwrap();
        assert_eq!((b0.number, b0.hash.as_str()), (16, "0xab"));
        let kinds: Vec<(&str, i64, u64, Option<&str>, &str)> = b0
            .transfers
            .iter()
            .map(|t| {
                (
                    t.kind,
                    t.log_index,
                    t.seq,
                    t.token_id.as_deref(),
                    t.amount.as_str(),
                )
            })
            .collect();
        assert_eq!(
            kinds,
            vec![
                ("native", -1, 0, None, "3"),
                ("erc20", 0, 0, None, "42"),
                ("erc721", 1, 0, Some("9"), "1"),
                ("erc1155", 2, 0, Some("3"), "4"),
                ("erc1155", 3, 0, Some("7"), "2"),
                ("erc1155", 3, 1, Some("8"), "5"),
            ]
        );
        // The failed second transaction moved nothing.
        assert!(b0.transfers.iter().all(|t| t.tx_hash == "0xt1"));
        assert!(block(&block_v, &json!([])).is_err());
    }

    #[test]
    fn batch_arrays_are_bounded() {
        let word = |n: u64| format!("{n:064x}");
        let huge = hex_bytes(&format!(
            "0x{}{}{}",
            word(64),
            word(96),
            word(u32::MAX as u64)
        ))
        .unwrap();
        assert!(word_array(&huge, 0).is_none());
        assert!(word_array(&[0u8; 10], 0).is_none());
    }
}

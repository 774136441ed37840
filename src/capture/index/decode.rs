//! A block and its receipts → the transfers the index keeps: a transaction's own value
//! (successful transactions only), ERC-20 / ERC-721 `Transfer`, ERC-1155
//! `TransferSingle` / `TransferBatch` (logs of successful transactions; a log that does
//! not have the standard shape is skipped, never fatal to the block).

pub use crate::jsonrpc::quantity::{quantity, u256_decimal};
use crate::store::index::{IndexedBlock, Transfer};
use alloy_primitives::{Address, B256, U256};
use alloy_sol_types::abi::AbiDecoderConfig;
use alloy_sol_types::SolEvent;
use serde::de::IgnoredAny;
use serde::Deserialize;

/// The standard transfer events, as their interfaces declare them: the topic hashes
/// and the ABI decoding come from `sol!`.
mod events {
    alloy_sol_types::sol! {
        /// ERC-20: the amount in the data.
        event Transfer(address indexed from, address indexed to, uint256 value);
        /// ERC-1155.
        event TransferSingle(address indexed operator, address indexed from, address indexed to, uint256 id, uint256 value);
        event TransferBatch(address indexed operator, address indexed from, address indexed to, uint256[] ids, uint256[] values);
    }

    /// ERC-721: the same signature (and topic) as ERC-20's, with the token id indexed.
    pub mod erc721 {
        alloy_sol_types::sol! {
            event Transfer(address indexed from, address indexed to, uint256 indexed tokenId);
        }
    }
}

/// Most entries taken from one `TransferBatch` (a log could claim millions).
pub const MAX_BATCH_ENTRIES: usize = 1024;

/// Strict ABI: padding, offsets and lengths exactly as a compiler writes them, no
/// trailing bytes, addresses with zero upper bytes. A log that is not so is not a
/// standard transfer and is skipped (a token may emit anything under these names).
/// The memory bound keeps a `TransferBatch` that claims huge arrays from being built.
const STRICT: AbiDecoderConfig = AbiDecoderConfig::new()
    .strict(true)
    .memory_limit(2 * 32 * (MAX_BATCH_ENTRIES + 2));

/// Why a block could not be read (the node's answer is not a block).
#[derive(Debug)]
pub struct NotABlock(pub String);

/// What the index reads of `eth_getBlockByNumber(n, true)` (`T` = `RpcTx`) or of
/// `eth_getBlockByNumber(n, false)` (`T` = `IgnoredAny`: only whether there are any),
/// borrowed from the node's answer; every other field is skipped unread (a block with
/// its receipts is tens of kilobytes, and building `Value` maps of it was most of the
/// indexer's CPU).
#[derive(Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct RpcBlock<'a, T> {
    pub number: &'a str,
    pub hash: &'a str,
    pub parent_hash: &'a str,
    #[serde(default)]
    pub timestamp: Option<&'a str>,
    pub transactions: Vec<T>,
}

/// A block's header: its transactions as hashes, not read.
pub type RpcHeader<'a> = RpcBlock<'a, IgnoredAny>;

#[derive(Deserialize)]
pub struct RpcTx<'a> {
    #[serde(default)]
    pub hash: Option<&'a str>,
    #[serde(default)]
    pub from: Option<&'a str>,
    /// `null` for a contract creation.
    #[serde(default)]
    pub to: Option<&'a str>,
    #[serde(default)]
    pub value: Option<&'a str>,
}

/// One entry of `eth_getBlockReceipts`.
#[derive(Deserialize)]
pub struct RpcReceipt<'a> {
    #[serde(default)]
    pub status: Option<&'a str>,
    #[serde(borrow, default)]
    pub logs: Vec<RpcLog<'a>>,
}

#[derive(Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct RpcLog<'a> {
    #[serde(default)]
    pub address: Option<&'a str>,
    #[serde(default)]
    pub log_index: Option<&'a str>,
    #[serde(borrow, default)]
    pub topics: Vec<&'a str>,
    #[serde(default)]
    pub data: Option<&'a str>,
}

/// A block known to have no transaction, from its header alone.
pub fn empty_block(header: &RpcHeader<'_>) -> Result<IndexedBlock, NotABlock> {
    Ok(IndexedBlock {
        number: quantity(header.number).ok_or_else(|| NotABlock("bad number".into()))?,
        hash: header.hash.to_ascii_lowercase(),
        parent_hash: header.parent_hash.to_ascii_lowercase(),
        timestamp: header.timestamp.and_then(quantity).unwrap_or(0),
        transfers: Vec::new(),
    })
}

/// The block's identity and transfers; `receipts` as `eth_getBlockReceipts` answered.
pub fn block(
    block: &RpcBlock<'_, RpcTx<'_>>,
    receipts: &[RpcReceipt<'_>],
) -> Result<IndexedBlock, NotABlock> {
    let number = quantity(block.number).ok_or_else(|| NotABlock("bad number".into()))?;
    if receipts.len() != block.transactions.len() {
        return Err(NotABlock(format!(
            "{} receipts for {} transactions",
            receipts.len(),
            block.transactions.len()
        )));
    }
    let mut transfers = Vec::new();
    for (i, (tx, receipt)) in block.transactions.iter().zip(receipts).enumerate() {
        // Failed transactions moved nothing (their logs are gone too).
        if receipt.status == Some("0x0") {
            continue;
        }
        let tx_hash = tx.hash.unwrap_or_default().to_ascii_lowercase();
        let value = tx.value.unwrap_or("0x0");
        if let (Some(from), Some(to), Some(amount)) = (tx.from, tx.to, u256_decimal(value)) {
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
        for log in &receipt.logs {
            transfers.extend(log_transfers(i as u64, &tx_hash, log));
        }
    }
    Ok(IndexedBlock {
        number,
        hash: block.hash.to_ascii_lowercase(),
        parent_hash: block.parent_hash.to_ascii_lowercase(),
        timestamp: block.timestamp.and_then(quantity).unwrap_or(0),
        transfers,
    })
}

/// The transfers one log records (none if it is not a standard transfer event).
fn log_transfers(tx_index: u64, tx_hash: &str, log: &RpcLog<'_>) -> Vec<Transfer> {
    let topics: Option<Vec<B256>> = log.topics.iter().map(|t| t.parse().ok()).collect();
    let (Some(topics), Some(token), Some(log_index), Some(data)) = (
        topics,
        log.address,
        log.log_index.and_then(quantity),
        log.data.and_then(hex_bytes),
    ) else {
        return Vec::new();
    };
    let token = token.to_ascii_lowercase();
    let one =
        |kind, from: &Address, to: &Address, token_id: Option<&U256>, amount: &U256| Transfer {
            tx_index,
            log_index: log_index as i64,
            seq: 0,
            kind,
            token: token.clone(),
            from: lower_hex(from),
            to: lower_hex(to),
            token_id: token_id.map(U256::to_string),
            amount: amount.to_string(),
            tx_hash: tx_hash.to_string(),
        };
    let topic0 = topics.first().copied().unwrap_or_default();
    let (topics, data) = (topics.iter().copied(), data.as_slice());
    if topic0 == events::Transfer::SIGNATURE_HASH {
        // ERC-20 and ERC-721 share the topic; the number of topics tells them apart.
        if let Ok(t) = events::Transfer::decode_raw_log_with_config(topics.clone(), data, STRICT) {
            return vec![one("erc20", &t.from, &t.to, None, &t.value)];
        }
        if let Ok(t) = events::erc721::Transfer::decode_raw_log_with_config(topics, data, STRICT) {
            return vec![one(
                "erc721",
                &t.from,
                &t.to,
                Some(&t.tokenId),
                &U256::from(1),
            )];
        }
    } else if topic0 == events::TransferSingle::SIGNATURE_HASH {
        if let Ok(t) = events::TransferSingle::decode_raw_log_with_config(topics, data, STRICT) {
            return vec![one("erc1155", &t.from, &t.to, Some(&t.id), &t.value)];
        }
    } else if topic0 == events::TransferBatch::SIGNATURE_HASH {
        if let Ok(t) = events::TransferBatch::decode_raw_log_with_config(topics, data, STRICT) {
            if t.ids.len() != t.values.len() || t.ids.len() > MAX_BATCH_ENTRIES {
                return Vec::new();
            }
            return t
                .ids
                .iter()
                .zip(&t.values)
                .enumerate()
                .map(|(seq, (id, value))| Transfer {
                    seq: seq as u64,
                    ..one("erc1155", &t.from, &t.to, Some(id), value)
                })
                .collect();
        }
    }
    Vec::new()
}

pub fn hex_bytes(hex: &str) -> Option<Vec<u8>> {
    hex::decode(hex.strip_prefix("0x")?).ok()
}

fn lower_hex(address: &Address) -> String {
    format!("0x{}", hex::encode(address))
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::{json, Value};

    /// `block` on answers given as JSON values.
    fn block_of(b: &Value, receipts: &Value) -> Result<IndexedBlock, NotABlock> {
        let b = RpcBlock::<RpcTx>::deserialize(b).unwrap();
        let receipts = Vec::<RpcReceipt>::deserialize(receipts).unwrap();
        block(&b, &receipts)
    }

    fn log_of(log: &Value) -> Vec<Transfer> {
        log_transfers(0, "0xt", &RpcLog::deserialize(log).unwrap())
    }

    const TRANSFER: B256 = events::Transfer::SIGNATURE_HASH;
    const TRANSFER_SINGLE: B256 = events::TransferSingle::SIGNATURE_HASH;
    const TRANSFER_BATCH: B256 = events::TransferBatch::SIGNATURE_HASH;

    fn t0(topic: B256) -> String {
        format!("{topic:#x}")
    }

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
                {"address": "0xC0", "logIndex": "0x0", "topics": [t0(TRANSFER), topic(a), topic(b)], "data": format!("0x{}", word(42))},
                {"address": "0xC1", "logIndex": "0x1", "topics": [t0(TRANSFER), topic(a), topic(b), format!("0x{}", word(9))], "data": "0x"},
                {"address": "0xC2", "logIndex": "0x2", "topics": [t0(TRANSFER_SINGLE), topic(a), topic(a), topic(b)], "data": format!("0x{}{}", word(3), word(4))},
                {"address": "0xC2", "logIndex": "0x3", "topics": [t0(TRANSFER_BATCH), topic(a), topic(a), topic(b)], "data": batch_data},
                // Not standard: wrong data length, a topic that is not an address.
                {"address": "0xC3", "logIndex": "0x4", "topics": [t0(TRANSFER), topic(a), topic(b)], "data": "0x01"},
                {"address": "0xC3", "logIndex": "0x5", "topics": [t0(TRANSFER), format!("0x{}", "f".repeat(64)), topic(b)], "data": format!("0x{}", word(1))},
            ]},
            {"status": "0x0", "logs": []}
        ]);
        let b0 = block_of(&block_v, &receipts).unwrap();
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
        assert!(block_of(&block_v, &json!([])).is_err());
    }

    #[test]
    fn the_topics_are_the_standards_own() {
        // keccak256 of each signature, as EIP-20, EIP-721 and EIP-1155 give them.
        let hex = |t: B256| format!("{t:#x}");
        assert_eq!(
            hex(TRANSFER),
            "0xddf252ad1be2c89b69c2b068fc378daa952ba7f163c4a11628f55a4df523b3ef"
        );
        assert_eq!(events::erc721::Transfer::SIGNATURE_HASH, TRANSFER);
        assert_eq!(
            hex(TRANSFER_SINGLE),
            "0xc3d58168c5ae7397731d063d5bbf3d657854427343f4c083240f7aacaa2d0f62"
        );
        assert_eq!(
            hex(TRANSFER_BATCH),
            "0x4a39dc06d4c0dbc64b70af90fd698a233a518aa5d07e595d983b8c0526c8f7fb"
        );
    }

    #[test]
    fn batch_arrays_are_bounded() {
        let a = topic("0x1111111111111111111111111111111111111111");
        let word = |n: u64| format!("{n:064x}");
        let log = |data: String| {
            json!({"address": "0xC2", "logIndex": "0x0",
                   "topics": [t0(TRANSFER_BATCH), a, a, a], "data": data})
        };
        // Arrays claiming 2^32 entries in a few words: refused, nothing built.
        let huge = format!("0x{}{}{}", word(64), word(96), word(u32::MAX as u64));
        assert!(log_of(&log(huge)).is_empty());
        // More entries than the index takes from one log.
        let n = MAX_BATCH_ENTRIES as u64 + 1;
        let mut many = format!("0x{}{}{}", word(64), word(64 + 32 * (n + 1)), word(n));
        many += &word(1).repeat(n as usize);
        many += &word(n);
        many += &word(1).repeat(n as usize);
        assert!(log_of(&log(many)).is_empty());
        // Too short to hold its head.
        assert!(log_of(&log("0x00".into())).is_empty());
    }
}

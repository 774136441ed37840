//! A block's receipts checked against the block they name (itself checked, its facts
//! kept): together they recompute to its receipts root and their blooms OR to its logs
//! bloom; each repeats its transaction (hash, sender, recipient, created contract, price
//! paid) and its place, each log its own place, and gas used follows from the
//! cumulative counts.

use super::block::BlockFacts;
use super::envelope::{self, AnyReceipt};
use super::Verdict;
use alloy_primitives::{Address, Bloom, B256};
use serde::Deserialize;
use serde_json::Value;

/// Receipt members the edge checks, and those it passes as they are (blob fees, which
/// need the parent's excess blob gas; an OP chain's L1 and operator fees, derived from
/// the block's L1 attributes: said in docs/verification.md).
const FIELDS: &[&str] = &[
    "type",
    "status",
    "root",
    "cumulativeGasUsed",
    "logsBloom",
    "logs",
    "transactionHash",
    "transactionIndex",
    "blockHash",
    "blockNumber",
    "blockTimestamp",
    "from",
    "to",
    "contractAddress",
    "gasUsed",
    "effectiveGasPrice",
    "blobGasUsed",
    "blobGasPrice",
    "depositNonce",
    "depositReceiptVersion",
    "l1GasPrice",
    "l1GasUsed",
    "l1Fee",
    "l1FeeScalar",
    "l1BaseFeeScalar",
    "l1BlobBaseFee",
    "l1BlobBaseFeeScalar",
    "operatorFeeScalar",
    "operatorFeeConstant",
    "daFootprintGasScalar",
];

#[derive(Deserialize)]
#[serde(rename_all = "camelCase")]
struct ReceiptPlace {
    transaction_hash: B256,
    #[serde(with = "alloy_serde::quantity")]
    transaction_index: u64,
    block_hash: B256,
    #[serde(with = "alloy_serde::quantity")]
    block_number: u64,
    #[serde(default, with = "alloy_serde::quantity::opt")]
    block_timestamp: Option<u64>,
    from: Address,
    to: Option<Address>,
    contract_address: Option<Address>,
    #[serde(with = "alloy_serde::quantity")]
    gas_used: u64,
    #[serde(with = "alloy_serde::quantity")]
    effective_gas_price: u128,
    #[serde(default)]
    logs: Vec<LogPlace>,
}

#[derive(Deserialize, PartialEq, Debug)]
#[serde(rename_all = "camelCase")]
struct LogPlace {
    block_hash: Option<B256>,
    #[serde(default, with = "alloy_serde::quantity::opt")]
    block_number: Option<u64>,
    transaction_hash: Option<B256>,
    #[serde(default, with = "alloy_serde::quantity::opt")]
    transaction_index: Option<u64>,
    #[serde(default, with = "alloy_serde::quantity::opt")]
    log_index: Option<u64>,
    #[serde(default, with = "alloy_serde::quantity::opt")]
    block_timestamp: Option<u64>,
    #[serde(default)]
    removed: bool,
}

/// Check `eth_getBlockReceipts`' result against the checked block it names.
pub fn check(receipts: &Value, block: &BlockFacts) -> Verdict<()> {
    let Some(list) = receipts.as_array() else {
        return Verdict::Disproved("the receipts are not a list".into());
    };
    if list.len() != block.txs.len() {
        return Verdict::Disproved(format!(
            "{} receipts for {} transactions",
            list.len(),
            block.txs.len()
        ));
    }
    let mut envelopes = Vec::with_capacity(list.len());
    let (mut bloom, mut cumulative, mut log_index) = (Bloom::ZERO, 0u64, 0u64);
    for (i, r) in list.iter().enumerate() {
        if let Some(unknown) = r
            .as_object()
            .and_then(|o| o.keys().find(|k| !FIELDS.contains(&k.as_str())))
        {
            return Verdict::Unchecked(format!("receipt field {unknown} unknown to the edge"));
        }
        let (receipt, place) = match (AnyReceipt::from_json(r), ReceiptPlace::deserialize(r)) {
            (Ok(e), Ok(p)) => (e, p),
            (Err(e), _) | (_, Err(e)) => {
                return Verdict::Unchecked(format!("receipt {i} not decoded: {e}"))
            }
        };
        let tx = &block.txs[i];
        let expected_contract = match (tx.to, tx.nonce) {
            (None, Some(nonce)) => Some(tx.from.create(nonce)),
            (None, None) => place.contract_address,
            (Some(_), _) => None,
        };
        let claims = (
            place.transaction_hash,
            place.transaction_index,
            place.block_hash,
            place.block_number,
            place.block_timestamp.unwrap_or(block.timestamp),
            place.from,
            place.to,
            place.contract_address,
            place.effective_gas_price,
        );
        let facts = (
            tx.hash,
            i as u64,
            block.hash,
            block.number,
            block.timestamp,
            tx.from,
            tx.to,
            expected_contract,
            tx.effective_gas_price,
        );
        if claims != facts {
            return Verdict::Disproved(format!(
                "receipt {i} does not repeat its transaction: {claims:?}"
            ));
        }
        let used = receipt.cumulative_gas_used().checked_sub(cumulative);
        if used != Some(place.gas_used) {
            return Verdict::Disproved(format!("receipt {i}'s gas used does not add up"));
        }
        cumulative = receipt.cumulative_gas_used();
        for (j, log) in place.logs.iter().enumerate() {
            let at = LogPlace {
                block_hash: Some(block.hash),
                block_number: Some(block.number),
                transaction_hash: Some(tx.hash),
                transaction_index: Some(i as u64),
                log_index: Some(log_index),
                block_timestamp: log.block_timestamp.and(Some(block.timestamp)),
                removed: false,
            };
            if *log != at {
                return Verdict::Disproved(format!("receipt {i}'s log {j} claims another place"));
            }
            log_index += 1;
        }
        bloom |= receipt.logs_bloom();
        envelopes.push(receipt);
    }
    if envelope::receipts_root(&envelopes) != block.receipts_root {
        return Verdict::Disproved("the receipts do not recompute to the receipts root".into());
    }
    if bloom != block.logs_bloom {
        return Verdict::Disproved("the receipts' blooms do not make the block's".into());
    }
    Verdict::Proven(())
}

#[cfg(test)]
mod tests {
    use super::super::{block, Want};
    use super::*;

    /// One lie told in an answer.
    type Tamper = fn(&mut Value);

    fn facts() -> BlockFacts {
        let b = serde_json::from_str(include_str!("testdata/anvil_block_full.json")).unwrap();
        match block::check(&b, Want::Tag) {
            Verdict::Proven(f) => f,
            other => panic!("{other:?}"),
        }
    }

    fn receipts() -> Value {
        serde_json::from_str(include_str!("testdata/anvil_receipts.json")).unwrap()
    }

    #[test]
    fn an_anvil_blocks_receipts_check_whole() {
        let f = facts();
        assert!(matches!(check(&receipts(), &f), Verdict::Proven(())));
    }

    #[test]
    fn every_lie_in_receipts_is_found() {
        let f = facts();
        let lies: [(&str, Tamper); 9] = [
            ("a status", |r| r[1]["status"] = "0x0".into()),
            ("a log dropped", |r| {
                r[3]["logs"].as_array_mut().unwrap().clear();
            }),
            ("a log's data", |r| r[3]["logs"][0]["data"] = "0x01".into()),
            ("a log added", |r| {
                let log = r[3]["logs"][0].clone();
                r[3]["logs"].as_array_mut().unwrap().push(log);
            }),
            ("a transaction hash", |r| {
                r[0]["transactionHash"] = r[1]["transactionHash"].clone()
            }),
            ("a sender", |r| {
                r[0]["from"] = "0x70997970c51812dc3a010c7d01b50e0d17dc79c8".into()
            }),
            ("a created contract", |r| {
                r[3]["contractAddress"] = "0x70997970c51812dc3a010c7d01b50e0d17dc79c8".into()
            }),
            ("gas used", |r| r[2]["gasUsed"] = "0x1".into()),
            ("a receipt dropped", |r| {
                r.as_array_mut().unwrap().pop();
            }),
        ];
        for (what, lie) in lies {
            let mut r = receipts();
            lie(&mut r);
            match check(&r, &f) {
                Verdict::Disproved(why) => eprintln!("{what}: {why}"),
                other => panic!("{what}: {other:?}"),
            }
        }
    }
}

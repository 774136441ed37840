//! A transaction answer (`eth_getTransactionByHash`) checked against itself: it decodes,
//! hashes to the hash asked for (the hash commits to every field and the signature),
//! and is signed by the sender it names. Where it says it sits in a block, the caller
//! checks that place against the block's checked transactions.

use super::block::TxPlace;
use super::envelope::AnyTx;
use super::Verdict;
use alloy_primitives::{Address, B256};
use serde::Deserialize;
use serde_json::Value;

/// A checked transaction: its sender, and its block and index when it claims one.
#[derive(Debug, PartialEq)]
pub struct TxSeen {
    pub from: Address,
    pub place: Option<(B256, u64)>,
}

/// Check `tx` (the answer's `result`) as the transaction `asked`; `known_sender`: the
/// sender an earlier check of the same transaction (same hash, so the same signature)
/// recovered, not recovered again.
pub fn check(tx: &Value, asked: B256, known_sender: Option<Address>) -> Verdict<TxSeen> {
    let (envelope, place) = match (AnyTx::from_json(tx), TxPlace::deserialize(tx)) {
        (Some(e), Ok(p)) => (e, p),
        _ => {
            let ty = tx.get("type").and_then(Value::as_str).unwrap_or("?");
            return Verdict::Unchecked(format!("a transaction of type {ty} not decoded"));
        }
    };
    let hash = envelope.hash();
    if hash != asked || place.hash != asked {
        return Verdict::Disproved(format!(
            "asked for {asked}; it hashes to {hash} and claims {}",
            place.hash
        ));
    }
    let sender = known_sender.or_else(|| envelope.sender());
    if sender != Some(place.from) {
        return Verdict::Disproved(format!("not signed by its from {}", place.from));
    }
    let at = match (place.block_hash, place.transaction_index) {
        (Some(block), Some(index)) => Some((block, index)),
        (None, None) => None,
        _ => return Verdict::Disproved("half a place in a block".into()),
    };
    Verdict::Proven(TxSeen {
        from: place.from,
        place: at,
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    fn first_tx() -> Value {
        let block: Value =
            serde_json::from_str(include_str!("testdata/anvil_block_full.json")).unwrap();
        block["transactions"][0].clone()
    }

    #[test]
    fn a_mined_transaction_checks_and_says_where_it_sits() {
        let tx = first_tx();
        let hash: B256 = tx["hash"].as_str().unwrap().parse().unwrap();
        let Verdict::Proven(seen) = check(&tx, hash, None) else {
            panic!("not proven")
        };
        let block: B256 = tx["blockHash"].as_str().unwrap().parse().unwrap();
        assert_eq!(seen.place, Some((block, 0)));
    }

    #[test]
    fn every_lie_in_a_transaction_is_found() {
        let tx = first_tx();
        let hash: B256 = tx["hash"].as_str().unwrap().parse().unwrap();
        let lies: [(&str, Value); 5] = [
            ("value", "0x2".into()),
            ("to", "0x000000000000000000000000000000000000dead".into()),
            ("from", "0x000000000000000000000000000000000000beef".into()),
            ("hash", format!("0x{}", "ab".repeat(32)).into()),
            ("blockHash", Value::Null),
        ];
        for (field, lie) in lies {
            let mut told = tx.clone();
            told[field] = lie;
            assert!(
                matches!(check(&told, hash, None), Verdict::Disproved(_)),
                "a lie in {field} passed"
            );
        }
        // Another transaction than the one asked for.
        let other = B256::repeat_byte(7);
        assert!(matches!(check(&tx, other, None), Verdict::Disproved(_)));
    }
}

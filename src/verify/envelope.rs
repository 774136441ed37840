//! The transaction and receipt encodings the edge checks: Ethereum's typed envelopes,
//! and the OP stack's deposits (type `0x7e`: Base, Optimism and the other OP chains),
//! which carry no signature: their sender is one of the fields the hash commits to.

use alloy_consensus::proofs::ordered_trie_root_with_encoder;
use alloy_consensus::transaction::SignerRecoverable;
use alloy_consensus::{ReceiptEnvelope, Transaction, TxEnvelope};
use alloy_eips::eip2718::Encodable2718;
use alloy_primitives::{keccak256, Address, Bloom, Log, TxKind, B256};
use op_alloy_consensus::{OpReceiptEnvelope, TxDeposit};
use serde::Deserialize;
use serde_json::Value;

/// Whether a transaction or receipt object is an OP-stack deposit (`type` `0x7e`, any case).
pub fn is_deposit(object: &Value) -> bool {
    object
        .get("type")
        .and_then(Value::as_str)
        .is_some_and(|t| t.eq_ignore_ascii_case("0x7e"))
}

/// A transaction as a block carries it.
// Unboxed: a block's transactions sit in one Vec for one root; a box would be an
// allocation per transaction to save a deposit's 224 bytes.
#[allow(clippy::large_enum_variant)]
pub enum AnyTx {
    Signed(TxEnvelope),
    Deposit(TxDeposit),
}

impl AnyTx {
    /// Decode a transaction object; `None` for a type the edge does not know.
    pub fn from_json(t: &Value) -> Option<AnyTx> {
        if is_deposit(t) {
            TxDeposit::deserialize(t).ok().map(AnyTx::Deposit)
        } else {
            TxEnvelope::deserialize(t).ok().map(AnyTx::Signed)
        }
    }

    fn encode(&self, out: &mut Vec<u8>) {
        match self {
            AnyTx::Signed(tx) => tx.encode_2718(out),
            AnyTx::Deposit(tx) => tx.encode_2718(out),
        }
    }

    /// The transaction's hash, computed (not the one it was decoded with).
    pub fn hash(&self) -> B256 {
        let mut buf = Vec::new();
        self.encode(&mut buf);
        keccak256(buf)
    }

    /// The sender: recovered from the signature, or a deposit's own `from`.
    pub fn sender(&self) -> Option<Address> {
        match self {
            AnyTx::Signed(tx) => tx.recover_signer().ok(),
            AnyTx::Deposit(tx) => Some(tx.from),
        }
    }

    pub fn to(&self) -> Option<Address> {
        let kind = match self {
            AnyTx::Signed(tx) => tx.kind(),
            AnyTx::Deposit(tx) => tx.to,
        };
        match kind {
            TxKind::Call(to) => Some(to),
            TxKind::Create => None,
        }
    }

    /// The nonce a created contract's address derives from. A deposit signs none: its
    /// object states the sender's nonce at execution, which nothing commits to.
    pub fn nonce(&self, object: &Value) -> Option<u64> {
        match self {
            AnyTx::Signed(tx) => Some(tx.nonce()),
            AnyTx::Deposit(_) => object
                .get("nonce")
                .and_then(|n| alloy_serde::quantity::deserialize(n).ok()),
        }
    }

    /// What the sender paid per gas (a deposit pays nothing on L2).
    pub fn effective_gas_price(&self, base_fee: Option<u64>) -> u128 {
        match self {
            AnyTx::Signed(tx) => tx.effective_gas_price(base_fee),
            AnyTx::Deposit(_) => 0,
        }
    }
}

/// The transactions root of a block's transactions.
pub fn transactions_root(txs: &[AnyTx]) -> B256 {
    ordered_trie_root_with_encoder(txs, |tx, buf| tx.encode(buf))
}

/// A receipt as a block's receipts root commits to it.
pub enum AnyReceipt {
    Eth(ReceiptEnvelope<Log>),
    /// A deposit's receipt, with its deposit nonce and receipt version (both committed).
    Op(OpReceiptEnvelope<Log>),
}

impl AnyReceipt {
    pub fn from_json(r: &Value) -> Result<AnyReceipt, serde_json::Error> {
        if is_deposit(r) {
            OpReceiptEnvelope::deserialize(r).map(AnyReceipt::Op)
        } else {
            ReceiptEnvelope::deserialize(r).map(AnyReceipt::Eth)
        }
    }

    pub fn cumulative_gas_used(&self) -> u64 {
        match self {
            AnyReceipt::Eth(r) => r.cumulative_gas_used(),
            AnyReceipt::Op(r) => r.cumulative_gas_used(),
        }
    }

    pub fn logs_bloom(&self) -> Bloom {
        match self {
            AnyReceipt::Eth(r) => *r.logs_bloom(),
            AnyReceipt::Op(r) => *r.logs_bloom(),
        }
    }
}

/// The receipts root of a block's receipts.
pub fn receipts_root(receipts: &[AnyReceipt]) -> B256 {
    ordered_trie_root_with_encoder(receipts, |r, buf| match r {
        AnyReceipt::Eth(r) => r.encode_2718(buf),
        AnyReceipt::Op(r) => r.encode_2718(buf),
    })
}

#[cfg(test)]
mod tests {
    use super::super::{block, receipts, Verdict, Want};
    use serde_json::Value;

    /// One lie told in an answer.
    type Tamper = fn(&mut Value);

    /// A block of `anvil --network optimism`: a fee-market transfer, a deposit transfer
    /// that mints, a deposit creating a contract that logs.
    fn op_block() -> Value {
        serde_json::from_str(include_str!("testdata/anvil_op_block.json")).unwrap()
    }

    fn op_receipts() -> Value {
        serde_json::from_str(include_str!("testdata/anvil_op_receipts.json")).unwrap()
    }

    fn facts(b: &Value) -> block::BlockFacts {
        match block::check(b, Want::Tag) {
            Verdict::Proven(f) => f,
            other => panic!("{other:?}"),
        }
    }

    #[test]
    fn an_op_stack_block_with_deposits_and_its_receipts_check_whole() {
        let b = op_block();
        let f = facts(&b);
        assert_eq!(f.txs.len(), 3);
        assert_eq!(
            f.txs[1].effective_gas_price, 0,
            "a deposit pays nothing on L2"
        );
        assert!(matches!(
            receipts::check(&op_receipts(), &f),
            Verdict::Proven(())
        ));
        let tx = &b["transactions"][1];
        let hash = tx["hash"].as_str().unwrap().parse().unwrap();
        assert!(matches!(
            super::super::tx::check(tx, hash, None),
            Verdict::Proven(_)
        ));
    }

    #[test]
    fn every_lie_about_a_deposit_is_found() {
        let b = op_block();
        let block_lies: [(&str, Tamper); 5] = [
            ("a deposit's mint", |b| {
                b["transactions"][1]["mint"] = "0x65".into()
            }),
            ("a deposit's sender", |b| {
                b["transactions"][1]["from"] = "0xf39fd6e51aad88f6f4ce6ab8827279cfffb92266".into()
            }),
            ("a deposit's source", |b| {
                b["transactions"][1]["sourceHash"] = b["hash"].clone()
            }),
            ("a deposit dropped", |b| {
                b["transactions"].as_array_mut().unwrap().remove(2);
            }),
            ("withdrawals in an OP block", |b| {
                b["withdrawals"] = serde_json::json!([{"index": "0x0", "validatorIndex": "0x0",
                    "address": "0xf39fd6e51aad88f6f4ce6ab8827279cfffb92266", "amount": "0x1"}])
            }),
        ];
        for (what, lie) in block_lies {
            let mut v = b.clone();
            lie(&mut v);
            match block::check(&v, Want::Tag) {
                Verdict::Disproved(why) => eprintln!("{what}: {why}"),
                other => panic!("{what}: {other:?}"),
            }
        }
        let f = facts(&b);
        let receipt_lies: [(&str, Tamper); 4] = [
            ("a deposit nonce", |r| r[1]["depositNonce"] = "0x9".into()),
            ("a deposit receipt version", |r| {
                r[2]["depositReceiptVersion"] = "0x2".into()
            }),
            ("a deposit's created contract", |r| {
                r[2]["contractAddress"] = "0x70997970c51812dc3a010c7d01b50e0d17dc79c8".into()
            }),
            ("a deposit's log", |r| {
                r[2]["logs"][0]["data"] = "0x02".into()
            }),
        ];
        for (what, lie) in receipt_lies {
            let mut r = op_receipts();
            lie(&mut r);
            match receipts::check(&r, &f) {
                Verdict::Disproved(why) => eprintln!("{what}: {why}"),
                other => panic!("{what}: {other:?}"),
            }
        }
    }
}

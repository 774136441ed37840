//! A block answer checked against itself: its header hashes to the hash it claims (every
//! fork's optional fields, as `alloy_consensus::Header` encodes them), it is the block
//! asked for, its transactions recompute to the transactions root (each one's hash,
//! sender and place in the block as claimed), its withdrawals to the withdrawals root,
//! an empty uncle list to the empty ommers hash.

use super::envelope::{self, AnyTx};
use super::{proven, Verdict, Want};
use alloy_consensus::{proofs, Header, EMPTY_OMMER_ROOT_HASH};
use alloy_eips::eip4895::Withdrawal;
use alloy_primitives::{Address, Bloom, B256};
use serde::Deserialize;
use serde_json::Value;

/// Header members a block answer may carry: each is covered by the header hash.
const HEADER_FIELDS: &[&str] = &[
    "parentHash",
    "sha3Uncles",
    "miner",
    "stateRoot",
    "transactionsRoot",
    "receiptsRoot",
    "logsBloom",
    "difficulty",
    "number",
    "gasLimit",
    "gasUsed",
    "timestamp",
    "extraData",
    "mixHash",
    "nonce",
    "baseFeePerGas",
    "withdrawalsRoot",
    "blobGasUsed",
    "excessBlobGas",
    "parentBeaconBlockRoot",
    "requestsHash",
    "blockAccessListHash",
    "slotNumber",
];

/// The block's other members: the hash and bodies are checked; `size` and the
/// deprecated `totalDifficulty` are not committed to by anything and pass as they are.
const BODY_FIELDS: &[&str] = &[
    "hash",
    "transactions",
    "uncles",
    "withdrawals",
    "size",
    "totalDifficulty",
];

/// What a checked block says of itself, kept per block for the answers that name it.
#[derive(Debug, Clone)]
pub struct BlockFacts {
    pub hash: B256,
    pub number: u64,
    pub timestamp: u64,
    pub receipts_root: B256,
    pub logs_bloom: Bloom,
    pub txs: Vec<TxFacts>,
}

/// One checked transaction, as its receipt must repeat it.
#[derive(Debug, Clone)]
pub struct TxFacts {
    pub hash: B256,
    pub from: Address,
    pub to: Option<Address>,
    /// What a created contract's address derives from (unknown for a deposit whose
    /// object does not state it).
    pub nonce: Option<u64>,
    pub effective_gas_price: u128,
}

/// A block answer's parts, read from the node's JSON without copying it: the header
/// decoded on its own (it passes over the other members), the transactions borrowed.
struct BlockJson<'a> {
    header: Header,
    hash: B256,
    transactions: &'a [Value],
    uncles: Vec<B256>,
    withdrawals: Option<Vec<Withdrawal>>,
}

impl<'a> BlockJson<'a> {
    fn read(block: &'a Value) -> Result<Self, serde_json::Error> {
        let member = |name: &str| block.get(name).filter(|v| !v.is_null());
        Ok(BlockJson {
            header: Header::deserialize(block)?,
            hash: B256::deserialize(block.get("hash").unwrap_or(&Value::Null))?,
            transactions: member("transactions")
                .and_then(Value::as_array)
                .map_or(&[], Vec::as_slice),
            uncles: optional(member("uncles"))?.unwrap_or_default(),
            withdrawals: optional(member("withdrawals"))?,
        })
    }
}

/// A member that may be absent or null, decoded when present.
fn optional<'a, T: Deserialize<'a>>(v: Option<&'a Value>) -> Result<Option<T>, serde_json::Error> {
    v.map(T::deserialize).transpose()
}

/// Where a transaction object says it sits.
#[derive(Deserialize)]
#[serde(rename_all = "camelCase")]
pub(super) struct TxPlace {
    pub(super) hash: B256,
    pub(super) from: Address,
    pub(super) block_hash: Option<B256>,
    #[serde(default, with = "alloy_serde::quantity::opt")]
    pub(super) block_number: Option<u64>,
    #[serde(default, with = "alloy_serde::quantity::opt")]
    pub(super) transaction_index: Option<u64>,
    #[serde(default, with = "alloy_serde::quantity::opt")]
    block_timestamp: Option<u64>,
}

/// Check a block answer (`result` of `eth_getBlockBy*`, transactions as objects) against
/// itself and against the block asked for.
pub fn check(block: &Value, want: Want) -> Verdict<BlockFacts> {
    check_knowing(block, want, None)
}

/// `check`, with what an earlier check of the block it claims to be found (`known`):
/// a transaction whose hash is the one checked then has its sender from then, not
/// recovered again (the hash commits to the signature, the signature to the sender;
/// recovery is most of a cold check's cost).
pub fn check_knowing(block: &Value, want: Want, known: Option<&BlockFacts>) -> Verdict<BlockFacts> {
    let (b, hash) = proven!(header(block, want));
    let known = known.filter(|k| k.hash == hash).map(|k| k.txs.as_slice());
    let txs = proven!(transactions(&b, hash, known.unwrap_or_default()));
    Verdict::Proven(BlockFacts {
        hash,
        number: b.header.number,
        timestamp: b.header.timestamp,
        receipts_root: b.header.receipts_root,
        logs_bloom: b.header.logs_bloom,
        txs,
    })
}

/// What a block's header commits to: the roots the answers about the block are proven
/// against once its hash is trusted.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct HeaderFacts {
    pub hash: B256,
    pub number: u64,
    pub parent_hash: B256,
    pub state_root: B256,
    pub receipts_root: B256,
    pub logs_bloom: Bloom,
}

/// A block answer's header alone (transactions as hashes or objects; the body is not
/// checked): its hash recomputed, and the block asked for.
pub fn check_header(block: &Value, want: Want) -> Verdict<HeaderFacts> {
    let (b, hash) = proven!(header(block, want));
    Verdict::Proven(HeaderFacts {
        hash,
        number: b.header.number,
        parent_hash: b.header.parent_hash,
        state_root: b.header.state_root,
        receipts_root: b.header.receipts_root,
        logs_bloom: b.header.logs_bloom,
    })
}

/// A hashes-only block answer (`full = false`) against the facts of the same block,
/// checked whole before: its header hashes to the block's hash and the hashes listed
/// are the checked transactions' (the list has no commitment of its own; the full
/// block's transactions root did).
pub fn check_hashes(block: &Value, want: Want, known: &BlockFacts) -> Verdict<()> {
    let (b, hash) = proven!(header(block, want));
    if hash != known.hash {
        return Verdict::Disproved(format!("its header hashes to {hash}, not {}", known.hash));
    }
    let listed = b
        .transactions
        .iter()
        .map(|t| t.as_str()?.parse::<B256>().ok());
    let same = b.transactions.len() == known.txs.len()
        && listed.zip(&known.txs).all(|(l, k)| l == Some(k.hash));
    if !same {
        return Verdict::Disproved("its transaction hashes are not the block's".into());
    }
    Verdict::Proven(())
}

/// A block answer's header and the members beside it that commit to nothing of their
/// own (uncles, withdrawals), checked: its parts and its computed hash.
fn header(block: &Value, want: Want) -> Verdict<(BlockJson<'_>, B256)> {
    let Some(members) = block.as_object() else {
        return Verdict::Disproved("the block is not an object".into());
    };
    if let Some(unknown) = members
        .keys()
        .find(|k| !HEADER_FIELDS.contains(&k.as_str()) && !BODY_FIELDS.contains(&k.as_str()))
    {
        return Verdict::Unchecked(format!("block field {unknown} unknown to the edge"));
    }
    let b = match BlockJson::read(block) {
        Ok(b) => b,
        Err(e) => return Verdict::Disproved(format!("the block does not decode: {e}")),
    };
    let hash = b.header.hash_slow();
    if hash != b.hash {
        return Verdict::Disproved(format!("its header hashes to {hash}, not {}", b.hash));
    }
    if let Err(e) = want.answered_by(b.header.number, hash) {
        return Verdict::Disproved(e);
    }
    if b.uncles.is_empty() && b.header.ommers_hash != EMPTY_OMMER_ROOT_HASH {
        return Verdict::Disproved("no uncles listed under a non-empty ommers hash".into());
    }
    if !b.uncles.is_empty() {
        return Verdict::Unchecked("uncle headers are not in the answer".into());
    }
    if let Some(err) = withdrawals_differ(&b) {
        return Verdict::Disproved(err);
    }
    Verdict::Proven((b, hash))
}

fn withdrawals_differ(b: &BlockJson<'_>) -> Option<String> {
    // An OP-stack block (its first transactions are deposits) lists no withdrawals; from
    // Isthmus its withdrawals root is the L2-to-L1 message passer's storage root, a
    // commitment to state, not to the list.
    if b.transactions.iter().any(envelope::is_deposit) {
        return match &b.withdrawals {
            Some(w) if !w.is_empty() => Some("withdrawals listed in an OP-stack block".into()),
            _ => None,
        };
    }
    match (&b.withdrawals, b.header.withdrawals_root) {
        (Some(w), Some(root)) if proofs::calculate_withdrawals_root(w) != root => {
            Some("its withdrawals do not recompute to the withdrawals root".into())
        }
        (Some(_), None) => Some("withdrawals listed without a withdrawals root".into()),
        _ => None,
    }
}

/// The block's transactions, each decoded, placed and signed as claimed, and together
/// recomputing to the transactions root.
fn transactions(b: &BlockJson<'_>, block_hash: B256, known: &[TxFacts]) -> Verdict<Vec<TxFacts>> {
    if b.transactions.iter().any(Value::is_string) {
        return Verdict::Unchecked("a hashes-only transaction list".into());
    }
    let mut envelopes = Vec::with_capacity(b.transactions.len());
    let mut facts = Vec::with_capacity(b.transactions.len());
    for (i, t) in b.transactions.iter().enumerate() {
        let (tx, place) = match (AnyTx::from_json(t), TxPlace::deserialize(t)) {
            (Some(tx), Ok(place)) => (tx, place),
            _ => {
                let ty = t.get("type").and_then(Value::as_str).unwrap_or("?");
                return Verdict::Unchecked(format!("transaction {i} (type {ty}) not decoded"));
            }
        };
        // Computed: an envelope decoded from JSON keeps the hash it was given.
        let hash = tx.hash();
        if hash != place.hash {
            return Verdict::Disproved(format!(
                "transaction {i} hashes to {hash}, not {}",
                place.hash
            ));
        }
        let at = (
            place.block_hash,
            place.block_number,
            place.transaction_index,
        );
        let stamp = place.block_timestamp.unwrap_or(b.header.timestamp);
        if at != (Some(block_hash), Some(b.header.number), Some(i as u64))
            || stamp != b.header.timestamp
        {
            return Verdict::Disproved(format!("transaction {i} claims another place: {at:?}"));
        }
        let signer = match known.get(i) {
            Some(k) if k.hash == hash => Some(k.from),
            _ => tx.sender(),
        };
        if signer != Some(place.from) {
            return Verdict::Disproved(format!("transaction {i} is not signed by its from"));
        }
        facts.push(TxFacts {
            hash,
            from: place.from,
            to: tx.to(),
            nonce: tx.nonce(t),
            effective_gas_price: tx.effective_gas_price(b.header.base_fee_per_gas),
        });
        envelopes.push(tx);
    }
    if envelope::transactions_root(&envelopes) != b.header.transactions_root {
        return Verdict::Disproved("its transactions do not recompute to the root".into());
    }
    Verdict::Proven(facts)
}

#[cfg(test)]
mod tests {
    use super::*;

    /// One lie told in an answer.
    type Tamper = fn(&mut Value);

    fn full() -> Value {
        serde_json::from_str(include_str!("testdata/anvil_block_full.json")).unwrap()
    }

    fn proven(v: &Value, want: Want) -> BlockFacts {
        match check(v, want) {
            Verdict::Proven(f) => f,
            other => panic!("{other:?}"),
        }
    }

    fn disproved(v: &Value) -> String {
        match check(v, Want::Tag) {
            Verdict::Disproved(why) => why,
            other => panic!("{other:?}"),
        }
    }

    #[test]
    fn an_anvil_block_checks_whole() {
        let b = full();
        let facts = proven(&b, Want::Number(2));
        assert_eq!(facts.txs.len(), 4);
        assert_eq!(facts.hash.to_string(), b["hash"].as_str().unwrap());
        // Legacy, access-list, fee-market and a creation.
        assert!(facts.txs[3].to.is_none());
        assert_eq!(
            facts.txs[0].from.to_string().to_lowercase(),
            "0xf39fd6e51aad88f6f4ce6ab8827279cfffb92266"
        );
        let hash: B256 = b["hash"].as_str().unwrap().parse().unwrap();
        proven(&b, Want::Hash(hash));
        // Knowing the block: senders taken from the earlier check, and still held to it.
        let known = facts.clone();
        assert!(matches!(
            check_knowing(&b, Want::Tag, Some(&known)),
            Verdict::Proven(_)
        ));
        let mut lie = b.clone();
        lie["transactions"][0]["from"] = "0x70997970c51812dc3a010c7d01b50e0d17dc79c8".into();
        assert!(matches!(
            check_knowing(&lie, Want::Tag, Some(&known)),
            Verdict::Disproved(_)
        ));
        // The hashes-only form: held to the facts of the block checked whole.
        let mut h = b.clone();
        for t in h["transactions"].as_array_mut().unwrap() {
            *t = t["hash"].clone();
        }
        assert!(matches!(check(&h, Want::Tag), Verdict::Unchecked(_)));
        assert!(matches!(
            check_hashes(&h, Want::Tag, &known),
            Verdict::Proven(())
        ));
        let mut dropped = h.clone();
        dropped["transactions"].as_array_mut().unwrap().pop();
        assert!(matches!(
            check_hashes(&dropped, Want::Tag, &known),
            Verdict::Disproved(_)
        ));
        let mut swapped = h.clone();
        swapped["transactions"].as_array_mut().unwrap().swap(0, 1);
        assert!(matches!(
            check_hashes(&swapped, Want::Tag, &known),
            Verdict::Disproved(_)
        ));
    }

    #[test]
    fn every_lie_in_a_block_is_found() {
        let b = full();
        let wrong = Want::Number(3);
        assert!(matches!(check(&b, wrong), Verdict::Disproved(_)));
        let lies: [(&str, Tamper); 8] = [
            ("state root", |b| {
                b["stateRoot"] = Value::from(format!("0x{}", "11".repeat(32)))
            }),
            ("receipts root", |b| {
                b["receiptsRoot"] = Value::from(format!("0x{}", "22".repeat(32)))
            }),
            ("a later fork's field", |b| {
                b["requestsHash"] = Value::from(format!("0x{}", "33".repeat(32)))
            }),
            ("a value", |b| b["transactions"][2]["value"] = "0x4".into()),
            ("a transaction dropped", |b| {
                b["transactions"].as_array_mut().unwrap().remove(1);
            }),
            ("a sender", |b| {
                b["transactions"][0]["from"] = "0x70997970c51812dc3a010c7d01b50e0d17dc79c8".into()
            }),
            ("a transaction hash", |b| {
                b["transactions"][1]["hash"] = b["hash"].clone()
            }),
            ("a place", |b| {
                b["transactions"][1]["transactionIndex"] = "0x2".into()
            }),
        ];
        for (what, lie) in lies {
            let mut v = b.clone();
            lie(&mut v);
            let why = disproved(&v);
            eprintln!("{what}: {why}");
        }
        // A field the edge does not know: served, unchecked, never refused.
        let mut v = b.clone();
        v["someFutureRoot"] = "0x01".into();
        assert!(matches!(check(&v, Want::Tag), Verdict::Unchecked(_)));
    }
}

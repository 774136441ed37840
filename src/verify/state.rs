//! Account state proven against a block's state root: an `eth_getProof` answer (EIP-1186)
//! walked from the root to the account's leaf, and from its storage root to each slot,
//! by alloy-trie. An account or slot the proof shows absent is proven absent (an
//! exclusion proof), not taken as zero on the node's word.

use super::{Verdict, Want};
use alloy_primitives::{keccak256, Address, Bytes, B256, U256, U64};
use alloy_rlp::Encodable;
use alloy_trie::proof::verify_proof;
use alloy_trie::{Nibbles, TrieAccount, EMPTY_ROOT_HASH, KECCAK_EMPTY};
use serde::Deserialize;
use serde_json::Value;

/// An `eth_getProof` answer as nodes write it.
#[derive(Deserialize)]
#[serde(rename_all = "camelCase")]
struct ProofJson {
    address: Address,
    balance: U256,
    code_hash: B256,
    nonce: U64,
    storage_hash: B256,
    account_proof: Vec<Bytes>,
    #[serde(default)]
    storage_proof: Vec<SlotJson>,
}

#[derive(Deserialize)]
struct SlotJson {
    /// Written as the caller gave it (geth), or as 32 bytes (reth, anvil).
    key: U256,
    value: U256,
    proof: Vec<Bytes>,
}

/// What a proof showed of one account at a state root.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ProvenAccount {
    pub nonce: u64,
    pub balance: U256,
    pub code_hash: B256,
    /// Each slot asked for, with its proven value (zero when proven absent).
    pub slots: Vec<(B256, U256)>,
}

/// `answer` (an `eth_getProof` result for `address` and `slots`) against `state_root`.
pub fn check_account(
    answer: &Value,
    address: Address,
    slots: &[B256],
    state_root: B256,
) -> Verdict<ProvenAccount> {
    let proof = match ProofJson::deserialize(answer) {
        Ok(p) => p,
        Err(e) => return Verdict::Disproved(format!("not an account proof: {e}")),
    };
    if proof.address != address {
        return Verdict::Disproved(format!("a proof of another account: {}", proof.address));
    }
    let account = TrieAccount {
        nonce: proof.nonce.to::<u64>(),
        balance: proof.balance,
        storage_root: proof.storage_hash,
        code_hash: proof.code_hash,
    };
    // Geth writes a zero code hash for an account that does not exist.
    let empty = account.nonce == 0
        && account.balance.is_zero()
        && account.storage_root == EMPTY_ROOT_HASH
        && (account.code_hash == KECCAK_EMPTY || account.code_hash.is_zero());
    let path = Nibbles::unpack(keccak256(address));
    let mut leaf = Vec::new();
    account.encode(&mut leaf);
    let included = verify_proof(state_root, path, Some(leaf), &proof.account_proof);
    let absent = empty && verify_proof(state_root, path, None, &proof.account_proof).is_ok();
    if let Err(e) = included {
        if !absent {
            return Verdict::Disproved(format!("its account proof does not hold: {e}"));
        }
    }
    let storage_root = if absent {
        EMPTY_ROOT_HASH
    } else {
        account.storage_root
    };
    let mut proven = Vec::with_capacity(slots.len());
    for slot in slots {
        let given = proof
            .storage_proof
            .iter()
            .find(|s| B256::from(s.key) == *slot);
        let Some(given) = given else {
            return Verdict::Disproved(format!("no proof of slot {slot}"));
        };
        let expected = (!given.value.is_zero()).then(|| alloy_rlp::encode(given.value));
        let path = Nibbles::unpack(keccak256(slot));
        if let Err(e) = verify_proof(storage_root, path, expected, &given.proof) {
            return Verdict::Disproved(format!("its proof of slot {slot} does not hold: {e}"));
        }
        proven.push((*slot, given.value));
    }
    Verdict::Proven(ProvenAccount {
        nonce: account.nonce,
        balance: account.balance,
        code_hash: if absent {
            KECCAK_EMPTY
        } else {
            account.code_hash
        },
        slots: proven,
    })
}

/// Code answered for an account whose code hash was proven.
pub fn check_code(code: &Value, code_hash: B256) -> Verdict<()> {
    let Some(code) = code.as_str().and_then(|c| c.parse::<Bytes>().ok()) else {
        return Verdict::Disproved("code that is not hex".into());
    };
    if keccak256(&code) == code_hash {
        Verdict::Proven(())
    } else {
        Verdict::Disproved(format!("code whose hash is not the proven {code_hash}"))
    }
}

/// A read of account state the edge can prove: which account, what of it, at which block.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct StateCall {
    pub field: StateField,
    pub address: Address,
    pub at: At,
}

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum StateField {
    Balance,
    Nonce,
    Code,
    Storage(B256),
}

/// The block a state read names. `pending` names none: it is not proven.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum At {
    Number(u64),
    Hash(B256),
    Latest,
    Safe,
    Finalized,
}

impl At {
    fn of(param: Option<&Value>) -> Option<At> {
        let Some(param) = param else {
            return Some(At::Latest);
        };
        match param {
            Value::String(s) => match s.as_str() {
                "latest" => Some(At::Latest),
                "safe" => Some(At::Safe),
                "finalized" => Some(At::Finalized),
                "earliest" => Some(At::Number(0)),
                s if s.len() == 66 => s.parse().ok().map(At::Hash),
                s => u64::from_str_radix(s.strip_prefix("0x")?, 16)
                    .ok()
                    .map(At::Number),
            },
            // EIP-1898: {"blockHash": …} or {"blockNumber": …}.
            Value::Object(o) => match (o.get("blockHash"), o.get("blockNumber")) {
                (Some(h), None) => At::of(Some(h)).filter(|a| matches!(a, At::Hash(_))),
                (None, Some(n)) => At::of(Some(n)).filter(|a| !matches!(a, At::Hash(_))),
                _ => None,
            },
            _ => None,
        }
    }

    /// The block as the checks name it (a tag moves: `Want::Tag`).
    pub fn want(self) -> Want {
        match self {
            At::Number(n) => Want::Number(n),
            At::Hash(h) => Want::Hash(h),
            _ => Want::Tag,
        }
    }

    /// The block as a JSON-RPC block parameter.
    pub fn param(self) -> Value {
        match self {
            At::Number(n) => Value::String(format!("0x{n:x}")),
            At::Hash(h) => Value::String(h.to_string()),
            At::Latest => "latest".into(),
            At::Safe => "safe".into(),
            At::Finalized => "finalized".into(),
        }
    }
}

impl StateCall {
    /// The state read `method(params)` is, when the edge can prove it.
    pub fn of(method: &str, params: Option<&Value>) -> Option<StateCall> {
        let p = |i: usize| params.and_then(|p| p.get(i));
        let address = p(0)?.as_str()?.parse().ok()?;
        let (field, block) = match method {
            "eth_getBalance" => (StateField::Balance, p(1)),
            "eth_getTransactionCount" => (StateField::Nonce, p(1)),
            "eth_getCode" => (StateField::Code, p(1)),
            "eth_getStorageAt" => {
                let slot: U256 = p(1)?.as_str()?.parse().ok()?;
                (StateField::Storage(slot.into()), p(2))
            }
            _ => return None,
        };
        Some(StateCall {
            field,
            address,
            at: At::of(block)?,
        })
    }

    /// The slots its proof must cover.
    pub fn slots(&self) -> Vec<B256> {
        match self.field {
            StateField::Storage(slot) => vec![slot],
            _ => Vec::new(),
        }
    }

    /// Its answer from the proven account, as nodes write it (code is not in the proof:
    /// `check_code` proves the node's).
    pub fn result(&self, account: &ProvenAccount) -> Option<Value> {
        Some(match self.field {
            StateField::Balance => format!("0x{:x}", account.balance).into(),
            StateField::Nonce => format!("0x{:x}", account.nonce).into(),
            StateField::Storage(_) => B256::from(account.slots.first()?.1).to_string().into(),
            StateField::Code => return None,
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    /// A real anvil block: a funded dev account, a contract (nonce 1) with slots 0 and 2
    /// set, and an account that does not exist.
    fn fixture() -> Value {
        serde_json::from_str(include_str!("testdata/anvil_proofs.json")).unwrap()
    }

    fn root(f: &Value) -> B256 {
        f["block"]["stateRoot"].as_str().unwrap().parse().unwrap()
    }

    fn slot(n: u8) -> B256 {
        B256::with_last_byte(n)
    }

    fn addr(f: &Value, which: &str) -> Address {
        f[which]["address"].as_str().unwrap().parse().unwrap()
    }

    fn disproved<T: std::fmt::Debug>(v: Verdict<T>) -> String {
        match v {
            Verdict::Disproved(why) => why,
            other => panic!("not disproved: {other:?}"),
        }
    }

    #[test]
    fn real_proofs_hold() {
        let f = fixture();
        let Verdict::Proven(eoa) = check_account(&f["eoa"], addr(&f, "eoa"), &[], root(&f)) else {
            panic!("the dev account's proof")
        };
        assert!(eoa.balance > U256::ZERO);
        assert_eq!(eoa.code_hash, KECCAK_EMPTY);
        let slots = [slot(0), slot(1), slot(2)];
        let Verdict::Proven(c) =
            check_account(&f["contract"], addr(&f, "contract"), &slots, root(&f))
        else {
            panic!("the contract's proof")
        };
        assert_eq!(c.nonce, 1);
        let values: Vec<u64> = c.slots.iter().map(|(_, v)| v.to::<u64>()).collect();
        assert_eq!(values, vec![0xff, 0, 0x1234], "slot 1 proven absent");
        assert!(matches!(
            check_code(&f["code"], c.code_hash),
            Verdict::Proven(())
        ));
        let Verdict::Proven(absent) =
            check_account(&f["absent"], addr(&f, "absent"), &[slot(0)], root(&f))
        else {
            panic!("the absent account's exclusion proof")
        };
        assert_eq!((absent.nonce, absent.balance), (0, U256::ZERO));
    }

    #[test]
    fn lies_are_found() {
        let f = fixture();
        let r = root(&f);
        let eoa = addr(&f, "eoa");
        let mut lie = f["eoa"].clone();
        lie["balance"] = json!("0xffffffffffffffffffff");
        assert!(disproved(check_account(&lie, eoa, &[], r)).contains("account proof"));
        // An existing account said absent.
        let mut lie = f["eoa"].clone();
        lie["balance"] = json!("0x0");
        lie["nonce"] = json!("0x0");
        disproved(check_account(&lie, eoa, &[], r));
        // Another account's (valid) proof.
        disproved(check_account(&f["contract"], eoa, &[], r));
        // A proof against another root.
        disproved(check_account(&f["eoa"], eoa, &[], B256::repeat_byte(7)));
        let c = addr(&f, "contract");
        let slots = [slot(0), slot(1), slot(2)];
        for (i, value) in [(0, "0x1"), (1, "0x5"), (2, "0x0")] {
            let mut lie = f["contract"].clone();
            lie["storageProof"][i]["value"] = json!(value);
            let why = disproved(check_account(&lie, c, &slots, r));
            assert!(why.contains("slot"), "{why}");
        }
        let mut lie = f["contract"].clone();
        lie["storageProof"].as_array_mut().unwrap().remove(2);
        assert!(disproved(check_account(&lie, c, &slots, r)).contains("no proof"));
        // The nonexistent account given a balance, and its absent slot a value.
        let a = addr(&f, "absent");
        let mut lie = f["absent"].clone();
        lie["balance"] = json!("0x1");
        disproved(check_account(&lie, a, &[slot(0)], r));
        let mut lie = f["absent"].clone();
        lie["storageProof"][0]["value"] = json!("0x1");
        disproved(check_account(&lie, a, &[slot(0)], r));
        assert!(matches!(
            check_code(&json!("0x6001"), KECCAK_EMPTY),
            Verdict::Disproved(_)
        ));
        disproved(check_account(&json!({"address": 1}), eoa, &[], r));
    }

    #[test]
    fn state_reads_name_their_block() {
        let a = "0x00000000000000000000000000000000000000aa";
        let h = "0x654ba534dc84271e0e62e3f631c30082010ef940b1484ccc9657aad39eb63e01";
        let call = |m: &str, p: Value| StateCall::of(m, Some(&p));
        let at = |m: &str, p: Value| call(m, p).map(|c| c.at);
        assert_eq!(at("eth_getBalance", json!([a])), Some(At::Latest));
        assert_eq!(
            at("eth_getBalance", json!([a, "0x10"])),
            Some(At::Number(16))
        );
        assert_eq!(
            at("eth_getCode", json!([a, "earliest"])),
            Some(At::Number(0))
        );
        assert_eq!(
            at("eth_getTransactionCount", json!([a, {"blockHash": h}])),
            Some(At::Hash(h.parse().unwrap()))
        );
        assert_eq!(at("eth_getBalance", json!([a, "pending"])), None);
        assert_eq!(at("eth_getBalance", json!([a, {"blockHash": "0x1"}])), None);
        assert_eq!(at("eth_getBalance", json!(["0x12", "latest"])), None);
        assert_eq!(at("eth_call", json!([{"to": a}, "latest"])), None);
        let storage = call("eth_getStorageAt", json!([a, "0x2", "finalized"])).unwrap();
        assert_eq!(storage.field, StateField::Storage(slot(2)));
        assert_eq!(storage.at, At::Finalized);
        assert_eq!(storage.slots(), vec![slot(2)]);
        let account = ProvenAccount {
            nonce: 26,
            balance: U256::from(4660),
            code_hash: KECCAK_EMPTY,
            slots: vec![(slot(2), U256::from(255))],
        };
        assert_eq!(
            storage.result(&account),
            Some(json!(format!("0x{}ff", "0".repeat(62))))
        );
        let balance = call("eth_getBalance", json!([a])).unwrap();
        assert_eq!(balance.result(&account), Some(json!("0x1234")));
        let nonce = call("eth_getTransactionCount", json!([a])).unwrap();
        assert_eq!(nonce.result(&account), Some(json!("0x1a")));
    }
}

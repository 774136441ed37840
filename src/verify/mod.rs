//! Answers checked against themselves: a node's answer that carries its own commitment
//! (a block's header hash, its transactions root, its receipts root and logs bloom) is
//! recomputed at the edge before it is served. An answer that fails is never served;
//! one the edge cannot check (a field or transaction type it does not know) is served
//! and said unchecked, never refused. docs/verification.md has the threat model.

pub mod block;
pub mod envelope;
pub mod light_client;
pub mod logs;
pub mod receipts;
pub mod root;
pub mod state;
pub mod tx;

use alloy_primitives::B256;
use serde_json::Value;

/// How an answer was checked, as `x-chainedge-verified` says it, weakest first.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub enum Verified {
    /// Not checked: nothing in it commits to the rest, or the edge could not check it.
    #[default]
    None,
    /// Recomputed from its own commitments (and the block it names, itself checked).
    SelfConsistent,
    /// `agree` of the `asked` hosts gave this answer (in canonical form).
    Quorum { agree: u8, asked: u8 },
    /// Proven by a Merkle proof against the state root of a block the edge trusts.
    Proof(root::AnchorNote),
    /// Recomputed from the receipts of blocks linked by their parent hashes to a block
    /// the edge trusts (a range's logs, complete).
    Root(root::AnchorNote),
}

impl Verified {
    pub fn as_str(self) -> &'static str {
        match self {
            Verified::None => "none",
            Verified::SelfConsistent => "self",
            Verified::Quorum { agree, asked } => match (agree, asked) {
                (1, 1) => "quorum=1/1",
                (2, 2) => "quorum=2/2",
                (2, 3) => "quorum=2/3",
                (3, 3) => "quorum=3/3",
                (3, 4) => "quorum=3/4",
                (4, 4) => "quorum=4/4",
                (3, 5) => "quorum=3/5",
                (4, 5) => "quorum=4/5",
                (5, 5) => "quorum=5/5",
                _ => "quorum",
            },
            Verified::Proof(_) => "proof",
            Verified::Root(_) => "root",
        }
    }

    /// The trusted block the answer was proven against (`x-chainedge-anchor`).
    pub fn anchor(self) -> Option<root::AnchorNote> {
        match self {
            Verified::Proof(a) | Verified::Root(a) => Some(a),
            _ => None,
        }
    }

    fn rank(self) -> u8 {
        match self {
            Verified::None => 0,
            Verified::SelfConsistent => 1,
            Verified::Quorum { .. } => 2,
            Verified::Proof(_) | Verified::Root(_) => 3,
        }
    }

    /// `X-Chainedge-Require-Verified`: a level's name.
    pub fn named(name: &str) -> Option<Verified> {
        match name.trim().to_ascii_lowercase().as_str() {
            "none" => Some(Verified::None),
            "self" => Some(Verified::SelfConsistent),
            "quorum" => Some(Verified::Quorum { agree: 0, asked: 0 }),
            "proof" => Some(Verified::Proof(root::AnchorNote::default())),
            "root" => Some(Verified::Root(root::AnchorNote::default())),
            _ => None,
        }
    }

    /// Whether an answer checked this way meets `required`.
    pub fn meets(self, required: Verified) -> bool {
        self.rank() >= required.rank()
    }

    /// The stronger of two (what a request must meet when its caller, key and plan each
    /// ask for a level).
    pub fn strongest(self, other: Verified) -> Verified {
        if other.rank() > self.rank() {
            other
        } else {
            self
        }
    }

    /// The weaker of two (an answer made of several is checked as its weakest part).
    pub fn weakest(self, other: Verified) -> Verified {
        if other.rank() < self.rank() {
            other
        } else {
            self
        }
    }
}

/// The outcome of checking one answer.
#[derive(Debug)]
pub enum Verdict<T> {
    /// Every commitment recomputed: what was learned on the way.
    Proven(T),
    /// Served as it is, said unchecked: why it could not be checked.
    Unchecked(String),
    /// Wrong: never served. Why, for the misbehaviour log.
    Disproved(String),
}

impl<T> Verdict<T> {
    /// A proven value turned into another; an unchecked or disproved verdict kept.
    pub fn map<U>(self, f: impl FnOnce(T) -> U) -> Verdict<U> {
        match self {
            Verdict::Proven(v) => Verdict::Proven(f(v)),
            Verdict::Unchecked(why) => Verdict::Unchecked(why),
            Verdict::Disproved(why) => Verdict::Disproved(why),
        }
    }

    /// A disproved verdict's reason said with `context` first.
    pub fn context(self, context: &str) -> Verdict<T> {
        match self {
            Verdict::Disproved(why) => Verdict::Disproved(format!("{context}: {why}")),
            other => other,
        }
    }
}

/// The value of a proven verdict; an unchecked or disproved one is returned from the
/// enclosing function as it is (`?` for verdicts).
macro_rules! proven {
    ($verdict:expr) => {
        match $verdict {
            $crate::verify::Verdict::Proven(v) => v,
            $crate::verify::Verdict::Unchecked(why) => {
                return $crate::verify::Verdict::Unchecked(why)
            }
            $crate::verify::Verdict::Disproved(why) => {
                return $crate::verify::Verdict::Disproved(why)
            }
        }
    };
}
pub(crate) use proven;

/// The block a call names: by number, by hash, or by a tag the answer cannot be held to.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum Want {
    Number(u64),
    Hash(B256),
    Tag,
}

impl Want {
    fn of(param: Option<&Value>) -> Option<Want> {
        match param? {
            Value::String(s) if s.len() == 66 => s.parse().ok().map(Want::Hash),
            Value::String(s) => match s.strip_prefix("0x") {
                Some(hex) => u64::from_str_radix(hex, 16).ok().map(Want::Number),
                None => Some(Want::Tag),
            },
            // EIP-1898: {"blockHash": …} or {"blockNumber": …}.
            Value::Object(o) => match (o.get("blockHash"), o.get("blockNumber")) {
                (Some(h), None) => Want::of(Some(h)),
                (None, Some(n)) => Want::of(Some(n)),
                _ => None,
            },
            _ => None,
        }
    }

    /// Whether a block numbered `number` with hash `hash` is the one wanted.
    pub fn answered_by(self, number: u64, hash: B256) -> Result<(), String> {
        match self {
            Want::Number(n) if n != number => Err(format!("asked for block {n}, got {number}")),
            Want::Hash(h) if h != hash => Err(format!("asked for block {h}, got {hash}")),
            _ => Ok(()),
        }
    }
}

/// What a call's answer can be checked against, by method.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Check {
    /// `eth_getBlockByNumber` / `eth_getBlockByHash`; `full`: the caller asked for
    /// transaction objects. A hashes-only block is fetched full, checked, and answered
    /// as hashes (the hash list has no commitment of its own).
    Block { want: Want, full: bool },
    /// `eth_getBlockReceipts`: against the receipts root of the block they name.
    BlockReceipts { want: Want },
    /// `eth_getTransactionReceipt`: the receipt at its place among its block's checked
    /// receipts.
    TxReceipt { hash: B256 },
    /// `eth_getLogs` for one block (`blockHash`): exactly the logs of its checked
    /// receipts the filter selects.
    BlockLogs { hash: B256 },
    /// `eth_getTransactionByHash`: its hash and signature, and its claimed place among
    /// its block's checked transactions.
    Tx { hash: B256 },
}

impl Check {
    /// The check for `method(params)`, when its answer commits to anything.
    pub fn of(method: &str, params: Option<&Value>) -> Option<Check> {
        let p = |i: usize| params.and_then(|p| p.get(i));
        match method {
            "eth_getBlockByNumber" | "eth_getBlockByHash" => Some(Check::Block {
                want: Want::of(p(0))?,
                full: p(1).and_then(Value::as_bool).unwrap_or(false),
            }),
            "eth_getBlockReceipts" => Some(Check::BlockReceipts {
                want: Want::of(p(0))?,
            }),
            "eth_getTransactionReceipt" => Some(Check::TxReceipt {
                hash: p(0)?.as_str()?.parse().ok()?,
            }),
            "eth_getTransactionByHash" => Some(Check::Tx {
                hash: p(0)?.as_str()?.parse().ok()?,
            }),
            "eth_getLogs" => {
                let filter = p(0)?;
                logs::LogFilter::of(filter)?;
                Some(Check::BlockLogs {
                    hash: filter.get("blockHash")?.as_str()?.parse().ok()?,
                })
            }
            _ => None,
        }
    }

    /// The name of the check in metrics and the misbehaviour log.
    pub fn name(self) -> &'static str {
        match self {
            Check::Block { .. } => "block",
            Check::BlockReceipts { .. } => "receipts",
            Check::TxReceipt { .. } => "receipt",
            Check::BlockLogs { .. } => "logs",
            Check::Tx { .. } => "transaction",
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    #[test]
    fn calls_name_their_checks() {
        let h = "0x654ba534dc84271e0e62e3f631c30082010ef940b1484ccc9657aad39eb63e01";
        assert_eq!(
            Check::of("eth_getBlockByNumber", Some(&json!(["0x10", true]))),
            Some(Check::Block {
                want: Want::Number(16),
                full: true
            })
        );
        assert_eq!(
            Check::of("eth_getBlockByHash", Some(&json!([h]))),
            Some(Check::Block {
                want: Want::Hash(h.parse().unwrap()),
                full: false
            })
        );
        assert_eq!(
            Check::of("eth_getBlockReceipts", Some(&json!(["latest"]))),
            Some(Check::BlockReceipts { want: Want::Tag })
        );
        assert_eq!(
            Check::of("eth_getBlockReceipts", Some(&json!([{"blockHash": h}]))),
            Some(Check::BlockReceipts {
                want: Want::Hash(h.parse().unwrap())
            })
        );
        assert_eq!(
            Check::of("eth_getTransactionReceipt", Some(&json!([h]))),
            Some(Check::TxReceipt {
                hash: h.parse().unwrap()
            })
        );
        assert_eq!(
            Check::of(
                "eth_getLogs",
                Some(&json!([{"blockHash": h, "address": "0xab"}]))
            ),
            Some(Check::BlockLogs {
                hash: h.parse().unwrap()
            })
        );
        // A range is not one block's: not checked (yet).
        assert_eq!(
            Check::of(
                "eth_getLogs",
                Some(&json!([{"fromBlock": "0x1", "toBlock": "0x2"}]))
            ),
            None
        );
        assert_eq!(Check::of("eth_getBalance", Some(&json!(["0x1"]))), None);
        assert_eq!(Check::of("eth_getBlockByNumber", Some(&json!([7]))), None);
    }
}

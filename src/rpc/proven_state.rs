//! Account state proven at a block, kept by the block's hash: a block's state never
//! changes, so a read proven once is answered again without a node (the response cache
//! keeps answers by the call as asked; this keeps what a proof proved, whichever way
//! the block was named: by number, by hash, or as `latest` while it is the head).

use crate::verify::state::ProvenAccount;
use alloy_primitives::{Address, Bytes, B256, U256};
use lru::LruCache;
use std::num::NonZeroUsize;
use std::sync::Mutex;

/// Accounts kept (each with up to `SLOTS_KEPT` storage words: at most about 2.5 KiB).
const ACCOUNTS_KEPT: usize = 16_384;
const SLOTS_KEPT: usize = 32;
/// Code kept by its hash, within this many bytes.
const CODE_KEPT_BYTES: usize = 16 << 20;

/// What proofs proved, by block hash and account; proven code by its hash.
pub struct ProvenState {
    accounts: Mutex<LruCache<(B256, Address), ProvenAccount>>,
    code: Mutex<KeptCode>,
}

struct KeptCode {
    by_hash: LruCache<B256, Bytes>,
    bytes: usize,
}

impl Default for ProvenState {
    fn default() -> Self {
        ProvenState {
            accounts: Mutex::new(LruCache::new(
                NonZeroUsize::new(ACCOUNTS_KEPT).expect("a positive bound"),
            )),
            code: Mutex::new(KeptCode {
                by_hash: LruCache::unbounded(),
                bytes: 0,
            }),
        }
    }
}

impl ProvenState {
    /// The account at `block`, when it was proven with every slot of `slots`.
    pub fn account(&self, block: B256, address: Address, slots: &[B256]) -> Option<ProvenAccount> {
        let mut kept = self.accounts.lock().ok()?;
        let account = kept.get(&(block, address))?;
        let covered = slots
            .iter()
            .all(|s| account.slots.iter().any(|(k, _)| k == s));
        covered.then(|| ProvenAccount {
            slots: slots
                .iter()
                .filter_map(|s| account.slots.iter().find(|(k, _)| k == s).copied())
                .collect(),
            ..account.clone()
        })
    }

    /// Keep what a proof proved of `address` at `block`, with the slots proven before.
    pub fn keep(&self, block: B256, address: Address, proven: &ProvenAccount) {
        let Ok(mut kept) = self.accounts.lock() else {
            return;
        };
        let mut slots: Vec<(B256, U256)> = kept
            .get(&(block, address))
            .map(|a| a.slots.clone())
            .unwrap_or_default();
        for slot in &proven.slots {
            if !slots.iter().any(|(k, _)| *k == slot.0) {
                slots.push(*slot);
            }
        }
        let from = slots.len().saturating_sub(SLOTS_KEPT);
        let account = ProvenAccount {
            slots: slots.split_off(from),
            ..proven.clone()
        };
        kept.put((block, address), account);
    }

    /// Code whose hash was proven and checked.
    pub fn code(&self, code_hash: &B256) -> Option<Bytes> {
        self.code.lock().ok()?.by_hash.get(code_hash).cloned()
    }

    pub fn keep_code(&self, code_hash: B256, code: Bytes) {
        let Ok(mut kept) = self.code.lock() else {
            return;
        };
        if code.len() > CODE_KEPT_BYTES || kept.by_hash.contains(&code_hash) {
            return;
        }
        kept.bytes += code.len();
        kept.by_hash.put(code_hash, code);
        while kept.bytes > CODE_KEPT_BYTES {
            match kept.by_hash.pop_lru() {
                Some((_, c)) => kept.bytes -= c.len(),
                None => break,
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn account(slots: &[(u8, u64)]) -> ProvenAccount {
        ProvenAccount {
            nonce: 1,
            balance: U256::from(10),
            code_hash: B256::ZERO,
            slots: slots
                .iter()
                .map(|(k, v)| (B256::with_last_byte(*k), U256::from(*v)))
                .collect(),
        }
    }

    #[test]
    fn what_was_proven_is_answered_again_and_slots_add_up() {
        let kept = ProvenState::default();
        let (block, other) = (B256::repeat_byte(1), B256::repeat_byte(2));
        let a = Address::repeat_byte(9);
        kept.keep(block, a, &account(&[(1, 5)]));
        assert_eq!(kept.account(block, a, &[]).unwrap().balance, U256::from(10));
        assert_eq!(kept.account(other, a, &[]), None, "another block");
        let slot = |n| B256::with_last_byte(n);
        assert_eq!(
            kept.account(block, a, &[slot(2)]),
            None,
            "a slot not proven"
        );
        kept.keep(block, a, &account(&[(2, 7)]));
        let both = kept.account(block, a, &[slot(2), slot(1)]).unwrap();
        assert_eq!(both.slots, account(&[(2, 7), (1, 5)]).slots);
        kept.keep_code(B256::repeat_byte(3), Bytes::from_static(b"\x60\x00"));
        assert_eq!(kept.code(&B256::repeat_byte(3)).unwrap().len(), 2);
    }
}

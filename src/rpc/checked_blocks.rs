//! What checked blocks said of themselves, kept by hash, with their checked receipts
//! and the gateway's other proven state (anchors, proven accounts, the light client's
//! roots): one checked fetch per block for every answer that names it.

use super::proven::ProvenAnswers;
use crate::verify::block::BlockFacts;
use alloy_primitives::B256;
use lru::LruCache;
use serde_json::Value;
use std::num::NonZeroUsize;
use std::sync::{Arc, Mutex};

/// Checked blocks kept by hash (their facts: a few hundred bytes per transaction).
const FACTS_KEPT: usize = 256;
/// Checked block receipts kept by hash, by their size as the node wrote them.
const RECEIPTS_KEPT_BYTES: usize = 16 << 20;

/// What checked blocks said of themselves, and their checked receipts, by block hash:
/// one checked fetch per block for every answer that names it.
pub struct CheckedBlocks {
    facts: Mutex<LruCache<B256, Arc<BlockFacts>>>,
    receipts: Mutex<KeptReceipts>,
    /// Whole answers proven, by the call they answered.
    pub(super) answers: ProvenAnswers,
    /// Blocks whose hash is trusted, and their roots.
    pub(super) anchors: super::anchor::Anchors,
    /// Account state proven at a block, by the block's hash.
    pub(super) proven_state: super::proven_state::ProvenState,
    /// What the beacon light client trusts (`rpc.verify.root.light_client`).
    pub(super) light: super::light_client::LightRoots,
}

/// Receipts by block hash, within `RECEIPTS_KEPT_BYTES`.
struct KeptReceipts {
    by_block: LruCache<B256, (Arc<Value>, usize)>,
    bytes: usize,
}

impl Default for CheckedBlocks {
    fn default() -> Self {
        CheckedBlocks {
            facts: Mutex::new(LruCache::new(
                NonZeroUsize::new(FACTS_KEPT).expect("a positive bound"),
            )),
            receipts: Mutex::new(KeptReceipts {
                by_block: LruCache::unbounded(),
                bytes: 0,
            }),
            answers: ProvenAnswers::default(),
            anchors: Default::default(),
            proven_state: Default::default(),
            light: Default::default(),
        }
    }
}

impl CheckedBlocks {
    pub(super) fn facts(&self, hash: &B256) -> Option<Arc<BlockFacts>> {
        self.facts.lock().ok()?.get(hash).cloned()
    }

    pub(super) fn keep(&self, facts: BlockFacts) -> Arc<BlockFacts> {
        let facts = Arc::new(facts);
        if let Ok(mut kept) = self.facts.lock() {
            kept.put(facts.hash, facts.clone());
        }
        facts
    }

    pub(super) fn receipts(&self, hash: &B256) -> Option<Arc<Value>> {
        let mut kept = self.receipts.lock().ok()?;
        kept.by_block.get(hash).map(|(r, _)| r.clone())
    }

    /// Keep a block's checked receipts (`size`: their bytes as the node wrote them),
    /// the least recently used let go past the bound.
    pub(super) fn keep_receipts(&self, hash: B256, receipts: Arc<Value>, size: usize) {
        let Ok(mut kept) = self.receipts.lock() else {
            return;
        };
        if size > RECEIPTS_KEPT_BYTES {
            return;
        }
        if let Some((_, old)) = kept.by_block.put(hash, (receipts, size)) {
            kept.bytes -= old;
        }
        kept.bytes += size;
        while kept.bytes > RECEIPTS_KEPT_BYTES {
            match kept.by_block.pop_lru() {
                Some((_, (_, n))) => kept.bytes -= n,
                None => break,
            }
        }
    }
}

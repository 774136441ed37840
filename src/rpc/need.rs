//! Block needs: which head (and whether archive state) a read needs, and hosts ordered
//! so the ones that have it go first.

use crate::jsonrpc::methods::{block_need, BlockNeed};
use crate::jsonrpc::Request;
use crate::pools::{Host, Pool};
use serde_json::Value;
use std::sync::Arc;

/// What a read (or a batch of reads) needs of a host: a minimum head, and whether
/// archive hosts should go first.
#[derive(Debug, Clone, Copy, PartialEq, Default)]
pub struct Need {
    pub min_head: u64,
    pub archive: bool,
    /// Hosts below this block are not asked at all (the caller's minimum block, for
    /// reading its own writes); `min_head` only puts them last.
    pub floor: u64,
}

impl Need {
    /// This need with the caller's minimum block as a hard floor.
    pub(super) fn at_least(mut self, floor: u64) -> Need {
        self.floor = floor;
        self.min_head = self.min_head.max(floor);
        self
    }
}

/// Blocks behind the head beyond which full nodes have pruned state (geth's default).
const ARCHIVE_DEPTH: u64 = 128;

/// One call's block need against the pool's head.
pub(super) fn need_for(pool: &Pool, block: BlockNeed) -> Need {
    need_from(
        pool.head.load(std::sync::atomic::Ordering::Relaxed),
        block,
        Need::default(),
    )
}

/// Combine the calls' block needs against the pool head of the last health round.
pub(super) fn need_of<'a>(pool: &Pool, calls: impl IntoIterator<Item = &'a Request>) -> Need {
    let head = pool.head.load(std::sync::atomic::Ordering::Relaxed);
    calls.into_iter().fold(Need::default(), |need, call| {
        need_from(head, block_need(&call.method, call.params.as_ref()), need)
    })
}

/// Combine the block needs of calls as parsed JSON against a pool head.
pub fn need_at<'a>(head: u64, calls: impl IntoIterator<Item = &'a Value>) -> Need {
    calls.into_iter().fold(Need::default(), |need, call| {
        let method = call.get("method").and_then(Value::as_str).unwrap_or("");
        need_from(head, block_need(method, call.get("params")), need)
    })
}

/// `need` widened by one call's block need.
pub(super) fn need_from(head: u64, block: BlockNeed, mut need: Need) -> Need {
    match block {
        BlockNeed::Any => {}
        BlockNeed::Head => need.min_head = need.min_head.max(head),
        BlockNeed::AtLeast(n) => {
            need.min_head = need.min_head.max(n);
            need.archive |= n.saturating_add(ARCHIVE_DEPTH) < head;
        }
        BlockNeed::Earliest => need.archive = true,
    }
    need
}

/// Stable reorder: hosts whose head covers the need (archive ones first when asked) ahead
/// of the rest, which stay as fallbacks.
pub(super) fn order_by_need(hosts: Vec<&Arc<Host>>, need: Need) -> Vec<&Arc<Host>> {
    if need == Need::default() {
        return hosts;
    }
    let rank = |h: &&Arc<Host>| {
        let covers = h.health.head() >= need.min_head;
        let archive_ok = !need.archive || h.has("archive");
        match (covers, archive_ok) {
            (true, true) => 0,
            (true, false) => 1,
            _ => 2,
        }
    };
    let mut hosts = hosts;
    hosts.sort_by_key(rank);
    hosts
}

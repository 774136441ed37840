//! The finality-aware response cache for single JSON-RPC reads.
//!
//! An answer is kept for as long as what it depends on cannot change: forever when it
//! is addressed by hash (a block, its transactions by index) or its block is finalized
//! (by the nodes' own `finalized` tag, or the beacon chain's finalized checkpoint); until
//! the next reorg the edge sees, and at most `unfinalized_ttl_ms`, for a numbered block
//! not final yet; until the head moves, and at most `head_ttl_ms`, for what follows the
//! head (`latest`, gas prices). Never for
//! `pending`, writes, filters, subscriptions, batches, errors or null answers.
//!
//! A tracker per pool in use (`Tracker`, in the background) reads the head and the
//! finalized block (for `eth_el`, also the beacon pool's finalized checkpoint,
//! `beacon_finality.rs`); a head whose parent is not the block it had at that height is a
//! reorg, and every answer not final is dropped at once (a generation counter).
//! Bounded in bytes, least recently used out first. Every lookup is counted by outcome
//! and reason, and each answer says both (`X-Cache-Status`, `X-Cache-Reason`).

mod tracker;

pub use tracker::Tracker;

use super::need::need_for;
use super::{Gateway, RpcReply};
use crate::jsonrpc::methods::{block_param, BlockNeed, MethodClass};
use crate::jsonrpc::quantity::quantity;
use crate::jsonrpc::{Id, Request, Response};
use crate::observe::metrics;
use crate::pools::Pools;
use bytes::Bytes;
use serde_json::value::RawValue;
use serde_json::Value;
use std::collections::{BTreeMap, HashMap};
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

/// What an answer's lifetime depends on, decided from the call before any node is asked.
#[derive(Debug, Clone, Copy, PartialEq)]
pub(super) enum Depends {
    /// Addressed by hash, or genesis: never changes.
    Nothing,
    /// A numbered block: final once finalized, until a reorg before that.
    Block(u64),
    /// The block the answer itself names (a transaction or receipt by hash).
    AnswerBlock,
    /// The head: `latest`, `safe`, `finalized`, gas prices.
    Head,
    /// The head's number itself (`eth_blockNumber`): a higher one moves the head.
    HeadNumber,
}

/// Whether a call may be answered from the cache, and if not, why.
#[derive(Debug, Clone, Copy, PartialEq)]
pub(super) enum Policy {
    Cache(Depends),
    Bypass(&'static str),
}

/// How the cache took part in an answer: `hit`, `miss` or `bypass`, and why.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct CacheNote {
    pub status: CacheStatus,
    pub reason: &'static str,
}

/// `X-Cache-Status`. An enum, not a string: every reply carries a note, and the reply
/// is part of every connection's task (`edge::tests::the_pipeline_future_stays_small`).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum CacheStatus {
    Hit,
    Miss,
    Bypass,
    /// Some of a batch's reads came from the cache.
    Partial,
}

impl CacheStatus {
    pub fn as_str(self) -> &'static str {
        match self {
            CacheStatus::Hit => "hit",
            CacheStatus::Miss => "miss",
            CacheStatus::Bypass => "bypass",
            CacheStatus::Partial => "partial",
        }
    }
}

/// The policy for one read call.
pub(super) fn policy(method: &str, params: Option<&Value>) -> Policy {
    use Depends::*;
    match method {
        "eth_chainId" | "net_version" => return Policy::Cache(Nothing),
        "eth_getBlockByHash"
        | "eth_getBlockTransactionCountByHash"
        | "eth_getUncleCountByBlockHash"
        | "eth_getUncleByBlockHashAndIndex"
        | "eth_getTransactionByBlockHashAndIndex" => return Policy::Cache(Nothing),
        "eth_getTransactionByHash" | "eth_getTransactionReceipt" => {
            return Policy::Cache(AnswerBlock)
        }
        "eth_blockNumber" => return Policy::Cache(HeadNumber),
        "eth_gasPrice" | "eth_maxPriorityFeePerGas" | "eth_blobBaseFee" | "eth_baseFee" => {
            return Policy::Cache(Head)
        }
        "eth_getLogs" => {
            let filter = params.and_then(|p| p.get(0));
            if filter.and_then(|f| f.get("blockHash")).is_some() {
                return Policy::Cache(Nothing);
            }
            let to = filter.and_then(|f| f.get("toBlock"));
            let from = filter.and_then(|f| f.get("fromBlock"));
            return match (tag(from), tag(to)) {
                (Some(Policy::Bypass(r)), _) | (_, Some(Policy::Bypass(r))) => Policy::Bypass(r),
                (_, Some(p)) => p,
                (_, None) => Policy::Bypass("block_param"),
            };
        }
        // Capability-bound families (trace, debug, txpool) and estimates are not kept.
        "eth_estimateGas" | "eth_createAccessList" | "eth_feeHistory" => {
            return Policy::Bypass("method")
        }
        _ => {}
    }
    let Some(at) = block_param(method) else {
        return Policy::Bypass("method");
    };
    if method.starts_with("trace_") || method.starts_with("debug_") {
        return Policy::Bypass("method");
    }
    tag(params.and_then(|p| p.get(at))).unwrap_or(Policy::Bypass("block_param"))
}

/// The policy a block parameter gives (omitted is `latest`).
fn tag(v: Option<&Value>) -> Option<Policy> {
    use Depends::*;
    Some(match v {
        None | Some(Value::Null) => Policy::Cache(Head),
        Some(Value::String(s)) => match s.as_str() {
            "latest" | "safe" | "finalized" => Policy::Cache(Head),
            "pending" => Policy::Bypass("pending"),
            "earliest" => Policy::Cache(Block(0)),
            hex => Policy::Cache(Block(quantity(hex)?)),
        },
        // EIP-1898: a block by hash or by number.
        Some(Value::Object(o)) => {
            if o.contains_key("blockHash") {
                Policy::Cache(Nothing)
            } else {
                return tag(o.get("blockNumber"));
            }
        }
        _ => return None,
    })
}

/// What the edge knows of one pool's chain (written by the tracker).
#[derive(Default)]
pub(super) struct ChainView {
    head: AtomicU64,
    finalized: AtomicU64,
    /// Bumped at each reorg: answers not final from before it are gone.
    generation: AtomicU64,
    /// A read of this pool wanted the cache: the tracker follows it.
    used: AtomicBool,
    /// Bumped by each write sent through the edge: what followed the head is asked anew.
    writes: AtomicU64,
}

enum Lifetime {
    Forever,
    /// Until a reorg (generation) or the deadline; for good once `block` is finalized.
    Unfinal {
        block: u64,
        generation: u64,
        until: Instant,
    },
    /// While the head is this one and no write went through, and until the deadline.
    Head {
        head: u64,
        writes: u64,
        until: Instant,
    },
}

struct Entry {
    /// The answer's `result`, as JSON.
    result: Bytes,
    block: Option<u64>,
    upstream: Option<String>,
    /// How the answer was checked when the node gave it.
    verified: crate::verify::Verified,
    lifetime: Lifetime,
}

impl Entry {
    fn size(&self, key: &str) -> usize {
        key.len() + self.result.len() + 96
    }
}

struct Store {
    entries: lru::LruCache<String, Entry>,
    bytes: usize,
}

pub struct ResponseCache {
    conf: crate::config::CacheConf,
    views: HashMap<String, Arc<ChainView>>,
    store: Mutex<Store>,
}

impl ResponseCache {
    pub fn new(conf: &crate::config::CacheConf, pools: &Pools) -> Self {
        ResponseCache {
            conf: conf.clone(),
            views: pools
                .all()
                .map(|p| (p.name.clone(), Arc::new(ChainView::default())))
                .collect(),
            store: Mutex::new(Store {
                entries: lru::LruCache::unbounded(),
                bytes: 0,
            }),
        }
    }

    pub fn enabled(&self) -> bool {
        self.conf.enabled
    }

    fn view(&self, pool: &str) -> Option<&Arc<ChainView>> {
        self.views.get(pool)
    }

    /// The answer kept for `key`, under the caller's id (`id` is only read on a hit); or
    /// why there is none.
    pub(super) fn get(
        &self,
        pool: &str,
        key: &str,
        id: impl FnOnce() -> Id,
    ) -> Result<RpcReply, &'static str> {
        let view = self.view(pool).ok_or("pool")?;
        view.used.store(true, Ordering::Relaxed);
        let mut store = self.store.lock().map_err(|_| "absent")?;
        let entry = store.entries.get_mut(key).ok_or("absent")?;
        let now = Instant::now();
        let stale = match entry.lifetime {
            Lifetime::Forever => None,
            Lifetime::Unfinal {
                block,
                generation,
                until,
            } => {
                if generation != view.generation.load(Ordering::Relaxed) {
                    Some("reorg")
                } else if block <= view.finalized.load(Ordering::Relaxed) {
                    // Kept before its block was final, unchanged since: final now.
                    entry.lifetime = Lifetime::Forever;
                    None
                } else if now >= until {
                    Some("expired")
                } else {
                    None
                }
            }
            Lifetime::Head {
                head,
                writes,
                until,
            } => {
                if head != view.head.load(Ordering::Relaxed) {
                    Some("head_moved")
                } else if writes != view.writes.load(Ordering::Relaxed) {
                    Some("write_sent")
                } else if now >= until {
                    Some("expired")
                } else {
                    None
                }
            }
        };
        if let Some(reason) = stale {
            if let Some(gone) = store.entries.pop(key) {
                store.bytes -= gone.size(key);
            }
            return Err(reason);
        }
        let mut body = Vec::with_capacity(entry.result.len() + 48);
        body.extend_from_slice(br#"{"jsonrpc":"2.0","id":"#);
        body.extend_from_slice(&serde_json::to_vec(&id()).unwrap_or_else(|_| b"null".to_vec()));
        body.extend_from_slice(br#","result":"#);
        body.extend_from_slice(&entry.result);
        body.push(b'}');
        Ok(RpcReply {
            body: Bytes::from(body),
            upstream: entry.upstream.clone(),
            block: entry.block,
            cache: Some(CacheNote {
                status: CacheStatus::Hit,
                reason: "fresh",
            }),
            verified: entry.verified,
        })
    }

    /// The chain as the edge knows it before a call: (reorg generation, head, writes).
    pub(super) fn snapshot(&self, pool: &str) -> (u64, u64, u64) {
        self.view(pool)
            .map(|v| {
                (
                    v.generation.load(Ordering::Relaxed),
                    v.head.load(Ordering::Relaxed),
                    v.writes.load(Ordering::Relaxed),
                )
            })
            .unwrap_or_default()
    }

    /// A write went to `pool`'s nodes: answers that follow the head are asked anew.
    pub(super) fn wrote(&self, pool: &str) {
        if let Some(v) = self.view(pool) {
            v.writes.fetch_add(1, Ordering::Relaxed);
        }
    }

    /// Keep a node's answer when what it depends on allows; why not, when it was not.
    /// `before` is `snapshot` from before the call: a reorg or a new head seen while the
    /// call was out leaves its answer unkept.
    pub(super) fn put(
        &self,
        pool: &str,
        key: String,
        depends: Depends,
        reply: &RpcReply,
        before: (u64, u64, u64),
    ) -> Result<(), &'static str> {
        let view = self.view(pool).ok_or("pool")?;
        if reply.body.len() > self.conf.max_entry_bytes {
            return Err("too_large");
        }
        let (generation, mut head, finalized) = (
            view.generation.load(Ordering::Relaxed),
            view.head.load(Ordering::Relaxed),
            view.finalized.load(Ordering::Relaxed),
        );
        if generation != before.0 {
            return Err("reorg_during_call");
        }
        let result = result_of(&reply.body)?;
        let now = Instant::now();
        let block = match depends {
            Depends::Nothing => None,
            Depends::Head | Depends::HeadNumber => {
                if head == 0 || head != before.1 || view.writes.load(Ordering::Relaxed) != before.2
                {
                    return Err("head_unknown_or_moving");
                }
                // A block number past the head the tracker knows moves the head at once.
                let number = (depends == Depends::HeadNumber)
                    .then(|| {
                        serde_json::from_str::<&str>(result.get())
                            .ok()
                            .and_then(quantity)
                    })
                    .flatten();
                if let Some(n) = number {
                    if n > head {
                        view.head.fetch_max(n, Ordering::Relaxed);
                        return Err("head_moved");
                    }
                }
                let until = now + Duration::from_millis(self.conf.head_ttl_ms);
                let writes = before.2;
                return self.keep(
                    key,
                    result,
                    reply,
                    Lifetime::Head {
                        head,
                        writes,
                        until,
                    },
                );
            }
            Depends::Block(n) => Some(n),
            Depends::AnswerBlock => match serde_json::from_str::<Value>(result.get())
                .ok()
                .and_then(|v| v.get("blockNumber")?.as_str().and_then(quantity))
            {
                // A transaction mined past the head the tracker knows: the head has
                // moved, and what followed the old one is asked anew.
                Some(n) => {
                    view.head.fetch_max(n, Ordering::Relaxed);
                    head = head.max(n);
                    Some(n)
                }
                // Not in a block yet: its answer will change.
                None => return Err("not_in_a_block"),
            },
        };
        let lifetime = match block {
            None => Lifetime::Forever,
            // Finalized blocks never change (the tracker has seen the tag at or past it).
            Some(n) if finalized > 0 && n <= finalized => Lifetime::Forever,
            // A block past the head the edge knows: nodes disagree about it; not kept.
            Some(n) if head > 0 && n > head => return Err("past_the_head"),
            Some(n) => Lifetime::Unfinal {
                block: n,
                generation: view.generation.load(Ordering::Relaxed),
                until: now + Duration::from_millis(self.conf.unfinalized_ttl_ms),
            },
        };
        self.keep(key, result, reply, lifetime)
    }

    fn keep(
        &self,
        key: String,
        result: &RawValue,
        reply: &RpcReply,
        lifetime: Lifetime,
    ) -> Result<(), &'static str> {
        let result = Bytes::copy_from_slice(result.get().as_bytes());
        let entry = Entry {
            result,
            block: reply.block,
            upstream: reply.upstream.clone(),
            verified: reply.verified,
            lifetime,
        };
        let size = entry.size(&key);
        if size > self.conf.max_entry_bytes {
            return Err("too_large");
        }
        let mut store = self.store.lock().map_err(|_| "store")?;
        if let Some(old) = store.entries.put(key.clone(), entry) {
            store.bytes -= old.size(&key);
        }
        store.bytes += size;
        while store.bytes > self.conf.max_bytes {
            match store.entries.pop_lru() {
                Some((k, gone)) => store.bytes -= gone.size(&k),
                None => break,
            }
        }
        metrics::cache_bytes(store.bytes);
        Ok(())
    }

    /// A reorg on `pool`: every answer not final is dropped (lazily, by generation).
    fn reorg(&self, pool: &str) {
        if let Some(view) = self.view(pool) {
            view.generation.fetch_add(1, Ordering::Relaxed);
        }
    }

    #[cfg(test)]
    fn bytes(&self) -> usize {
        self.store.lock().map(|s| s.bytes).unwrap_or(0)
    }
}

/// An answer's `result`, borrowed from the answer rather than parsed into a tree (a
/// block of a thousand transactions costs one scan); why it is not one to keep.
pub(crate) fn result_of(body: &[u8]) -> Result<&RawValue, &'static str> {
    #[derive(serde::Deserialize)]
    struct Answer<'a> {
        #[serde(borrow, default)]
        result: Option<&'a RawValue>,
        #[serde(default)]
        error: Option<serde::de::IgnoredAny>,
    }
    let answer: Answer = serde_json::from_slice(body).map_err(|_| "not_json")?;
    if answer.error.is_some() {
        return Err("error_answer");
    }
    match answer.result {
        Some(r) if r.get() != "null" => Ok(r),
        _ => Err("null_answer"),
    }
}

#[cfg(test)]
mod tests;

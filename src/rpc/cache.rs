//! The finality-aware response cache for single JSON-RPC reads.
//!
//! An answer is kept for as long as what it depends on cannot change: forever when it
//! is addressed by hash (a block, its transactions by index) or its block is finalized
//! (by the nodes' own `finalized` tag); until the next reorg the edge sees, and at most
//! `unfinalized_ttl_ms`, for a numbered block not final yet; until the head moves, and at
//! most `head_ttl_ms`, for what follows the head (`latest`, gas prices). Never for
//! `pending`, writes, filters, subscriptions, batches, errors or null answers.
//!
//! A tracker per pool in use (`Tracker`, in the background) reads the head and the
//! finalized block; a head whose parent is not the block it had at that height is a
//! reorg, and every answer not final is dropped at once (a generation counter).
//! Bounded in bytes, least recently used out first. Every lookup is counted by outcome
//! and reason, and each answer says both (`X-Cache-Status`, `X-Cache-Reason`).

use super::methods::{block_param, BlockNeed, MethodClass};
use super::need::need_for;
use super::{Gateway, RpcReply};
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
    pub status: &'static str,
    pub reason: &'static str,
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
        "eth_blockNumber"
        | "eth_gasPrice"
        | "eth_maxPriorityFeePerGas"
        | "eth_blobBaseFee"
        | "eth_baseFee" => return Policy::Cache(Head),
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

fn quantity(hex: &str) -> Option<u64> {
    u64::from_str_radix(hex.strip_prefix("0x")?, 16).ok()
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
}

enum Lifetime {
    Forever,
    /// Until a reorg (generation) or the deadline; for good once `block` is finalized.
    Unfinal {
        block: u64,
        generation: u64,
        until: Instant,
    },
    /// While the head is this one, and until the deadline.
    Head {
        head: u64,
        until: Instant,
    },
}

struct Entry {
    /// The answer's `result`, as JSON.
    result: Bytes,
    block: Option<u64>,
    upstream: Option<String>,
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

    /// The answer kept for `key`, under the caller's `id`; or why there is none.
    pub(super) fn get(&self, pool: &str, key: &str, id: &Id) -> Result<RpcReply, &'static str> {
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
            Lifetime::Head { head, until } => {
                if head != view.head.load(Ordering::Relaxed) {
                    Some("head_moved")
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
        body.extend_from_slice(&serde_json::to_vec(id).unwrap_or_else(|_| b"null".to_vec()));
        body.extend_from_slice(br#","result":"#);
        body.extend_from_slice(&entry.result);
        body.push(b'}');
        Ok(RpcReply {
            body: Bytes::from(body),
            upstream: entry.upstream.clone(),
            block: entry.block,
            cache: Some(CacheNote {
                status: "hit",
                reason: "fresh",
            }),
        })
    }

    /// The chain as the edge knows it before a call: (reorg generation, head).
    pub(super) fn snapshot(&self, pool: &str) -> (u64, u64) {
        self.view(pool)
            .map(|v| {
                (
                    v.generation.load(Ordering::Relaxed),
                    v.head.load(Ordering::Relaxed),
                )
            })
            .unwrap_or_default()
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
        before: (u64, u64),
    ) -> Result<(), &'static str> {
        let view = self.view(pool).ok_or("pool")?;
        if reply.body.len() > self.conf.max_entry_bytes {
            return Err("too_large");
        }
        let (generation, head, finalized) = (
            view.generation.load(Ordering::Relaxed),
            view.head.load(Ordering::Relaxed),
            view.finalized.load(Ordering::Relaxed),
        );
        if generation != before.0 {
            return Err("reorg_during_call");
        }
        // The result borrowed from the answer, not parsed into a tree: a block of a
        // thousand transactions costs one scan.
        #[derive(serde::Deserialize)]
        struct Answer<'a> {
            #[serde(borrow, default)]
            result: Option<&'a RawValue>,
            #[serde(default)]
            error: Option<serde::de::IgnoredAny>,
        }
        let answer: Answer = serde_json::from_slice(&reply.body).map_err(|_| "not_json")?;
        if answer.error.is_some() {
            return Err("error_answer");
        }
        let result = match answer.result {
            Some(r) if r.get() != "null" => r,
            _ => return Err("null_answer"),
        };
        let now = Instant::now();
        let block = match depends {
            Depends::Nothing => None,
            Depends::Head => {
                if head == 0 || head != before.1 {
                    return Err("head_unknown_or_moving");
                }
                let until = now + Duration::from_millis(self.conf.head_ttl_ms);
                return self.keep(key, result, reply, Lifetime::Head { head, until });
            }
            Depends::Block(n) => Some(n),
            Depends::AnswerBlock => match serde_json::from_str::<Value>(result.get())
                .ok()
                .and_then(|v| v.get("blockNumber")?.as_str().and_then(quantity))
            {
                Some(n) => Some(n),
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

/// Follows the head and the finalized block of each pool the cache serves, and tells
/// a reorg by a head whose parent (or whose own hash at a height seen before) is not
/// what the edge had.
pub struct Tracker {
    pub gateway: Arc<Gateway>,
    pub pools: Arc<Pools>,
}

/// How many recent heights' hashes are kept to tell a reorg.
const RECENT: usize = 256;

#[async_trait::async_trait]
impl pingora_core::services::background::BackgroundService for Tracker {
    async fn start(&self, mut shutdown: pingora_core::server::ShutdownWatch) {
        let cache = &self.gateway.cache;
        if !cache.enabled() {
            return;
        }
        let mut recent: HashMap<String, BTreeMap<u64, String>> = HashMap::new();
        let mut tick =
            tokio::time::interval(Duration::from_millis(cache.conf.track_interval_ms.max(50)));
        tick.set_missed_tick_behavior(tokio::time::MissedTickBehavior::Delay);
        loop {
            tokio::select! {
                _ = tick.tick() => {}
                _ = shutdown.changed() => return,
            }
            for (name, view) in &cache.views {
                if !view.used.load(Ordering::Relaxed) {
                    continue;
                }
                let Some(pool) = self.pools.get(name) else {
                    continue;
                };
                let seen = recent.entry(name.clone()).or_default();
                if let Err(e) = self.track(pool, view, seen).await {
                    log::debug!("cache tracker: {name}: {e}");
                }
            }
        }
    }
}

impl Tracker {
    async fn track(
        &self,
        pool: &crate::pools::Pool,
        view: &ChainView,
        seen: &mut BTreeMap<u64, String>,
    ) -> Result<(), String> {
        let calls = [
            Request::new(
                Id::index(0),
                "eth_getBlockByNumber",
                serde_json::json!(["latest", false]),
            ),
            Request::new(
                Id::index(1),
                "eth_getBlockByNumber",
                serde_json::json!(["finalized", false]),
            ),
        ];
        let body = Bytes::from(serde_json::to_vec(&calls).unwrap_or_default());
        let need = need_for(pool, BlockNeed::Head);
        let reply = self
            .gateway
            .read(pool, MethodClass::Read, need, body, "cache-tracker")
            .await
            .map_err(|e| e.message)?;
        let answers: Vec<Response> =
            serde_json::from_slice(&reply.body).map_err(|e| e.to_string())?;
        let mut head = None;
        let mut finalized = None;
        for a in answers {
            let slot = a.id.as_index();
            if let Ok(block) = a.into_result() {
                match slot {
                    Some(0) => head = Some(block),
                    Some(1) => finalized = Some(block),
                    _ => {}
                }
            }
        }
        let head = head.ok_or("no head")?;
        let field = |b: &Value, k: &str| b.get(k).and_then(Value::as_str).map(str::to_string);
        let number = field(&head, "number")
            .and_then(|h| quantity(&h))
            .ok_or("head number")?;
        let hash = field(&head, "hash").ok_or("head hash")?;
        let parent = field(&head, "parentHash").unwrap_or_default();
        let mut reorged = seen.get(&number).is_some_and(|h| *h != hash);
        if let Some(below) = number.checked_sub(1).and_then(|n| seen.get(&n)) {
            reorged |= *below != parent;
        }
        if reorged {
            log::info!(
                "cache: reorg on {} at block {number}; answers not final dropped",
                pool.name
            );
            metrics::cache_reorg(&pool.name);
            self.gateway.cache.reorg(&pool.name);
            seen.retain(|n, _| *n < number);
            if let Some(n) = number.checked_sub(1) {
                seen.insert(n, parent.clone());
            }
        }
        seen.insert(number, hash);
        while seen.len() > RECENT {
            seen.pop_first();
        }
        view.head.store(number, Ordering::Relaxed);
        if let Some(f) = finalized
            .as_ref()
            .and_then(|b| field(b, "number"))
            .and_then(|h| quantity(&h))
        {
            // The finalized block only moves forward.
            view.finalized.fetch_max(f, Ordering::Relaxed);
            metrics::cache_finalized(&pool.name, view.finalized.load(Ordering::Relaxed));
        }
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    #[test]
    fn lifetimes_follow_what_the_answer_depends_on() {
        use Depends::*;
        let p = |m: &str, v: Value| policy(m, Some(&v));
        assert_eq!(p("eth_chainId", json!([])), Policy::Cache(Nothing));
        assert_eq!(
            p("eth_getBlockByHash", json!(["0xab", false])),
            Policy::Cache(Nothing)
        );
        assert_eq!(
            p("eth_getBlockByNumber", json!(["0x10", false])),
            Policy::Cache(Block(16))
        );
        assert_eq!(
            p("eth_getBlockByNumber", json!(["latest", false])),
            Policy::Cache(Head)
        );
        assert_eq!(p("eth_getBalance", json!(["0xab"])), Policy::Cache(Head));
        assert_eq!(
            p("eth_getBalance", json!(["0xab", "pending"])),
            Policy::Bypass("pending")
        );
        assert_eq!(
            p("eth_getBalance", json!(["0xab", "earliest"])),
            Policy::Cache(Block(0))
        );
        assert_eq!(
            p("eth_call", json!([{}, {"blockHash": "0xab"}])),
            Policy::Cache(Nothing)
        );
        assert_eq!(
            p("eth_call", json!([{}, {"blockNumber": "0x5"}])),
            Policy::Cache(Block(5))
        );
        assert_eq!(
            p("eth_getTransactionReceipt", json!(["0xab"])),
            Policy::Cache(AnswerBlock)
        );
        assert_eq!(
            p(
                "eth_getLogs",
                json!([{"fromBlock": "0x1", "toBlock": "0x5"}])
            ),
            Policy::Cache(Block(5))
        );
        assert_eq!(
            p("eth_getLogs", json!([{"toBlock": "pending"}])),
            Policy::Bypass("pending")
        );
        assert_eq!(
            p("eth_getLogs", json!([{"blockHash": "0xab"}])),
            Policy::Cache(Nothing)
        );
        assert_eq!(
            p("eth_getBalance", json!(["0xab", "0xzz"])),
            Policy::Bypass("block_param")
        );
        for m in [
            "eth_sendRawTransaction",
            "eth_newFilter",
            "debug_traceBlockByNumber",
            "eth_estimateGas",
        ] {
            assert_eq!(p(m, json!(["0x1"])), Policy::Bypass("method"), "{m}");
        }
    }

    fn cache(max_bytes: usize) -> ResponseCache {
        let conf = crate::config::CacheConf {
            max_bytes,
            ..Default::default()
        };
        let mut views = HashMap::new();
        views.insert("p".to_string(), Arc::new(ChainView::default()));
        ResponseCache {
            conf,
            views,
            store: Mutex::new(Store {
                entries: lru::LruCache::unbounded(),
                bytes: 0,
            }),
        }
    }

    fn answer(result: Value) -> RpcReply {
        RpcReply {
            body: Bytes::from(json!({"jsonrpc": "2.0", "id": 1, "result": result}).to_string()),
            upstream: Some("el-1".into()),
            block: Some(100),
            cache: None,
        }
    }

    #[test]
    fn finality_reorgs_and_the_head_decide_what_is_served() {
        let c = cache(1 << 20);
        let view = c.views["p"].clone();
        view.head.store(100, Ordering::Relaxed);
        view.finalized.store(36, Ordering::Relaxed);
        let id = Id::Number(7.into());
        let put = |k: &str, d, r| c.put("p", k.into(), d, &answer(r), c.snapshot("p"));
        assert!(put("final", Depends::Block(30), json!("0x1")).is_ok());
        assert!(put("recent", Depends::Block(99), json!("0x2")).is_ok());
        assert!(put("head", Depends::Head, json!("0x3")).is_ok());
        // Not kept: nulls, pending transactions, blocks past the head, a reorg meanwhile.
        assert_eq!(
            put("null", Depends::Nothing, Value::Null),
            Err("null_answer")
        );
        assert_eq!(
            put("tx", Depends::AnswerBlock, json!({"blockNumber": null})),
            Err("not_in_a_block")
        );
        assert_eq!(
            put("future", Depends::Block(101), json!("0x4")),
            Err("past_the_head")
        );
        let before = c.snapshot("p");
        view.generation.fetch_add(1, Ordering::Relaxed);
        assert_eq!(
            c.put(
                "p",
                "late".into(),
                Depends::Block(98),
                &answer(json!("0x5")),
                before
            ),
            Err("reorg_during_call")
        );
        view.generation.fetch_sub(1, Ordering::Relaxed);
        let hit = c.get("p", "final", &id).unwrap();
        assert_eq!(&hit.body[..], br#"{"jsonrpc":"2.0","id":7,"result":"0x1"}"#);
        assert_eq!(hit.block, Some(100));
        assert!(c.get("p", "recent", &id).is_ok());
        view.head.store(101, Ordering::Relaxed);
        assert_eq!(c.get("p", "head", &id).unwrap_err(), "head_moved");
        c.reorg("p");
        assert_eq!(c.get("p", "recent", &id).unwrap_err(), "reorg");
        assert!(
            c.get("p", "final", &id).is_ok(),
            "final answers outlive a reorg"
        );
        assert_eq!(c.get("p", "recent", &id).unwrap_err(), "absent");
    }

    #[test]
    fn the_cache_is_bounded_in_bytes_and_drops_the_least_recently_used() {
        let c = cache(4096);
        c.views["p"].finalized.store(1000, Ordering::Relaxed);
        let big = json!("0x".to_string() + &"ab".repeat(400));
        for i in 0..20 {
            let kept = c.put(
                "p",
                format!("k{i}"),
                Depends::Nothing,
                &answer(big.clone()),
                (0, 0),
            );
            assert!(kept.is_ok());
            assert!(c.bytes() <= 4096);
        }
        assert_eq!(c.get("p", "k0", &Id::Null).unwrap_err(), "absent");
        assert!(c.get("p", "k19", &Id::Null).is_ok());
    }
}

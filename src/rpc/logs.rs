//! The `eth_getLogs` guard: a block range per plan, checked before any node is asked;
//! ranges wider than one chunk split into chunks fetched a few at a time and merged in
//! order; a chunk a node refuses as too large ("more than 10000 results", "block range
//! too wide", -32005) bisected until it is answered; a bound on the merged result.
//!
//! A range within one chunk goes to the node as the caller sent it (coalesced like any
//! read), and only a refusal as too large brings it here to be split.

use super::need::need_for;
use super::{Caller, Gateway, RpcReply};
use crate::errors::ApiError;
use crate::jsonrpc::methods::{BlockNeed, MethodClass};
use crate::jsonrpc::{ErrorObject, Id, Outgoing, Request, Response};
use crate::pools::Pool;
use crate::verify::Verified;
use futures_util::future::BoxFuture;
use futures_util::{FutureExt, StreamExt};
use serde_json::{Map, Value};
use std::sync::atomic::{AtomicU64, AtomicUsize, Ordering};

pub(super) const GET_LOGS: &str = "eth_getLogs";

/// The guard's settings, from `rpc.get_logs`.
#[derive(Clone, Debug)]
pub struct LogsSettings {
    /// Widest range (blocks) per plan, by plan rank; `anonymous` apart.
    by_rank: Vec<u64>,
    anonymous: u64,
    pub chunk_blocks: u64,
    pub parallel: usize,
    pub max_results: usize,
    pub max_node_calls: usize,
}

impl LogsSettings {
    pub fn new(c: &crate::config::LogsConf, plans: &[String]) -> Self {
        let listed: Vec<Option<u64>> = plans
            .iter()
            .map(|p| c.max_block_range.get(p).copied())
            .collect();
        let lowest = c
            .max_block_range
            .values()
            .copied()
            .min()
            .unwrap_or(u64::MAX);
        // A plan not listed has the range of the nearest plan below it that is.
        let mut by_rank = Vec::with_capacity(plans.len());
        let mut below = None;
        for own in listed {
            below = own.or(below);
            by_rank.push(below.unwrap_or(lowest));
        }
        LogsSettings {
            by_rank,
            anonymous: c
                .max_block_range
                .get(crate::config::limits::ANONYMOUS)
                .copied()
                .unwrap_or(lowest),
            chunk_blocks: c.chunk_blocks.max(1),
            parallel: c.parallel.max(1),
            max_results: c.max_results,
            max_node_calls: c.max_node_calls.max(1),
        }
    }

    /// The widest range `caller` may ask for (admins: any).
    fn max_range(&self, caller: &Caller<'_>) -> u64 {
        if caller.rank == usize::MAX {
            return u64::MAX;
        }
        if caller.plan == crate::config::limits::ANONYMOUS {
            return self.anonymous;
        }
        self.by_rank
            .get(caller.rank)
            .copied()
            .unwrap_or(self.anonymous)
    }
}

/// A filter's numbered range: `fromBlock`/`toBlock` as block numbers, tags at the pool
/// head (`earliest` 0). `Ok(None)` when the range is not the edge's to judge (a
/// `blockHash` filter, no head yet, an empty range); an end that is neither a tag nor a
/// 64-bit quantity is an error, refused before any node sees it (a quantity the guard
/// cannot read would otherwise pass it unchecked).
fn range_of(filter: Option<&Value>, head: u64) -> Result<Option<(u64, u64)>, String> {
    let Some(filter) = filter.and_then(Value::as_object) else {
        return Ok(None);
    };
    if filter.contains_key("blockHash") {
        return Ok(None);
    }
    let end = |name: &str| -> Result<Option<u64>, String> {
        match filter.get(name) {
            None | Some(Value::Null) => Ok((head > 0).then_some(head)),
            Some(Value::String(tag)) => match tag.as_str() {
                "latest" | "pending" | "safe" | "finalized" => Ok((head > 0).then_some(head)),
                "earliest" => Ok(Some(0)),
                hex => hex
                    .strip_prefix("0x")
                    .filter(|d| !d.is_empty() && d.len() <= 16)
                    .and_then(|d| u64::from_str_radix(d, 16).ok())
                    .map(Some)
                    .ok_or_else(|| format!("{name} is not a block tag or a 64-bit hex quantity")),
            },
            Some(_) => Err(format!("{name} is not a block tag or a hex quantity")),
        }
    };
    let (from, to) = (end("fromBlock")?, end("toBlock")?);
    Ok(match (from, to) {
        (Some(from), Some(to)) if from <= to => Some((from, to)),
        _ => None,
    })
}

/// Whether a node's error refuses the range as too large (as geth, Erigon, reth,
/// Besu, Nethermind and the large providers word it), so a narrower one may pass.
pub(super) fn too_large(e: &ErrorObject) -> bool {
    let m = e.message.to_ascii_lowercase();
    // -32005 is also a provider's rate limit: splitting that would only make it worse.
    if [
        "rate limit",
        "rate-limit",
        "ratelimit",
        "too many requests",
        "capacity",
    ]
    .iter()
    .any(|s| m.contains(s))
    {
        return false;
    }
    if e.code == -32005 {
        return true;
    }
    [
        "more than",
        "too many",
        "exceed",
        "too large",
        "too wide",
        "too big",
        "response size",
        "limit",
    ]
    .iter()
    .any(|s| m.contains(s))
}

/// Why a range could not be answered.
enum Failed {
    /// The edge's own refusal or failure.
    Edge(ApiError),
    /// A node's answer that narrowing will not change: it is the caller's answer.
    Node(ErrorObject),
}

impl From<ApiError> for Failed {
    fn from(e: ApiError) -> Self {
        Failed::Edge(e)
    }
}

/// What a split fetch shares: the filter, the caller's minimum block, node calls made,
/// the oldest block a part was served at.
struct Split<'a> {
    pool: &'a Pool,
    filter: &'a Map<String, Value>,
    rid: &'a str,
    floor: u64,
    calls: AtomicUsize,
    oldest: AtomicU64,
}

impl Gateway {
    /// The range guard, for `eth_getLogs` and for `eth_newFilter` (whose logs
    /// `eth_getFilterLogs` would fetch later): the filter's range, refused when it is
    /// wider than the caller's plan allows or its ends cannot be read.
    pub(super) fn logs_range(
        &self,
        pool: &Pool,
        method: &str,
        filter: Option<&Value>,
        caller: &Caller<'_>,
    ) -> Result<Option<(u64, u64)>, ApiError> {
        let head = pool.head.load(Ordering::Relaxed);
        let range = range_of(filter, head).map_err(|why| {
            ApiError::invalid_params(format!("{method}: {why}")).with_field("jsonrpc_code", -32602)
        })?;
        if let Some((from, to)) = range {
            let blocks = to - from + 1;
            let max = self.conf.logs.max_range(caller);
            if blocks > max {
                return Err(ApiError::invalid_params(format!(
                    "{method} over {blocks} blocks; plan {} allows {max} per call: ask for a narrower range",
                    caller.plan
                ))
                .with_field("max_block_range", max)
                .with_field("requested_block_range", blocks)
                .with_field("current_tier", caller.plan)
                .with_field("jsonrpc_code", -32005));
            }
        }
        Ok(range)
    }

    /// A single `eth_getLogs` call: checked against the caller's plan, then passed
    /// through, or split when its range is wider than a chunk or a node refused it.
    pub(super) async fn get_logs(
        &self,
        pool: &Pool,
        params: Option<&Value>,
        sent: &Outgoing<'_>,
        rid: &str,
        caller: &Caller<'_>,
    ) -> Result<RpcReply, ApiError> {
        let filter = params.and_then(|p| p.get(0));
        let range = self.logs_range(pool, GET_LOGS, filter, caller)?;
        // The call as the caller sent it (coalesced and cached like any read).
        let as_sent = || {
            let floor = caller.min_block;
            self.shared_read(pool, MethodClass::Read, GET_LOGS, params, sent, rid, floor)
        };
        if let (Some(f), Some(r), true) = (filter, range, self.conf.root.is_some()) {
            let body = sent.to_bytes();
            if let Some(reply) = self.complete_logs(pool, f, r, &body, rid).await {
                return reply;
            }
        }
        let (filter, (from, to)) = match (filter.and_then(Value::as_object), range) {
            (Some(f), Some(r)) => (f, r),
            _ => return as_sent().await,
        };
        let mut refused = false;
        if to - from < self.conf.logs.chunk_blocks {
            let reply = as_sent().await?;
            if from == to || !refused_as_too_large(&reply.body) {
                return Ok(reply);
            }
            refused = true;
        }
        let split = Split {
            pool,
            filter,
            rid,
            floor: caller.min_block,
            calls: AtomicUsize::new(0),
            oldest: AtomicU64::new(u64::MAX),
        };
        let id = sent.answer_id();
        let answer = match self.fetch_split(&split, from, to, refused).await {
            Ok(logs) => Response::result(id, Value::Array(logs)),
            Err(Failed::Node(e)) => Response::error(id, e),
            Err(Failed::Edge(e)) => return Err(e),
        };
        let oldest = split.oldest.load(Ordering::Relaxed);
        // Every chunk was voted on, or none was.
        let verified = self
            .quorum_for(GET_LOGS)
            .map_or(Verified::None, |q| q.least());
        Ok(RpcReply {
            body: answer.to_bytes(),
            upstream: None,
            block: (oldest != u64::MAX).then_some(oldest),
            cache: None,
            verified,
        })
    }

    /// Chunks of `from..=to`, `parallel` at a time, merged in block order; stops at the
    /// first chunk that takes the merged logs past `max_results`. `refused`: a node has
    /// just refused the whole (one chunk's) range, so it is halved at once.
    async fn fetch_split(
        &self,
        split: &Split<'_>,
        from: u64,
        to: u64,
        refused: bool,
    ) -> Result<Vec<Value>, Failed> {
        let logs_conf = &self.conf.logs;
        let chunk = logs_conf.chunk_blocks;
        let starts = (from..=to).step_by(chunk.min(usize::MAX as u64) as usize);
        let mut chunks = futures_util::stream::iter(starts.map(|start| {
            let end = start.saturating_add(chunk - 1).min(to);
            let fetch = if refused {
                self.bisect(split, start, end)
            } else {
                self.fetch_range(split, start, end)
            };
            fetch.map(move |r| (start, end, r))
        }))
        .buffered(logs_conf.parallel);
        let mut merged: Vec<Value> = Vec::new();
        let mut bytes = 0usize;
        while let Some((start, end, logs)) = chunks.next().await {
            let logs = logs?;
            bytes += logs.iter().map(approx_size).sum::<usize>();
            if merged.len() + logs.len() > logs_conf.max_results
                || bytes > self.conf.max_response_bytes
            {
                // Everything before this chunk fit: that is the range to ask for.
                let fits = (start > from).then(|| (from, start - 1));
                return Err(Failed::Edge(too_many_logs(
                    logs_conf.max_results,
                    fits,
                    end,
                )));
            }
            merged.extend(logs);
        }
        Ok(merged)
    }

    /// One range's logs; bisected while a node refuses it as too large.
    fn fetch_range<'a>(
        &'a self,
        split: &'a Split<'a>,
        from: u64,
        to: u64,
    ) -> BoxFuture<'a, Result<Vec<Value>, Failed>> {
        async move {
            if split.calls.fetch_add(1, Ordering::Relaxed) >= self.conf.logs.max_node_calls {
                return Err(Failed::Edge(ApiError::bad_gateway(
                    "upstream_unavailable",
                    format!(
                        "eth_getLogs: the nodes refused this range as too large even split into {} calls; ask for a narrower one",
                        self.conf.logs.max_node_calls
                    ),
                )));
            }
            let mut filter = split.filter.clone();
            filter.insert("fromBlock".into(), format!("{from:#x}").into());
            filter.insert("toBlock".into(), format!("{to:#x}").into());
            let call = Request::new(Id::index(1), GET_LOGS, Value::Array(vec![Value::Object(filter)]));
            let need = need_for(split.pool, BlockNeed::AtLeast(to)).at_least(split.floor);
            let body = call.to_bytes();
            let reply = match self.quorum_for(GET_LOGS) {
                Some(q) => {
                    let read = self.read_by_quorum(split.pool, MethodClass::Read, need, &body, split.rid, GET_LOGS, q, None);
                    Box::pin(read).await?
                }
                None => self.read(split.pool, MethodClass::Read, need, &body, split.rid).await?,
            };
            if let Some(block) = reply.block {
                split.oldest.fetch_min(block, Ordering::Relaxed);
            }
            let answer: Response = serde_json::from_slice(&reply.body).map_err(|_| {
                ApiError::bad_gateway("upstream_unavailable", "eth_getLogs: the node answered non-JSON-RPC")
            })?;
            match answer.into_result() {
                Ok(Value::Array(logs)) => Ok(logs),
                Ok(_) => Err(Failed::Edge(ApiError::bad_gateway(
                    "upstream_unavailable",
                    "eth_getLogs: the node answered something other than a list of logs",
                ))),
                Err(e) if from < to && too_large(&e) => self.bisect(split, from, to).await,
                Err(e) => Err(Failed::Node(e)),
            }
        }
        .boxed()
    }

    /// A range a node refused as too large: its two halves, one after the other.
    fn bisect<'a>(
        &'a self,
        split: &'a Split<'a>,
        from: u64,
        to: u64,
    ) -> BoxFuture<'a, Result<Vec<Value>, Failed>> {
        async move {
            if from >= to {
                return self.fetch_range(split, from, to).await;
            }
            let mid = from + (to - from) / 2;
            let mut logs = self.fetch_range(split, from, mid).await?;
            logs.extend(self.fetch_range(split, mid + 1, to).await?);
            Ok(logs)
        }
        .boxed()
    }
}

/// The bound on merged logs passed: the range that fits, in the words indexers already
/// parse from providers ("query returned more than N results", "Try with this block
/// range [from, to]").
fn too_many_logs(max: usize, fits: Option<(u64, u64)>, at: u64) -> ApiError {
    let mut message = format!("query returned more than {max} results");
    if let Some((from, to)) = fits {
        message.push_str(&format!(
            ". Try with this block range [{from:#x}, {to:#x}]."
        ));
    }
    let e = ApiError::new(400, "too_many_logs", message)
        .with_field("max_results", max)
        .with_field("exceeded_at_block", at)
        .with_field("jsonrpc_code", -32005);
    match fits {
        Some((from, to)) => e.with_field("suggested_range", vec![from, to]),
        None => e,
    }
}

/// Whether a passed-through answer is a node's refusal of the range as too large. An
/// error answer is small; a large body is logs and is not parsed again.
fn refused_as_too_large(body: &[u8]) -> bool {
    if body.len() > 16 * 1024 {
        return false;
    }
    serde_json::from_slice::<Response>(body)
        .ok()
        .and_then(|r| r.error_object().map(too_large))
        .unwrap_or(false)
}

/// A log's size as JSON, closely enough to bound the merged answer.
fn approx_size(log: &Value) -> usize {
    match log {
        Value::Object(m) => {
            m.iter()
                .map(|(k, v)| k.len() + approx_size(v) + 4)
                .sum::<usize>()
                + 2
        }
        Value::Array(a) => a.iter().map(approx_size).sum::<usize>() + a.len() + 2,
        Value::String(s) => s.len() + 2,
        _ => 8,
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    #[test]
    fn ranges_resolve_tags_at_the_head_and_refuse_what_cannot_be_read() {
        let r = |f: Value| range_of(Some(&json!(f)), 1000).unwrap();
        assert_eq!(r(json!({})), Some((1000, 1000)));
        assert_eq!(r(json!({"fromBlock": "0x0"})), Some((0, 1000)));
        assert_eq!(
            r(json!({"fromBlock": "earliest", "toBlock": "0x10"})),
            Some((0, 16))
        );
        assert_eq!(
            r(json!({"fromBlock": "0x10", "toBlock": "0x1f"})),
            Some((16, 31))
        );
        assert_eq!(
            r(json!({"fromBlock": null, "toBlock": "finalized"})),
            Some((1000, 1000))
        );
        // The node judges these itself.
        assert_eq!(r(json!({"blockHash": "0xab"})), None);
        assert_eq!(r(json!({"fromBlock": "0x20", "toBlock": "0x10"})), None);
        assert_eq!(range_of(Some(&json!({})), 0), Ok(None));
        assert_eq!(range_of(Some(&json!([])), 10), Ok(None));
        // What the guard cannot read never passes it.
        for bad in [
            json!({"fromBlock": "12"}),
            json!({"fromBlock": 12}),
            json!({"fromBlock": "0x0", "toBlock": "0x1ffffffffffffffff"}),
            json!({"fromBlock": "0x"}),
            json!({"toBlock": "next"}),
        ] {
            assert!(range_of(Some(&bad), 1000).is_err(), "{bad}");
        }
    }

    #[test]
    fn refusals_as_too_large_are_told_from_other_errors() {
        for (code, message) in [
            (-32005, "query returned more than 10000 results"),
            (-32602, "query returned more than 10000 results"),
            (-32000, "Log response size exceeded. You can make eth_getLogs requests with up to a 2K block range"),
            (-32000, "query exceeds max results 20000"),
            (-32000, "block range too large"),
            (-32602, "eth_getLogs is limited to a 10,000 range"),
            (-32000, "Requested range exceeds maximum range limit"),
        ] {
            assert!(too_large(&ErrorObject::new(code, message)), "{message}");
        }
        for (code, message) in [
            (-32000, "invalid block range params"),
            (-32602, "invalid argument 0: hex string without 0x prefix"),
            (-32000, "unknown block"),
            (-32005, "rate limit exceeded"),
            (-32005, "daily request count exceeded, request rate limited"),
            (429, "Too Many Requests"),
        ] {
            assert!(!too_large(&ErrorObject::new(code, message)), "{message}");
        }
    }

    #[test]
    fn plans_not_listed_take_the_range_of_the_plan_below() {
        let conf: crate::config::LogsConf = serde_json::from_value(json!({
            "max_block_range": {"anonymous": 100, "free": 500, "pro": 10000}
        }))
        .unwrap();
        let plans: Vec<String> = ["free", "basic", "pro", "business"]
            .map(String::from)
            .to_vec();
        let s = LogsSettings::new(&conf, &plans);
        let at = |rank, plan| {
            s.max_range(&Caller {
                rank,
                plan,
                scopes: None,
                min_block: 0,
                owner: "",
                submitter: None,
                restrictions: None,
            })
        };
        assert_eq!(at(0, "anonymous"), 100);
        assert_eq!(at(0, "free"), 500);
        assert_eq!(at(1, "basic"), 500);
        assert_eq!(at(2, "pro"), 10000);
        assert_eq!(at(3, "business"), 10000);
        assert_eq!(at(usize::MAX, "admin"), u64::MAX);
    }
}

//! The read path: one call or a batch, classified, checked against per-family plans and
//! sent to hosts in order of what they can serve, with fallback on node-state errors.

use super::cache::{self, CacheNote};
use super::call::{error_from, id_of, jsonrpc_error, CallView, ReadCall};
use super::logs::GET_LOGS;

/// A logs filter: its range meets the `eth_getLogs` guard when it is made.
const NEW_FILTER: &str = "eth_newFilter";
use super::need::{need_for, need_of, order_by_need, Need};
use super::{older, Budget, Caller, Gateway, RpcReply};
use crate::errors::ApiError;
use crate::jsonrpc::methods::{block_need, classify_on, MethodClass};
use crate::jsonrpc::{ErrorObject, Id, Request, Response};
use crate::observe::metrics;
use crate::pools::{Host, Pool};
use crate::upstream::UpstreamError;
use bytes::Bytes;
use futures_util::stream::{FuturesUnordered, StreamExt};
use serde_json::Value;
use std::sync::Arc;
use std::time::{Duration, Instant};

/// Node-state errors: the host cannot answer *now*; another host may.
pub(super) const NODE_STATE_PATTERNS: &[&str] = &[
    "header not found",
    "missing trie node",
    "unknown block",
    "block not found",
    "not synced",
    "syncing",
    // Solana: a lagging or unhealthy node, or one not yet at the slot asked for.
    "node is unhealthy",
    "node is behind",
    "minimum context slot has not been reached",
];

/// The answer to a batch's call that travelled alone, noting who served it and at what
/// block.
fn answer_alone(
    answered: Result<RpcReply, ApiError>,
    id: &Id,
    upstream: &mut Option<String>,
    block: &mut Option<u64>,
) -> Response {
    match answered {
        Ok(r) => {
            *upstream = upstream.take().or(r.upstream);
            *block = older(*block, r.block);
            serde_json::from_slice(&r.body)
                .unwrap_or_else(|_| jsonrpc_error(id, -32603, "upstream answered non-JSON"))
        }
        Err(e) => error_from(id, &e),
    }
}

/// A read's place in the response cache: the key its answer is kept under, the policy
/// (none when the cache is off or the pool pinned), and how the lookup went.
struct CacheSlot {
    key: String,
    policy: Option<cache::Policy>,
    note: Option<CacheNote>,
}

/// How a batch's plain reads met the cache, for the batch's one `X-Cache-Status`.
#[derive(Default)]
struct CacheTally {
    hit: usize,
    miss: usize,
    bypass: usize,
}

impl CacheTally {
    fn count(&mut self, note: Option<CacheNote>) {
        match note.map(|n| n.status) {
            Some("hit") => self.hit += 1,
            Some("miss") => self.miss += 1,
            Some(_) => self.bypass += 1,
            None => {}
        }
    }

    /// `hit` when every read came from the cache, `partial` when some did, `miss` when
    /// none did and one was looked for, `bypass` when none could be; reason `batch`.
    fn note(&self) -> Option<CacheNote> {
        let status = match (self.hit, self.miss, self.bypass) {
            (0, 0, 0) => return None,
            (_, 0, 0) => "hit",
            (0, 0, _) => "bypass",
            (0, _, _) => "miss",
            _ => "partial",
        };
        Some(CacheNote {
            status,
            reason: "batch",
        })
    }
}

impl Gateway {
    pub async fn handle(
        &self,
        pool: &Pool,
        body: &[u8],
        request_id: &str,
        caller: &Caller<'_>,
    ) -> Result<RpcReply, ApiError> {
        // Most bodies are one read call: classified from a borrowed view, no `Value` tree
        // (a dozen allocations per request). Anything else takes the general path below.
        if let Some(view) = CallView::of(body) {
            let class = classify_on(&pool.methods, view.method);
            if class.is_plain_read() {
                let call = ReadCall {
                    method: view.method,
                    class,
                    params: view.params.as_ref(),
                };
                return self.single_read(pool, call, body, request_id, caller).await;
            }
        }
        let parsed: Value = serde_json::from_slice(body).map_err(|e| {
            ApiError::invalid_params(format!("body is not JSON: {e}"))
                .with_field("jsonrpc_code", -32700)
        })?;
        // The general path is boxed: its futures (a batch's, a write's broadcast) would
        // otherwise size the fast path's, and with it every connection's task.
        match parsed {
            Value::Array(calls) => Box::pin(self.batch(pool, calls, request_id, caller)).await,
            call @ Value::Object(_) => {
                let call: Request = serde_json::from_value(call).map_err(|_| {
                    ApiError::invalid_params("each JSON-RPC call needs a string 'method'")
                })?;
                Box::pin(self.single(pool, &call, body, request_id, caller)).await
            }
            _ => Err(ApiError::invalid_params(
                "a JSON-RPC request is an object or a non-empty array",
            )),
        }
    }

    pub(super) async fn single(
        &self,
        pool: &Pool,
        call: &Request,
        raw: &[u8],
        rid: &str,
        caller: &Caller<'_>,
    ) -> Result<RpcReply, ApiError> {
        let method = call.method.as_str();
        let class = classify_on(&pool.methods, method);
        if let Some(refused) = caller.scope_refusal(class, method) {
            return Err(refused);
        }
        match class {
            MethodClass::Unknown => Err(method_unknown(method)),
            MethodClass::Subscription => Err(needs_websocket(method)),
            MethodClass::Write => {
                let (answer, host) = self.write(pool, call, rid).await?;
                Ok(RpcReply {
                    body: answer.to_bytes(),
                    upstream: host,
                    block: None,
                    cache: None,
                })
            }
            MethodClass::Filter => {
                if method == NEW_FILTER {
                    let filter = call.params.as_ref().and_then(|p| p.get(0));
                    self.logs_range(pool, method, filter, caller)?;
                }
                let (answer, host) = self.filter(pool, call, rid, caller.owner).await?;
                Ok(RpcReply {
                    body: answer.to_bytes(),
                    upstream: host,
                    block: None,
                    cache: None,
                })
            }
            class => {
                let read = ReadCall {
                    method,
                    class,
                    params: call.params.as_ref(),
                };
                self.single_read(pool, read, raw, rid, caller).await
            }
        }
    }

    /// One read call (reads, trace, debug, txpool): the plan check, then the body as it
    /// came to a host that can answer it.
    pub(super) async fn single_read(
        &self,
        pool: &Pool,
        call: ReadCall<'_>,
        raw: &[u8],
        rid: &str,
        caller: &Caller<'_>,
    ) -> Result<RpcReply, ApiError> {
        let ReadCall {
            method,
            class,
            params,
        } = call;
        if let Some(refused) = caller.scope_refusal(class, method) {
            return Err(refused);
        }
        if let Some(required) = self.conf.plan_refusal(class, caller) {
            return Err(self.tier_refusal(method, required, caller));
        }
        if method == GET_LOGS {
            return Box::pin(self.get_logs(pool, params, raw, rid, caller)).await;
        }
        self.shared_read(pool, class, method, params, raw, rid, caller.min_block)
            .await
    }

    /// A read as the caller sent it, to a host that has the block it needs (and at least
    /// `floor`, the caller's minimum block). A kept answer (`rpc.cache`) or an identical
    /// read already in flight (`rpc.coalesce`) answers it instead.
    #[allow(clippy::too_many_arguments)]
    pub(super) async fn shared_read(
        &self,
        pool: &Pool,
        class: MethodClass,
        method: &str,
        params: Option<&Value>,
        raw: &[u8],
        rid: &str,
        floor: u64,
    ) -> Result<RpcReply, ApiError> {
        let slot = match self.cache_lookup(pool, method, params, floor, || id_of(raw)) {
            Ok(hit) => return Ok(hit),
            Err(slot) => slot,
        };
        let before = self.cache.snapshot(&pool.name);
        let need = need_for(pool, block_need(method, params)).at_least(floor);
        let read = self.read(pool, class, need, Bytes::copy_from_slice(raw), rid);
        // Boxed: the attempts' state (hedge timer, attempts in flight) would otherwise
        // size every connection's task, idle ones included.
        let mut reply = if self.conf.coalesce {
            Box::pin(self.in_flight.run(slot.key.clone(), || id_of(raw), read)).await?
        } else {
            Box::pin(read).await?
        };
        reply.cache = self.cache_keep(pool, slot, &reply, before);
        Ok(reply)
    }

    /// Whether reads of `pool` meet the response cache (on, and the pool not pinned).
    fn caches(&self, pool: &Pool) -> bool {
        self.cache.enabled() && !pool.is_pinned()
    }

    /// The kept answer to `method(params)` under the caller's id (`id` is only read on a
    /// hit); otherwise the slot its node answer may be kept in, noting why it was not
    /// there. Counted in `chainedge_cache_lookups_total` either way.
    fn cache_lookup(
        &self,
        pool: &Pool,
        method: &str,
        params: Option<&Value>,
        floor: u64,
        id: impl FnOnce() -> Id,
    ) -> Result<RpcReply, CacheSlot> {
        // Same pool, method and params: the same call, whatever its id. Params print
        // with sorted keys (no `preserve_order`), so equal params make equal keys.
        let text = params.map(Value::to_string).unwrap_or_default();
        let key = format!("{}\n{floor}\n{method}\n{text}", pool.name);
        let policy = match () {
            _ if !self.caches(pool) => None,
            _ if floor > 0 => Some(cache::Policy::Bypass("min_block")),
            _ => Some(cache::policy(method, params)),
        };
        let note = match policy {
            Some(cache::Policy::Bypass(reason)) => Some(CacheNote {
                status: "bypass",
                reason,
            }),
            Some(cache::Policy::Cache(_)) => match self.cache.get(&pool.name, &key, id) {
                Ok(hit) => {
                    metrics::cache_lookup(&pool.name, "hit", "fresh");
                    return Ok(hit);
                }
                Err(reason) => Some(CacheNote {
                    status: "miss",
                    reason,
                }),
            },
            None => None,
        };
        if let Some(n) = note {
            metrics::cache_lookup(&pool.name, n.status, n.reason);
        }
        Err(CacheSlot { key, policy, note })
    }

    /// Keep a node's answer in its slot where the policy allows; the slot's note, with
    /// why it was not kept when it was not. `before` is the cache's snapshot from
    /// before the call.
    fn cache_keep(
        &self,
        pool: &Pool,
        slot: CacheSlot,
        reply: &RpcReply,
        before: (u64, u64, u64),
    ) -> Option<CacheNote> {
        let CacheSlot {
            key,
            policy,
            mut note,
        } = slot;
        if let Some(cache::Policy::Cache(depends)) = policy {
            if let (Err(why), Some(n)) = (
                self.cache.put(&pool.name, key, depends, reply, before),
                note.as_mut(),
            ) {
                n.reason = why;
            }
        }
        note
    }

    pub(super) async fn batch(
        &self,
        pool: &Pool,
        calls: Vec<Value>,
        rid: &str,
        caller: &Caller<'_>,
    ) -> Result<RpcReply, ApiError> {
        if calls.is_empty() {
            return Err(ApiError::invalid_params("empty batch"));
        }
        super::check_batch_size(calls.len(), self.conf.max_batch)?;
        // Slots keep the caller's order; reads go upstream together, the rest one by one.
        let mut out: Vec<Option<Response>> = vec![None; calls.len()];
        let mut reads: Vec<(usize, Request, Option<CacheSlot>)> = Vec::new();
        let mut tally = CacheTally::default();
        let mut upstream = None;
        let mut block = None;
        // JSON-RPC 2.0: a call without an `id` member is a notification and gets no reply
        // (an element that is not a call at all is answered).
        let mut notification = vec![false; calls.len()];
        for (i, call) in calls.into_iter().enumerate() {
            let call = match Request::from_value(call) {
                Ok(c) => c,
                Err(answer) => {
                    out[i] = Some(answer);
                    continue;
                }
            };
            notification[i] = call.is_notification();
            let id = call.answer_id();
            let method = call.method.as_str();
            let class = classify_on(&pool.methods, method);
            // Each refusal is the one a single call gets, as this element's answer.
            if let Some(refused) = caller.scope_refusal(class, method) {
                out[i] = Some(error_from(&id, &refused));
                continue;
            }
            if let Some(required) = self.conf.plan_refusal(class, caller) {
                out[i] = Some(error_from(
                    &id,
                    &self.tier_refusal(method, required, caller),
                ));
                continue;
            }
            match class {
                MethodClass::Unknown => out[i] = Some(error_from(&id, &method_unknown(method))),
                MethodClass::Subscription => {
                    out[i] = Some(error_from(&id, &needs_websocket(method)))
                }
                MethodClass::Write | MethodClass::Filter => {
                    let filter = call.params.as_ref().and_then(|p| p.get(0));
                    let answered = if class == MethodClass::Write {
                        self.write(pool, &call, rid).await
                    } else if let Err(e) = (method == NEW_FILTER)
                        .then(|| self.logs_range(pool, method, filter, caller))
                        .transpose()
                    {
                        Err(e)
                    } else {
                        self.filter(pool, &call, rid, caller.owner).await
                    };
                    out[i] = Some(match answered {
                        Ok((answer, host)) => {
                            upstream = upstream.or(host);
                            answer
                        }
                        Err(e) => error_from(&id, &e),
                    });
                }
                // eth_getLogs travels alone: its range is checked, and split when wide.
                MethodClass::Read if method == GET_LOGS => {
                    let raw = call.to_bytes();
                    let answered =
                        Box::pin(self.get_logs(pool, call.params.as_ref(), &raw, rid, caller))
                            .await;
                    tally.count(answered.as_ref().ok().and_then(|r| r.cache));
                    out[i] = Some(answer_alone(answered, &id, &mut upstream, &mut block));
                }
                MethodClass::Read if !self.caches(pool) => reads.push((i, call, None)),
                // A plain read is looked up on its own; the misses go upstream together.
                MethodClass::Read => {
                    let params = call.params.as_ref();
                    match self.cache_lookup(pool, method, params, caller.min_block, || id.clone()) {
                        Ok(hit) => {
                            tally.count(hit.cache);
                            out[i] = Some(answer_alone(Ok(hit), &id, &mut upstream, &mut block));
                        }
                        Err(slot) => {
                            tally.count(slot.note);
                            reads.push((i, call, Some(slot)));
                        }
                    }
                }
                // Capability-bound calls travel alone so each finds a host that can serve it.
                class => {
                    let need = need_for(pool, block_need(method, call.params.as_ref()))
                        .at_least(caller.min_block);
                    let answered = self.read(pool, class, need, call.to_bytes(), rid).await;
                    out[i] = Some(answer_alone(answered, &id, &mut upstream, &mut block));
                }
            }
        }
        if !reads.is_empty() {
            let sub: Vec<&Request> = reads.iter().map(|(_, c, _)| c).collect();
            let body = Bytes::from(serde_json::to_vec(&sub).unwrap_or_default());
            let need = need_of(pool, reads.iter().map(|(_, c, _)| c)).at_least(caller.min_block);
            let before = self.cache.snapshot(&pool.name);
            let mut failed = None;
            // Who answered the misses and at what block, for the answers kept from them.
            let (mut served_by, mut served_at) = (None, None);
            let mut answered: Vec<Response> =
                match self.read(pool, MethodClass::Read, need, body, rid).await {
                    Ok(r) => {
                        (served_by, served_at) = (r.upstream.clone(), r.block);
                        upstream = upstream.or(r.upstream);
                        block = older(block, r.block);
                        node_batch_answers(&r.body)
                    }
                    Err(e) => {
                        failed = Some(e);
                        Vec::new()
                    }
                };
            // Match answers to calls by id: upstreams may reorder batch responses.
            for (at, call, slot) in reads {
                let id = call.answer_id();
                let found = answered
                    .iter()
                    .position(|a| a.id == id)
                    .map(|at| answered.swap_remove(at));
                let keep = slot.filter(|s| matches!(s.policy, Some(cache::Policy::Cache(_))));
                if let (Some(answer), Some(slot)) = (&found, keep) {
                    // Kept as if it had come alone: the same checks, the same key.
                    let alone = RpcReply {
                        body: Bytes::from(serde_json::to_vec(answer).unwrap_or_default()),
                        upstream: served_by.clone(),
                        block: served_at,
                        cache: None,
                    };
                    self.cache_keep(pool, slot, &alone, before);
                }
                out[at] = Some(found.unwrap_or_else(|| match &failed {
                    Some(e) => error_from(&id, e),
                    None => jsonrpc_error(&id, -32603, "no upstream answered this call"),
                }));
            }
        }
        let items: Vec<Response> = out
            .into_iter()
            .zip(notification)
            .filter_map(|(v, n)| if n { None } else { v })
            .collect();
        Ok(RpcReply {
            body: Bytes::from(serde_json::to_vec(&items).unwrap_or_default()),
            upstream,
            block,
            cache: tally.note(),
        })
    }

    /// One read made by a product handler (not a client's JSON-RPC): routed by its block
    /// need like any read; its `result`, and the host that gave it. A node's JSON-RPC
    /// error is the node's failure here, 502 `upstream_unavailable`.
    pub async fn read_call(
        &self,
        pool: &Pool,
        method: &str,
        params: Value,
        rid: &str,
    ) -> Result<(Value, Option<String>), ApiError> {
        self.read_call_with(pool, None, method, params, rid).await
    }

    /// `read_call` on the pool's hosts with `capability` only (`txpool`, `trace`, …).
    pub async fn read_call_with(
        &self,
        pool: &Pool,
        capability: Option<&str>,
        method: &str,
        params: Value,
        rid: &str,
    ) -> Result<(Value, Option<String>), ApiError> {
        let (answer, host) = self
            .node_call(pool, capability, method, params, rid)
            .await?;
        match answer {
            Ok(result) => Ok((result, host)),
            Err(e) => Err(ApiError::new(
                502,
                "upstream_unavailable",
                format!("{method}: the node answered: {}", e.message),
            )),
        }
    }

    /// One call made by a product handler, routed like `read_call_with`, with the node's
    /// own answer: its `result` or its JSON-RPC error (for handlers to whom a node's
    /// refusal means something, as an unknown transaction does to a tracer). Only a
    /// failure to get any answer is an `ApiError`.
    pub async fn node_call(
        &self,
        pool: &Pool,
        capability: Option<&str>,
        method: &str,
        params: Value,
        rid: &str,
    ) -> Result<(Result<Value, ErrorObject>, Option<String>), ApiError> {
        let need = need_for(pool, block_need(method, Some(&params)));
        let budget = self.conf.budget(classify_on(&pool.methods, method));
        let call = Request::new(Id::index(1), method, params);
        let hosts = self.hosts_for(pool, capability, need)?;
        let r = self
            .try_hosts(
                &hosts,
                call.to_bytes(),
                rid,
                NodeState::NextHostElseAnswer,
                budget,
            )
            .await?;
        let answer: Response = serde_json::from_slice(&r.body).map_err(|_| {
            ApiError::new(
                502,
                "upstream_unavailable",
                "the node answered non-JSON-RPC",
            )
        })?;
        Ok((answer.into_result(), r.upstream))
    }

    /// Several reads made by a product handler or the indexer, as one JSON-RPC batch to
    /// one host (so they see one view of the chain): each call's `result` in order, and
    /// the host. Any call's JSON-RPC error fails the whole batch (502).
    pub async fn read_batch(
        &self,
        pool: &Pool,
        calls: &[(&str, Value)],
        rid: &str,
    ) -> Result<(Vec<Value>, Option<String>), ApiError> {
        let (each, host) = self.read_batch_each(pool, calls, rid).await?;
        let results = each
            .into_iter()
            .zip(calls)
            .map(|(r, (method, _))| {
                r.map_err(|m| {
                    ApiError::new(
                        502,
                        "upstream_unavailable",
                        format!("{method}: the node answered: {m}"),
                    )
                })
            })
            .collect::<Result<Vec<_>, _>>()?;
        Ok((results, host))
    }

    /// As `read_batch`, with each call's own outcome: its `result`, or the message of
    /// its JSON-RPC error (a revert is one call's answer, not the batch's failure).
    pub async fn read_batch_each(
        &self,
        pool: &Pool,
        calls: &[(&str, Value)],
        rid: &str,
    ) -> Result<(Vec<Result<Value, String>>, Option<String>), ApiError> {
        let body: Vec<Request> = calls
            .iter()
            .enumerate()
            .map(|(i, (method, params))| Request::new(Id::index(i), method, params.clone()))
            .collect();
        let body = Bytes::from(serde_json::to_vec(&body).unwrap_or_default());
        let r = self
            .read(pool, MethodClass::Read, Need::default(), body, rid)
            .await?;
        let bad = |why: &str| ApiError::new(502, "upstream_unavailable", why.to_string());
        let answers: Vec<Response> = serde_json::from_slice(&r.body)
            .map_err(|_| bad("the node's batch answer is not a JSON-RPC array"))?;
        let mut results = vec![None; calls.len()];
        for a in answers {
            let Some(slot) = a.id.as_index().and_then(|i| results.get_mut(i)) else {
                continue;
            };
            *slot = Some(a.into_result().map_err(|e| e.message));
        }
        let results = results
            .into_iter()
            .collect::<Option<Vec<_>>>()
            .ok_or_else(|| bad("the node's batch answer misses calls"))?;
        Ok((results, r.upstream))
    }

    /// Send a read to hosts in order until one gives an answer worth returning. Hosts
    /// that have the state the call needs go first; the others stay as fallbacks.
    pub(super) async fn read(
        &self,
        pool: &Pool,
        class: MethodClass,
        need: Need,
        body: Bytes,
        rid: &str,
    ) -> Result<RpcReply, ApiError> {
        let hosts = self.hosts_reaching(pool, class.capability(), need).await?;
        // A node's own error after every host said it cannot answer now (an unknown
        // block, a method it lacks) is the answer: the caller gets its code and message.
        let budget = self.conf.budget(class);
        self.try_hosts(&hosts, body, rid, NodeState::NextHostElseAnswer, budget)
            .await
    }

    /// A per-family plan refusal, with where to upgrade.
    fn tier_refusal(&self, method: &str, required: &str, caller: &Caller<'_>) -> ApiError {
        ApiError::new(
            403,
            "tier_insufficient",
            format!("{method} needs plan {required} or above"),
        )
        .with_field("current_tier", caller.plan)
        .with_field("required_tier", required)
        .with_field("upgrade_url", self.conf.upgrade_url.as_str())
        .with_header("X-Required-Tier", required.to_string())
    }

    /// The pool's hosts that can take a call, in the order to try them.
    /// `hosts_for`, keeping only hosts at or past the need's floor; when none has reached
    /// it yet, waits for one (heads move with each health round) up to
    /// `rpc.min_block_wait_ms`, then 503 `block_not_reached`.
    async fn hosts_reaching(
        &self,
        pool: &Pool,
        capability: Option<&str>,
        need: Need,
    ) -> Result<Vec<Arc<Host>>, ApiError> {
        if need.floor == 0 {
            return self.hosts_for(pool, capability, need);
        }
        let until = tokio::time::Instant::now() + self.conf.min_block_wait;
        loop {
            let mut hosts = self.hosts_for(pool, capability, need)?;
            let highest = hosts.iter().map(|h| h.health.head()).max().unwrap_or(0);
            hosts.retain(|h| h.health.head() >= need.floor);
            if !hosts.is_empty() {
                return Ok(hosts);
            }
            if tokio::time::Instant::now() >= until {
                return Err(ApiError::new(
                    503,
                    "block_not_reached",
                    format!(
                        "no host of pool {} has reached block {} yet (highest: {highest})",
                        pool.name, need.floor
                    ),
                )
                .with_field("min_block", need.floor)
                .with_field("highest_block", highest)
                .with_field("retry_after_sec", 1)
                .with_header("Retry-After", "1".to_string()));
            }
            tokio::time::sleep(std::time::Duration::from_millis(25)).await;
        }
    }

    fn hosts_for(
        &self,
        pool: &Pool,
        capability: Option<&str>,
        need: Need,
    ) -> Result<Vec<Arc<Host>>, ApiError> {
        let hosts = order_by_need(pool.candidates(capability), need);
        if hosts.is_empty() {
            return Err(ApiError::new(
                503,
                "no_upstream",
                format!(
                    "no host in pool {} can serve this call{}",
                    pool.name,
                    capability
                        .map(|c| format!(" (needs {c})"))
                        .unwrap_or_default()
                ),
            ));
        }
        Ok(hosts)
    }

    /// Hosts in order, within the retry budget and the call's deadline, until one gives
    /// an answer worth returning; `on_node_state` says what a "cannot answer now" error
    /// (lagging, or a missing method or namespace) does.
    ///
    /// Each attempt has its own share of the budget, so a host that never answers costs
    /// one attempt, not the call. A hedged call also gives the next host the same call
    /// when the first has been silent past its recent answer times: the first answer
    /// worth returning wins and the other attempt is dropped (its connection closed).
    /// After a failure the next host is tried at once.
    pub(super) async fn try_hosts(
        &self,
        hosts: &[Arc<Host>],
        body: Bytes,
        rid: &str,
        on_node_state: NodeState,
        budget: Budget,
    ) -> Result<RpcReply, ApiError> {
        let deadline = Instant::now() + budget.total;
        let node_state = on_node_state != NodeState::Answer;
        let mut queue = hosts.iter().take(self.conf.max_attempts);
        let launch = |host: &Arc<Host>| {
            let (host, body) = (host.clone(), body.clone());
            async move {
                let began = Instant::now();
                let share = deadline
                    .saturating_duration_since(began)
                    .min(budget.attempt);
                let outcome = self.attempt(&host, body, rid, share).await;
                (host, began, outcome)
            }
        };
        let mut running = FuturesUnordered::new();
        // Hosts of the attempts in flight, with when each began (to tell who lost a race).
        let mut in_flight: Vec<(Arc<Host>, Instant)> = Vec::with_capacity(2);
        let mut hedge_at = None;
        let mut hedged = false;
        let mut first_began = None;
        let mut last_error = String::new();
        let mut last_answer = None;
        // Each turn of the loop begins with the next host's attempt: the first, a hedge,
        // or the one after a failure.
        loop {
            let now = Instant::now();
            match queue.next() {
                Some(host) if now < deadline => {
                    if let (Some(delay), false) = (budget.hedge, hedged) {
                        hedge_at = Some(now + delay.for_host(host));
                    }
                    first_began.get_or_insert(now);
                    in_flight.push((host.clone(), now));
                    running.push(launch(host));
                }
                _ if running.is_empty() => break,
                _ => {}
            }
            let hedge_timer = async {
                match hedge_at {
                    Some(at) => tokio::time::sleep_until(at.into()).await,
                    None => std::future::pending().await,
                }
            };
            let (host, began, outcome) = tokio::select! {
                biased;
                Some(done) = running.next() => done,
                _ = hedge_timer => {
                    // The first host is still silent: the next one gets the call too.
                    (hedge_at, hedged) = (None, true);
                    continue;
                }
            };
            in_flight.retain(|(h, _)| !Arc::ptr_eq(h, &host));
            match outcome {
                Ok(body) => {
                    host.latency.record(began.elapsed());
                    if let Some(reason) = node_state.then(|| node_state_error(&body)).flatten() {
                        host.record_failure(&reason);
                        metrics::upstream_failure(&host.pool, &host.id, "node_state");
                        last_error = format!("{}: {reason}", host.id);
                        if on_node_state == NodeState::NextHostElseAnswer {
                            last_answer = Some(RpcReply::from_host(body, &host));
                        }
                        continue;
                    }
                    host.record_success();
                    // Attempts begun before this one and still silent lost a race.
                    for (loser, since) in &in_flight {
                        if *since < began {
                            loser.record_race_lost(since.elapsed());
                        }
                    }
                    if hedged {
                        let first = first_began == Some(began);
                        metrics::hedged_read(&host.pool, if first { "first" } else { "other" });
                    }
                    return Ok(RpcReply::from_host(body, &host));
                }
                Err(e) => last_error = format!("{}: {e}", host.id),
            }
        }
        if let Some(pool) = hedged.then(|| hosts.first()).flatten().map(|h| &h.pool) {
            metrics::hedged_read(pool, "none");
        }
        if let Some(answer) = last_answer {
            return Ok(answer);
        }
        Err(ApiError::bad_gateway(
            "upstream_unavailable",
            format!("every attempt failed; last: {last_error}"),
        ))
    }

    /// One call to one host; transport errors, timeouts and 5xx/429 count as failures.
    pub(super) async fn attempt(
        &self,
        host: &Arc<Host>,
        body: Bytes,
        rid: &str,
        timeout: Duration,
    ) -> Result<Bytes, String> {
        metrics::upstream_attempt(&host.pool, &host.id);
        let res = self
            .client
            .send(
                host.post_json(body, rid),
                timeout,
                self.conf.max_response_bytes,
            )
            .await;
        let reason = match res {
            Ok(r) if r.status < 400 || (r.status < 500 && r.status != 429) => return Ok(r.body),
            Ok(r) => format!("HTTP {}", r.status),
            Err(UpstreamError::Timeout) => "timeout".to_string(),
            Err(e) => e.to_string(),
        };
        host.record_failure(&reason);
        metrics::upstream_failure(
            &host.pool,
            &host.id,
            if reason == "timeout" {
                "timeout"
            } else {
                "transport"
            },
        );
        Err(reason)
    }
}

fn method_unknown(method: &str) -> ApiError {
    ApiError::new(
        403,
        "method_unknown",
        format!("method '{method}' is not part of the product"),
    )
}

fn needs_websocket(method: &str) -> ApiError {
    ApiError::invalid_params(format!("{method} needs a WebSocket connection to /rpc/eth"))
        .with_field("jsonrpc_code", -32600)
}

/// What a node's "cannot answer now" error does to a call.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(super) enum NodeState {
    /// It is the answer (calls whose every error is the caller's to see).
    Answer,
    /// The next host is tried; when none is left the last such answer is the answer
    /// (a product handler that reads the node's own error).
    NextHostElseAnswer,
}

/// A single response whose error says the node cannot answer now (not the call's fault).
pub(super) fn node_state_error(body: &[u8]) -> Option<String> {
    // Nearly every answer is a result: skip parsing those.
    if !body.windows(7).any(|w| w == b"\"error\"") {
        return None;
    }
    let answer: Response = serde_json::from_slice(body).ok()?;
    let err = answer.error_object()?;
    let (code, msg) = (err.code, err.message.as_str());
    let lower = msg.to_ascii_lowercase();
    if code == -32601 || NODE_STATE_PATTERNS.iter().any(|p| lower.contains(p)) {
        Some(format!("{code} {msg}"))
    } else {
        None
    }
}

/// A node's answer to a batch, each element read on its own (one malformed element does
/// not cost the others their answers).
fn node_batch_answers(body: &[u8]) -> Vec<Response> {
    match serde_json::from_slice::<Vec<Value>>(body) {
        Ok(items) => items
            .into_iter()
            .filter_map(|v| serde_json::from_value(v).ok())
            .collect(),
        Err(_) => Vec::new(),
    }
}

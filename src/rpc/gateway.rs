//! The read path: one call or a batch, classified, checked against per-family plans and
//! sent to hosts in order of what they can serve, with fallback on node-state errors.

use super::cache::{self, CacheNote, CacheStatus};
use super::call::ReadCall;
use super::checked::Judged;
use super::logs::GET_LOGS;

/// A logs filter: its range meets the `eth_getLogs` guard when it is made.
pub(super) const NEW_FILTER: &str = "eth_newFilter";
use super::attempts::{method_unknown, needs_websocket, NodeState};
use super::need::{need_for, Need};
use super::{Caller, Gateway, RpcReply};
use crate::errors::ApiError;
use crate::jsonrpc::methods::{block_need, classify_on, MethodClass};
use crate::jsonrpc::{ErrorObject, Id, Outgoing, Request, Response};
use crate::observe::metrics;
use crate::pools::Pool;
use crate::verify::Verified;
use serde_json::Value;

/// A read's place in the response cache: the key its answer is kept under, the policy
/// (none when the cache is off or the pool pinned), and how the lookup went.
pub(super) struct CacheSlot {
    pub(super) key: String,
    pub(super) policy: Option<cache::Policy>,
    pub(super) note: Option<CacheNote>,
}

/// A read's key in the cache and among calls in flight: same pool, floor, method and
/// params make the same call, whatever its id. Params print with sorted keys (no
/// `preserve_order`), so equal params make equal keys. Written into one buffer: this
/// runs for every read.
fn call_key(pool: &str, floor: u64, method: &str, params: Option<&Value>) -> String {
    use std::fmt::Write;
    let mut key = String::with_capacity(pool.len() + method.len() + 160);
    let _ = write!(key, "{pool}\n{floor}\n{method}\n");
    debug_assert_eq!(key.len(), params_at(pool, floor, method));
    let Some(params) = params else { return key };
    let mut bytes = key.into_bytes();
    // A `Value` written to a `Vec` cannot fail, and what serde_json writes is UTF-8.
    let _ = serde_json::to_writer(&mut bytes, params);
    String::from_utf8(bytes).unwrap_or_else(|e| String::from_utf8_lossy(e.as_bytes()).into_owned())
}

/// Where the params' JSON starts in `call_key(pool, floor, method, _)` (counted, not
/// searched for: a method's name may hold any byte). Not kept in the slot: the read's
/// future, held across the node call, would grow by it.
fn params_at(pool: &str, floor: u64, method: &str) -> usize {
    pool.len() + itoa::Buffer::new().format(floor).len() + method.len() + 3
}

impl Gateway {
    pub(super) async fn single(
        &self,
        pool: &Pool,
        call: &Request,
        rid: &str,
        caller: &Caller<'_>,
    ) -> Result<RpcReply, ApiError> {
        let method = call.method.as_str();
        let class = classify_on(&pool.methods, method);
        if let Some(refused) = caller.refusal(class, method, call.params.as_ref()) {
            return Err(refused);
        }
        match class {
            MethodClass::Unknown => Err(method_unknown(method)),
            MethodClass::Subscription => Err(needs_websocket(method)),
            MethodClass::Write => {
                let (answer, host) = self.write(pool, call, rid, caller.submitter).await?;
                Ok(RpcReply {
                    body: answer.to_bytes(),
                    upstream: host,
                    block: None,
                    cache: None,
                    verified: Verified::None,
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
                    verified: Verified::None,
                })
            }
            class => {
                let read = ReadCall {
                    method,
                    class,
                    params: call.params.as_ref(),
                };
                let sent = Outgoing::new(call.id.as_ref(), method, call.params.as_ref());
                self.single_read(pool, read, &sent, rid, caller).await
            }
        }
    }

    /// One read call (reads, trace, debug, txpool), once its caller has checked the key's
    /// scope and restrictions (`Caller::refusal`): the plan check, then `sent` (the call
    /// as the edge read it) to a host that can answer it.
    pub(super) async fn single_read(
        &self,
        pool: &Pool,
        call: ReadCall<'_>,
        sent: &Outgoing<'_>,
        rid: &str,
        caller: &Caller<'_>,
    ) -> Result<RpcReply, ApiError> {
        let ReadCall {
            method,
            class,
            params,
        } = call;
        if let Some(required) = self.conf.plan_refusal(class, caller) {
            return Err(self.tier_refusal(method, required, caller));
        }
        if method == GET_LOGS {
            return Box::pin(self.get_logs(pool, params, sent, rid, caller)).await;
        }
        self.shared_read(pool, class, method, params, sent, rid, caller.min_block)
            .await
    }

    /// A read, written from the edge's parse (`sent`; only when a node is asked: a kept
    /// answer costs no serialization), to a host that has the block it needs (and at
    /// least `floor`, the caller's minimum block). A kept answer (`rpc.cache`) or an
    /// identical read already in flight (`rpc.coalesce`) answers it instead.
    #[allow(clippy::too_many_arguments)]
    pub(super) async fn shared_read(
        &self,
        pool: &Pool,
        class: MethodClass,
        method: &str,
        params: Option<&Value>,
        sent: &Outgoing<'_>,
        rid: &str,
        floor: u64,
    ) -> Result<RpcReply, ApiError> {
        let slot = match self.cache_lookup(pool, method, params, floor, || sent.answer_id()) {
            Ok(hit) => return Ok(hit),
            Err(slot) => slot,
        };
        let before = self.cache.snapshot(&pool.name);
        let need = need_for(pool, block_need(method, params)).at_least(floor);
        // One box for the attempts and the coalescing around them: inline, the attempts'
        // state (hedge timer, attempts in flight) would size every connection's task, idle
        // ones included, and be copied at each level it passes.
        let (coalesce, key) = (self.conf.coalesce, &slot.key);
        let mut reply = Box::pin(async move {
            let judged = Judged::of(self.conf.verify, method, params);
            // The key holds these very params as serde_json writes them (the same
            // `Value`): the node's copy of the call reuses them.
            let same_params = match (sent.params(), params) {
                (Some(a), Some(b)) => std::ptr::eq(a, b),
                (a, b) => a.is_none() && b.is_none(),
            };
            let body = match same_params {
                true => {
                    let at = params_at(&pool.name, floor, method);
                    sent.to_vec_with_params(&key.as_bytes()[at..])
                }
                false => serde_json::to_vec(sent).unwrap_or_default(),
            };
            let read = async {
                if self.conf.root.is_some() {
                    let id = sent.answer_id();
                    // Boxed: its state (6 KiB) would double this box's, which every read
                    // writes whole, proven or not.
                    let proven = self.read_proven(pool, class, method, params, &body, id, rid);
                    if let Some(reply) = Box::pin(proven).await {
                        return reply;
                    }
                }
                match self.quorum_for(method) {
                    Some(q) => {
                        self.read_by_quorum(pool, class, need, &body, rid, method, q, judged)
                            .await
                    }
                    None => {
                        self.read_judged(pool, class, need, &body, rid, judged)
                            .await
                    }
                }
            };
            let read = std::pin::pin!(read);
            if coalesce {
                self.in_flight.run(key, || sent.answer_id(), read).await
            } else {
                read.await
            }
        })
        .await?;
        reply.cache = self.cache_keep(pool, slot, &reply, before);
        Ok(reply)
    }

    /// Whether reads of `pool` meet the response cache (on, and the pool not pinned).
    pub(super) fn caches(&self, pool: &Pool) -> bool {
        self.cache.enabled() && !pool.is_pinned()
    }

    /// The kept answer to `method(params)` under the caller's id (`id` is only read on a
    /// hit); otherwise the slot its node answer may be kept in, noting why it was not
    /// there. Counted in `chainedge_cache_lookups_total` either way.
    pub(super) fn cache_lookup(
        &self,
        pool: &Pool,
        method: &str,
        params: Option<&Value>,
        floor: u64,
        id: impl FnOnce() -> Id,
    ) -> Result<RpcReply, CacheSlot> {
        let key = call_key(&pool.name, floor, method, params);
        let policy = match () {
            _ if !self.caches(pool) => None,
            _ if floor > 0 => Some(cache::Policy::Bypass("min_block")),
            _ => Some(cache::policy(method, params)),
        };
        let note = match policy {
            Some(cache::Policy::Bypass(reason)) => Some(CacheNote {
                status: CacheStatus::Bypass,
                reason,
            }),
            Some(cache::Policy::Cache(_)) => match self.cache.get(&pool.name, &key, id) {
                Ok(hit) => {
                    metrics::cache_lookup(&pool.name, "hit", "fresh");
                    return Ok(hit);
                }
                Err(reason) => Some(CacheNote {
                    status: CacheStatus::Miss,
                    reason,
                }),
            },
            None => None,
        };
        if let Some(n) = note {
            metrics::cache_lookup(&pool.name, n.status.as_str(), n.reason);
        }
        Err(CacheSlot { key, policy, note })
    }

    /// Keep a node's answer in its slot where the policy allows; the slot's note, with
    /// why it was not kept when it was not. `before` is the cache's snapshot from
    /// before the call.
    pub(super) fn cache_keep(
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
                &call.to_bytes(),
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

    /// The calls as one JSON-RPC batch (ids are the calls' indexes) to one host, and its
    /// answer as the node wrote it: for a reader that decodes it into its own types
    /// (the indexer) rather than through `Value`s.
    pub async fn read_batch_raw(
        &self,
        pool: &Pool,
        calls: &[(&str, Value)],
        rid: &str,
    ) -> Result<RpcReply, ApiError> {
        let body: Vec<Request> = calls
            .iter()
            .enumerate()
            .map(|(i, (method, params))| Request::new(Id::index(i), method, params.clone()))
            .collect();
        let body = serde_json::to_vec(&body).unwrap_or_default();
        self.read(pool, MethodClass::Read, Need::default(), &body, rid)
            .await
    }

    /// As `read_batch`, with each call's own outcome: its `result`, or the message of
    /// its JSON-RPC error (a revert is one call's answer, not the batch's failure).
    pub async fn read_batch_each(
        &self,
        pool: &Pool,
        calls: &[(&str, Value)],
        rid: &str,
    ) -> Result<(Vec<Result<Value, String>>, Option<String>), ApiError> {
        let r = self.read_batch_raw(pool, calls, rid).await?;
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
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn call_key_is_pool_floor_method_and_compact_params() {
        let params = serde_json::json!([{"to": "0xab", "data": "0x01"}, "latest"]);
        assert_eq!(
            call_key("eth", 7, "eth_call", Some(&params)),
            format!("eth\n7\neth_call\n{params}")
        );
        assert_eq!(
            call_key("eth", 0, "eth_chainId", None),
            "eth\n0\neth_chainId\n"
        );
        // The params are the key's tail, as the node's copy of the call writes them.
        for (pool, floor, method) in [("eth", 7, "eth_call"), ("p", 0, "m\n\"x"), ("", 123456, "")]
        {
            let key = call_key(pool, floor, method, Some(&params));
            assert_eq!(&key[params_at(pool, floor, method)..], params.to_string());
        }
        // Equal params in another key order make the same key.
        let a: Value = serde_json::from_str(r#"[{"data":"0x01","to":"0xab"}]"#).unwrap();
        let b: Value = serde_json::from_str(r#"[{"to":"0xab","data":"0x01"}]"#).unwrap();
        assert_eq!(
            call_key("p", 0, "m", Some(&a)),
            call_key("p", 0, "m", Some(&b))
        );
    }
}

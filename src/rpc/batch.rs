//! A JSON-RPC batch: each element meets the same policy a single call does (scopes,
//! plans, the method table, the `eth_getLogs` guard); plain reads are looked up in the
//! cache one by one and the misses go upstream together as one node batch; writes,
//! filters, `eth_getLogs` and capability-bound calls travel alone. Answers keep the
//! caller's order; notifications get none.

use super::attempts::{method_unknown, needs_websocket};
use super::cache::{self, CacheNote, CacheStatus};
use super::call::{error_from, jsonrpc_error};
use super::checked::Judged;
use super::gateway::{CacheSlot, NEW_FILTER};
use super::logs::GET_LOGS;
use super::need::{need_for, need_of};
use super::{older, Caller, Gateway, RpcReply};
use crate::errors::ApiError;
use crate::jsonrpc::methods::{block_need, classify_on, MethodClass};
use crate::jsonrpc::{Id, Outgoing, Request, Response};
use crate::pools::Pool;
use crate::verify::Verified;
use bytes::Bytes;
use serde_json::Value;

/// A batch being answered: each element's answer in the caller's order, the plain reads
/// that go upstream together, and what the reply says of who served it.
struct Answering {
    out: Vec<Option<Response>>,
    reads: Vec<(usize, Request, Option<CacheSlot>)>,
    tally: CacheTally,
    upstream: Option<String>,
    block: Option<u64>,
    /// The weakest check of the answers from nodes or the cache; `None` before any.
    verified: Option<Verified>,
}

impl Answering {
    /// The answer of a call that travelled alone, noting who served it and at what block.
    fn alone(&mut self, at: usize, id: &Id, answered: Result<RpcReply, ApiError>) {
        self.out[at] = Some(match answered {
            Ok(r) => {
                self.upstream = self.upstream.take().or(r.upstream);
                self.block = older(self.block, r.block);
                self.verified = Some(self.verified.map_or(r.verified, |v| v.weakest(r.verified)));
                serde_json::from_slice(&r.body)
                    .unwrap_or_else(|_| jsonrpc_error(id, -32603, "upstream answered non-JSON"))
            }
            Err(e) => error_from(id, &e),
        });
    }
}

impl Gateway {
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
        let mut batch = Answering {
            out: vec![None; calls.len()],
            reads: Vec::new(),
            tally: CacheTally::default(),
            upstream: None,
            block: None,
            verified: None,
        };
        // JSON-RPC 2.0: a call without an `id` member is a notification and gets no reply
        // (an element that is not a call at all is answered).
        let mut notification = vec![false; calls.len()];
        for (at, call) in calls.into_iter().enumerate() {
            match Request::from_value(call) {
                Ok(call) => {
                    notification[at] = call.is_notification();
                    self.batch_element(pool, &mut batch, at, call, rid, caller)
                        .await;
                }
                Err(answer) => batch.out[at] = Some(answer),
            }
        }
        if !batch.reads.is_empty() {
            self.batch_reads(pool, &mut batch, rid, caller).await;
        }
        let items: Vec<Response> = batch
            .out
            .into_iter()
            .zip(notification)
            .filter_map(|(v, n)| if n { None } else { v })
            .collect();
        Ok(RpcReply {
            body: Bytes::from(serde_json::to_vec(&items).unwrap_or_default()),
            upstream: batch.upstream,
            block: batch.block,
            cache: batch.tally.note(),
            verified: batch.verified.unwrap_or_default(),
        })
    }

    /// One element: refused as a single call would be, answered alone, or queued with
    /// the plain reads.
    async fn batch_element(
        &self,
        pool: &Pool,
        batch: &mut Answering,
        at: usize,
        call: Request,
        rid: &str,
        caller: &Caller<'_>,
    ) {
        let id = call.answer_id();
        let method = call.method.as_str();
        let class = classify_on(&pool.methods, method);
        // Each refusal is the one a single call gets, as this element's answer.
        if let Some(refused) = caller.refusal(class, method, call.params.as_ref()) {
            batch.out[at] = Some(error_from(&id, &refused));
            return;
        }
        if let Some(required) = self.conf.plan_refusal(class, caller) {
            let refused = self.tier_refusal(method, required, caller);
            batch.out[at] = Some(error_from(&id, &refused));
            return;
        }
        match class {
            MethodClass::Unknown => batch.out[at] = Some(error_from(&id, &method_unknown(method))),
            MethodClass::Subscription => {
                batch.out[at] = Some(error_from(&id, &needs_websocket(method)))
            }
            MethodClass::Write | MethodClass::Filter => {
                let filter = call.params.as_ref().and_then(|p| p.get(0));
                let answered = if class == MethodClass::Write {
                    self.write(pool, &call, rid, caller.submitter).await
                } else if let Err(e) = (method == NEW_FILTER)
                    .then(|| self.logs_range(pool, method, filter, caller))
                    .transpose()
                {
                    Err(e)
                } else {
                    self.filter(pool, &call, rid, caller.owner).await
                };
                batch.out[at] = Some(match answered {
                    Ok((answer, host)) => {
                        batch.upstream = batch.upstream.take().or(host);
                        answer
                    }
                    Err(e) => error_from(&id, &e),
                });
            }
            // eth_getLogs travels alone: its range is checked, and split when wide. So
            // does a read whose answer is checked: judged on the host that gave it, and
            // asked again of another host when disproved.
            MethodClass::Read
                if method == GET_LOGS
                    || self.quorum_for(method).is_some()
                    || Judged::of(self.conf.verify, method, call.params.as_ref()).is_some() =>
            {
                let answered = Box::pin(self.read_alone(pool, &call, rid, caller)).await;
                batch
                    .tally
                    .count(answered.as_ref().ok().and_then(|r| r.cache));
                batch.alone(at, &id, answered);
            }
            MethodClass::Read if !self.caches(pool) => batch.reads.push((at, call, None)),
            // A plain read is looked up on its own; the misses go upstream together.
            MethodClass::Read => {
                let params = call.params.as_ref();
                match self.cache_lookup(pool, method, params, caller.min_block, || id.clone()) {
                    Ok(hit) => {
                        batch.tally.count(hit.cache);
                        batch.alone(at, &id, Ok(hit));
                    }
                    Err(slot) => {
                        batch.tally.count(slot.note);
                        batch.reads.push((at, call, Some(slot)));
                    }
                }
            }
            // Capability-bound calls travel alone so each finds a host that can serve it.
            class => {
                let need = need_for(pool, block_need(method, call.params.as_ref()))
                    .at_least(caller.min_block);
                let answered = self.read(pool, class, need, &call.to_bytes(), rid).await;
                batch.alone(at, &id, answered);
            }
        }
    }

    /// A read that travels alone, as a single call is read: `eth_getLogs` through its
    /// guard, the rest through the cache, coalescing and judged attempts.
    async fn read_alone(
        &self,
        pool: &Pool,
        call: &Request,
        rid: &str,
        caller: &Caller<'_>,
    ) -> Result<RpcReply, ApiError> {
        let (method, params) = (call.method.as_str(), call.params.as_ref());
        let sent = Outgoing::new(call.id.as_ref(), method, params);
        if method == GET_LOGS {
            return self.get_logs(pool, params, &sent, rid, caller).await;
        }
        self.shared_read(
            pool,
            MethodClass::Read,
            method,
            params,
            &sent,
            rid,
            caller.min_block,
        )
        .await
    }

    /// The plain reads the cache did not answer, upstream as one node batch; each answer
    /// matched to its call by id (nodes may reorder them) and kept in the cache as if it
    /// had come alone.
    async fn batch_reads(
        &self,
        pool: &Pool,
        batch: &mut Answering,
        rid: &str,
        caller: &Caller<'_>,
    ) {
        let reads = std::mem::take(&mut batch.reads);
        let sub: Vec<&Request> = reads.iter().map(|(_, c, _)| c).collect();
        let body = Bytes::from(serde_json::to_vec(&sub).unwrap_or_default());
        let need = need_of(pool, reads.iter().map(|(_, c, _)| c)).at_least(caller.min_block);
        let before = self.cache.snapshot(&pool.name);
        let mut failed = None;
        // Who answered the misses and at what block, for the answers kept from them.
        let (mut served_by, mut served_at) = (None, None);
        let mut answered: Vec<Response> =
            match self.read(pool, MethodClass::Read, need, &body, rid).await {
                Ok(r) => {
                    batch.verified = Some(Verified::None);
                    (served_by, served_at) = (r.upstream.clone(), r.block);
                    batch.upstream = batch.upstream.take().or(r.upstream);
                    batch.block = older(batch.block, r.block);
                    node_batch_answers(&r.body)
                }
                Err(e) => {
                    failed = Some(e);
                    Vec::new()
                }
            };
        for (at, call, slot) in reads {
            let id = call.answer_id();
            let found = answered
                .iter()
                .position(|a| a.id == id)
                .map(|at| answered.swap_remove(at));
            let keep = slot.filter(|s| matches!(s.policy, Some(cache::Policy::Cache(_))));
            if let (Some(answer), Some(slot)) = (&found, keep) {
                let alone = RpcReply {
                    body: Bytes::from(serde_json::to_vec(answer).unwrap_or_default()),
                    upstream: served_by.clone(),
                    block: served_at,
                    cache: None,
                    verified: Verified::None,
                };
                self.cache_keep(pool, slot, &alone, before);
            }
            batch.out[at] = Some(found.unwrap_or_else(|| match &failed {
                Some(e) => error_from(&id, e),
                None => jsonrpc_error(&id, -32603, "no upstream answered this call"),
            }));
        }
    }
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
            Some(CacheStatus::Hit) => self.hit += 1,
            Some(CacheStatus::Miss) => self.miss += 1,
            Some(_) => self.bypass += 1,
            None => {}
        }
    }

    /// `hit` when every read came from the cache, `partial` when some did, `miss` when
    /// none did and one was looked for, `bypass` when none could be; reason `batch`.
    fn note(&self) -> Option<CacheNote> {
        let status = match (self.hit, self.miss, self.bypass) {
            (0, 0, 0) => return None,
            (_, 0, 0) => CacheStatus::Hit,
            (0, 0, _) => CacheStatus::Bypass,
            (0, _, _) => CacheStatus::Miss,
            _ => CacheStatus::Partial,
        };
        Some(CacheNote {
            status,
            reason: "batch",
        })
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

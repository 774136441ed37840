//! The JSON-RPC gateway behind `/rpc/eth` (and `/rpc/base`): parse, classify, route with
//! fallback, dispatch writes by policy.

pub mod methods;

use crate::config::{RpcConf, WritePolicy};
use crate::errors::ApiError;
use crate::observe::metrics;
use crate::pools::{Host, Pool};
use crate::upstream::{UpstreamClient, UpstreamError};
use bytes::Bytes;
use methods::{block_need, classify, BlockNeed, MethodClass};
use serde_json::{json, Value};
use sha3::{Digest, Keccak256};
use std::sync::Arc;
use std::time::{Duration, Instant};

pub struct Gateway {
    pub client: Arc<UpstreamClient>,
    pub conf: RpcSettings,
    /// Which host created each filter: filter state lives on that node only.
    pub filters: FilterHosts,
}

/// Filter id → (pool, host id), bounded and aging out like the nodes' own filters.
pub struct FilterHosts {
    map: std::sync::Mutex<lru::LruCache<String, (String, String, Instant)>>,
}

/// Nodes drop filters not polled for about 5 minutes; so do we.
const FILTER_TTL: Duration = Duration::from_secs(300);

impl Default for FilterHosts {
    fn default() -> Self {
        FilterHosts {
            map: std::sync::Mutex::new(lru::LruCache::new(
                std::num::NonZeroUsize::new(100_000).expect("non-zero"),
            )),
        }
    }
}

impl FilterHosts {
    fn remember(&self, id: &str, pool: &str, host: &str) {
        if let Ok(mut m) = self.map.lock() {
            m.put(
                id.to_string(),
                (pool.to_string(), host.to_string(), Instant::now()),
            );
        }
    }

    /// The host of a filter, refreshing its age (a poll keeps a filter alive).
    fn host(&self, id: &str, pool: &str) -> Option<String> {
        let mut m = self.map.lock().ok()?;
        let entry = m.get_mut(id)?;
        if entry.0 != pool || entry.2.elapsed() > FILTER_TTL {
            return None;
        }
        entry.2 = Instant::now();
        Some(entry.1.clone())
    }
}

#[derive(Clone)]
pub struct RpcSettings {
    pub max_batch: usize,
    pub max_response_bytes: usize,
    pub timeout: Duration,
    pub max_attempts: usize,
    pub write_policy: WritePolicy,
    /// (family, rank, plan name) for `trace`, `debug`, `txpool`.
    pub method_plans: Vec<(&'static str, usize, String)>,
    pub upgrade_url: String,
}

impl RpcSettings {
    pub fn new(c: &RpcConf, plans: &[String], upgrade_url: &str) -> Self {
        let method_plans = ["trace", "debug", "txpool"]
            .into_iter()
            .filter_map(|f| {
                let plan = c.method_plans.get(f)?;
                let rank = plans.iter().position(|p| p == plan)?;
                Some((f, rank, plan.clone()))
            })
            .collect();
        RpcSettings {
            max_batch: c.max_batch,
            max_response_bytes: c.max_response_bytes,
            timeout: Duration::from_millis(c.timeout_ms),
            max_attempts: c.max_attempts,
            write_policy: c.write_policy,
            method_plans,
            upgrade_url: upgrade_url.to_string(),
        }
    }

    /// The plan a method class needs, when the caller's rank is below it.
    fn plan_refusal(&self, class: MethodClass, caller: &Caller) -> Option<&str> {
        let family = class.capability()?;
        self.method_plans
            .iter()
            .find(|(f, rank, _)| *f == family && caller.rank < *rank)
            .map(|(_, _, plan)| plan.as_str())
    }
}

/// Who is calling, for per-method plans.
pub struct Caller<'a> {
    pub rank: usize,
    pub plan: &'a str,
}

/// The gateway's answer: a JSON body, and which host served it (for the access log).
pub struct RpcReply {
    pub body: Bytes,
    pub upstream: Option<String>,
}

/// Node-state errors: the host cannot answer *now*; another host may.
const NODE_STATE_PATTERNS: &[&str] = &[
    "header not found",
    "missing trie node",
    "unknown block",
    "block not found",
    "not synced",
    "syncing",
];

/// What a read (or a batch of reads) needs of a host: a minimum head, and whether
/// archive hosts should go first.
#[derive(Debug, Clone, Copy, PartialEq, Default)]
pub struct Need {
    pub min_head: u64,
    pub archive: bool,
}

/// Blocks behind the head beyond which full nodes have pruned state (geth's default).
const ARCHIVE_DEPTH: u64 = 128;

/// A single call as the fast path reads it: `method` borrowed from the body (a string
/// with escapes fails here and takes the general path), `params` parsed, the rest
/// (`jsonrpc`, `id`) skipped. A repeated field also fails here, so the general path keeps
/// its meaning for such bodies.
#[derive(serde::Deserialize)]
pub struct CallView<'a> {
    pub method: &'a str,
    #[serde(default)]
    pub params: Option<Value>,
}

impl<'a> CallView<'a> {
    /// The body's one call, when it is a JSON object the view can read. The whole body
    /// must be UTF-8: the fields the view skips are not checked as they are skipped, and
    /// the general path refuses a body with bad UTF-8 anywhere (fuzz: jsonrpc).
    pub fn of(body: &'a [u8]) -> Option<Self> {
        let first = body.iter().find(|b| !b.is_ascii_whitespace())?;
        if *first != b'{' {
            return None;
        }
        serde_json::from_str(std::str::from_utf8(body).ok()?).ok()
    }
}

/// A read call's method, its class and its params.
struct ReadCall<'a> {
    method: &'a str,
    class: MethodClass,
    params: Option<&'a Value>,
}

/// One call's block need against the pool's head.
fn need_for(pool: &Pool, block: BlockNeed) -> Need {
    need_from(
        pool.head.load(std::sync::atomic::Ordering::Relaxed),
        block,
        Need::default(),
    )
}

/// Combine the calls' block needs against the pool head of the last health round.
fn need_of<'a>(pool: &Pool, calls: impl IntoIterator<Item = &'a Value>) -> Need {
    need_at(pool.head.load(std::sync::atomic::Ordering::Relaxed), calls)
}

/// Combine the calls' block needs against a pool head.
pub fn need_at<'a>(head: u64, calls: impl IntoIterator<Item = &'a Value>) -> Need {
    calls.into_iter().fold(Need::default(), |need, call| {
        let method = call.get("method").and_then(Value::as_str).unwrap_or("");
        need_from(head, block_need(method, call.get("params")), need)
    })
}

/// `need` widened by one call's block need.
fn need_from(head: u64, block: BlockNeed, mut need: Need) -> Need {
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
fn order_by_need(hosts: Vec<Arc<Host>>, need: Need) -> Vec<Arc<Host>> {
    if need == Need::default() {
        return hosts;
    }
    let rank = |h: &Arc<Host>| {
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

/// An upstream's way of saying "I already have this transaction".
const ALREADY_KNOWN_PATTERNS: &[&str] = &["already known", "already imported", "known transaction"];

fn jsonrpc_error(id: &Value, code: i64, message: &str) -> Value {
    json!({"jsonrpc": "2.0", "id": id, "error": {"code": code, "message": message}})
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
            let class = classify(view.method);
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
        match parsed {
            Value::Array(calls) => self.batch(pool, calls, request_id, caller).await,
            call @ Value::Object(_) => self.single(pool, call, body, request_id, caller).await,
            _ => Err(ApiError::invalid_params(
                "a JSON-RPC request is an object or a non-empty array",
            )),
        }
    }

    async fn single(
        &self,
        pool: &Pool,
        call: Value,
        raw: &[u8],
        rid: &str,
        caller: &Caller<'_>,
    ) -> Result<RpcReply, ApiError> {
        let method = method_of(&call)?;
        let class = classify(method);
        match class {
            MethodClass::Unknown => Err(ApiError::new(
                403,
                "method_unknown",
                format!("method '{method}' is not part of the product"),
            )),
            MethodClass::Subscription => Err(ApiError::invalid_params(format!(
                "{method} needs a WebSocket connection to /rpc/eth"
            ))),
            MethodClass::Write => {
                let (v, host) = self.write(pool, &call, rid).await?;
                Ok(RpcReply {
                    body: Bytes::from(serde_json::to_vec(&v).unwrap_or_default()),
                    upstream: host,
                })
            }
            MethodClass::Filter => {
                let (v, host) = self.filter(pool, &call, rid).await?;
                Ok(RpcReply {
                    body: Bytes::from(serde_json::to_vec(&v).unwrap_or_default()),
                    upstream: host,
                })
            }
            class => {
                let read = ReadCall {
                    method,
                    class,
                    params: call.get("params"),
                };
                self.single_read(pool, read, raw, rid, caller).await
            }
        }
    }

    /// One read call (reads, trace, debug, txpool): the plan check, then the body as it
    /// came to a host that can answer it.
    async fn single_read(
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
        if let Some(required) = self.conf.plan_refusal(class, caller) {
            return Err(ApiError::new(
                403,
                "tier_insufficient",
                format!("{method} needs plan {required} or above"),
            )
            .with_field("current_tier", caller.plan)
            .with_field("required_tier", required)
            .with_field("upgrade_url", self.conf.upgrade_url.as_str())
            .with_header("X-Required-Tier", required.to_string()));
        }
        let need = need_for(pool, block_need(method, params));
        self.read(
            pool,
            class.capability(),
            need,
            Bytes::copy_from_slice(raw),
            rid,
        )
        .await
    }

    async fn batch(
        &self,
        pool: &Pool,
        calls: Vec<Value>,
        rid: &str,
        caller: &Caller<'_>,
    ) -> Result<RpcReply, ApiError> {
        if calls.is_empty() {
            return Err(ApiError::invalid_params("empty batch"));
        }
        if calls.len() > self.conf.max_batch {
            return Err(ApiError::invalid_params(format!(
                "batch of {} calls exceeds the limit of {}",
                calls.len(),
                self.conf.max_batch
            )));
        }
        // Slots keep the caller's order; reads go upstream together, the rest one by one.
        let mut out: Vec<Option<Value>> = vec![None; calls.len()];
        let mut reads: Vec<(usize, Value)> = Vec::new();
        let mut upstream = None;
        // JSON-RPC 2.0: a call without an `id` member is a notification and gets no reply.
        let notification: Vec<bool> = calls.iter().map(|c| c.get("id").is_none()).collect();
        for (i, call) in calls.into_iter().enumerate() {
            let id = call.get("id").cloned().unwrap_or(Value::Null);
            let method = match method_of(&call) {
                Ok(m) => m.to_string(),
                Err(e) => {
                    out[i] = Some(jsonrpc_error(&id, -32600, &e.message));
                    continue;
                }
            };
            let class = classify(&method);
            if let Some(required) = self.conf.plan_refusal(class, caller) {
                out[i] = Some(jsonrpc_error(
                    &id,
                    -32001,
                    &format!("tier_insufficient: {method} needs plan {required} or above"),
                ));
                continue;
            }
            match class {
                MethodClass::Unknown => {
                    out[i] = Some(jsonrpc_error(
                        &id,
                        -32601,
                        &format!("method_unknown: '{method}' is not part of the product"),
                    ))
                }
                MethodClass::Subscription => {
                    out[i] = Some(jsonrpc_error(
                        &id,
                        -32600,
                        &format!("{method} needs a WebSocket connection"),
                    ))
                }
                MethodClass::Write => match self.write(pool, &call, rid).await {
                    Ok((v, h)) => {
                        out[i] = Some(v);
                        upstream = upstream.or(h);
                    }
                    Err(e) => out[i] = Some(jsonrpc_error(&id, -32603, &e.message)),
                },
                MethodClass::Read => reads.push((i, call)),
                MethodClass::Filter => match self.filter(pool, &call, rid).await {
                    Ok((v, h)) => {
                        out[i] = Some(v);
                        upstream = upstream.or(h);
                    }
                    Err(e) => out[i] = Some(jsonrpc_error(&id, -32603, &e.message)),
                },
                // Capability-bound calls travel alone so each finds a host that can serve it.
                class => {
                    let body = Bytes::from(serde_json::to_vec(&call).unwrap_or_default());
                    let need = need_of(pool, [&call]);
                    out[i] = Some(
                        match self.read(pool, class.capability(), need, body, rid).await {
                            Ok(r) => {
                                upstream = upstream.or(r.upstream);
                                serde_json::from_slice(&r.body).unwrap_or_else(|_| {
                                    jsonrpc_error(&id, -32603, "upstream answered non-JSON")
                                })
                            }
                            Err(e) => jsonrpc_error(&id, -32603, &e.message),
                        },
                    );
                }
            }
        }
        if !reads.is_empty() {
            let sub: Vec<&Value> = reads.iter().map(|(_, c)| c).collect();
            let body = Bytes::from(serde_json::to_vec(&sub).unwrap_or_default());
            let need = need_of(pool, reads.iter().map(|(_, c)| c));
            let answered: Vec<Value> = match self.read(pool, None, need, body, rid).await {
                Ok(r) => {
                    upstream = upstream.or(r.upstream);
                    match serde_json::from_slice::<Value>(&r.body) {
                        Ok(Value::Array(items)) => items,
                        _ => Vec::new(),
                    }
                }
                Err(_) => Vec::new(),
            };
            // Match answers to calls by id: upstreams may reorder batch responses.
            for (slot, call) in &reads {
                let id = call.get("id").cloned().unwrap_or(Value::Null);
                let found = answered.iter().find(|a| a.get("id") == Some(&id)).cloned();
                out[*slot] = Some(found.unwrap_or_else(|| {
                    jsonrpc_error(&id, -32603, "no upstream answered this call")
                }));
            }
        }
        let items: Vec<Value> = out
            .into_iter()
            .zip(notification)
            .filter_map(|(v, n)| if n { None } else { v })
            .collect();
        Ok(RpcReply {
            body: Bytes::from(serde_json::to_vec(&items).unwrap_or_default()),
            upstream,
        })
    }

    /// Send a read to hosts in order until one gives an answer worth returning. Hosts
    /// that have the state the call needs go first; the others stay as fallbacks.
    async fn read(
        &self,
        pool: &Pool,
        capability: Option<&str>,
        need: Need,
        body: Bytes,
        rid: &str,
    ) -> Result<RpcReply, ApiError> {
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
        self.try_hosts(&hosts, body, rid, true).await
    }

    /// Hosts in order, within the retry budget and the overall deadline, until one gives
    /// an answer worth returning. With `node_state`, a "cannot answer now" error (lagging
    /// or missing namespace) also moves on to the next host.
    async fn try_hosts(
        &self,
        hosts: &[Arc<Host>],
        body: Bytes,
        rid: &str,
        node_state: bool,
    ) -> Result<RpcReply, ApiError> {
        let deadline = Instant::now() + self.conf.timeout;
        let mut last_error = String::new();
        for host in hosts.iter().take(self.conf.max_attempts) {
            let left = deadline.saturating_duration_since(Instant::now());
            if left.is_zero() {
                break;
            }
            match self.attempt(host, body.clone(), rid, left).await {
                Ok(body) => {
                    if let Some(reason) = node_state.then(|| node_state_error(&body)).flatten() {
                        host.record_failure(&reason);
                        metrics::upstream_failure(&host.pool, &host.id, "node_state");
                        last_error = format!("{}: {reason}", host.id);
                        continue;
                    }
                    host.record_success();
                    return Ok(RpcReply {
                        body,
                        upstream: Some(host.id.clone()),
                    });
                }
                Err(e) => last_error = format!("{}: {e}", host.id),
            }
        }
        Err(ApiError::bad_gateway(
            "upstream_unavailable",
            format!("every attempt failed; last: {last_error}"),
        ))
    }

    /// One call to one host; transport errors, timeouts and 5xx/429 count as failures.
    async fn attempt(
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

    /// Dispatch `eth_sendRawTransaction`. Each host receives the write at most once.
    pub async fn write(
        &self,
        pool: &Pool,
        call: &Value,
        rid: &str,
    ) -> Result<(Value, Option<String>), ApiError> {
        let id = call.get("id").cloned().unwrap_or(Value::Null);
        let raw = call
            .get("params")
            .and_then(|p| p.get(0))
            .and_then(Value::as_str)
            .ok_or_else(|| {
                ApiError::invalid_params("eth_sendRawTransaction takes one 0x-hex string")
            })?;
        let tx_hash = tx_hash(raw)
            .ok_or_else(|| ApiError::invalid_params("raw transaction is not 0x-prefixed hex"))?;
        let hosts = pool.candidates(None);
        if hosts.is_empty() {
            return Err(ApiError::new(
                503,
                "no_upstream",
                format!("pool {} has no hosts", pool.name),
            ));
        }
        let body = Bytes::from(serde_json::to_vec(call).unwrap_or_default());
        let answers: Vec<(String, Result<Bytes, String>)> = match self.conf.write_policy {
            WritePolicy::Broadcast => {
                let mut tasks = Vec::new();
                for host in hosts {
                    let (client, body, rid, conf) = (
                        self.client.clone(),
                        body.clone(),
                        rid.to_string(),
                        self.conf.clone(),
                    );
                    tasks.push(tokio::spawn(async move {
                        metrics::upstream_attempt(&host.pool, &host.id);
                        let r = client
                            .send(
                                host.post_json(body, &rid),
                                conf.timeout,
                                conf.max_response_bytes,
                            )
                            .await;
                        let r = match r {
                            Ok(r) if r.status < 500 => Ok(r.body),
                            Ok(r) => Err(format!("HTTP {}", r.status)),
                            Err(e) => Err(e.to_string()),
                        };
                        if let Err(e) = &r {
                            host.record_failure(e);
                            metrics::upstream_failure(&host.pool, &host.id, "transport");
                        }
                        (host.id.clone(), r)
                    }));
                }
                let mut out = Vec::new();
                for t in tasks {
                    if let Ok(a) = t.await {
                        out.push(a);
                    }
                }
                out
            }
            WritePolicy::FirstAccepting => {
                let mut out = Vec::new();
                for host in hosts.iter().take(self.conf.max_attempts) {
                    let r = self
                        .attempt(host, body.clone(), rid, self.conf.timeout)
                        .await;
                    let accepted = r
                        .as_ref()
                        .is_ok_and(|b| write_outcome(b) != WriteOutcome::Rejected);
                    out.push((host.id.clone(), r));
                    if accepted {
                        break;
                    }
                }
                out
            }
        };
        // Prefer an acceptance; an "already known" counts as one (the resend is idempotent).
        let mut first_rejection: Option<(Value, String)> = None;
        for (host, answer) in &answers {
            if let Ok(b) = answer {
                match write_outcome(b) {
                    WriteOutcome::Accepted | WriteOutcome::AlreadyKnown => {
                        return Ok((
                            json!({"jsonrpc": "2.0", "id": id, "result": tx_hash}),
                            Some(host.clone()),
                        ));
                    }
                    WriteOutcome::Rejected => {
                        if first_rejection.is_none() {
                            if let Ok(v) = serde_json::from_slice::<Value>(b) {
                                first_rejection = Some((v, host.clone()));
                            }
                        }
                    }
                }
            }
        }
        // A resend after the transaction was mined meets "nonce too low": if the chain
        // already has this very transaction, the resend succeeded.
        let nonce_too_low = first_rejection.as_ref().is_some_and(|(v, _)| {
            v.pointer("/error/message")
                .and_then(Value::as_str)
                .is_some_and(|m| m.to_ascii_lowercase().contains("nonce too low"))
        });
        if nonce_too_low && self.known_on_chain(pool, &tx_hash, rid).await {
            return Ok((json!({"jsonrpc": "2.0", "id": id, "result": tx_hash}), None));
        }
        match first_rejection {
            Some((mut v, host)) => {
                v["id"] = id;
                Ok((v, Some(host)))
            }
            None => Err(ApiError::bad_gateway(
                "upstream_unavailable",
                "no host answered the transaction",
            )),
        }
    }
}

/// Methods a block builder accepts (Flashbots-style bundle API).
pub const BUILDER_METHODS: &[&str] = &[
    "eth_sendBundle",
    "eth_callBundle",
    "eth_cancelBundle",
    "mev_sendBundle",
    "mev_simBundle",
    "eth_sendRawTransaction",
];
/// Methods a private transaction relay accepts.
pub const PRIVATE_TX_METHODS: &[&str] = &[
    "eth_sendRawTransaction",
    "eth_sendPrivateTransaction",
    "eth_sendPrivateRawTransaction",
    "eth_cancelPrivateTransaction",
];

impl Gateway {
    /// Forward a call (or batch) whose every method is in `allow` to the hosts in order
    /// until one answers; for builder and private-transaction endpoints, whose methods
    /// are not part of the general method table.
    pub async fn forward(
        &self,
        hosts: Vec<Arc<Host>>,
        body: &[u8],
        allow: &[&str],
        rid: &str,
    ) -> Result<RpcReply, ApiError> {
        let parsed: Value = serde_json::from_slice(body)
            .map_err(|e| ApiError::invalid_params(format!("body is not JSON: {e}")))?;
        let calls: Vec<&Value> = match &parsed {
            Value::Array(a) if !a.is_empty() && a.len() <= self.conf.max_batch => {
                a.iter().collect()
            }
            Value::Object(_) => vec![&parsed],
            _ => {
                return Err(ApiError::invalid_params(
                    "a JSON-RPC call or a bounded batch",
                ))
            }
        };
        for call in calls {
            let method = method_of(call)?;
            if !allow.contains(&method) {
                return Err(ApiError::new(
                    403,
                    "method_unknown",
                    format!("{method} is not served on this endpoint"),
                ));
            }
        }
        if hosts.is_empty() {
            return Err(ApiError::new(
                503,
                "no_upstream",
                "no healthy host for this endpoint",
            ));
        }
        self.try_hosts(&hosts, Bytes::copy_from_slice(body), rid, false)
            .await
    }

    /// Filters: creation goes to any host (remembered by filter id); polls and uninstall
    /// go to that host only, since no other node has the filter.
    async fn filter(
        &self,
        pool: &Pool,
        call: &Value,
        rid: &str,
    ) -> Result<(Value, Option<String>), ApiError> {
        let id = call.get("id").cloned().unwrap_or(Value::Null);
        let method = call.get("method").and_then(Value::as_str).unwrap_or("");
        let body = Bytes::from(serde_json::to_vec(call).unwrap_or_default());
        if method.starts_with("eth_new") {
            let r = self.read(pool, None, Need::default(), body, rid).await?;
            let v: Value = serde_json::from_slice(&r.body)
                .unwrap_or_else(|_| jsonrpc_error(&id, -32603, "upstream answered non-JSON"));
            if let (Some(fid), Some(host)) = (v.get("result").and_then(Value::as_str), &r.upstream)
            {
                self.filters.remember(fid, &pool.name, host);
            }
            return Ok((v, r.upstream));
        }
        let fid = call
            .get("params")
            .and_then(|p| p.get(0))
            .and_then(Value::as_str)
            .unwrap_or("");
        let Some(host) = self
            .filters
            .host(fid, &pool.name)
            .and_then(|h| pool.host(&h).cloned())
        else {
            return Ok((jsonrpc_error(&id, -32000, "filter not found"), None));
        };
        let timeout = self.conf.timeout;
        match self.attempt(&host, body, rid, timeout).await {
            Ok(b) => Ok((
                serde_json::from_slice(&b)
                    .unwrap_or_else(|_| jsonrpc_error(&id, -32603, "upstream answered non-JSON")),
                Some(host.id.clone()),
            )),
            // The node that holds the filter is gone: so is the filter.
            Err(_) => Ok((
                jsonrpc_error(&id, -32000, "filter not found"),
                Some(host.id.clone()),
            )),
        }
    }

    /// Whether some node of the pool knows a transaction with this hash.
    async fn known_on_chain(&self, pool: &Pool, tx_hash: &str, rid: &str) -> bool {
        let call = json!({"jsonrpc": "2.0", "id": 1, "method": "eth_getTransactionByHash", "params": [tx_hash]});
        let body = Bytes::from(call.to_string());
        match self.read(pool, None, Need::default(), body, rid).await {
            Ok(r) => serde_json::from_slice::<Value>(&r.body)
                .ok()
                .and_then(|v| v.get("result").cloned())
                .is_some_and(|t| t.get("hash").and_then(Value::as_str) == Some(tx_hash)),
            Err(_) => false,
        }
    }
}

#[derive(PartialEq, Eq, Debug)]
pub enum WriteOutcome {
    Accepted,
    AlreadyKnown,
    Rejected,
}

pub fn write_outcome(body: &[u8]) -> WriteOutcome {
    let Ok(v) = serde_json::from_slice::<Value>(body) else {
        return WriteOutcome::Rejected;
    };
    if v.get("result").is_some_and(Value::is_string) {
        return WriteOutcome::Accepted;
    }
    let msg = v
        .pointer("/error/message")
        .and_then(Value::as_str)
        .unwrap_or("")
        .to_ascii_lowercase();
    if ALREADY_KNOWN_PATTERNS.iter().any(|p| msg.contains(p)) {
        WriteOutcome::AlreadyKnown
    } else {
        WriteOutcome::Rejected
    }
}

/// A single response whose error says the node cannot answer now (not the call's fault).
fn node_state_error(body: &[u8]) -> Option<String> {
    // Nearly every answer is a result: skip parsing those.
    if !body.windows(7).any(|w| w == b"\"error\"") {
        return None;
    }
    let v: Value = serde_json::from_slice(body).ok()?;
    let err = v.get("error")?;
    let code = err.get("code").and_then(Value::as_i64).unwrap_or(0);
    let msg = err.get("message").and_then(Value::as_str).unwrap_or("");
    let lower = msg.to_ascii_lowercase();
    if code == -32601 || NODE_STATE_PATTERNS.iter().any(|p| lower.contains(p)) {
        Some(format!("{code} {msg}"))
    } else {
        None
    }
}

pub fn method_of(call: &Value) -> Result<&str, ApiError> {
    call.get("method")
        .and_then(Value::as_str)
        .ok_or_else(|| ApiError::invalid_params("each JSON-RPC call needs a string 'method'"))
}

/// keccak256 of the raw transaction bytes: its hash.
pub fn tx_hash(raw: &str) -> Option<String> {
    let bytes = hex::decode(raw.strip_prefix("0x")?).ok()?;
    if bytes.is_empty() {
        return None;
    }
    Some(format!("0x{}", hex::encode(Keccak256::digest(&bytes))))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_borrowed_view_takes_only_plain_single_calls() {
        let view = CallView::of(
            br#" {"jsonrpc":"2.0","id":7,"method":"eth_getBalance","params":["0xab","0x10"]}"#,
        )
        .expect("a plain call");
        assert_eq!(view.method, "eth_getBalance");
        assert_eq!(view.params, Some(json!(["0xab", "0x10"])));
        // `"params": null` reads as none, which needs the same blocks.
        let null = CallView::of(br#"{"method":"eth_call","params":null}"#).unwrap();
        assert_eq!(null.params, None);
        assert_eq!(
            need_at(
                100,
                [&json!({"method": "eth_getBalance", "params": ["0xab", "0x10"]})]
            ),
            need_from(
                100,
                block_need(view.method, view.params.as_ref()),
                Need::default()
            )
        );
        // Everything else goes the general way (and gets its errors there).
        for body in [
            &br#"[{"jsonrpc":"2.0","id":1,"method":"eth_chainId"}]"#[..],
            br#"{"id":1,"method":"eth_chain\u0049d"}"#,
            br#"{"id":1,"method":"eth_chainId","method":"eth_call"}"#,
            br#"{"id":1,"method":7}"#,
            br#"{"id":1,"method":"eth_chainId"} x"#,
            br#"{"id":1}"#,
            b"not json",
            // Found by fuzz/jsonrpc: bad UTF-8 in a field the view skips.
            b"{\"js+onrpc\":\"2.0\xff\xff\",\"id\":1,\"method\":\"eth_getBalance\",\"params\":[\"0x0\"]}",
        ] {
            assert!(
                CallView::of(body).is_none(),
                "{}",
                String::from_utf8_lossy(body)
            );
        }
        assert!(!classify("eth_sendRawTransaction").is_plain_read());
        assert!(!classify("eth_newFilter").is_plain_read());
        assert!(classify("eth_call").is_plain_read());
    }

    #[test]
    fn outcome_of_writes() {
        assert_eq!(
            write_outcome(br#"{"jsonrpc":"2.0","id":1,"result":"0xab"}"#),
            WriteOutcome::Accepted
        );
        assert_eq!(
            write_outcome(br#"{"jsonrpc":"2.0","id":1,"error":{"code":-32003,"message":"transaction already imported"}}"#),
            WriteOutcome::AlreadyKnown
        );
        assert_eq!(
            write_outcome(
                br#"{"jsonrpc":"2.0","id":1,"error":{"code":-32003,"message":"nonce too low"}}"#
            ),
            WriteOutcome::Rejected
        );
    }

    #[test]
    fn node_state_vs_deterministic_errors() {
        assert!(
            node_state_error(br#"{"error":{"code":-32000,"message":"header not found"}}"#)
                .is_some()
        );
        assert!(node_state_error(
            br#"{"error":{"code":-32601,"message":"the method trace_block does not exist"}}"#
        )
        .is_some());
        assert!(
            node_state_error(br#"{"error":{"code":3,"message":"execution reverted"}}"#).is_none()
        );
        assert!(node_state_error(br#"{"result":"0x1"}"#).is_none());
    }

    #[test]
    fn hash_of_raw_tx() {
        // keccak256 of the single byte 0x00.
        assert_eq!(
            tx_hash("0x00").unwrap(),
            "0xbc36789e7a1e281436464229828f817d6612f7b477d66591ff96a9e064bcc98a"
        );
        assert!(tx_hash("0x").is_none());
        assert!(tx_hash("zz").is_none());
    }
}

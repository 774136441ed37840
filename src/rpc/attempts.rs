//! Reads sent to hosts: which hosts can serve a call (state, capability, block), in what
//! order, and the attempts themselves: retries on failure, a hedge when the first host is
//! slow, node-state errors ("header not found") sent on to the next host, a deadline
//! over them all.

use super::need::{order_by_need, Need};
use super::{Budget, Caller, Gateway, RpcReply};
use crate::errors::ApiError;
use crate::jsonrpc::methods::MethodClass;
use crate::jsonrpc::Response;
use crate::observe::metrics;
use crate::pools::{Host, Pool};
use crate::upstream::UpstreamError;
use crate::verify::Verified;
use bytes::Bytes;
use futures_util::stream::{FuturesUnordered, StreamExt};
use futures_util::FutureExt;
use std::future::Future;
use std::sync::Arc;
use std::time::Duration;
// Tokio's clock, so the policy's timing can be tested on paused time.
use tokio::time::Instant;

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

impl Gateway {
    /// Send a read to hosts in order until one gives an answer worth returning. Hosts
    /// that have the state the call needs go first; the others stay as fallbacks.
    pub(super) async fn read(
        &self,
        pool: &Pool,
        class: MethodClass,
        need: Need,
        body: &[u8],
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
    pub(super) fn tier_refusal(
        &self,
        method: &str,
        required: &str,
        caller: &Caller<'_>,
    ) -> ApiError {
        crate::auth::plans::needs_plan(
            caller.plan,
            required,
            &self.conf.upgrade_url,
            format!("{method} needs plan {required} or above"),
        )
    }

    /// The pool's hosts that can take a call, in the order to try them.
    /// `hosts_for`, keeping only hosts at or past the need's floor; when none has reached
    /// it yet, waits for one (heads move with each health round) up to
    /// `rpc.min_block_wait_ms`, then 503 `block_not_reached`.
    pub(super) async fn hosts_reaching<'p>(
        &self,
        pool: &'p Pool,
        capability: Option<&str>,
        need: Need,
    ) -> Result<Vec<&'p Arc<Host>>, ApiError> {
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

    pub(super) fn hosts_for<'p>(
        &self,
        pool: &'p Pool,
        capability: Option<&str>,
        need: Need,
    ) -> Result<Vec<&'p Arc<Host>>, ApiError> {
        let hosts = order_by_need(pool.candidates_borrowed(capability), need);
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

    /// Hosts in order under the call's attempt policy (`Attempts::run`), each attempt
    /// one call to one host.
    pub(super) async fn try_hosts(
        &self,
        hosts: &[&Arc<Host>],
        body: &[u8],
        rid: &str,
        on_node_state: NodeState,
        budget: Budget,
    ) -> Result<RpcReply, ApiError> {
        self.policy(budget, on_node_state)
            .run(hosts, |host, share| {
                self.attempt(host, body, rid, share)
                    .map(|r| r.map(|body| (body, Verified::None)))
            })
            .await
    }

    /// The attempt policy of a call with `budget`: the retry budget is the gateway's.
    pub(super) fn policy(&self, budget: Budget, on_node_state: NodeState) -> Attempts {
        Attempts {
            max: self.conf.max_attempts,
            budget,
            on_node_state,
            ask_past_empty: 0,
        }
    }

    /// One call to one host; transport errors, timeouts and 5xx/429 count as failures.
    pub(super) async fn attempt(
        &self,
        host: &Host,
        body: &[u8],
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

pub(super) fn method_unknown(method: &str) -> ApiError {
    ApiError::new(
        403,
        "method_unknown",
        format!("method '{method}' is not part of the product"),
    )
}

pub(super) fn needs_websocket(method: &str) -> ApiError {
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
    if !crate::jsonrpc::mentions_error(body) {
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

/// Whether a JSON-RPC answer's `result` is `null`.
fn result_is_null(body: &[u8]) -> bool {
    let Some(at) = crate::jsonrpc::find_result_member(body) else {
        return false;
    };
    let rest = &body[at + 8..];
    let rest = rest.trim_ascii_start().strip_prefix(b":").unwrap_or(b"");
    rest.trim_ascii_start().starts_with(b"null")
}

/// The attempt policy of one call, as a value: how many hosts it may try, its budget (a
/// deadline over every attempt, each attempt's share, the hedge), and what a node's
/// "cannot answer now" error does.
#[derive(Clone, Copy)]
pub(super) struct Attempts {
    pub(super) max: usize,
    pub(super) budget: Budget,
    pub(super) on_node_state: NodeState,
    /// More hosts to ask after an answer whose result is `null` (a checked read's: the
    /// thing it names should exist); that answer is served when none has better.
    pub(super) ask_past_empty: usize,
}

impl Attempts {
    /// Hosts in order, within the retry budget and the call's deadline, until one gives
    /// an answer worth returning. `attempt` makes one call to one host within the time
    /// it is given (the transport enforces it).
    ///
    /// Each attempt has its own share of the budget, so a host that never answers costs
    /// one attempt, not the call. A hedged call also gives the next host the same call
    /// when the last one asked has been silent past its recent answer times (and so on,
    /// within `max`): the first answer worth returning wins and the other attempts are
    /// dropped (their connections closed).
    /// After a failure the next host is tried at once.
    /// Hosts are borrowed, never counted: their reference counts are shared by every
    /// worker thread, and each count written moves the count's cache line between cores.
    pub(super) async fn run<'h, F, Fut>(
        self,
        hosts: &[&'h Arc<Host>],
        attempt: F,
    ) -> Result<RpcReply, ApiError>
    where
        F: Fn(&'h Arc<Host>, Duration) -> Fut,
        Fut: Future<Output = Result<(Bytes, Verified), String>>,
    {
        let budget = self.budget;
        let deadline = Instant::now() + budget.total;
        let mut queue = hosts.iter().copied().take(self.max);
        let launch = |host: &'h Arc<Host>, began: Instant| {
            let share = deadline
                .saturating_duration_since(began)
                .min(budget.attempt);
            // `map`, not an `async move` block awaiting `call`: such a block keeps room
            // for the call twice (rust-lang/rust#62958), and this is the whole exchange.
            attempt(host, share).map(move |outcome| (host, began, outcome))
        };
        let mut race = Race::new(self.on_node_state, self.ask_past_empty);
        let Some(first_host) = queue.next() else {
            return race.give_up(hosts);
        };
        // Most reads end with their first attempt: it is polled in place, and the set of
        // later attempts (an allocation) is made only when a second one starts. A hedge
        // is armed only while another host is left to take the call.
        let began = Instant::now();
        let mut hedge_at = hedge_deadline(budget, first_host, began, queue.len());
        race.first_began = Some(began);
        race.in_flight.push((first_host, began));
        let first = launch(first_host, began);
        tokio::pin!(first);
        let mut first_running = true;
        let mut later = None;
        // Each turn of the loop after the first begins with the next host's attempt: a
        // hedge, or the one after a failure.
        let mut launch_next = false;
        loop {
            if launch_next {
                let now = Instant::now();
                match queue.next() {
                    Some(host) if now < deadline => {
                        hedge_at = hedge_deadline(budget, host, now, queue.len());
                        race.in_flight.push((host, now));
                        later
                            .get_or_insert_with(FuturesUnordered::new)
                            .push(launch(host, now));
                    }
                    _ if !first_running && later.as_ref().is_none_or(|l| l.is_empty()) => break,
                    _ => {}
                }
            }
            launch_next = true;
            let hedge_timer = async {
                match hedge_at {
                    Some(at) => tokio::time::sleep_until(at).await,
                    None => std::future::pending().await,
                }
            };
            let later_done = async {
                match later.as_mut() {
                    Some(l) => l.next().await,
                    None => std::future::pending().await,
                }
            };
            let (host, began, outcome) = tokio::select! {
                biased;
                done = &mut first, if first_running => {
                    first_running = false;
                    done
                }
                Some(done) = later_done => done,
                _ = hedge_timer => {
                    // The host is still silent: the next one gets the call too.
                    (hedge_at, race.hedged) = (None, true);
                    continue;
                }
            };
            if let Some(answer) = race.settle(host, began, outcome) {
                return Ok(answer);
            }
        }
        race.give_up(hosts)
    }
}

/// When the attempt on `host` begun `now` is hedged: never when the policy does not
/// hedge or no host is left (`left`) to take it. A hedge's own attempt is hedged in
/// turn: two hosts frozen together (a node and a front before it, one machine's two
/// clients) cost two hedge delays, not an attempt's timeout.
fn hedge_deadline(budget: Budget, host: &Arc<Host>, now: Instant, left: usize) -> Option<Instant> {
    match budget.hedge {
        Some(delay) if left > 0 => Some(now + delay.for_host(host)),
        _ => None,
    }
}

/// What a read's attempts have come to so far.
struct Race<'h> {
    on_node_state: NodeState,
    /// Empty answers still to pass over before one is served.
    empties_left: usize,
    /// Hosts of the attempts in flight, with when each began (to tell who lost a race).
    in_flight: Vec<(&'h Arc<Host>, Instant)>,
    hedged: bool,
    first_began: Option<Instant>,
    last_error: String,
    last_answer: Option<RpcReply>,
    /// The first `null` passed over: served when no host has better.
    empty_answer: Option<RpcReply>,
}

impl<'h> Race<'h> {
    fn new(on_node_state: NodeState, ask_past_empty: usize) -> Self {
        Race {
            on_node_state,
            empties_left: ask_past_empty,
            in_flight: Vec::with_capacity(2),
            hedged: false,
            first_began: None,
            last_error: String::new(),
            last_answer: None,
            empty_answer: None,
        }
    }

    /// One attempt's outcome: the answer to return, or `None` to go on with the others.
    fn settle(
        &mut self,
        host: &'h Arc<Host>,
        began: Instant,
        outcome: Result<(Bytes, Verified), String>,
    ) -> Option<RpcReply> {
        self.in_flight.retain(|(h, _)| !Arc::ptr_eq(h, host));
        let (body, verified) = match outcome {
            Ok(answer) => answer,
            Err(e) => {
                self.last_error = format!("{}: {e}", host.id);
                return None;
            }
        };
        host.latency.record(began.elapsed());
        let node_state = self.on_node_state != NodeState::Answer;
        if let Some(reason) = node_state.then(|| node_state_error(&body)).flatten() {
            host.record_failure(&reason);
            metrics::upstream_failure(&host.pool, &host.id, "node_state");
            self.last_error = format!("{}: {reason}", host.id);
            if self.on_node_state == NodeState::NextHostElseAnswer {
                self.last_answer = Some(RpcReply::from_host(body, host));
            }
            return None;
        }
        host.record_success();
        if self.empties_left > 0 && result_is_null(&body) {
            // Not a failure of the host: another may have what this one does not yet.
            self.empties_left -= 1;
            metrics::empty_answer_passed(&host.pool);
            self.last_error = format!("{}: an empty answer", host.id);
            self.empty_answer
                .get_or_insert(RpcReply::from_host(body, host));
            return None;
        }
        // Attempts begun before this one and still silent lost a race.
        for (loser, since) in &self.in_flight {
            if *since < began {
                loser.record_race_lost(since.elapsed());
            }
        }
        if self.hedged {
            let first = self.first_began == Some(began);
            metrics::hedged_read(&host.pool, if first { "first" } else { "other" });
        }
        let mut reply = RpcReply::from_host(body, host);
        reply.verified = verified;
        Some(reply)
    }

    /// Every attempt failed: the last node-state answer when the caller takes one, else
    /// 502 with the last failure.
    fn give_up(self, hosts: &[&Arc<Host>]) -> Result<RpcReply, ApiError> {
        if let Some(pool) = self
            .hedged
            .then(|| hosts.first())
            .flatten()
            .map(|h| &h.pool)
        {
            metrics::hedged_read(pool, "none");
        }
        if let Some(answer) = self.empty_answer.or(self.last_answer) {
            return Ok(answer);
        }
        Err(ApiError::bad_gateway(
            "upstream_unavailable",
            format!("every attempt failed; last: {}", self.last_error),
        ))
    }
}

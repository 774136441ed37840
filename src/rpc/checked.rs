//! Reads whose answers carry their own commitments (`crate::verify`), judged on each
//! host as it answers: a disproved answer is a failed attempt (the next host is asked at
//! once, the hedge and budget as for any read), one JSON line in the misbehaviour log,
//! a count per host and check, and towards the host's cordon. What a checked block says
//! of itself is kept by hash, so the receipts naming it are checked without asking again.

use super::attempts::{Attempts, NodeState};
use super::need::Need;
use super::{Gateway, RpcReply};
use crate::config::VerifyMode;
use crate::errors::ApiError;
use crate::jsonrpc::methods::MethodClass;
use crate::jsonrpc::{Id, Request};
use crate::observe::metrics;
use crate::pools::{Host, Pool};
use crate::verify::block::{self, BlockFacts};
use crate::verify::{receipts, Check, Verdict, Verified, Want};
use alloy_primitives::B256;
use bytes::Bytes;
use lru::LruCache;
use serde_json::{json, Value};
use std::num::NonZeroUsize;
use std::sync::{Arc, Mutex};
use std::time::Duration;

/// Checked blocks kept by hash (their facts: a few hundred bytes per transaction).
const FACTS_KEPT: usize = 256;
/// How much of a request and an answer the misbehaviour log keeps.
const LOGGED_BYTES: usize = 2048;

/// What checked blocks said of themselves, by hash: one checked fetch per block.
pub struct BlockFactsCache(Mutex<LruCache<B256, Arc<BlockFacts>>>);

impl Default for BlockFactsCache {
    fn default() -> Self {
        BlockFactsCache(Mutex::new(LruCache::new(
            NonZeroUsize::new(FACTS_KEPT).expect("a positive bound"),
        )))
    }
}

impl BlockFactsCache {
    fn get(&self, hash: &B256) -> Option<Arc<BlockFacts>> {
        self.0.lock().ok()?.get(hash).cloned()
    }

    fn keep(&self, facts: BlockFacts) -> Arc<BlockFacts> {
        let facts = Arc::new(facts);
        if let Ok(mut kept) = self.0.lock() {
            kept.put(facts.hash, facts.clone());
        }
        facts
    }
}

/// What the caller asked for and what is sent: a hashes-only block is asked for full
/// (its hash list has no commitment of its own) and answered as hashes.
#[derive(Clone, Copy)]
pub(super) struct Judged<'a> {
    pub(super) check: Check,
    pub(super) hashes_only: bool,
    pub(super) method: &'a str,
}

impl<'a> Judged<'a> {
    /// The check for `method(params)` under the gateway's mode.
    pub(super) fn of(mode: VerifyMode, method: &'a str, params: Option<&Value>) -> Option<Self> {
        if mode == VerifyMode::Off {
            return None;
        }
        let check = Check::of(method, params)?;
        Some(Judged {
            check,
            hashes_only: matches!(check, Check::Block { full: false, .. }),
            method,
        })
    }

    /// The params to send: a hashes-only block's flag turned to full.
    pub(super) fn sent_params(&self, params: Option<&Value>) -> Option<Value> {
        let mut p = params?.clone();
        if self.hashes_only {
            match p.as_array_mut() {
                Some(a) if a.len() >= 2 => a[1] = Value::Bool(true),
                Some(a) => a.push(Value::Bool(true)),
                None => return None,
            }
        }
        Some(p)
    }
}

/// One answer after its judgement: what to serve, or why it is refused.
enum Outcome {
    Serve(Bytes, Verified),
    Disproved(String),
}

impl Gateway {
    /// `read`, judging each host's answer by `judged` (when there is one).
    pub(super) async fn read_judged(
        &self,
        pool: &Pool,
        class: MethodClass,
        need: Need,
        body: &[u8],
        rid: &str,
        judged: Option<Judged<'_>>,
    ) -> Result<RpcReply, ApiError> {
        let Some(judged) = judged else {
            return self.read(pool, class, need, body, rid).await;
        };
        let hosts = self.hosts_reaching(pool, class.capability(), need).await?;
        let policy = Attempts {
            max: self.conf.max_attempts,
            budget: self.conf.budget(class),
            on_node_state: NodeState::NextHostElseAnswer,
        };
        policy
            .run(&hosts, |host, share| {
                Box::pin(self.judged_attempt(host, body, rid, share, judged))
            })
            .await
    }

    async fn judged_attempt(
        &self,
        host: Arc<Host>,
        body: &[u8],
        rid: &str,
        share: Duration,
        judged: Judged<'_>,
    ) -> Result<(Bytes, Verified), String> {
        let began = tokio::time::Instant::now();
        let answer = self.attempt(host.clone(), body, rid, share).await?;
        let left = share.saturating_sub(began.elapsed());
        let check = judged.check.name();
        match self.judge(&host, judged, answer.clone(), rid, left).await {
            Outcome::Serve(body, verified) => {
                let outcome = if verified == Verified::None {
                    "unchecked"
                } else {
                    "proven"
                };
                metrics::checked_answer(&host.pool, check, outcome);
                Ok((body, verified))
            }
            Outcome::Disproved(why) => {
                metrics::checked_answer(&host.pool, check, "disproved");
                misbehaved(&host, judged, body, &answer, &why, rid);
                if self.conf.verify == VerifyMode::Observe {
                    return Ok((answer, Verified::None));
                }
                Err(format!("its answer was disproved ({check}): {why}"))
            }
        }
    }

    /// Judge one node answer: errors and empty results pass as they are (node-state
    /// errors go on to the next host as for any read).
    async fn judge(
        &self,
        host: &Arc<Host>,
        judged: Judged<'_>,
        answer: Bytes,
        rid: &str,
        left: Duration,
    ) -> Outcome {
        let Ok(mut response) = serde_json::from_slice::<Value>(&answer) else {
            return Outcome::Serve(answer, Verified::None);
        };
        let Some(result) = response.get("result").filter(|r| !r.is_null()) else {
            return Outcome::Serve(answer, Verified::None);
        };
        let verdict = match judged.check {
            Check::Block { want, .. } => match block::check(result, want) {
                Verdict::Proven(facts) => {
                    self.facts.keep(facts);
                    Verdict::Proven(())
                }
                Verdict::Unchecked(why) => Verdict::Unchecked(why),
                Verdict::Disproved(why) => Verdict::Disproved(why),
            },
            Check::BlockReceipts { want } => {
                self.judge_receipts(host, result, want, rid, left).await
            }
        };
        let verified = match verdict {
            Verdict::Disproved(why) => return Outcome::Disproved(why),
            Verdict::Unchecked(why) => {
                log::debug!("{} from {}: unchecked: {why}", judged.method, host.id);
                Verified::None
            }
            Verdict::Proven(()) => Verified::SelfConsistent,
        };
        if !judged.hashes_only {
            return Outcome::Serve(answer, verified);
        }
        if let Some(result) = response.get_mut("result") {
            block::to_hashes_only(result);
        }
        let body = Bytes::from(serde_json::to_vec(&response).unwrap_or_default());
        Outcome::Serve(body, verified)
    }

    /// A block's receipts against the block they name, asked of the same host when not
    /// kept: a host that names a block it cannot give contradicts itself.
    async fn judge_receipts(
        &self,
        host: &Arc<Host>,
        result: &Value,
        want: Want,
        rid: &str,
        left: Duration,
    ) -> Verdict<()> {
        let named = result
            .get(0)
            .and_then(|r| r.get("blockHash"))
            .and_then(Value::as_str)
            .and_then(|h| h.parse::<B256>().ok());
        let hash = match (named, want) {
            (Some(h), _) | (None, Want::Hash(h)) => h,
            (None, _) => return Verdict::Unchecked("no receipts to name their block".into()),
        };
        let facts = match self.facts.get(&hash) {
            Some(f) => f,
            None => match self.block_of(host, hash, rid, left).await {
                Verdict::Proven(f) => f,
                Verdict::Unchecked(why) => return Verdict::Unchecked(why),
                Verdict::Disproved(why) => return Verdict::Disproved(why),
            },
        };
        if let Err(e) = want.answered_by(facts.number, facts.hash) {
            return Verdict::Disproved(e);
        }
        receipts::check(result, &facts)
    }

    /// Block `hash` with its transactions, from `host`, checked and kept.
    async fn block_of(
        &self,
        host: &Arc<Host>,
        hash: B256,
        rid: &str,
        left: Duration,
    ) -> Verdict<Arc<BlockFacts>> {
        let call = Request::new(
            Id::index(1),
            "eth_getBlockByHash",
            json!([hash.to_string(), true]),
        );
        let Ok(answer) = self
            .attempt(host.clone(), &call.to_bytes(), rid, left)
            .await
        else {
            return Verdict::Unchecked("the block the receipts name was not fetched".into());
        };
        let response: Value = serde_json::from_slice(&answer).unwrap_or(Value::Null);
        match response.get("result") {
            Some(Value::Null) => {
                Verdict::Disproved(format!("it names block {hash}, which it does not have"))
            }
            Some(b) => match block::check(b, Want::Hash(hash)) {
                Verdict::Proven(f) => Verdict::Proven(self.facts.keep(f)),
                Verdict::Unchecked(why) => Verdict::Unchecked(why),
                Verdict::Disproved(why) => Verdict::Disproved(format!("its block: {why}")),
            },
            None => Verdict::Unchecked("the block the receipts name was not given".into()),
        }
    }
}

/// One disproved answer: a JSON line in the misbehaviour log (target `misbehaviour`),
/// counted, and towards the host's cordon.
fn misbehaved(
    host: &Host,
    judged: Judged<'_>,
    request: &[u8],
    answer: &[u8],
    why: &str,
    rid: &str,
) {
    let clip = |b: &[u8]| String::from_utf8_lossy(&b[..b.len().min(LOGGED_BYTES)]).into_owned();
    log::warn!(
        target: "misbehaviour",
        "{}",
        json!({
            "pool": host.pool,
            "host": host.id,
            "method": judged.method,
            "check": judged.check.name(),
            "why": why,
            "request_id": rid,
            "request": clip(request),
            "answer": clip(answer),
        })
    );
    metrics::disproved_answer(&host.pool, &host.id, judged.check.name());
    host.record_failure(&format!("answer disproved: {why}"));
    if host.conduct.disproved() {
        log::warn!(
            "pool {} host {}: cordoned for 5 minutes after 3 disproved answers in 10",
            host.pool,
            host.id
        );
    }
}

//! Reads whose answers carry their own commitments (`crate::verify`), judged on each
//! host as it answers: a disproved answer is a failed attempt (the next host is asked at
//! once, the hedge and budget as for any read), one JSON line in the misbehaviour log,
//! a count per host and check, and towards the host's cordon. What a checked block says
//! of itself is kept by hash, so the receipts naming it are checked without asking again.

use super::attempts::NodeState;
use super::misbehaviour::Misbehaviour;
use super::need::Need;
use super::proven::{raw_result, About};
use super::{Gateway, RpcReply};
use crate::config::VerifyMode;
use crate::errors::ApiError;
use crate::jsonrpc::methods::MethodClass;
use crate::jsonrpc::{Id, Request};
use crate::observe::metrics;
use crate::pools::{Host, Pool};
use crate::verify::block::{self, BlockFacts};
use crate::verify::logs::{self, LogFilter};
use crate::verify::state::At;
use crate::verify::{proven, receipts, Check, Verdict, Verified, Want};
use alloy_primitives::B256;
use bytes::Bytes;
use serde_json::{json, Value};
use std::sync::Arc;
use std::time::Duration;

/// The check a call's answers meet, and the call.
#[derive(Clone, Copy)]
pub(super) struct Judged<'a> {
    pub(super) check: Check,
    pub(super) method: &'a str,
    pub(super) params: Option<&'a Value>,
}

impl<'a> Judged<'a> {
    /// The call as a key: its method and params.
    fn call(&self) -> String {
        let params = self.params.map(Value::to_string).unwrap_or_default();
        format!("{}{params}", self.method)
    }

    /// The check for `method(params)` under the gateway's mode.
    pub(super) fn of(mode: VerifyMode, method: &'a str, params: Option<&'a Value>) -> Option<Self> {
        if mode == VerifyMode::Off {
            return None;
        }
        Some(Judged {
            check: Check::of(method, params)?,
            method,
            params,
        })
    }
}

/// One answer after its judgement: what to serve (and the block it is about, when it
/// names one), or why it is refused.
enum Outcome {
    Serve(Bytes, Verified, About),
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
        let mut policy = self.policy(self.conf.budget(class), NodeState::NextHostElseAnswer);
        policy.ask_past_empty = self.conf.ask_past_empty;
        policy
            .run(&hosts, |host, share| {
                Box::pin(self.judged_attempt(pool, host, body, rid, share, judged))
            })
            .await
    }

    pub(super) async fn judged_attempt(
        &self,
        pool: &Pool,
        host: &Arc<Host>,
        body: &[u8],
        rid: &str,
        share: Duration,
        judged: Judged<'_>,
    ) -> Result<(Bytes, Verified), String> {
        let began = tokio::time::Instant::now();
        let answer = self.attempt(host, body, rid, share).await?;
        let left = share.saturating_sub(began.elapsed());
        let check = judged.check.name();
        let mut outcome = self.judge(host, judged, answer.clone(), rid, left).await;
        if let Outcome::Serve(body, Verified::SelfConsistent, Some(about)) = outcome {
            outcome = self.anchored(pool, body, about, rid).await;
        }
        match outcome {
            Outcome::Serve(body, verified, _) => {
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
                let seen = Misbehaviour {
                    method: judged.method,
                    check,
                    why: &why,
                    rid,
                    request: body,
                    answer: &answer,
                    winning: None,
                };
                seen.record(host);
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
        // The same bytes as an answer proven for the same call: proven.
        let call = judged.call();
        let raw = raw_result(&answer);
        if let Some(about) = raw.and_then(|r| self.checked.answers.holds(&call, r)) {
            return Outcome::Serve(answer, Verified::SelfConsistent, about);
        }
        let Ok(response) = serde_json::from_slice::<Value>(&answer) else {
            return Outcome::Serve(answer, Verified::None, None);
        };
        let Some(result) = response.get("result").filter(|r| !r.is_null()) else {
            return Outcome::Serve(answer, Verified::None, None);
        };
        let verdict = match judged.check {
            Check::Block { want, full } => {
                let claimed = result.get("hash").and_then(Value::as_str);
                let claimed = claimed.and_then(|h| h.parse::<B256>().ok());
                let known = claimed.and_then(|h| self.checked.facts(&h));
                match (full, claimed) {
                    (true, _) => self.judge_block(result, want, known.as_deref()),
                    (false, Some(hash)) => {
                        self.judge_hashes_only(host, result, want, hash, rid, left)
                            .await
                    }
                    (false, None) => Verdict::Disproved("a block without its hash".into()),
                }
            }
            Check::BlockReceipts { want } => {
                let size = answer.len();
                self.judge_receipts(host, result, want, size, rid, left)
                    .await
            }
            Check::TxReceipt { hash } => self.judge_tx_receipt(host, result, hash, rid, left).await,
            Check::Tx { hash } => self.judge_tx(host, result, hash, rid, left).await,
            Check::BlockLogs { hash } => {
                let filter = judged.params.and_then(|p| p.get(0)).and_then(LogFilter::of);
                match filter {
                    Some(filter) => {
                        self.judge_logs(host, result, hash, &filter, rid, left)
                            .await
                    }
                    None => Verdict::Unchecked("a filter the edge does not read".into()),
                }
            }
        };
        match verdict {
            Verdict::Disproved(why) => Outcome::Disproved(why),
            Verdict::Unchecked(why) => {
                log::debug!("{} from {}: unchecked: {why}", judged.method, host.id);
                Outcome::Serve(answer, Verified::None, None)
            }
            Verdict::Proven(()) => {
                let about = block_about(result);
                if let Some(raw) = raw {
                    self.checked.answers.keep(call, raw, about);
                }
                Outcome::Serve(answer, Verified::SelfConsistent, about)
            }
        }
    }

    /// A self-consistent answer about block `(number, hash)`, where reads are proven
    /// (`rpc.verify.root`): `root` when that block is the one anchored at its number,
    /// disproved when another is (a fork's block, or a forged one); `self` when no
    /// block could be anchored there.
    async fn anchored(&self, pool: &Pool, body: Bytes, about: (u64, B256), rid: &str) -> Outcome {
        let Some(root) = self.conf.root.as_ref() else {
            return Outcome::Serve(body, Verified::SelfConsistent, Some(about));
        };
        let (number, hash) = about;
        match self.anchor(pool, At::Number(number), root.ask, rid).await {
            Ok(anchor) if anchor.header.hash == hash => {
                Outcome::Serve(body, Verified::Root(anchor.note()), Some(about))
            }
            Ok(anchor) => Outcome::Disproved(format!(
                "block {number} is {hash} in its answer; the block anchored there is {}",
                anchor.header.hash
            )),
            Err(e) => {
                log::debug!("block {number} not anchored: {}", e.message);
                Outcome::Serve(body, Verified::SelfConsistent, Some(about))
            }
        }
    }

    /// A block answer, knowing what an earlier check of the block it claims found.
    fn judge_block(&self, result: &Value, want: Want, known: Option<&BlockFacts>) -> Verdict<()> {
        block::check_knowing(result, want, known).map(|facts| {
            if known.is_none() {
                self.checked.keep(facts);
            }
        })
    }

    /// A hashes-only block: its hash list commits to nothing, so it is held to the block
    /// checked whole (kept, else asked of the same host by its hash).
    async fn judge_hashes_only(
        &self,
        host: &Arc<Host>,
        result: &Value,
        want: Want,
        hash: B256,
        rid: &str,
        left: Duration,
    ) -> Verdict<()> {
        let facts = proven!(self.facts_of(host, hash, rid, left).await);
        block::check_hashes(result, want, &facts)
    }

    /// A block's receipts against the block they name, asked of the same host when not
    /// kept: a host that names a block it cannot give contradicts itself.
    async fn judge_receipts(
        &self,
        host: &Arc<Host>,
        result: &Value,
        want: Want,
        size: usize,
        rid: &str,
        left: Duration,
    ) -> Verdict<()> {
        let named = result
            .get(0)
            .and_then(|r| r.get("blockHash"))
            .and_then(Value::as_str)
            .and_then(|h| h.parse::<B256>().ok());
        let facts = match (named, want) {
            (Some(h), _) | (None, Want::Hash(h)) => {
                proven!(self.facts_of(host, h, rid, left).await)
            }
            // No receipts for a block by number: its block, from the same host, must
            // have no transactions (a withheld list is disproved by the block).
            (None, Want::Number(_)) => proven!(self.block_of(host, want, rid, left).await),
            (None, Want::Tag) => {
                return Verdict::Unchecked("no receipts to name their block".into())
            }
        };
        if let Err(e) = want.answered_by(facts.number, facts.hash) {
            return Verdict::Disproved(e);
        }
        // The same receipts as checked before: nothing to recompute.
        if self
            .checked
            .receipts(&facts.hash)
            .is_some_and(|kept| *kept == *result)
        {
            return Verdict::Proven(());
        }
        proven!(receipts::check(result, &facts));
        if !result.as_array().is_some_and(Vec::is_empty) {
            (self.checked).keep_receipts(facts.hash, Arc::new(result.clone()), size);
        }
        Verdict::Proven(())
    }

    /// A transaction's receipt against the one at its place in its block's checked
    /// receipts.
    async fn judge_tx_receipt(
        &self,
        host: &Arc<Host>,
        result: &Value,
        asked: B256,
        rid: &str,
        left: Duration,
    ) -> Verdict<()> {
        let hash = result.get("transactionHash").and_then(Value::as_str);
        let hash = hash.and_then(|h| h.parse::<B256>().ok());
        if hash != Some(asked) {
            return Verdict::Disproved(format!("a receipt of another transaction: {hash:?}"));
        }
        let (Some(block), index) = claimed_place(result) else {
            return Verdict::Unchecked("a receipt without its block".into());
        };
        let receipts = proven!(self.receipts_of(host, block, rid, left).await);
        match index.and_then(|i| receipts.get(i as usize)) {
            Some(checked) if checked == result => Verdict::Proven(()),
            _ => Verdict::Disproved("not the receipt at its place in its block".into()),
        }
    }

    /// A transaction: itself (hash, signature), then, when it claims a block, that it is
    /// the transaction at its index among the block's checked ones. `null` (unknown to
    /// the node) commits to nothing.
    async fn judge_tx(
        &self,
        host: &Arc<Host>,
        result: &Value,
        asked: B256,
        rid: &str,
        left: Duration,
    ) -> Verdict<()> {
        if result.is_null() {
            return Verdict::Unchecked("no transaction".into());
        }
        // A transaction of a block checked whole: its sender was recovered then.
        let (block, index) = claimed_place(result);
        let kept = block.and_then(|h| self.checked.facts(&h));
        let known_sender = kept.zip(index).and_then(|(facts, i)| {
            facts
                .txs
                .get(i as usize)
                .filter(|t| t.hash == asked)
                .map(|t| t.from)
        });
        let seen = proven!(crate::verify::tx::check(result, asked, known_sender));
        let Some((block, index)) = seen.place else {
            // Pending: its hash and signature are all there is to check.
            return Verdict::Proven(());
        };
        let facts = proven!(self.facts_of(host, block, rid, left).await);
        match facts.txs.get(index as usize) {
            Some(t) if t.hash == asked && t.from == seen.from => Verdict::Proven(()),
            _ => Verdict::Disproved("not the transaction at its place in its block".into()),
        }
    }

    /// Block `hash`'s receipts, checked against the block (kept, else asked of `host`
    /// with the block): from what is kept, else from `host`.
    pub(super) async fn receipts_of(
        &self,
        host: &Arc<Host>,
        hash: B256,
        rid: &str,
        left: Duration,
    ) -> Verdict<Arc<Value>> {
        if let Some(kept) = self.checked.receipts(&hash) {
            return Verdict::Proven(kept);
        }
        let began = tokio::time::Instant::now();
        let facts = proven!(self.facts_of(host, hash, rid, left).await);
        let left = left.saturating_sub(began.elapsed());
        let call = Request::new(
            Id::index(1),
            "eth_getBlockReceipts",
            json!([hash.to_string()]),
        );
        let Ok(answer) = self.attempt(host, &call.to_bytes(), rid, left).await else {
            return Verdict::Unchecked("the block's receipts were not fetched".into());
        };
        let mut response: Value = serde_json::from_slice(&answer).unwrap_or(Value::Null);
        let receipts = match response.get_mut("result").map(Value::take) {
            Some(Value::Null) => {
                return Verdict::Disproved(format!("it has no receipts for its block {hash}"))
            }
            Some(r) => r,
            None => return Verdict::Unchecked("the block's receipts were not given".into()),
        };
        let checked = receipts::check(&receipts, &facts).context("its block's receipts");
        checked.map(|()| {
            let receipts = Arc::new(receipts);
            self.checked
                .keep_receipts(hash, receipts.clone(), answer.len());
            receipts
        })
    }

    /// One block's logs against the logs of its checked receipts `filter` selects.
    async fn judge_logs(
        &self,
        host: &Arc<Host>,
        result: &Value,
        hash: B256,
        filter: &LogFilter,
        rid: &str,
        left: Duration,
    ) -> Verdict<()> {
        let receipts = proven!(self.receipts_of(host, hash, rid, left).await);
        logs::check(result, &receipts, filter)
    }

    /// What block `hash` says of itself: kept, else asked of `host` and checked.
    async fn facts_of(
        &self,
        host: &Arc<Host>,
        hash: B256,
        rid: &str,
        left: Duration,
    ) -> Verdict<Arc<BlockFacts>> {
        match self.checked.facts(&hash) {
            Some(kept) => Verdict::Proven(kept),
            None => self.block_of(host, Want::Hash(hash), rid, left).await,
        }
    }

    /// The block `at` (a hash or a number) with its transactions, from `host`, checked
    /// and kept.
    async fn block_of(
        &self,
        host: &Arc<Host>,
        at: Want,
        rid: &str,
        left: Duration,
    ) -> Verdict<Arc<BlockFacts>> {
        let (method, param) = match at {
            Want::Hash(hash) => ("eth_getBlockByHash", hash.to_string()),
            Want::Number(n) => ("eth_getBlockByNumber", format!("0x{n:x}")),
            Want::Tag => return Verdict::Unchecked("a block by tag moves".into()),
        };
        let call = Request::new(Id::index(1), method, json!([param, true]));
        let Ok(answer) = self.attempt(host, &call.to_bytes(), rid, left).await else {
            return Verdict::Unchecked("the block the receipts name was not fetched".into());
        };
        let response: Value = serde_json::from_slice(&answer).unwrap_or(Value::Null);
        match response.get("result") {
            Some(Value::Null) => {
                Verdict::Disproved(format!("it names block {param}, which it does not have"))
            }
            Some(b) => block::check(b, at)
                .context("its block")
                .map(|f| self.checked.keep(f)),
            None => Verdict::Unchecked("the block the receipts name was not given".into()),
        }
    }
}

/// The block an answer is about: a block's own number and hash; a transaction's, a
/// receipt's or a log's block; for a list, its first item's.
fn block_about(result: &Value) -> About {
    let item = match result {
        Value::Array(items) => items.first()?,
        other => other,
    };
    let field = |name: &str| item.get(name).and_then(Value::as_str);
    let (number, hash) = match (field("blockNumber"), field("blockHash")) {
        (Some(n), Some(h)) => (n, h),
        _ => (field("number")?, field("hash")?),
    };
    let number = u64::from_str_radix(number.strip_prefix("0x")?, 16).ok()?;
    Some((number, hash.parse().ok()?))
}

/// The block hash and index a transaction or receipt answer claims to sit at.
fn claimed_place(answer: &Value) -> (Option<B256>, Option<u64>) {
    let field = |name: &str| answer.get(name).and_then(Value::as_str);
    let block = field("blockHash").and_then(|h| h.parse().ok());
    let index =
        field("transactionIndex").and_then(|i| u64::from_str_radix(i.strip_prefix("0x")?, 16).ok());
    (block, index)
}

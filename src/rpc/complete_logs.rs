//! Complete logs (`rpc.verify.root.logs_blocks`): an `eth_getLogs` range answer held to
//! the blocks it covers. The range's last block is anchored, the headers before it are
//! linked to it by their parent hashes, so every block of the range is trusted; a block
//! whose logs bloom cannot match the filter holds nothing, and every other block's
//! receipts (checked against its receipts root) give exactly the logs the answer must
//! have. A node that drops, hides or adds a log is disproved and the next host asked.

use super::attempts::NodeState;
use super::misbehaviour::Misbehaviour;
use super::need::Need;
use super::{Gateway, RpcReply};
use crate::config::VerifyMode;
use crate::errors::ApiError;
use crate::jsonrpc::methods::MethodClass;
use crate::jsonrpc::{Id, Request};
use crate::observe::metrics;
use crate::pools::{Host, Pool};
use crate::verify::block::{check_header, HeaderFacts};
use crate::verify::logs::{check_block, LogFilter};
use crate::verify::root::Anchor;
use crate::verify::state::At;
use crate::verify::{proven, Verdict, Verified, Want};
use bytes::Bytes;
use serde_json::{json, Value};
use std::collections::BTreeMap;
use std::sync::Arc;
use std::time::Duration;

impl Gateway {
    /// `eth_getLogs` over `from..=to` held to the anchored chain, when the pool's reads
    /// are proven and the range is within `logs_blocks`; `None` reads it as before.
    pub(super) async fn complete_logs(
        &self,
        pool: &Pool,
        filter: &Value,
        (from, to): (u64, u64),
        body: &[u8],
        rid: &str,
    ) -> Option<Result<RpcReply, ApiError>> {
        let root = self.conf.root.as_ref()?;
        if self.conf.verify == VerifyMode::Off || to - from >= root.logs_blocks {
            return None;
        }
        let selects = LogFilter::of_range(filter)?;
        let chain = match self.anchored_chain(pool, from, to, root.ask, rid).await {
            Ok(chain) => chain,
            Err(e) => return Some(Err(e)),
        };
        let need = Need {
            min_head: to,
            ..Need::default()
        };
        let hosts = match self.hosts_reaching(pool, None, need).await {
            Ok(hosts) => hosts,
            Err(e) => return Some(Err(e)),
        };
        let policy = self.policy(
            self.conf.budget(MethodClass::Read),
            NodeState::NextHostElseAnswer,
        );
        let range = RangeRead {
            chain: &chain,
            filter: &selects,
            body,
            rid,
        };
        let range = &range;
        Some(
            policy
                .run(&hosts, |host, share| {
                    Box::pin(self.complete_attempt(host, range, share))
                })
                .await,
        )
    }

    /// One host's answer for the range, held to the anchored chain's receipts.
    async fn complete_attempt(
        &self,
        host: &Arc<Host>,
        range: &RangeRead<'_>,
        share: Duration,
    ) -> Result<(Bytes, Verified), String> {
        let began = tokio::time::Instant::now();
        let answer = self.attempt(host, range.body, range.rid, share).await?;
        let left = share.saturating_sub(began.elapsed());
        let verdict = self.judge_range(host, range, &answer, left).await;
        let why = match verdict {
            Verdict::Proven(()) => {
                metrics::checked_answer(&host.pool, "complete_logs", "proven");
                return Ok((answer, Verified::Root(range.chain.anchor.note())));
            }
            // An error answer, or receipts the edge could not fetch: served unchecked
            // only when it is an error (a node-state error goes on to the next host).
            Verdict::Unchecked(why) => {
                if answer_is_error(&answer) {
                    return Ok((answer, Verified::None));
                }
                return Err(format!("its logs could not be checked: {why}"));
            }
            Verdict::Disproved(why) => why,
        };
        metrics::checked_answer(&host.pool, "complete_logs", "disproved");
        let seen = Misbehaviour {
            method: "eth_getLogs",
            check: "complete_logs",
            why: &why,
            rid: range.rid,
            request: range.body,
            answer: &answer,
            winning: None,
        };
        seen.record(host);
        if self.conf.verify == VerifyMode::Observe {
            return Ok((answer, Verified::None));
        }
        Err(format!("its logs are not the blocks' ({why})"))
    }

    /// A range answer against the chain: no log outside it or of another block, and per
    /// block exactly the logs its checked receipts give the filter.
    async fn judge_range(
        &self,
        host: &Arc<Host>,
        range: &RangeRead<'_>,
        answer: &[u8],
        left: Duration,
    ) -> Verdict<()> {
        let began = tokio::time::Instant::now();
        let Ok(response) = serde_json::from_slice::<Value>(answer) else {
            return Verdict::Disproved("not JSON-RPC".into());
        };
        let Some(logs) = response.get("result").and_then(Value::as_array) else {
            return Verdict::Unchecked("no list of logs".into());
        };
        let chain = range.chain;
        let mut by_block: BTreeMap<u64, Vec<&Value>> = BTreeMap::new();
        for log in logs {
            let number = log
                .get("blockNumber")
                .and_then(Value::as_str)
                .and_then(quantity);
            let hash = log.get("blockHash").and_then(Value::as_str);
            let header = number.and_then(|n| chain.header(n));
            let Some(header) = header else {
                return Verdict::Disproved(format!("a log outside the range: {log}"));
            };
            if hash.and_then(|h| h.parse().ok()) != Some(header.hash) {
                return Verdict::Disproved(format!(
                    "a log of block {} not in the chain: {log}",
                    header.number
                ));
            }
            by_block.entry(header.number).or_default().push(log);
        }
        for header in &chain.headers {
            let answered = by_block.remove(&header.number).unwrap_or_default();
            if !range.filter.may_match(&header.logs_bloom) {
                if !answered.is_empty() {
                    return Verdict::Disproved(format!(
                        "logs in block {}, whose bloom holds none the filter selects",
                        header.number
                    ));
                }
                continue;
            }
            let left = left.saturating_sub(began.elapsed());
            let receipts = proven!(self.receipts_of(host, header.hash, range.rid, left).await);
            let checked = check_block(&answered, &receipts, range.filter);
            proven!(checked.context(&format!("block {}", header.number)));
        }
        Verdict::Proven(())
    }

    /// Blocks `from..=to` trusted: `to` anchored, each header before it linked to the next
    /// by its parent hash (kept from an earlier range, else asked as one batch of one
    /// host, each hash recomputed, and kept as anchored).
    async fn anchored_chain(
        &self,
        pool: &Pool,
        from: u64,
        to: u64,
        ask: usize,
        rid: &str,
    ) -> Result<Chain, ApiError> {
        let anchor = self.anchor(pool, At::Number(to), ask, rid).await?;
        let mut headers = vec![anchor.header];
        let anchors = &self.checked.anchors;
        let kept: Option<Vec<HeaderFacts>> = (from..to)
            .map(|n| anchors.at_number(pool, n).map(|a| a.header))
            .collect();
        if let Some(kept) = kept.filter(|k| linked(k, &anchor.header).is_ok()) {
            headers.splice(0..0, kept);
        } else if from < to {
            let earlier = self
                .headers_leading_to(pool, from, &anchor.header, rid)
                .await?;
            for header in &earlier {
                anchors.keep(
                    pool,
                    Anchor {
                        header: *header,
                        ..anchor
                    },
                );
            }
            headers.splice(0..0, earlier);
        }
        Ok(Chain { anchor, headers })
    }
}

impl Gateway {
    /// Headers `from..top` asked as one batch of one host, each hash recomputed and
    /// linked by parent hashes to `top` (trusted): then as trusted as it. Oldest first,
    /// `top` not included. A range's blocks, and the light client's older blocks.
    pub(super) async fn headers_leading_to(
        &self,
        pool: &Pool,
        from: u64,
        top: &HeaderFacts,
        rid: &str,
    ) -> Result<Vec<HeaderFacts>, ApiError> {
        let calls: Vec<Request> = (from..top.number)
            .map(|n| {
                let params = json!([format!("0x{n:x}"), false]);
                let id = Id::index((n - from) as usize);
                Request::new(id, "eth_getBlockByNumber", params)
            })
            .collect();
        let body = serde_json::to_vec(&calls).unwrap_or_default();
        let need = Need {
            min_head: top.number,
            ..Need::default()
        };
        let reply = self.read(pool, MethodClass::Read, need, &body, rid).await?;
        linked_headers(&reply.body, from, top).map_err(|why| {
            let n = top.number;
            let why = format!("the headers below block {n} do not lead to it: {why}");
            ApiError::bad_gateway("upstream_unavailable", why)
        })
    }
}

/// A range's blocks, oldest first, the last one anchored.
struct Chain {
    anchor: Anchor,
    headers: Vec<HeaderFacts>,
}

impl Chain {
    fn header(&self, number: u64) -> Option<&HeaderFacts> {
        let first = self.headers.first()?.number;
        self.headers
            .get(usize::try_from(number.checked_sub(first)?).ok()?)
    }
}

/// A range read being checked.
struct RangeRead<'a> {
    chain: &'a Chain,
    filter: &'a LogFilter,
    body: &'a [u8],
    rid: &'a str,
}

/// A batch answer of headers `from..` (ids from 0), each checked against itself and
/// linked, newest last, to `last` by parent hashes.
pub(super) fn linked_headers(
    batch: &[u8],
    from: u64,
    last: &HeaderFacts,
) -> Result<Vec<HeaderFacts>, String> {
    let answers: Vec<Value> = serde_json::from_slice(batch).map_err(|_| "not a batch answer")?;
    let count = (last.number - from) as usize;
    let mut headers: Vec<Option<HeaderFacts>> = vec![None; count];
    for answer in &answers {
        let index = answer
            .get("id")
            .and_then(Value::as_u64)
            .ok_or("an answer without its id")?;
        let slot = headers
            .get_mut(index as usize)
            .ok_or("an answer to no call")?;
        let block = answer
            .get("result")
            .filter(|r| r.is_object())
            .ok_or_else(|| format!("no block {}", from + index))?;
        match check_header(block, Want::Number(from + index)) {
            Verdict::Proven(facts) => *slot = Some(facts),
            Verdict::Unchecked(why) | Verdict::Disproved(why) => {
                return Err(format!("block {}: {why}", from + index))
            }
        }
    }
    let headers: Vec<HeaderFacts> = headers
        .into_iter()
        .collect::<Option<_>>()
        .ok_or("a header missing")?;
    linked(&headers, last)?;
    Ok(headers)
}

/// Whether `headers` (consecutive, oldest first) lead by parent hashes to `last`.
fn linked(headers: &[HeaderFacts], last: &HeaderFacts) -> Result<(), String> {
    let mut next = last;
    for header in headers.iter().rev() {
        if next.parent_hash != header.hash {
            return Err(format!(
                "block {}'s parent is {}, not {}",
                next.number, next.parent_hash, header.hash
            ));
        }
        next = header;
    }
    Ok(())
}

fn quantity(s: &str) -> Option<u64> {
    u64::from_str_radix(s.strip_prefix("0x")?, 16).ok()
}

fn answer_is_error(answer: &[u8]) -> bool {
    serde_json::from_slice::<Value>(answer).is_ok_and(|v| v.get("error").is_some())
}

//! Anchoring a block: its header asked of several hosts at once, each header's hash
//! recomputed from its fields, and the hash a strict majority give trusted. Kept, so a
//! block is anchored once (a number near the head only briefly: a reorganisation moves
//! it). A host whose header is disproved or outvoted is recorded as misbehaving.

use super::misbehaviour::Misbehaviour;
use super::need::Need;
use super::Gateway;
use crate::errors::ApiError;
use crate::jsonrpc::{Id, Request};
use crate::pools::{Host, Pool};
use crate::verify::block::check_header;
use crate::verify::root::{Anchor, RootSource};
use crate::verify::state::At;
use crate::verify::{Verdict, Want};
use alloy_primitives::B256;
use bytes::Bytes;
use futures_util::stream::{FuturesUnordered, StreamExt};
use lru::LruCache;
use serde_json::{json, Value};
use std::num::NonZeroUsize;
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

/// Anchors kept (a header's roots and bloom: about 350 bytes each).
const ANCHORS_KEPT: usize = 4096;
/// Blocks this close to the head may still be reorganised away: their anchor by number
/// is asked again once it is older than `NEAR_HEAD_FOR`.
const REORG_DEPTH: u64 = 64;
const NEAR_HEAD_FOR: Duration = Duration::from_secs(2);

/// The hosts that gave one header, with their answers.
type Givers = Vec<(Arc<Host>, Bytes)>;

/// Anchored blocks by pool and place (`Want::Number` or `Want::Hash`), with when they
/// were anchored.
pub struct Anchors {
    kept: Mutex<LruCache<(String, Want), (Anchor, Instant)>>,
}

impl Default for Anchors {
    fn default() -> Self {
        Anchors {
            kept: Mutex::new(LruCache::new(
                NonZeroUsize::new(ANCHORS_KEPT).expect("a positive bound"),
            )),
        }
    }
}

impl Anchors {
    fn get(&self, pool: &Pool, place: Want) -> Option<Anchor> {
        let mut kept = self.kept.lock().ok()?;
        let (anchor, when) = *kept.get(&(pool.name.clone(), place))?;
        let head = pool.head.load(std::sync::atomic::Ordering::Relaxed);
        let settled = anchor.header.number.saturating_add(REORG_DEPTH) <= head;
        (matches!(place, Want::Hash(_)) || settled || when.elapsed() < NEAR_HEAD_FOR)
            .then_some(anchor)
    }

    /// The block `hash` names on `pool`, when it is anchored.
    pub(super) fn at_hash(&self, pool: &Pool, hash: B256) -> Option<Anchor> {
        self.get(pool, Want::Hash(hash))
    }

    /// The block numbered `number` on `pool`, when it is anchored (and not stale).
    pub(super) fn at_number(&self, pool: &Pool, number: u64) -> Option<Anchor> {
        self.get(pool, Want::Number(number))
    }

    pub(super) fn keep(&self, pool: &Pool, anchor: Anchor) {
        if let Ok(mut kept) = self.kept.lock() {
            let now = Instant::now();
            let h = anchor.header;
            kept.put((pool.name.clone(), Want::Number(h.number)), (anchor, now));
            kept.put((pool.name.clone(), Want::Hash(h.hash)), (anchor, now));
        }
    }
}

impl Gateway {
    /// The anchored block `at` names on `pool`: kept, else voted on by `ask` hosts.
    pub(super) async fn anchor(
        &self,
        pool: &Pool,
        at: At,
        ask: usize,
        rid: &str,
    ) -> Result<Anchor, ApiError> {
        // Where a light client follows the pool, what it trusts needs no vote.
        if let Some(anchor) = self.light_anchor(pool, at, rid).await? {
            return Ok(anchor);
        }
        let head = pool.head.load(std::sync::atomic::Ordering::Relaxed);
        let at = match at {
            // `latest` is the pool's head: the block a strict majority of hosts reached.
            At::Latest if head > 0 => At::Number(head),
            other => other,
        };
        let anchors = &self.checked.anchors;
        let kept = Some(at.want()).filter(|w| *w != Want::Tag);
        if let Some(kept) = kept.and_then(|w| anchors.get(pool, w)) {
            return Ok(kept);
        }
        let anchor = self.vote_on_header(pool, at, ask, rid).await?;
        anchors.keep(pool, anchor);
        Ok(anchor)
    }

    /// Block `at`'s header from up to `ask` hosts that have it; the hash a strict
    /// majority of the answers give (each checked against itself first).
    async fn vote_on_header(
        &self,
        pool: &Pool,
        at: At,
        ask: usize,
        rid: &str,
    ) -> Result<Anchor, ApiError> {
        let want = at.want();
        let method = match want {
            Want::Hash(_) => "eth_getBlockByHash",
            _ => "eth_getBlockByNumber",
        };
        let call = Request::new(Id::index(1), method, json!([at.param(), false]));
        let body = &call.to_bytes();
        let voters = self.header_voters(pool, at, ask).await?;
        let budget = self.conf.budget(crate::jsonrpc::methods::MethodClass::Read);
        let mut vote = HeaderVote {
            want,
            method,
            rid,
            request: body,
            asked: voters.len(),
            tally: Vec::new(),
            said: Vec::new(),
        };
        let mut answers: FuturesUnordered<_> = voters
            .into_iter()
            .map(|host| async move {
                let answer = self.attempt(&host, body, rid, budget.attempt).await;
                (host, answer)
            })
            .collect();
        let deadline = tokio::time::Instant::now() + budget.total;
        while let Ok(Some((host, answer))) = tokio::time::timeout_at(deadline, answers.next()).await
        {
            if let Some(anchor) = vote.cast(host, answer) {
                return Ok(anchor);
            }
        }
        Err(vote.dispute(at))
    }

    /// Up to `ask` hosts of `pool` that have block `at` (by their last head).
    async fn header_voters(
        &self,
        pool: &Pool,
        at: At,
        ask: usize,
    ) -> Result<Vec<Arc<Host>>, ApiError> {
        let floor = match at {
            At::Number(n) => n,
            _ => 0,
        };
        let need = Need {
            min_head: floor,
            ..Need::default()
        };
        let hosts = self.hosts_reaching(pool, None, need).await?;
        let voters: Vec<Arc<Host>> = hosts
            .into_iter()
            .filter(|h| h.health.head() >= floor || h.health.head() == 0)
            .take(ask.max(1))
            .cloned()
            .collect();
        if voters.is_empty() {
            let why = format!("no host of pool {} has block {}", pool.name, at.param());
            return Err(no_anchor(why));
        }
        Ok(voters)
    }
}

/// A vote on one block's header: each hash given, with the hosts that gave it.
struct HeaderVote<'a> {
    want: Want,
    method: &'a str,
    rid: &'a str,
    request: &'a [u8],
    asked: usize,
    tally: Vec<(B256, Givers)>,
    /// What each host that cast no vote said instead.
    said: Vec<String>,
}

impl HeaderVote<'_> {
    fn agree(&self) -> usize {
        self.asked / 2 + 1
    }

    /// One host's answer counted: the anchor once a strict majority gave one hash.
    fn cast(&mut self, host: Arc<Host>, answer: Result<Bytes, String>) -> Option<Anchor> {
        let Ok(answer) = answer else {
            self.said.push(format!("{}: no answer", host.id));
            return None;
        };
        let result = serde_json::from_slice::<Value>(&answer)
            .ok()
            .and_then(|mut v| v.get_mut("result").map(Value::take));
        let Some(block) = result.filter(|r| !r.is_null()) else {
            self.said.push(format!("{}: no such block", host.id));
            return None;
        };
        let facts = match check_header(&block, self.want) {
            Verdict::Proven(facts) => facts,
            Verdict::Unchecked(why) => {
                let said = format!("{}: a header the edge cannot check ({why})", host.id);
                self.said.push(said);
                return None;
            }
            Verdict::Disproved(why) => {
                self.record(&host, "header", &why, &answer, None);
                let said = format!("{}: a header that is not its block's ({why})", host.id);
                self.said.push(said);
                return None;
            }
        };
        let at = match self.tally.iter().position(|(h, _)| *h == facts.hash) {
            Some(at) => at,
            None => {
                self.tally.push((facts.hash, Vec::new()));
                self.tally.len() - 1
            }
        };
        self.tally[at].1.push((host, answer));
        if self.tally[at].1.len() < self.agree() {
            return None;
        }
        let (_, winners) = self.tally.swap_remove(at);
        let won = winners.first().map(|(_, b)| b.clone()).unwrap_or_default();
        for (host, answer) in self.tally.iter().flat_map(|(_, hs)| hs) {
            self.record(host, "anchor", "outvoted", answer, Some(&won));
        }
        Some(Anchor {
            header: facts,
            by: RootSource::Majority,
            agree: winners.len() as u8,
            asked: self.asked as u8,
        })
    }

    /// A host's header disproved or outvoted: logged, counted, towards its cordon.
    fn record(
        &self,
        host: &Host,
        check: &'static str,
        why: &str,
        answer: &[u8],
        winning: Option<&[u8]>,
    ) {
        let seen = Misbehaviour {
            method: self.method,
            check,
            why,
            rid: self.rid,
            request: self.request,
            answer,
            winning,
        };
        seen.record(host);
    }

    /// No hash reached a majority: an error naming what each host said.
    fn dispute(mut self, at: At) -> ApiError {
        for (hash, hosts) in &self.tally {
            let ids: Vec<&str> = hosts.iter().map(|(h, _)| h.id.as_str()).collect();
            self.said.push(format!("{}: {hash}", ids.join("+")));
        }
        no_anchor(format!(
            "block {} is not anchored: {} of {} hosts must give the same header; {}",
            at.param(),
            self.agree(),
            self.asked,
            self.said.join(" / ")
        ))
    }
}

fn no_anchor(why: String) -> ApiError {
    ApiError::bad_gateway("quorum_dispute", why)
}

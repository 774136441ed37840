//! How the indexer reads blocks from its pool: dense batches (every block whole, with its
//! receipts), sparse windows (headers first, bodies only where there are transactions),
//! and dense batches fetched *ahead*, each in a task of its own, while the batch before
//! them commits: the node is never idle waiting for the store, and the decoding runs on
//! another worker thread than the commit.

use super::decode::{self, RpcBlock, RpcHeader, RpcTx};
use super::StepError;
use crate::jsonrpc::ErrorObject;
use crate::observe::metrics;
use crate::pools::{Pool, Pools};
use crate::rpc::Gateway;
use crate::store::index::IndexedBlock;
use bytes::Bytes;
use futures_util::FutureExt;
use serde::Deserialize;
use serde_json::value::RawValue;
use serde_json::{json, Value};
use std::collections::VecDeque;
use std::sync::Arc;
use std::time::{Duration, Instant};
use tokio::task::JoinHandle;

/// Headers asked for at once on a sparse stretch.
pub(super) const SPARSE_WINDOW: u64 = 1000;

/// The blocks one fetch brought, decoded.
pub(super) struct Batch {
    pub blocks: Vec<IndexedBlock>,
    /// Every block asked for came (none was past the node's head).
    pub complete: bool,
    /// The next step should read headers first: this batch ended on an empty block (dense),
    /// or at least half of this window was empty (sparse).
    pub go_sparse: bool,
}

/// What the indexer reads blocks with; cheap to clone into a task of its own.
#[derive(Clone)]
pub(super) struct Fetcher {
    pub gateway: Arc<Gateway>,
    pub pools: Arc<Pools>,
    pub pool: String,
    pub chain: String,
    pub rid: String,
}

impl Fetcher {
    pub fn pool(&self) -> Result<&Arc<Pool>, StepError> {
        self.pools
            .get(&self.pool)
            .ok_or_else(|| StepError::Node(format!("no pool {}", self.pool)))
    }

    /// The pool's head block number.
    pub async fn head(&self) -> Result<u64, StepError> {
        let (head, _) = self
            .gateway
            .read_call(self.pool()?, "eth_blockNumber", json!([]), &self.rid)
            .await?;
        head.as_str()
            .and_then(decode::quantity)
            .ok_or_else(|| StepError::Node("eth_blockNumber is not a quantity".into()))
    }

    /// Blocks `first..=last` with their receipts, in one batch; a block the node has not
    /// got yet ends it.
    pub async fn dense(&self, first: u64, last: u64) -> Result<Batch, StepError> {
        let calls = whole((first..=last).map(|n| json!(format!("0x{n:x}"))));
        let reply = self.batch(&calls).await?;
        let answers = in_order(&reply, &calls)?;
        let mut blocks = Vec::with_capacity(answers.len() / 2);
        let mut go_sparse = false;
        for pair in answers.chunks(2) {
            // A node that has not got this block yet: commit what came before it.
            let (Some(block), Some(receipts)) = (pair[0], pair[1]) else {
                break;
            };
            let (block, receipts) = (parse::<RpcBlock<RpcTx>>(block)?, parse::<Vec<_>>(receipts)?);
            blocks.push(decode::block(&block, &receipts).map_err(|e| StepError::Node(e.0))?);
            go_sparse = block.transactions.is_empty();
        }
        Ok(Batch {
            complete: blocks.len() as u64 == last - first + 1,
            go_sparse,
            blocks,
        })
    }

    /// Blocks `first..=last` (at most `SPARSE_WINDOW`) read from their headers: only the
    /// blocks with transactions are fetched whole, with their receipts, in a second batch.
    /// The window ends before a block the node has not got, or one that changed between
    /// the two batches. Stays sparse while at least half the window is empty.
    pub async fn sparse(&self, first: u64, last: u64) -> Result<Batch, StepError> {
        let calls: Vec<(&str, Value)> = (first..=last)
            .map(|n| ("eth_getBlockByNumber", json!([format!("0x{n:x}"), false])))
            .collect();
        let reply = self.batch(&calls).await?;
        let headers = in_order(&reply, &calls)?
            .into_iter()
            .map_while(|h| h.map(parse::<RpcHeader>))
            .collect::<Result<Vec<_>, _>>()?;
        let full = whole(
            headers
                .iter()
                .filter(|h| !h.transactions.is_empty())
                .map(|h| json!(h.number)),
        );
        let raw = if full.is_empty() {
            Bytes::new()
        } else {
            self.batch(&full).await?
        };
        let bodies = if full.is_empty() {
            Vec::new()
        } else {
            in_order(&raw, &full)?
        };
        let mut bodies = bodies.chunks(2);
        let (mut blocks, mut header_only) = (Vec::with_capacity(headers.len()), 0);
        for h in &headers {
            let block = if h.transactions.is_empty() {
                header_only += 1;
                decode::empty_block(h)
            } else {
                let pair = bodies
                    .next()
                    .expect("a body for each block with transactions");
                let (Some(block), Some(receipts)) = (pair[0], pair[1]) else {
                    break;
                };
                let (block, receipts) =
                    (parse::<RpcBlock<RpcTx>>(block)?, parse::<Vec<_>>(receipts)?);
                if !block.hash.eq_ignore_ascii_case(h.hash) {
                    break;
                }
                decode::block(&block, &receipts)
            };
            blocks.push(block.map_err(|e| StepError::Node(e.0))?);
        }
        let empty = headers.iter().filter(|h| h.transactions.is_empty()).count();
        metrics::INDEX_HEADER_ONLY
            .with_label_values(&[&self.chain])
            .inc_by(header_only);
        Ok(Batch {
            complete: blocks.len() as u64 == last - first + 1,
            go_sparse: 2 * empty >= headers.len().max(1),
            blocks,
        })
    }

    /// The calls as one batch to one host of the pool; the node's answer unparsed.
    async fn batch(&self, calls: &[(&str, Value)]) -> Result<Bytes, StepError> {
        let reply = self
            .gateway
            .read_batch_raw(self.pool()?, calls, &self.rid)
            .await?;
        Ok(reply.body)
    }
}

/// One answer of a batch, its result left unparsed.
#[derive(Deserialize)]
struct Answer<'a> {
    #[serde(default)]
    id: Option<usize>,
    #[serde(borrow, default)]
    result: Option<&'a RawValue>,
    #[serde(default)]
    error: Option<ErrorObject>,
}

/// The batch answer's results in the calls' order (`None`: the node answered `null`);
/// any call's error fails the batch, as `Gateway::read_batch` does.
fn in_order<'a>(
    body: &'a [u8],
    calls: &[(&str, Value)],
) -> Result<Vec<Option<&'a RawValue>>, StepError> {
    let answers: Vec<Answer> = serde_json::from_slice(body)
        .map_err(|_| StepError::Node("the node's batch answer is not a JSON-RPC array".into()))?;
    let mut results = vec![None; calls.len()];
    for a in answers {
        let Some(slot) = a.id.and_then(|i| results.get_mut(i)) else {
            continue;
        };
        if let Some(e) = a.error {
            let method = calls[a.id.unwrap_or_default()].0;
            return Err(StepError::Node(format!(
                "{method}: the node answered: {}",
                e.message
            )));
        }
        *slot = Some(a.result.filter(|r| r.get() != "null"));
    }
    results
        .into_iter()
        .collect::<Option<Vec<_>>>()
        .ok_or_else(|| StepError::Node("the node's batch answer misses calls".into()))
}

fn parse<'a, T: Deserialize<'a>>(raw: &'a RawValue) -> Result<T, StepError> {
    serde_json::from_str(raw.get()).map_err(|e| StepError::Node(format!("not a block: {e}")))
}

/// The calls for blocks whole: each block with its transactions, then its receipts.
fn whole(tags: impl Iterator<Item = Value>) -> Vec<(&'static str, Value)> {
    tags.flat_map(|tag| {
        [
            ("eth_getBlockByNumber", json!([tag.clone(), true])),
            ("eth_getBlockReceipts", json!([tag])),
        ]
    })
    .collect()
}

/// Dense batches being fetched ahead, consecutive and in order, each in its own task.
/// Dropped or cleared, the tasks are aborted: nothing fetched ahead is ever committed
/// without being linked to the committed tip first, so a reorg or another instance's
/// commit only costs the fetch.
#[derive(Default)]
pub(super) struct Ahead {
    queue: VecDeque<(u64, u64, Fetching)>,
}

/// A batch being fetched and decoded in a task of its own.
type Fetching = JoinHandle<Result<Batch, StepError>>;

impl Ahead {
    /// The batch starting at `first`, if it is the one fetched ahead; anything else queued
    /// does not follow the committed tip and is dropped.
    pub async fn take(&mut self, first: u64) -> Option<Result<Batch, StepError>> {
        if self.queue.front().map(|(f, _, _)| *f) != Some(first) {
            self.clear();
            return None;
        }
        let (_, _, task) = self.queue.pop_front()?;
        Some(match task.await {
            Ok(fetched) => fetched,
            Err(e) => Err(StepError::Node(format!("a fetch ahead ended: {e}"))),
        })
    }

    /// Keep `depth` batches of `size` blocks in flight from `from` (the block after the
    /// last one asked for) up to `target`.
    pub fn fill(&mut self, fetcher: &Fetcher, mut from: u64, target: u64, size: u64, depth: usize) {
        if let Some((_, last, _)) = self.queue.back() {
            from = last + 1;
        }
        while self.queue.len() < depth && from <= target {
            let last = target.min(from + size - 1);
            let fetcher = fetcher.clone();
            let task = tokio::spawn(async move { fetcher.dense(from, last).await });
            self.queue.push_back((from, last, task));
            from = last + 1;
        }
    }

    pub fn clear(&mut self) {
        for (_, _, task) in self.queue.drain(..) {
            task.abort();
        }
    }
}

impl Drop for Ahead {
    fn drop(&mut self) {
        self.clear();
    }
}

/// The pool's head as the indexer knows it. Backfilling far below the head, the head is
/// not asked for on every step: a node busy with a batch may answer even
/// `eth_blockNumber` only after it, which would hold each step for a whole fetch. A head
/// known to be at or past the block wanted is used, and refreshed in the background once
/// older than `fresh`; otherwise (caught up, or not known yet) it is asked for now.
#[derive(Default)]
pub(super) struct HeadWatch {
    known: Option<(u64, Instant)>,
    asking: Option<JoinHandle<Result<u64, StepError>>>,
}

impl HeadWatch {
    pub async fn at_least(
        &mut self,
        fetcher: &Fetcher,
        wanted: u64,
        fresh: Duration,
    ) -> Result<u64, StepError> {
        if self.asking.as_ref().is_some_and(JoinHandle::is_finished) {
            if let Some(Some(Ok(Ok(head)))) = self.asking.take().map(|t| t.now_or_never()) {
                self.known = Some((head, Instant::now()));
            }
        }
        if let Some((head, at)) = self.known {
            if head >= wanted {
                if at.elapsed() >= fresh && self.asking.is_none() {
                    let fetcher = fetcher.clone();
                    self.asking = Some(tokio::spawn(async move { fetcher.head().await }));
                }
                return Ok(head);
            }
        }
        let head = match self.asking.take() {
            Some(task) => task
                .await
                .map_err(|e| StepError::Node(format!("asking the head ended: {e}")))??,
            None => fetcher.head().await?,
        };
        self.known = Some((head, Instant::now()));
        Ok(head)
    }
}

impl Drop for HeadWatch {
    fn drop(&mut self) {
        if let Some(task) = self.asking.take() {
            task.abort();
        }
    }
}

//! How the indexer reads blocks from its pool: dense batches (every block whole, with its
//! receipts), sparse windows (headers first, bodies only where there are transactions),
//! and dense batches fetched *ahead* by a feeder task, `fetch_ahead` at the node at once
//! while the ones before them decode and commit: the node is never idle waiting for the
//! store or the decoder, and the decoding runs on a blocking thread, off the capture's own.

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
use std::future::Future;
use std::sync::Arc;
use std::time::{Duration, Instant};
use tokio::sync::{mpsc, watch, OwnedSemaphorePermit, Semaphore};
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
        self.dense_at_node(first, last, None).await
    }

    /// `dense`, holding `at_node` (a place among the fetches at the node at once) only
    /// until the node's answer is in: the next fetch can be asked for while this one
    /// decodes. The decoding (about 10 ms for 50 full blocks) runs on a blocking thread:
    /// on the capture's own thread it would hold up reading the other answers and
    /// asking for the next batch, the node idle meanwhile.
    async fn dense_at_node(
        &self,
        first: u64,
        last: u64,
        at_node: Option<OwnedSemaphorePermit>,
    ) -> Result<Batch, StepError> {
        let calls = whole((first..=last).map(|n| json!(format!("0x{n:x}"))));
        let reply = self.batch(&calls).await?;
        drop(at_node);
        tokio::task::spawn_blocking(move || decode_dense(first, last, &calls, &reply))
            .await
            .map_err(|e| StepError::Node(format!("decoding a batch ended: {e}")))?
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

/// The blocks of a dense batch's answer, in order; a block the node has not got yet ends
/// them.
fn decode_dense(
    first: u64,
    last: u64,
    calls: &[(&str, Value)],
    reply: &[u8],
) -> Result<Batch, StepError> {
    let answers = in_order(reply, calls)?;
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

/// Dense batches fetched ahead of the commits, consecutive and in order. A feeder task
/// keeps `depth` fetches at the node at once and asks for the next batch as soon as one's
/// answer is in, not when the commit loop takes it: the node waits neither for the
/// decoding nor for the store, as it would not for a client that only reads. At most
/// `2 × depth` batches are ahead (at the node, decoding or decoded), so a slow store
/// holds the feeder back. Dropped or cleared, the feeder and every fetch are aborted:
/// nothing fetched ahead is ever committed without being linked to the committed tip
/// first, so a reorg or another instance's commit only costs the fetches.
#[derive(Default)]
pub(super) struct Ahead {
    feed: Option<Feed>,
}

/// A batch being fetched and decoded in a task of its own.
type Fetching = JoinHandle<Result<Batch, StepError>>;

struct Feed {
    /// The first block of the batch handed over next.
    next: u64,
    /// The last block to ask for, raised as the head moves.
    target: watch::Sender<u64>,
    batches: mpsc::Receiver<(u64, u64, Fetching)>,
    feeder: JoinHandle<()>,
}

impl Ahead {
    /// The batch starting at `first`, if it is the one fetched ahead; anything else ahead
    /// does not follow the committed tip and is dropped. `None` as well when nothing
    /// ahead reaches `first` yet (the caller fetches it itself).
    pub async fn take(&mut self, first: u64) -> Option<Result<Batch, StepError>> {
        let feed = self.feed.as_mut()?;
        if feed.next != first {
            self.clear();
            return None;
        }
        if *feed.target.borrow() < first {
            return None;
        }
        let Some((asked, last, task)) = feed.batches.recv().await else {
            self.clear();
            return None;
        };
        debug_assert_eq!(asked, first, "the feeder asks for consecutive batches");
        feed.next = last + 1;
        let fetched = match task.await {
            Ok(fetched) => fetched,
            Err(e) => Err(StepError::Node(format!("a fetch ahead ended: {e}"))),
        };
        if fetched.is_err() {
            self.clear();
        }
        Some(fetched)
    }

    /// Fetch batches of `size` blocks ahead from `from` (the block after the one just
    /// taken) up to `target`, `depth` at the node at once; ahead already from there, the
    /// target is only raised.
    pub fn fill(&mut self, fetcher: &Fetcher, from: u64, target: u64, size: u64, depth: usize) {
        let fetcher = fetcher.clone();
        self.fill_with(from, target, size, depth, move |first, last, place| {
            let fetcher = fetcher.clone();
            async move { fetcher.dense_at_node(first, last, Some(place)).await }
        });
    }

    /// `fill`, each batch asked for with `ask(first, last, place at the node)`.
    fn fill_with<F, Fut>(&mut self, from: u64, target: u64, size: u64, depth: usize, ask: F)
    where
        F: Fn(u64, u64, OwnedSemaphorePermit) -> Fut + Send + 'static,
        Fut: Future<Output = Result<Batch, StepError>> + Send + 'static,
    {
        if depth == 0 {
            return self.clear();
        }
        if let Some(feed) = &self.feed {
            if feed.next == from && !feed.feeder.is_finished() {
                feed.target.send_if_modified(|t| {
                    let raised = target > *t;
                    *t = (*t).max(target);
                    raised
                });
                return;
            }
        }
        self.clear();
        let (target_tx, target_rx) = watch::channel(target);
        let (batches_tx, batches) = mpsc::channel(2 * depth);
        let feeder = tokio::spawn(feed(
            ask,
            from,
            size,
            Arc::new(Semaphore::new(depth)),
            target_rx,
            batches_tx,
        ));
        self.feed = Some(Feed {
            next: from,
            target: target_tx,
            batches,
            feeder,
        });
    }

    pub fn clear(&mut self) {
        if let Some(mut feed) = self.feed.take() {
            // The feeder first: once it is stopped no task is between spawned and queued.
            feed.feeder.abort();
            feed.batches.close();
            while let Ok((_, _, task)) = feed.batches.try_recv() {
                task.abort();
            }
        }
    }
}

impl Drop for Ahead {
    fn drop(&mut self) {
        self.clear();
    }
}

/// Ask for batch after batch from `from`, each once a place in the queue and a place at
/// the node (`at_node`) are free; wait for the target to move past what was asked.
async fn feed<F, Fut>(
    ask: F,
    mut from: u64,
    size: u64,
    at_node: Arc<Semaphore>,
    mut target: watch::Receiver<u64>,
    batches: mpsc::Sender<(u64, u64, Fetching)>,
) where
    F: Fn(u64, u64, OwnedSemaphorePermit) -> Fut,
    Fut: Future<Output = Result<Batch, StepError>> + Send + 'static,
{
    loop {
        if target.wait_for(|t| *t >= from).await.is_err() {
            return;
        }
        let Ok(slot) = batches.reserve().await else {
            return;
        };
        let Ok(place) = at_node.clone().acquire_owned().await else {
            return;
        };
        // The target as it is now: it may have risen while the places were awaited.
        let last = (*target.borrow()).min(from + size - 1);
        slot.send((from, last, tokio::spawn(ask(from, last, place))));
        from = last + 1;
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

#[cfg(test)]
mod tests {
    use super::*;
    use std::sync::atomic::{AtomicUsize, Ordering};

    /// A node that answers a batch after `answer` and counts what it is asked: the
    /// batches asked for, and the most at the node at once.
    #[derive(Default)]
    struct Node {
        asked: AtomicUsize,
        at_node: AtomicUsize,
        most_at_node: AtomicUsize,
    }

    fn asking(
        node: &Arc<Node>,
        answer: Duration,
    ) -> impl Fn(u64, u64, OwnedSemaphorePermit) -> BoxFuture + Send + 'static {
        let node = node.clone();
        move |first, last, place| {
            let node = node.clone();
            Box::pin(async move {
                node.asked.fetch_add(1, Ordering::SeqCst);
                let now = node.at_node.fetch_add(1, Ordering::SeqCst) + 1;
                node.most_at_node.fetch_max(now, Ordering::SeqCst);
                tokio::time::sleep(answer).await;
                node.at_node.fetch_sub(1, Ordering::SeqCst);
                drop(place);
                Ok(Batch {
                    blocks: Vec::new(),
                    complete: last >= first,
                    go_sparse: false,
                })
            })
        }
    }

    type BoxFuture =
        std::pin::Pin<Box<dyn Future<Output = Result<Batch, StepError>> + Send + 'static>>;

    /// While the batch taken commits (nothing is taken), the node keeps `depth` batches
    /// to answer until `2 × depth` are ahead; then the feeder waits.
    #[tokio::test(start_paused = true)]
    async fn the_node_keeps_depth_batches_while_one_commits() {
        let node = Arc::new(Node::default());
        let mut ahead = Ahead::default();
        ahead.fill_with(0, 1_000, 10, 2, asking(&node, Duration::from_millis(10)));
        // A commit as long as five answers: the old queue (refilled only when a batch is
        // taken) would have asked for two batches in that time.
        tokio::time::sleep(Duration::from_millis(50)).await;
        assert_eq!(node.most_at_node.load(Ordering::SeqCst), 2);
        assert_eq!(
            node.asked.load(Ordering::SeqCst),
            4,
            "2 x depth ahead, then it waits"
        );
        // Taking one frees a place in the queue: the next batch is asked for at once.
        let first = ahead
            .take(0)
            .await
            .expect("fetched ahead")
            .expect("answered");
        assert!(first.complete);
        tokio::time::sleep(Duration::from_millis(1)).await;
        assert_eq!(node.asked.load(Ordering::SeqCst), 5);
        // In order, consecutive.
        for from in [10, 20, 30, 40] {
            assert!(ahead.take(from).await.is_some(), "batch from {from}");
        }
        assert_eq!(node.most_at_node.load(Ordering::SeqCst), 2);
    }

    /// Up to the target and no further; a raised target goes on from there, and a block
    /// that does not follow what was taken drops everything ahead.
    #[tokio::test(start_paused = true)]
    async fn the_feeder_stops_at_the_target_and_follows_it() {
        let node = Arc::new(Node::default());
        let mut ahead = Ahead::default();
        let ask = asking(&node, Duration::from_millis(1));
        ahead.fill_with(0, 14, 10, 2, ask);
        tokio::time::sleep(Duration::from_millis(20)).await;
        assert_eq!(node.asked.load(Ordering::SeqCst), 2, "0..=9 and 10..=14");
        assert!(ahead.take(0).await.is_some());
        assert!(ahead.take(10).await.is_some());
        // Nothing ahead reaches 15 yet: the caller fetches it itself.
        assert!(ahead.take(15).await.is_none());
        let again = asking(&node, Duration::from_millis(1));
        ahead.fill_with(15, 30, 10, 2, again);
        tokio::time::sleep(Duration::from_millis(20)).await;
        assert_eq!(node.asked.load(Ordering::SeqCst), 4, "15..=24 and 25..=30");
        // Not the block after the committed tip (another instance moved it): dropped.
        assert!(ahead.take(16).await.is_none());
        assert!(ahead.feed.is_none());
    }
}

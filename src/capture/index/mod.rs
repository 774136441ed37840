//! The chain indexer: one background task per configured EVM chain (`index:`), following
//! the head through the chain's own pool (healthy hosts only, so a dead node never stalls
//! it) and keeping, per wallet, every native, ERC-20, ERC-721 and ERC-1155 transfer
//! (`decode.rs`) in the store (`store/index.rs`), off the proxy's path.
//!
//! Each step fetches up to `batch_blocks` blocks with their receipts in one JSON-RPC
//! batch from one node, checks that every block's parent is the block before it, and
//! commits the blocks with the new cursor in one transaction. A parent that does not
//! match what is committed is a reorg: the index walks back over the kept block hashes
//! to the common ancestor and undoes everything above it in one transaction, then goes
//! forward on the new branch. Caught up, it checks that its tip is still the chain's.
//!
//! **Sparse stretches.** Once a batch ends on an empty block, the next steps read up to
//! `SPARSE_WINDOW` headers at once (`eth_getBlockByNumber(n, false)`): a block with no
//! transactions needs no body and no receipts, so only the window's blocks with
//! transactions are fetched whole, in one more batch, and the whole window is linked,
//! reorg-checked and committed as any batch is. A window less than half empty goes back
//! to full batches. A dense chain pays one header batch each time a batch ends empty; a
//! sparse one is read a thousand blocks per step.
//!
//! Token metadata (`name`, `symbol`, `decimals`) is fetched once per token, after the
//! block that first shows it is committed; a token that answers nothing, reverts or
//! answers `bytes32` is recorded as it is and never holds indexing up.

pub mod decode;
mod fetch;

use crate::capture::{Health, Producer};
use crate::config::ChainIndexConf;
use crate::errors::ApiError;
use crate::observe::metrics;
use crate::pools::Pools;
use crate::rpc::token_metadata::token_metadata;
use crate::rpc::Gateway;
use crate::store::index::{IndexCursor, IndexedBlock};
use crate::store::Store;
use async_trait::async_trait;
use fetch::{Ahead, Fetcher, HeadWatch, SPARSE_WINDOW};
use serde_json::{json, Value};
use std::collections::BTreeSet;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;
use std::time::Duration;

/// Longest wait between attempts after failures.
const MAX_BACKOFF: Duration = Duration::from_secs(5);

pub struct Indexer {
    chain: String,
    conf: ChainIndexConf,
    fetcher: Fetcher,
    store: Store,
    /// The last batch ended on an empty block: try headers first.
    sparse: AtomicBool,
}

/// What one step did.
enum Step {
    /// Committed blocks (more may be waiting).
    Advanced,
    /// At the target height; nothing to do until the next poll.
    CaughtUp,
}

/// Why a step stopped.
#[derive(Debug)]
pub(crate) enum StepError {
    Node(String),
    Store(String),
}

impl From<ApiError> for StepError {
    fn from(e: ApiError) -> Self {
        StepError::Node(e.message)
    }
}

impl From<crate::store::sql::StoreError> for StepError {
    fn from(e: crate::store::sql::StoreError) -> Self {
        StepError::Store(e.message)
    }
}

impl std::fmt::Display for StepError {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            StepError::Node(m) => write!(f, "node: {m}"),
            StepError::Store(m) => write!(f, "store: {m}"),
        }
    }
}

impl Indexer {
    pub fn new(
        chain: &str,
        conf: ChainIndexConf,
        pools: Arc<Pools>,
        gateway: Arc<Gateway>,
        store: Store,
    ) -> Indexer {
        Indexer {
            fetcher: Fetcher {
                gateway,
                pools,
                pool: conf.pool_for(chain).to_string(),
                chain: chain.to_string(),
                rid: format!("index-{chain}"),
            },
            chain: chain.to_string(),
            conf,
            store,
            sparse: AtomicBool::new(false),
        }
    }

    /// Follow the chain until shutdown.
    async fn follow(&self, health: &Health, mut shutdown: pingora_core::server::ShutdownWatch) {
        let poll = Duration::from_millis(self.conf.poll_ms);
        let mut backoff = poll;
        let (mut ahead, mut heads) = (Ahead::default(), HeadWatch::default());
        loop {
            let wait = match self.step(&mut ahead, &mut heads).await {
                Ok(step) => {
                    health.ok();
                    backoff = poll;
                    match step {
                        Step::Advanced => Duration::ZERO,
                        Step::CaughtUp => poll,
                    }
                }
                Err(e) => {
                    ahead.clear();
                    metrics::INDEX_ERRORS
                        .with_label_values(&[&self.chain])
                        .inc();
                    health.failed(e);
                    backoff = (backoff * 2).min(MAX_BACKOFF);
                    backoff
                }
            };
            if wait.is_zero() {
                // Let shutdown in between back-to-back steps.
                if *shutdown.borrow() {
                    return;
                }
                continue;
            }
            tokio::select! {
                _ = tokio::time::sleep(wait) => {}
                _ = shutdown.changed() => return,
            }
        }
    }

    /// One step: read the cursor and the head, take the next batch (fetched ahead while
    /// the last one committed, or fetched now), queue the batches after it, link it to the
    /// committed tip and commit it with the new cursor.
    async fn step(&self, ahead: &mut Ahead, heads: &mut HeadWatch) -> Result<Step, StepError> {
        let pool = self.fetcher.pool()?;
        let cursor = self.store.index_cursor(&self.chain).await?;
        let head = match &cursor {
            Some(c) => {
                let wanted = c.number + 1 + self.conf.confirmations;
                let fresh = Duration::from_millis(self.conf.poll_ms);
                heads.at_least(&self.fetcher, wanted, fresh).await?
            }
            None => {
                heads
                    .at_least(&self.fetcher, u64::MAX, Duration::ZERO)
                    .await?
            }
        };
        let target = head.saturating_sub(self.conf.confirmations);
        let next = match &cursor {
            Some(c) => c.number + 1,
            None => self.conf.start_block.unwrap_or(target),
        };
        self.record_heads(cursor.as_ref().map(|c| c.number), head);
        if next > target {
            ahead.clear();
            return self.check_tip(pool, cursor.as_ref()).await;
        }
        let size = self.conf.batch_blocks;
        let (batch, fetched_ahead) = if let Some(batch) = ahead.take(next).await {
            (batch?, true)
        } else if self.sparse.load(Ordering::Relaxed) {
            ahead.clear();
            let last = target.min(next + SPARSE_WINDOW - 1);
            (self.fetcher.sparse(next, last).await?, false)
        } else {
            let last = target.min(next + size - 1);
            (self.fetcher.dense(next, last).await?, false)
        };
        self.sparse.store(batch.go_sparse, Ordering::Relaxed);
        match batch.blocks.last() {
            Some(b) if batch.complete && !batch.go_sparse => {
                let depth = self.conf.fetch_ahead;
                ahead.fill(&self.fetcher, b.number + 1, target, size, depth);
            }
            _ => ahead.clear(),
        }
        let blocks = match link(cursor.as_ref(), batch.blocks) {
            Linked::Blocks(blocks) => blocks,
            // Fetched before the chain moved: read it again before deciding it is a reorg.
            Linked::Reorg if fetched_ahead => {
                ahead.clear();
                return Ok(Step::Advanced);
            }
            Linked::Reorg => {
                ahead.clear();
                let c = cursor.as_ref().expect("a parent comes from the cursor");
                self.roll_back(pool, c).await?;
                return Ok(Step::Advanced);
            }
        };
        let Some(top) = blocks.last().map(|b| b.number) else {
            return Ok(Step::CaughtUp);
        };
        let keep_from = top.saturating_sub(self.conf.max_reorg_depth);
        let transfers: usize = blocks.iter().map(|b| b.transfers.len()).sum();
        match self
            .store
            .commit_blocks(&self.chain, cursor.as_ref(), &blocks, keep_from)
            .await
        {
            Ok(()) => {}
            // Another instance committed this step first: start over from its cursor.
            Err(e) if e.kind == crate::store::sql::ErrorKind::Conflict => {
                ahead.clear();
                return Ok(Step::Advanced);
            }
            Err(e) => return Err(e.into()),
        }
        metrics::INDEX_BLOCKS
            .with_label_values(&[&self.chain])
            .inc_by(blocks.len() as u64);
        metrics::INDEX_TRANSFERS
            .with_label_values(&[&self.chain])
            .inc_by(transfers as u64);
        self.record_heads(Some(top), head);
        self.fetch_metadata(pool, &blocks).await;
        Ok(Step::Advanced)
    }

    /// Caught up: is the committed tip still the chain's? A reorg is rolled back.
    async fn check_tip(
        &self,
        pool: &crate::pools::Pool,
        cursor: Option<&IndexCursor>,
    ) -> Result<Step, StepError> {
        let Some(c) = cursor else {
            return Ok(Step::CaughtUp);
        };
        let (tip, _) = self
            .fetcher
            .gateway
            .read_call(
                pool,
                "eth_getBlockByNumber",
                json!([format!("0x{:x}", c.number), false]),
                &self.fetcher.rid,
            )
            .await?;
        let hash = tip
            .get("hash")
            .and_then(Value::as_str)
            .map(str::to_ascii_lowercase);
        if hash.is_some_and(|h| h != c.hash) {
            self.roll_back(pool, c).await?;
            return Ok(Step::Advanced);
        }
        Ok(Step::CaughtUp)
    }

    fn record_heads(&self, indexed: Option<u64>, head: u64) {
        if let Some(n) = indexed {
            metrics::INDEX_HEAD
                .with_label_values(&[&self.chain])
                .set(n as i64);
            metrics::INDEX_LAG
                .with_label_values(&[&self.chain])
                .set(head.saturating_sub(n) as i64);
        }
    }

    /// Undo the blocks above the last one both the index and the chain have.
    async fn roll_back(
        &self,
        pool: &crate::pools::Pool,
        tip: &IndexCursor,
    ) -> Result<(), StepError> {
        let rid = &self.fetcher.rid;
        let from = tip.number.saturating_sub(self.conf.max_reorg_depth);
        let kept = self
            .store
            .indexed_blocks(&self.chain, from, tip.number)
            .await?;
        let mut ancestor = None;
        // Newest first, a JSON-RPC batch of hashes at a time.
        for chunk in kept.chunks(32) {
            let calls: Vec<(&str, Value)> = chunk
                .iter()
                .map(|(n, _, _)| ("eth_getBlockByNumber", json!([format!("0x{n:x}"), false])))
                .collect();
            let (answers, _) = self.fetcher.gateway.read_batch(pool, &calls, rid).await?;
            let found = chunk.iter().zip(&answers).find(|((_, hash, _), block)| {
                block
                    .get("hash")
                    .and_then(Value::as_str)
                    .map(str::to_ascii_lowercase)
                    == Some(hash.clone())
            });
            if let Some(((n, hash, _), _)) = found {
                ancestor = Some(IndexCursor {
                    number: *n,
                    hash: hash.clone(),
                });
                break;
            }
        }
        let ancestor = match ancestor {
            Some(a) => a,
            None => {
                // Deeper than the kept hashes: re-index from below the oldest kept block
                // (the tip itself when none is kept), on the chain's own block there. Its
                // recorded parent would be the orphaned branch's, and every next batch would
                // fail to link to it.
                let oldest = kept.last().map_or(tip.number, |(n, _, _)| *n);
                let number = oldest.saturating_sub(1);
                log::error!(
                    "index {}: reorg deeper than max_reorg_depth ({}); re-indexing from {}",
                    self.chain,
                    self.conf.max_reorg_depth,
                    number + 1
                );
                let (block, _) = self
                    .fetcher
                    .gateway
                    .read_call(
                        pool,
                        "eth_getBlockByNumber",
                        json!([format!("0x{number:x}"), false]),
                        rid,
                    )
                    .await?;
                let hash = block
                    .get("hash")
                    .and_then(Value::as_str)
                    .ok_or_else(|| StepError::Node(format!("no block {number} on the node")))?;
                IndexCursor {
                    number,
                    hash: hash.to_ascii_lowercase(),
                }
            }
        };
        let depth = tip.number - ancestor.number;
        match self
            .store
            .roll_back_index(&self.chain, tip, &ancestor)
            .await
        {
            Ok(()) => {}
            Err(e) if e.kind == crate::store::sql::ErrorKind::Conflict => return Ok(()),
            Err(e) => return Err(e.into()),
        }
        log::info!(
            "index {}: reorg: rolled back {depth} block(s) to {}",
            self.chain,
            ancestor.number
        );
        metrics::INDEX_REORGS
            .with_label_values(&[&self.chain])
            .inc();
        metrics::INDEX_ROLLBACK_DEPTH
            .with_label_values(&[&self.chain])
            .set(depth as i64);
        Ok(())
    }

    /// Fetch and keep metadata for tokens seen for the first time (best effort: a node
    /// failure leaves the token for the next block that shows it).
    async fn fetch_metadata(&self, pool: &crate::pools::Pool, blocks: &[IndexedBlock]) {
        let tokens: BTreeSet<String> = blocks
            .iter()
            .flat_map(|b| &b.transfers)
            .filter(|t| !t.token.is_empty())
            .map(|t| t.token.clone())
            .collect();
        if tokens.is_empty() {
            return;
        }
        let tokens: Vec<String> = tokens.into_iter().collect();
        let Ok(known) = self.store.token_meta(&self.chain, &tokens).await else {
            return;
        };
        for token in tokens.iter().filter(|t| !known.contains_key(*t)) {
            if let Some(meta) =
                token_metadata(&self.fetcher.gateway, pool, token, &self.fetcher.rid).await
            {
                let _ = self.store.put_token_meta(&self.chain, token, &meta).await;
            }
        }
    }
}

#[async_trait]
impl Producer for Indexer {
    fn name(&self) -> String {
        format!("index/{}", self.chain)
    }

    async fn run(&self, health: &Health, shutdown: pingora_core::server::ShutdownWatch) {
        self.follow(health, shutdown).await
    }
}

/// Fetched blocks against the committed tip.
enum Linked {
    /// The prefix whose every block's parent is the block before it.
    Blocks(Vec<IndexedBlock>),
    /// The first block does not follow the committed tip: the chain moved under it.
    Reorg,
}

fn link(cursor: Option<&IndexCursor>, fetched: Vec<IndexedBlock>) -> Linked {
    let mut parent = cursor.map(|c| c.hash.clone());
    let mut blocks = Vec::with_capacity(fetched.len());
    for block in fetched {
        if parent.as_ref().is_some_and(|p| *p != block.parent_hash) {
            if blocks.is_empty() {
                return Linked::Reorg;
            }
            // The chain changed within the batch: keep the linked part.
            break;
        }
        parent = Some(block.hash.clone());
        blocks.push(block);
    }
    Linked::Blocks(blocks)
}

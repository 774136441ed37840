//! Background capture: everything that produces product data off the request path, each
//! behind one contract (`Producer`): a name, a loop that runs until shutdown, and its
//! health (`Health`: rounds done and failed, the last success, exported as metrics).
//! Request handlers only read what these wrote (the store, or an in-memory window).
//!
//! - `index`: the chain indexer (transfers, balances, NFTs), one per configured chain.
//! - `mempool`: EVM mempool watchers, one per configured chain.
//! - `capacity`: the consensus-layer capacity series.
//! - `sol`: Solana's producers: epoch stake snapshots, watchlist push, the senders'
//!   transactions followed until they land, MEV-cache samples.
//! - `txs`: transactions accepted through the edge, stored and followed until they
//!   settle (`GET /v1/{eth|polygon}/tx/{hash}`), sent again when every node lost them.
//! - `usage`: the per-key usage journal and its flusher to the store.
//!
//! Which producers run is `producers`' answer for a configuration; the server adds each
//! as a Pingora background service, which gives it the shutdown signal.

pub mod capacity;
pub mod index;
pub mod mempool;
pub mod sol;
pub mod txs;
pub mod usage;

use crate::config::Loaded;
use crate::observe::metrics;
use crate::pools::Pools;
use crate::rpc::Gateway;
use crate::state::shared::Shared;
use async_trait::async_trait;
use pingora_core::server::ShutdownWatch;
use pingora_core::services::background::BackgroundService;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;
use std::time::Duration;

/// What the producers work with: the long-lived services they write and read
/// (`Shared`, which `Inputs` dereferences to), the configuration, pools and gateway
/// they started with, and the usage journal.
pub struct Inputs<'a> {
    pub shared: &'a Shared,
    pub config: &'a Loaded,
    pub pools: &'a Arc<Pools>,
    pub gateway: &'a Arc<Gateway>,
    /// The usage journal, when usage is counted.
    pub usage: Option<&'a Arc<usage::Durable>>,
}

impl std::ops::Deref for Inputs<'_> {
    type Target = Shared;

    fn deref(&self) -> &Shared {
        self.shared
    }
}

/// Every producer the configuration asks for: one indexer and one mempool watcher per
/// configured chain; the capacity series with an `eth_cl` pool; Solana's producers with
/// their pools; the usage flusher when usage is counted.
pub fn producers(i: &Inputs) -> Vec<Arc<dyn Producer>> {
    let app = &i.config.app;
    let mut all: Vec<Arc<dyn Producer>> = Vec::new();
    for (chain, conf) in &app.index {
        all.push(Arc::new(index::Indexer::new(
            chain,
            conf.clone(),
            i.pools.clone(),
            i.gateway.clone(),
            i.store().clone(),
        )));
    }
    for (chain, conf) in &app.mempool {
        all.push(Arc::new(mempool::Watcher::new(
            chain,
            conf.clone(),
            i.pools.clone(),
            i.gateway.clone(),
            i.mempools().clone(),
            i.subscriptions().clone(),
        )));
    }
    let has = |pool: &str| i.pools.get(pool).is_some();
    if has(capacity::POOL) {
        all.push(Arc::new(capacity::Sampler {
            pools: i.pools.clone(),
            store: i.store().clone(),
        }));
    }
    all.extend(solana_producers(i));
    if app.tx_tracking.enabled {
        all.extend(tx_producers(i));
    }
    all.extend(usage_producers(i));
    all
}

/// Solana's producers, for the pools configured: stake snapshots, the mempool, MEV-cache
/// analytics, the watchlist's push.
fn solana_producers(i: &Inputs) -> Vec<Arc<dyn Producer>> {
    let app = &i.config.app;
    let has = |pool: &str| i.pools.get(pool).is_some();
    let mut all: Vec<Arc<dyn Producer>> = Vec::new();
    let stake = &app.solana.stake_snapshots;
    if stake.enabled && has(sol::stake::POOL) {
        all.push(Arc::new(sol::stake::Capture {
            conf: stake.clone(),
            pools: i.pools.clone(),
            gateway: i.gateway.clone(),
            store: i.store().clone(),
        }));
    }
    if has(sol::mempool::POOL) {
        all.push(Arc::new(sol::mempool::Tracker {
            mempool: i.sol_mempool().clone(),
            pools: i.pools.clone(),
            gateway: i.gateway.clone(),
        }));
    }
    if has(sol::mev_cache::POOL) {
        all.push(Arc::new(sol::mev_cache::Sampler {
            conf: app.solana.mev_cache.clone(),
            pools: i.pools.clone(),
            store: i.store().clone(),
            client: i.gateway.client.clone(),
            snapshots: i.mev_cache().clone(),
        }));
    }
    if app.solana.watchlist.push && has(sol::watch::upstream::POOL) {
        all.push(Arc::new(sol::watch::Push(i.sol_watch().clone())));
    }
    all
}

/// Following sent transactions: the recorder of accepted sends, the push of their
/// changes, a follower per chain with a pool.
fn tx_producers(i: &Inputs) -> Vec<Arc<dyn Producer>> {
    let app = &i.config.app;
    let has = |pool: &str| i.pools.get(pool).is_some();
    let mut all: Vec<Arc<dyn Producer>> = Vec::new();
    all.push(Arc::new(txs::Recorder {
        conf: app.tx_tracking.clone(),
        store: i.store().clone(),
        queue: std::sync::Mutex::new(i.gateway.txlog.take_receiver()),
    }));
    let link = i
        .config
        .cluster_redis
        .as_ref()
        .map(|url| Arc::new(crate::cluster::link::Link::new(url.expose())));
    let leases = Arc::new(crate::cluster::leases::Leases::new(link));
    all.push(Arc::new(txs::push::Push {
        push: i.tx_push().clone(),
        leases: leases.clone(),
    }));
    for chain in ["eth", "polygon", "sol"] {
        let Some(pool) = crate::tracking::pool_of_chain(chain).filter(|p| has(p)) else {
            continue;
        };
        all.push(Arc::new(txs::Follower {
            leases: leases.clone(),
            chain,
            pool,
            conf: app.tx_tracking.clone(),
            pools: i.pools.clone(),
            gateway: i.gateway.clone(),
            store: i.store().clone(),
        }));
    }
    all
}

/// The usage flusher (when usage is counted) and the keys' request-log writer.
fn usage_producers(i: &Inputs) -> Vec<Arc<dyn Producer>> {
    let app = &i.config.app;
    let mut all: Vec<Arc<dyn Producer>> = Vec::new();
    if let Some(durable) = i.usage {
        let conf = &app.usage;
        all.push(Arc::new(usage::Flusher {
            durable: durable.clone(),
            interval: Duration::from_millis(conf.flush_interval_ms),
            minute_retention: Duration::from_secs(conf.minute_retention_hours * 3600),
            hour_retention: Duration::from_secs(conf.hour_retention_days * 86400),
        }));
    }
    if app.usage.enabled && i.requests().enabled() {
        all.push(Arc::new(usage::requests::RequestLogWriter {
            log: i.requests().clone(),
            store: i.store().clone(),
            interval: Duration::from_millis(app.usage.flush_interval_ms),
        }));
    }
    all
}

/// One background producer.
#[async_trait]
pub trait Producer: Send + Sync {
    /// Its name in logs and metrics (`index/eth`, `sol/stake`).
    fn name(&self) -> String;

    /// Run until `shutdown` fires, reporting each round on `health`.
    async fn run(&self, health: &Health, shutdown: ShutdownWatch);
}

/// A producer's health: what its rounds did, exported as
/// `chainedge_capture_rounds_total{producer,outcome}`,
/// `chainedge_capture_last_success_timestamp_seconds{producer}` and
/// `chainedge_capture_running{producer}`. A failure is logged when the producer starts
/// failing and again when it recovers, not at every retry.
pub struct Health {
    name: String,
    failing: AtomicBool,
}

impl Health {
    pub fn new(name: String) -> Self {
        Health {
            name,
            failing: AtomicBool::new(false),
        }
    }

    /// A round that did its work.
    pub fn ok(&self) {
        metrics::CAPTURE_ROUNDS
            .with_label_values(&[&self.name, "ok"])
            .inc();
        metrics::CAPTURE_LAST_SUCCESS
            .with_label_values(&[&self.name])
            .set(crate::clock::now() as f64);
        if self.failing.swap(false, Ordering::Relaxed) {
            log::info!("{}: working again", self.name);
        }
    }

    /// A round that failed (it will be retried by the producer's own loop).
    pub fn failed(&self, why: impl std::fmt::Display) {
        metrics::CAPTURE_ROUNDS
            .with_label_values(&[&self.name, "failed"])
            .inc();
        if !self.failing.swap(true, Ordering::Relaxed) {
            log::warn!("{}: {why}; retrying", self.name);
        }
    }

    /// A round's outcome.
    pub fn round<E: std::fmt::Display>(&self, outcome: Result<(), E>) {
        match outcome {
            Ok(()) => self.ok(),
            Err(e) => self.failed(e),
        }
    }

    pub fn name(&self) -> &str {
        &self.name
    }
}

/// A producer as a Pingora background service.
pub struct Service {
    producer: Arc<dyn Producer>,
    health: Health,
}

impl Service {
    pub fn new(producer: Arc<dyn Producer>) -> Self {
        let health = Health::new(producer.name());
        Service { producer, health }
    }
}

#[async_trait]
impl BackgroundService for Service {
    async fn start(&self, shutdown: ShutdownWatch) {
        let running = metrics::CAPTURE_RUNNING.with_label_values(&[self.health.name()]);
        running.set(1);
        self.producer.run(&self.health, shutdown).await;
        running.set(0);
    }
}

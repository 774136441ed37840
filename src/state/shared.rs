//! What lives as long as the process: built once at start (`Shared::build`) and kept
//! by every configuration reload, which rebuilds only the edge's snapshot (routes,
//! contract, configuration, pools, gateway settings, limits, costs; `edge::State`)
//! around the same `Shared`. Handlers see it through `handlers::Services`, producers
//! through `capture::Inputs`, both views of this one value.
//!
//! A new long-lived service is a field here, its line in `build` and its accessor.

use crate::auth::keys::KeyAuth;
use crate::cluster::leases::Leases;
use crate::cluster::places::OwnerPlaces;
use crate::config::Loaded;
use crate::console::Console;
use crate::pools::Pools;
use crate::rpc::Gateway;
use crate::state::mempool::Mempools;
use crate::state::metrics_cache::MetricsCache;
use crate::state::mev_snapshots::Snapshots;
use crate::state::peer_graphs::PeerGraphs;
use crate::state::sent::SentTransactions;
use crate::state::sol_mempool::SolMempool;
use crate::state::sol_watch::SolWatch;
use crate::state::stream_slots::StreamSlots;
use crate::state::tx_push::TxPush;
use crate::store::Store;
use crate::streams::events::EventsHub;
use crate::streams::subscriptions::Hub;
use crate::upstream::UpstreamClient;
use crate::usage::requests::RequestLog;
use crate::usage::Usage;
use std::sync::Arc;
use std::time::Duration;

pub struct Shared {
    store: Store,
    keys: Arc<KeyAuth>,
    console: Arc<Console>,
    usage: Arc<Usage>,
    requests: Arc<RequestLog>,
    metrics_cache: MetricsCache,
    stream_slots: Arc<StreamSlots>,
    ws_connections: Arc<OwnerPlaces>,
    ws_subscriptions: Arc<OwnerPlaces>,
    subscriptions: Arc<Hub>,
    events: Arc<EventsHub>,
    sent: SentTransactions,
    peer_graphs: PeerGraphs,
    mempools: Arc<Mempools>,
    sol_watch: Arc<SolWatch>,
    tx_push: Arc<TxPush>,
    mev_cache: Arc<Snapshots>,
    sol_mempool: Arc<SolMempool>,
}

impl Shared {
    /// Every long-lived service for the configuration `app` first started with. The
    /// watchlist push follows the first pools and gateway (a reload keeps it as is).
    pub fn build(
        app: &Loaded,
        store: Store,
        pools: &Arc<Pools>,
        gateway: &Arc<Gateway>,
        client: Arc<UpstreamClient>,
        leases: Arc<Leases>,
    ) -> Result<Shared, String> {
        let conf = &app.app;
        // Sign-in and key lookups answer within the request deadline when PostgreSQL
        // cannot be reached. SQLite is a local file: a slow disk or a long write is not
        // an outage, and giving up on it would answer 503 for work that completes anyway.
        let request_store = match store.dialect() {
            crate::store::sql::Dialect::Postgres => {
                store.with_deadline(Duration::from_millis(conf.store.request_deadline_ms))
            }
            crate::store::sql::Dialect::Sqlite => store.clone(),
        };
        Ok(Shared {
            console: Arc::new(Console::new(app, request_store.clone(), client.clone())?),
            keys: Arc::new(KeyAuth::new(
                request_store,
                conf.auth.key_cache_size,
                Duration::from_millis(conf.auth.key_cache_ttl_ms),
                Duration::from_secs(conf.auth.key_stale_secs),
            )),
            usage: Arc::new(Usage::new(conf.usage.max_pending_keys)),
            requests: Arc::new(RequestLog::new(
                conf.usage.request_log_buffer,
                conf.usage.request_log_per_key,
            )),
            metrics_cache: MetricsCache::new(conf.metrics_mirror.clone(), client),
            stream_slots: Arc::new(StreamSlots::new(leases.clone())),
            ws_connections: Arc::new(OwnerPlaces::new("ws", leases.clone())),
            ws_subscriptions: Arc::new(OwnerPlaces::new("ws_sub", leases)),
            subscriptions: Default::default(),
            events: Default::default(),
            sent: Default::default(),
            peer_graphs: Default::default(),
            mempools: Arc::new(Mempools::new(conf.mempool.keys().cloned())),
            sol_watch: SolWatch::new(
                conf.solana.watchlist.clone(),
                app.watchlist_secret.clone(),
                store.clone(),
                pools.clone(),
                gateway.clone(),
            ),
            tx_push: TxPush::new(
                conf.tx_tracking.clone(),
                app.tx_hook_secret.clone(),
                store.clone(),
            ),
            mev_cache: Default::default(),
            sol_mempool: Default::default(),
            store,
        })
    }

    /// The store, for what reads and writes it off the request path (the index,
    /// captured data); sign-in and keys use their own handle with a deadline.
    pub fn store(&self) -> &Store {
        &self.store
    }

    /// API keys (LRU by hash, shared with the cluster's revocation notices).
    pub fn keys(&self) -> &Arc<KeyAuth> {
        &self.keys
    }

    /// Sessions, sign-in and the console's page.
    pub fn console(&self) -> &Console {
        &self.console
    }

    /// Per-key usage gathered in memory (`capture::usage` journals and flushes it).
    pub fn usage(&self) -> &Arc<Usage> {
        &self.usage
    }

    /// Each key's newest requests, gathered in memory (`capture::usage` stores them).
    pub fn requests(&self) -> &Arc<RequestLog> {
        &self.requests
    }

    pub fn metrics_cache(&self) -> &MetricsCache {
        &self.metrics_cache
    }

    /// MEV-Share's one stream per user.
    pub fn stream_slots(&self) -> &Arc<StreamSlots> {
        &self.stream_slots
    }

    /// Open WebSocket connections per owner.
    pub fn ws_connections(&self) -> &Arc<OwnerPlaces> {
        &self.ws_connections
    }

    /// Subscriptions held over WebSocket per owner.
    pub fn ws_subscriptions(&self) -> &Arc<OwnerPlaces> {
        &self.ws_subscriptions
    }

    /// Shared node subscriptions (WebSocket clients and the mempool watchers).
    pub fn subscriptions(&self) -> &Arc<Hub> {
        &self.subscriptions
    }

    /// Shared event streams (beacon events).
    pub fn events(&self) -> &Arc<EventsHub> {
        &self.events
    }

    /// Transactions the REST senders took recently (resends are answered once).
    pub fn sent(&self) -> &SentTransactions {
        &self.sent
    }

    /// Peer-graph snapshots by depth.
    pub fn peer_graphs(&self) -> &PeerGraphs {
        &self.peer_graphs
    }

    /// What the mempool watchers keep.
    pub fn mempools(&self) -> &Arc<Mempools> {
        &self.mempools
    }

    /// Solana watchlist push: the registry handlers update, the channels' feed.
    pub fn sol_watch(&self) -> &Arc<SolWatch> {
        &self.sol_watch
    }

    /// Status changes of followed transactions, for `/ws/txs` and the hooks.
    pub fn tx_push(&self) -> &Arc<TxPush> {
        &self.tx_push
    }

    /// The MEV-cache hosts' last scrapes.
    pub fn mev_cache(&self) -> &Arc<Snapshots> {
        &self.mev_cache
    }

    /// What the Solana senders submitted, followed until it lands.
    pub fn sol_mempool(&self) -> &Arc<SolMempool> {
        &self.sol_mempool
    }
}

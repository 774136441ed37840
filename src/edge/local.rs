//! Which local handler answers a route: the body is read here, within the route's bound,
//! and the handler gets a plain `handlers::Request` (see the contract in `handlers`).

use super::{Ctx, Downstream, Edge};
use crate::errors::ApiError;
use crate::handlers::{self, Request};
use crate::reply::Reply;
use crate::routes::spec::HandlerKind;
use crate::routes::Route;
use bytes::Bytes;
use std::sync::Arc;

/// Console request bodies are small JSON objects.
const CONSOLE_MAX_BODY: usize = 16 * 1024;

impl Edge {
    pub(super) async fn dispatch_local<D: Downstream + ?Sized>(
        &self,
        session: &mut D,
        ctx: &mut Ctx,
        route: &Arc<Route>,
    ) -> Result<Reply, ApiError> {
        // JSON-RPC stays with the edge: each call of a batch counts against the limit.
        match route.handler {
            HandlerKind::JsonRpc => {
                let pool = self.pool(route.pool.as_deref().unwrap_or("eth_el"))?;
                return self.json_rpc(session, ctx, route, pool).await;
            }
            // An operator (or enterprise key) asking one node: the gateway on a pool
            // pinned to that host.
            HandlerKind::HostRpc => {
                let host_id = ctx.params.first().cloned().unwrap_or_default();
                let pool = self.pool(route.pool.as_deref().unwrap_or("eth_el"))?;
                let host = pool.host(&host_id).cloned().ok_or_else(|| {
                    ApiError::new(
                        404,
                        "unknown_host",
                        format!("no host {host_id} in {}", pool.name),
                    )
                })?;
                return self
                    .json_rpc(session, ctx, route, &pool.pinned_to(&host))
                    .await;
            }
            _ => {}
        }
        // Boxed: product handlers' futures are large (several node calls, joins), and
        // inline they would size every connection's task, streams and idle keep-alives
        // included (`tests::the_pipeline_future_stays_small`); one allocation per
        // product request is nothing beside its node calls.
        Box::pin(self.product_handler(session, ctx, route)).await
    }

    /// The local handlers other than JSON-RPC: the body read within the route's bound,
    /// then the handler the route names.
    async fn product_handler<D: Downstream + ?Sized>(
        &self,
        session: &mut D,
        ctx: &mut Ctx,
        route: &Arc<Route>,
    ) -> Result<Reply, ApiError> {
        let st = &*self.state;
        let body = match session.method() {
            "GET" | "HEAD" => Bytes::new(),
            _ => session.read_body(self.body_limit(route.handler)).await?,
        };
        let principal = ctx
            .principal
            .clone()
            .unwrap_or(crate::auth::Principal::Anonymous);
        let cookies = session.cookies();
        let req = Request {
            kind: route.handler,
            method: session.method(),
            path: session.path(),
            path_suspicious: ctx.path_suspicious,
            params: &ctx.params,
            query: session.query(),
            body,
            caller: &principal,
            cookies: cookies.as_deref(),
            secure: self.secure(session),
            request_id: &ctx.request_id,
            client: ctx.client(session.client_ip()),
        };
        let reply = match req.kind {
            HandlerKind::BasePage => Ok(handlers::base_page::serve()),
            HandlerKind::Openapi => Ok(handlers::openapi::serve(&st.openapi)),
            HandlerKind::ConsolePage => crate::console::page::serve(req.tail()),
            kind if kind.is_console_api() => {
                crate::console::api::handle(&st.console, &st.keys, &req).await
            }
            HandlerKind::EthSenderRaw => {
                handlers::sender::raw(&st.gateway, &st.pools, &st.sent, &req).await
            }
            HandlerKind::PolygonSenderRaw => {
                handlers::sender::polygon_raw(&st.gateway, &st.pools, &st.sent, &req).await
            }
            HandlerKind::EthSenderBundle => {
                handlers::sender::bundle(&st.gateway, &st.pools, &req).await
            }
            HandlerKind::BuilderRpc | HandlerKind::PrivateRpc => {
                handlers::sender::endpoint(&st.gateway, &st.pools, &req).await
            }
            HandlerKind::MeshHealth | HandlerKind::PolygonMeshHealth | HandlerKind::MeshHosts => {
                Ok(handlers::mesh::serve(&st.pools, req.kind))
            }
            HandlerKind::AdminUsage => {
                handlers::usage::export(&st.store, &req, crate::store::now()).await
            }
            HandlerKind::MetricsMirror | HandlerKind::PolygonMetricsMirror => {
                handlers::metrics_mirror::serve(&st.metrics_cache, &st.pools, &req).await
            }
            HandlerKind::EthWalletBalance | HandlerKind::PolygonWalletBalance => {
                let unit = match req.kind {
                    HandlerKind::EthWalletBalance => "eth",
                    _ => "matic",
                };
                let pool = self.pool(route.pool.as_deref().unwrap_or("eth_el"))?;
                handlers::wallet::balance(&st.gateway, pool, unit, &req).await
            }
            HandlerKind::EthWalletHistory
            | HandlerKind::EthWalletTokens
            | HandlerKind::EthWalletNfts
            | HandlerKind::PolygonWalletHistory
            | HandlerKind::PolygonWalletTokens
            | HandlerKind::PolygonWalletNfts => {
                let chain = chain_of(route);
                self.indexed(chain, route, &req).await
            }
            HandlerKind::EthMempoolSnapshot
            | HandlerKind::EthMempoolStats
            | HandlerKind::PolygonMempoolSnapshot
            | HandlerKind::PolygonMempoolStats => {
                let chain = chain_of(route);
                handlers::mempool::serve(&st.mempools, chain, &req)
            }
            HandlerKind::PolygonFirehoseInfo => {
                let channel = if route.name.ends_with(".mempool") {
                    "mempool"
                } else {
                    "logs"
                };
                self.firehose_source_ready(channel)?;
                // A token outlives the request: it is issued only on the key as the
                // store has it now, never on a cached (perhaps revoked) record.
                if let Some(key) = req.key() {
                    let fresh = st.keys.fresh(&key.secret_sha256).await?;
                    match fresh {
                        Some(rec) => crate::auth::check_standing(&rec, crate::store::now())?,
                        None => return Err(ApiError::new(401, "unauthorized", "unknown API key")),
                    }
                }
                let conf = &st.config.app.streams.firehose;
                handlers::firehose::info(
                    st.config
                        .firehose_secret
                        .as_ref()
                        .map(|s| s.expose().as_bytes()),
                    conf.token_ttl_secs,
                    &self.firehose_url(),
                    channel,
                    &req,
                )
            }
            HandlerKind::EthPeerGraph => {
                let pool = self.pool(route.pool.as_deref().unwrap_or("eth_el"))?;
                handlers::peer_graph::graph(&st.peer_graphs, &st.gateway, pool, &req).await
            }
            HandlerKind::EthPeerGraphHost => {
                let pool = self.pool(route.pool.as_deref().unwrap_or("eth_el"))?;
                handlers::peer_graph::host(&st.gateway, pool, &req).await
            }
            HandlerKind::EthValidatorSeries => handlers::intel::series(&st.store, &req).await,
            HandlerKind::EthValidatorIntel => {
                let pool = self.pool(route.pool.as_deref().unwrap_or("eth_cl"))?;
                handlers::intel::validator(&st.gateway.client, pool, &req).await
            }
            HandlerKind::PolygonTraceReplay | HandlerKind::PolygonTraceCall => {
                let pool = self.pool(route.pool.as_deref().unwrap_or("polygon_bor"))?;
                if req.kind == HandlerKind::PolygonTraceReplay {
                    handlers::trace::replay_tx(&st.gateway, pool, &req).await
                } else {
                    handlers::trace::call(&st.gateway, pool, &req).await
                }
            }
            HandlerKind::PolygonCheckpoint
            | HandlerKind::PolygonSpan
            | HandlerKind::PolygonValidators => {
                let pool = self.pool(route.pool.as_deref().unwrap_or("polygon_heimdall"))?;
                handlers::heimdall::serve(&st.gateway.client, pool, &req).await
            }
            HandlerKind::SolAccountSnapshot
            | HandlerKind::SolWalletBalance
            | HandlerKind::SolWalletTokens
            | HandlerKind::SolWalletNfts
            | HandlerKind::SolWalletHistory => {
                use handlers::sol::wallet;
                let pool = self.pool(route.pool.as_deref().unwrap_or("sol_rpc"))?;
                match req.kind {
                    HandlerKind::SolAccountSnapshot => {
                        wallet::account(&st.gateway, pool, &req).await
                    }
                    HandlerKind::SolWalletBalance => wallet::balance(&st.gateway, pool, &req).await,
                    HandlerKind::SolWalletTokens => wallet::tokens(&st.gateway, pool, &req).await,
                    HandlerKind::SolWalletNfts => wallet::nfts(&st.gateway, pool, &req).await,
                    _ => wallet::history(&st.gateway, pool, &req).await,
                }
            }
            HandlerKind::SolWatchlistList
            | HandlerKind::SolWatchlistCreate
            | HandlerKind::SolWatchlistGet
            | HandlerKind::SolWatchlistDelete
            | HandlerKind::SolWatchlistDeadLetters => {
                handlers::sol::watchlist::serve(&st.store, &st.sol_watch, &req).await
            }
            HandlerKind::SolMevCacheHosts
            | HandlerKind::SolMevCacheLeaderboard
            | HandlerKind::SolMevCacheHostMetrics
            | HandlerKind::SolMevCacheHostSeries => {
                let pool = self.pool(route.pool.as_deref().unwrap_or("sol_mev_cache"))?;
                handlers::sol::mev_cache::serve(&st.store, &st.mev_cache, pool, &req).await
            }
            HandlerKind::SolMempoolSnapshot | HandlerKind::SolMempoolStats => {
                self.pool(route.pool.as_deref().unwrap_or("sol_rpc"))?;
                handlers::sol::mempool::serve(&st.sol_mempool, &req)
            }
            HandlerKind::SolStakeLatest
            | HandlerKind::SolStakeEpoch
            | HandlerKind::SolStakeByVoter
            | HandlerKind::SolStakeHistory => handlers::sol::stake::serve(&st.store, &req).await,
            HandlerKind::SolSenderTx => {
                let pool = self.pool(route.pool.as_deref().unwrap_or("sol_rpc"))?;
                handlers::sol::sender::tx(&st.gateway, pool, &st.sent, &st.sol_mempool, &req).await
            }
            HandlerKind::SolSenderBundle => {
                let pool = self.pool(route.pool.as_deref().unwrap_or("sol_block_engine"))?;
                handlers::sol::sender::bundle(&st.gateway, pool, &st.sol_mempool, &req).await
            }
            _ => Err(ApiError::not_implemented(&route.name)),
        };
        reply.map(|mut r| {
            ctx.upstream = r.upstream.take();
            r
        })
    }

    /// A wallet route answered from the chain index (503 when the chain is not indexed).
    async fn indexed(
        &self,
        chain: &str,
        route: &Route,
        req: &Request<'_>,
    ) -> Result<Reply, ApiError> {
        let st = &*self.state;
        if !st.config.app.index.contains_key(chain) {
            return Err(ApiError::new(
                503,
                "index_not_configured",
                format!("the {chain} chain is not indexed here (config `index.{chain}`)"),
            ));
        }
        let ix = handlers::indexed::Indexed {
            chain,
            pool: self.pool(route.pool.as_deref().unwrap_or("eth_el"))?,
            gateway: &st.gateway,
            store: &st.store,
        };
        match req.kind {
            HandlerKind::EthWalletHistory | HandlerKind::PolygonWalletHistory => {
                handlers::indexed::history(&ix, req).await
            }
            HandlerKind::EthWalletTokens | HandlerKind::PolygonWalletTokens => {
                handlers::indexed::tokens(&ix, req).await
            }
            _ => handlers::indexed::nfts(&ix, req).await,
        }
    }

    /// Where clients open the firehose channels: `streams.firehose.public_url`, else the
    /// console's origin with a WebSocket scheme.
    fn firehose_url(&self) -> String {
        let app = &self.state.config.app;
        if let Some(u) = &app.streams.firehose.public_url {
            return u.clone();
        }
        match app.console.origin.as_deref() {
            Some(o) if o.starts_with("https://") => format!("wss://{}", &o[8..]),
            Some(o) => format!("ws://{}", o.trim_start_matches("http://")),
            None => "ws://127.0.0.1".into(),
        }
    }

    /// The most body bytes a local handler's route accepts: console forms are small;
    /// everything that carries transactions or JSON-RPC has the JSON-RPC bound.
    fn body_limit(&self, kind: HandlerKind) -> usize {
        if kind.is_console_api() {
            CONSOLE_MAX_BODY
        } else {
            self.state.config.app.rpc.max_body_bytes
        }
    }
}

/// The EVM chain a wallet or mempool route is about, from its surface (`polygon.…`).
fn chain_of(route: &Route) -> &'static str {
    if route.name.starts_with("polygon.") {
        "polygon"
    } else {
        "eth"
    }
}

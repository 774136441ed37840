//! The handler registry: every local handler once, by the name a manifest's `handler:`
//! gives it. A handler file declares its entries in a `HANDLERS` table; `TABLES` lists
//! the tables. The route table resolves each manifest name to its place here when it
//! loads (`names`), so a request finds its handler by index, and a name the binary does
//! not know is a configuration error, not a 501.

use super::*;
use crate::config::Loaded;
use crate::errors::ApiError;
use crate::pools::{Pool, Pools};
use crate::reply::Reply;
use crate::rpc::Gateway;
use crate::state::shared::Shared;
use std::future::Future;
use std::pin::Pin;
use std::sync::{Arc, LazyLock};

/// What a handler's call comes to.
pub type Answer<'a> = Pin<Box<dyn Future<Output = Result<Reply, ApiError>> + Send + 'a>>;

/// One local handler.
pub struct Handler {
    /// The name manifests use (`eth_wallet_balance`).
    pub name: &'static str,
    /// The pool it asks when its route names none.
    pub pool: Option<&'static str>,
    /// A console form: the body is bounded at 16 KiB, not `rpc.max_body_bytes`.
    pub form: bool,
    pub serve: for<'a> fn(&'a Services<'a>, &'a Request<'a>) -> Answer<'a>,
}

impl Handler {
    pub const fn new(
        name: &'static str,
        serve: for<'a> fn(&'a Services<'a>, &'a Request<'a>) -> Answer<'a>,
    ) -> Self {
        Handler {
            name,
            pool: None,
            form: false,
            serve,
        }
    }

    /// The pool it asks when its route names none.
    pub const fn pool(mut self, pool: &'static str) -> Self {
        self.pool = Some(pool);
        self
    }

    /// A console form (small JSON body).
    pub const fn form(mut self) -> Self {
        self.form = true;
        self
    }
}

/// What a handler may use: the long-lived services (`Shared`, which `Services`
/// dereferences to: `s.store()`, `s.console()`, ...), the snapshot's configuration,
/// pools and gateway, and the route's pool.
pub struct Services<'a> {
    pub shared: &'a Shared,
    pub config: &'a Loaded,
    /// The API's OpenAPI document.
    pub openapi: &'a bytes::Bytes,
    /// Every route of this configuration (what a plan opens; the console checks the
    /// key routes it stands in for against them).
    pub routes: &'a [Arc<crate::routes::Route>],
    pub pools: &'a Pools,
    pub gateway: &'a Arc<Gateway>,
    /// The route's pool: the manifest's `pool:`, else the handler's own.
    pub pool_name: Option<&'a str>,
}

impl std::ops::Deref for Services<'_> {
    type Target = Shared;

    fn deref(&self) -> &Shared {
        self.shared
    }
}

impl Services<'_> {
    /// The route's pool; 503 `pool_not_configured` when the configuration has none.
    pub fn pool(&self) -> Result<&Pool, ApiError> {
        let name = self.pool_name.unwrap_or("eth_el");
        self.pools.get(name).map(|p| &**p).ok_or_else(|| {
            ApiError::new(
                503,
                "pool_not_configured",
                format!("no {name} pool is configured"),
            )
        })
    }
}

/// Every handler file's table.
const TABLES: &[&[Handler]] = &[
    base_page::HANDLERS,
    openapi::HANDLERS,
    console::HANDLERS,
    console::pushes::HANDLERS,
    mesh::HANDLERS,
    usage::HANDLERS,
    metrics_mirror::HANDLERS,
    sender::HANDLERS,
    tx::HANDLERS,
    tx_hooks::HANDLERS,
    wallet::HANDLERS,
    indexed::HANDLERS,
    indexed_tokens::HANDLERS,
    mempool::HANDLERS,
    firehose::HANDLERS,
    peer_graph::HANDLERS,
    intel::HANDLERS,
    trace::HANDLERS,
    heimdall::HANDLERS,
    sol::wallet::HANDLERS,
    sol::watchlist::HANDLERS,
    sol::mev_cache::HANDLERS,
    sol::mempool::HANDLERS,
    sol::stake::HANDLERS,
    sol::sender::HANDLERS,
];

static ALL: LazyLock<Vec<&'static Handler>> =
    LazyLock::new(|| TABLES.iter().flat_map(|t| t.iter()).collect());

/// Every handler's name, in registry order: a route's `HandlerKind::Local(i)` is the
/// `i`th.
pub fn names() -> Vec<&'static str> {
    ALL.iter().map(|h| h.name).collect()
}

/// The handler at `index` (a place `names` gave).
pub fn get(index: u16) -> Option<&'static Handler> {
    ALL.get(index as usize).copied()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn every_name_is_declared_once() {
        let mut seen = std::collections::HashSet::new();
        for name in names() {
            assert!(seen.insert(name), "{name} is declared twice");
        }
        assert!(seen.len() < u16::MAX as usize);
    }
}

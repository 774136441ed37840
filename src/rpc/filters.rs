//! Filters live on the node that created them: remember which, and send polls there.
//! Clustered, the filter's host is also kept in Redis, so a poll that a load balancer
//! sends to another instance still reaches the node that holds the filter.
//!
//! A filter belongs to the tenant that made it: a node's filter ids are shared by every
//! tenant on it (and some nodes number them 0x1, 0x2, ...), so a poll or an uninstall
//! from anyone else is answered "filter not found" without reaching the node; polling
//! would take the owner's changes, uninstalling would end its filter.

use super::call::jsonrpc_error;
use super::need::Need;
use super::Gateway;
use crate::cluster::link::Link;
use crate::errors::ApiError;
use crate::jsonrpc::methods::MethodClass;
use crate::jsonrpc::{Payload, Request, Response};
use crate::pools::Pool;
use serde_json::Value;
use std::sync::Arc;
use std::time::{Duration, Instant};

/// Filter id → (pool, host id), bounded and aging out like the nodes' own filters; with
/// Redis, shared by every instance.
pub struct FilterHosts {
    map: std::sync::Mutex<lru::LruCache<String, Known>>,
    shared: Option<Arc<Link>>,
}

struct Known {
    pool: String,
    host: String,
    /// Whose filter it is (`Caller::owner`).
    owner: String,
    polled: Instant,
    /// When Redis's copy last had its expiry pushed forward.
    shared_at: Instant,
}

/// Nodes drop filters not polled for about 5 minutes; so do we.
const FILTER_TTL: Duration = Duration::from_secs(300);
/// A poll served from memory pushes Redis's expiry forward at most this often.
const SHARED_REFRESH: Duration = Duration::from_secs(60);

impl FilterHosts {
    pub fn new(shared: Option<Arc<Link>>) -> FilterHosts {
        FilterHosts {
            map: std::sync::Mutex::new(lru::LruCache::new(
                std::num::NonZeroUsize::new(100_000).expect("non-zero"),
            )),
            shared,
        }
    }

    fn shared_key(id: &str, pool: &str) -> String {
        format!("chainedge:filter:{pool}:{id}")
    }

    fn keep(&self, id: &str, pool: &str, host: &str, owner: &str) {
        if let Ok(mut m) = self.map.lock() {
            let now = Instant::now();
            let known = Known {
                pool: pool.to_string(),
                host: host.to_string(),
                owner: owner.to_string(),
                polled: now,
                shared_at: now,
            };
            m.put(id.to_string(), known);
        }
    }

    /// A new filter: known here, and to the other instances before its id is answered.
    async fn remember(&self, id: &str, pool: &str, host: &str, owner: &str) {
        self.keep(id, pool, host, owner);
        if let Some(link) = &self.shared {
            let mut set = redis::cmd("SET");
            set.arg(Self::shared_key(id, pool))
                .arg(format!("{owner}\n{host}"))
                .arg("EX")
                .arg(FILTER_TTL.as_secs());
            let _: Option<String> = link.query(&set).await;
        }
    }

    /// The host of `owner`'s filter, refreshing its age (a poll keeps a filter alive):
    /// from memory, else from Redis (created or last polled through another instance).
    /// Someone else's filter is not found.
    async fn host(&self, id: &str, pool: &str, owner: &str) -> Option<String> {
        let refresh = match self.local(id, pool, owner) {
            Local::Fresh(host) => return Some(host),
            Local::Refresh(host) => Some(host),
            Local::Unknown => None,
        };
        let link = self.shared.as_ref()?;
        let mut get = redis::cmd("GETEX");
        get.arg(Self::shared_key(id, pool))
            .arg("EX")
            .arg(FILTER_TTL.as_secs());
        if let Some(host) = refresh {
            // Known here: the refresh goes out without holding the poll back.
            let link = link.clone();
            tokio::spawn(async move { link.query::<Option<String>>(&get).await });
            return Some(host);
        }
        let shared: String = link.query::<Option<String>>(&get).await??;
        let (holder, host) = shared.split_once('\n')?;
        if holder != owner {
            return None;
        }
        self.keep(id, pool, host, owner);
        Some(host.to_string())
    }

    fn local(&self, id: &str, pool: &str, owner: &str) -> Local {
        let Ok(mut m) = self.map.lock() else {
            return Local::Unknown;
        };
        let Some(k) = m.get_mut(id) else {
            return Local::Unknown;
        };
        if k.pool != pool || k.owner != owner || k.polled.elapsed() > FILTER_TTL {
            return Local::Unknown;
        }
        k.polled = Instant::now();
        if self.shared.is_some() && k.shared_at.elapsed() > SHARED_REFRESH {
            k.shared_at = k.polled;
            return Local::Refresh(k.host.clone());
        }
        Local::Fresh(k.host.clone())
    }

    /// An uninstalled filter is forgotten everywhere.
    async fn forget(&self, id: &str, pool: &str) {
        if let Ok(mut m) = self.map.lock() {
            m.pop(id);
        }
        if let Some(link) = &self.shared {
            let mut del = redis::cmd("DEL");
            del.arg(Self::shared_key(id, pool));
            let _: Option<i64> = link.query(&del).await;
        }
    }
}

enum Local {
    Fresh(String),
    /// Known here, and Redis's expiry is due to be pushed forward.
    Refresh(String),
    Unknown,
}

impl Gateway {
    /// Filters: creation goes to any host (remembered by filter id); polls and uninstall
    /// go to that host only, since no other node has the filter.
    pub(super) async fn filter(
        &self,
        pool: &Pool,
        call: &Request,
        rid: &str,
        owner: &str,
    ) -> Result<(Response, Option<String>), ApiError> {
        let id = call.answer_id();
        let method = call.method.as_str();
        let body = call.to_bytes();
        let answer_of = |body: &[u8]| -> Response {
            serde_json::from_slice(body)
                .unwrap_or_else(|_| jsonrpc_error(&id, -32603, "upstream answered non-JSON"))
        };
        if method.starts_with("eth_new") {
            let r = self
                .read(pool, MethodClass::Filter, Need::default(), &body, rid)
                .await?;
            let answer = answer_of(&r.body);
            if let (Payload::Result(Value::String(fid)), Some(host)) =
                (&answer.payload, &r.upstream)
            {
                self.filters.remember(fid, &pool.name, host, owner).await;
            }
            return Ok((answer, r.upstream));
        }
        let fid = call.param(0).and_then(Value::as_str).unwrap_or("");
        let Some(host) = self
            .filters
            .host(fid, &pool.name, owner)
            .await
            .and_then(|h| pool.host(&h).cloned())
        else {
            return Ok((jsonrpc_error(&id, -32000, "filter not found"), None));
        };
        let timeout = self.conf.timeout;
        match self.attempt(&host, &body, rid, timeout).await {
            Ok(b) => {
                let answer = answer_of(&b);
                if method == "eth_uninstallFilter"
                    && answer.payload == Payload::Result(Value::Bool(true))
                {
                    self.filters.forget(fid, &pool.name).await;
                }
                Ok((answer, Some(host.id.clone())))
            }
            // The node that holds the filter is gone: so is the filter.
            Err(_) => Ok((
                jsonrpc_error(&id, -32000, "filter not found"),
                Some(host.id.clone()),
            )),
        }
    }
}

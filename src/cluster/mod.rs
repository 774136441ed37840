//! Several instances as one edge (`cluster.redis`): shared rate-limit counts and change
//! notices over Redis.
//!
//! - **Limits**: every `sync_interval_ms` one Lua script call sends the counts this
//!   instance admitted since the last round and brings back each active caller's global
//!   counts (`limits::shared`). The request path only reads memory.
//! - **Notices**: a revoked or rotated key is published on `chainedge:revoked`; every
//!   instance drops it from its key cache at once (well within 1 s). After a lost
//!   subscription the whole key cache is dropped, since a notice may have been missed.
//!
//! - **Stream caps** (`leases`, `places`): a user's MEV-Share stream and a key's
//!   WebSocket connections and subscriptions are places leased in Redis, so the caps
//!   hold across instances.
//! - **Filter hosts**: which node holds a JSON-RPC filter is kept in Redis too
//!   (`rpc::FilterHosts`), so a poll may land on any instance.
//!
//! Redis down: limits fall back to each instance's own (the others' counts age out),
//! notices wait for the key cache's TTL; `chainedge_cluster_redis_up` says which, and
//! the state change is logged once. Both loops reconnect by themselves.

pub mod leases;
pub mod link;
pub mod places;

use crate::auth::keys::KeyAuth;
use crate::limits::shared::SharedCounts;
use crate::observe::metrics;
use async_trait::async_trait;
use futures_util::StreamExt;
use pingora_core::server::ShutdownWatch;
use pingora_core::services::background::BackgroundService;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;
use std::time::Duration;
use tokio::sync::mpsc;

/// The channel revocations go out on: a revoked key's hash (hex), or `tenant:<id>` when a
/// tenant's plan, features or billing changed.
pub const REVOKED_CHANNEL: &str = "chainedge:revoked";
const TENANT_PREFIX: &str = "tenant:";
/// How long a Redis call may take before the round counts as failed.
const CALL_TIMEOUT: Duration = Duration::from_millis(500);
/// Wait between reconnection attempts.
const RECONNECT: Duration = Duration::from_secs(1);
/// Revocations waiting to be published (more are dropped; the TTL still bounds them).
const NOTICE_QUEUE: usize = 1024;

/// Per round: for each caller, its name, then pairs of (second, count) to add; returns
/// each caller's counts for `now`, `now - 1`, ... `now - horizon`. Counters expire once
/// out of every window.
const SYNC_SCRIPT: &str = r#"
local now = tonumber(ARGV[1])
local horizon = tonumber(ARGV[2])
local out = {}
local i = 3
while i <= #ARGV do
  local name = 'chainedge:rl:' .. ARGV[i]
  local pairs_n = tonumber(ARGV[i + 1])
  i = i + 2
  for p = 1, pairs_n do
    local key = name .. ':' .. ARGV[i]
    redis.call('INCRBY', key, ARGV[i + 1])
    redis.call('EXPIRE', key, horizon + 5)
    i = i + 2
  end
  local counts = {}
  for back = 0, horizon do
    counts[#counts + 1] = tonumber(redis.call('GET', name .. ':' .. (now - back)) or '0')
  end
  out[#out + 1] = counts
end
return out
"#;

pub struct Cluster {
    url: String,
    interval: Duration,
    shared: Arc<SharedCounts>,
    keys: Arc<KeyAuth>,
    /// Revocations to publish; behind a lock only because a background service runs
    /// from `&self` (one loop ever holds it).
    notices: tokio::sync::Mutex<mpsc::Receiver<[u8; 32]>>,
    /// Redis answered the last call (for the state-change log).
    up: AtomicBool,
}

pub use crate::auth::keys::NoticeSender;

impl Cluster {
    pub fn new(
        url: String,
        interval: Duration,
        shared: Arc<SharedCounts>,
        keys: Arc<KeyAuth>,
    ) -> (Cluster, NoticeSender) {
        let (tx, rx) = mpsc::channel(NOTICE_QUEUE);
        metrics::cluster_redis_up(false);
        (
            Cluster {
                url,
                interval,
                shared,
                keys,
                notices: tokio::sync::Mutex::new(rx),
                up: AtomicBool::new(false),
            },
            tx,
        )
    }

    fn client(&self) -> redis::RedisResult<redis::Client> {
        redis::Client::open(self.url.as_str())
    }

    async fn connect(&self) -> redis::RedisResult<redis::aio::MultiplexedConnection> {
        connect(&self.url).await
    }

    /// Record Redis's state; log only when it changes.
    fn state(&self, up: bool, why: &dyn std::fmt::Display) {
        if self.up.swap(up, Ordering::AcqRel) != up {
            if up {
                log::info!("cluster: redis reachable; limits and notices are shared");
            } else {
                log::warn!(
                    "cluster: redis unreachable ({why}); limits fall back to this instance's own"
                );
            }
        }
        metrics::cluster_redis_up(up);
        if !up {
            metrics::cluster_redis_error();
        }
    }

    /// Send the noted counts and bring back the global ones, every interval.
    async fn sync_loop(&self) {
        let script = redis::Script::new(SYNC_SCRIPT);
        let mut conn = None;
        let mut tick = tokio::time::interval(self.interval);
        tick.set_missed_tick_behavior(tokio::time::MissedTickBehavior::Delay);
        loop {
            tick.tick().await;
            if conn.is_none() {
                match self.connect().await {
                    Ok(c) => conn = Some(c),
                    Err(e) => {
                        self.state(false, &e);
                        tokio::time::sleep(RECONNECT).await;
                        continue;
                    }
                }
            }
            let Some(c) = conn.as_mut() else { continue };
            let now = crate::clock::now() as u64;
            let outgoing = self.shared.take_outgoing(now);
            if outgoing.is_empty() {
                // Nothing to count; still check Redis is there (for the metric).
                let ping: redis::RedisResult<String> = redis::cmd("PING").query_async(c).await;
                match ping {
                    Ok(_) => self.state(true, &""),
                    Err(e) => {
                        self.state(false, &e);
                        conn = None;
                    }
                }
                continue;
            }
            let mut call = script.prepare_invoke();
            call.arg(now).arg(self.shared.horizon());
            for o in &outgoing {
                call.arg(&o.name).arg(o.deltas.len());
                for (second, n) in &o.deltas {
                    call.arg(*second).arg(*n);
                }
            }
            let answer: redis::RedisResult<Vec<Vec<i64>>> = call.invoke_async(c).await;
            match answer {
                Ok(globals) => {
                    self.state(true, &"");
                    for (o, global) in outgoing.iter().zip(globals) {
                        self.shared.set_global(o.key, now, &global);
                    }
                }
                Err(e) => {
                    // These counts are not shared; each instance limits on its own until
                    // Redis is back (fail-open, documented).
                    self.state(false, &e);
                    conn = None;
                }
            }
        }
    }

    /// Publish queued revocations; drop revoked keys others announce.
    async fn notice_loop(&self) {
        let mut queue = self.notices.lock().await;
        loop {
            let Ok(client) = self.client() else {
                tokio::time::sleep(RECONNECT).await;
                continue;
            };
            let (publisher, subscriber) = tokio::join!(self.connect(), async {
                tokio::time::timeout(CALL_TIMEOUT, client.get_async_pubsub()).await
            });
            let (mut publisher, mut subscriber) = match (publisher, subscriber) {
                (Ok(p), Ok(Ok(s))) => (p, s),
                _ => {
                    tokio::time::sleep(RECONNECT).await;
                    continue;
                }
            };
            if subscriber.subscribe(REVOKED_CHANNEL).await.is_err() {
                tokio::time::sleep(RECONNECT).await;
                continue;
            }
            // Notices may have been missed while not subscribed.
            self.keys.expire_all();
            let mut messages = subscriber.on_message();
            loop {
                tokio::select! {
                    msg = messages.next() => {
                        let Some(msg) = msg else { break };
                        let payload: Vec<u8> = msg.get_payload().unwrap_or_default();
                        match std::str::from_utf8(&payload).ok().and_then(|p| p.strip_prefix(TENANT_PREFIX)) {
                            Some(tenant) => self.keys.evict_tenant(tenant),
                            None => {
                                if let Some(hash) = parse_hash(&payload) {
                                    self.keys.evict(&hash);
                                }
                            }
                        }
                    }
                    hash = queue.recv() => {
                        let Some(hash) = hash else { return };
                        if publish(&mut publisher, &hash).await.is_err() {
                            break;
                        }
                    }
                }
            }
            tokio::time::sleep(RECONNECT).await;
        }
    }
}

fn parse_hash(payload: &[u8]) -> Option<[u8; 32]> {
    let bytes = hex::decode(payload).ok()?;
    bytes.try_into().ok()
}

/// A connection whose calls fail after `CALL_TIMEOUT` instead of waiting.
async fn connect(url: &str) -> redis::RedisResult<redis::aio::MultiplexedConnection> {
    let config = redis::AsyncConnectionConfig::new()
        .set_connection_timeout(CALL_TIMEOUT)
        .set_response_timeout(CALL_TIMEOUT);
    redis::Client::open(url)?
        .get_multiplexed_async_connection_with_config(&config)
        .await
}

/// Announce one revoked key (its secret's hash) to every instance.
async fn publish(
    conn: &mut redis::aio::MultiplexedConnection,
    hash: &[u8; 32],
) -> redis::RedisResult<()> {
    publish_text(conn, &hex::encode(hash)).await
}

async fn publish_text(
    conn: &mut redis::aio::MultiplexedConnection,
    payload: &str,
) -> redis::RedisResult<()> {
    redis::cmd("PUBLISH")
        .arg(REVOKED_CHANNEL)
        .arg(payload)
        .query_async::<i64>(conn)
        .await
        .map(|_| ())
}

/// Publish one revocation from outside a running instance (the CLI).
pub async fn publish_revoked(url: &str, hash: &[u8; 32]) -> Result<(), String> {
    let mut conn = connect(url).await.map_err(|e| e.to_string())?;
    publish(&mut conn, hash).await.map_err(|e| e.to_string())
}

/// Tell every instance a tenant changed (the CLI's `tenants set-*`).
pub async fn publish_tenant_changed(url: &str, tenant: &str) -> Result<(), String> {
    let mut conn = connect(url).await.map_err(|e| e.to_string())?;
    publish_text(&mut conn, &format!("{TENANT_PREFIX}{tenant}"))
        .await
        .map_err(|e| e.to_string())
}

#[async_trait]
impl BackgroundService for Cluster {
    async fn start(&self, mut shutdown: ShutdownWatch) {
        let both = async {
            tokio::join!(self.sync_loop(), self.notice_loop());
        };
        tokio::select! {
            _ = both => {}
            _ = shutdown.changed() => {}
        }
    }
}

//! One Redis connection for calls made on behalf of a request (stream leases, filter
//! hosts): connected on first use, shared by every task (Redis multiplexes), dropped when
//! a call fails. While Redis is away a new connection is tried at most once per
//! `RECONNECT`, so requests never queue behind connection attempts; callers treat `None`
//! as "not shared" and fall back to this instance's own view.

use super::{connect, RECONNECT};
use redis::aio::MultiplexedConnection;
use std::time::Instant;

pub struct Link {
    url: String,
    conn: tokio::sync::Mutex<Option<MultiplexedConnection>>,
    /// No connection attempt before this (after a failed one).
    quiet_until: std::sync::Mutex<Option<Instant>>,
}

impl Link {
    pub fn new(url: &str) -> Link {
        Link {
            url: url.to_string(),
            conn: tokio::sync::Mutex::new(None),
            quiet_until: std::sync::Mutex::new(None),
        }
    }

    /// The connection, connecting if there is none and the last attempt is not too recent.
    pub async fn conn(&self) -> Option<MultiplexedConnection> {
        let mut held = self.conn.lock().await;
        if let Some(c) = held.as_ref() {
            return Some(c.clone());
        }
        let quiet = self.quiet_until.lock().ok().and_then(|q| *q);
        if quiet.is_some_and(|t| Instant::now() < t) {
            return None;
        }
        match connect(&self.url).await {
            Ok(c) => {
                *held = Some(c.clone());
                Some(c)
            }
            Err(e) => {
                log::debug!("cluster link: {e}");
                if let Ok(mut q) = self.quiet_until.lock() {
                    *q = Some(Instant::now() + RECONNECT);
                }
                None
            }
        }
    }

    /// A call on the connection failed: forget it (the next caller reconnects) and count it.
    pub async fn failed(&self, why: &redis::RedisError) {
        log::debug!("cluster link: {why}");
        crate::observe::metrics::cluster_redis_error();
        *self.conn.lock().await = None;
    }

    /// Run one command or script call; `None` when Redis is away or the call failed.
    pub async fn query<T: redis::FromRedisValue>(&self, cmd: &redis::Cmd) -> Option<T> {
        let mut c = self.conn().await?;
        match cmd.query_async(&mut c).await {
            Ok(v) => Some(v),
            Err(e) => {
                self.failed(&e).await;
                None
            }
        }
    }
}

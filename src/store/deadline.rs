//! Every store call has a deadline, and a database that cannot be reached is noticed
//! once rather than by every caller: the backend wrapped.
//!
//! - Each statement, transaction start and commit gives up after the deadline with
//!   `Unavailable` (the caller answers 503 or serves what it holds; a background task
//!   tries again on its next round). Request paths use a short one (`store.
//!   request_deadline_ms`), background work a long one.
//! - PostgreSQL refusing connections marks the store down for `PROBE_EVERY`: calls in
//!   that time fail at once instead of each waiting on a dead server; the first call
//!   after it probes again. (SQLite's "busy" is contention, not an outage: it never
//!   marks the store down.)

use super::sql::{Backend, Dialect, ErrorKind, Result, Row, StoreError, Tx, Value, Visit};
use crate::observe::metrics;
use async_trait::async_trait;
use std::future::Future;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::Arc;
use std::time::{Duration, Instant};

/// How long the store counts as down after a connection failure.
pub const PROBE_EVERY: Duration = Duration::from_secs(1);

/// Whether the database answered lately; shared by every deadline of one store.
#[derive(Debug)]
pub struct Health {
    origin: Instant,
    /// Milliseconds after `origin` until which the store counts as down (0: up).
    down_until_ms: AtomicU64,
}

impl Default for Health {
    fn default() -> Self {
        Health {
            origin: Instant::now(),
            down_until_ms: AtomicU64::new(0),
        }
    }
}

impl Health {
    fn now_ms(&self) -> u64 {
        self.origin.elapsed().as_millis() as u64
    }

    /// Whether the store is known to be down right now.
    pub fn is_down(&self) -> bool {
        self.now_ms() < self.down_until_ms.load(Ordering::Relaxed)
    }

    fn mark_down(&self) {
        let until = self.now_ms() + PROBE_EVERY.as_millis() as u64;
        self.down_until_ms.store(until, Ordering::Relaxed);
    }

    fn mark_up(&self) {
        self.down_until_ms.store(0, Ordering::Relaxed);
    }
}

/// A backend whose calls end by a deadline.
pub struct Deadlined {
    pub inner: Arc<dyn Backend>,
    pub deadline: Duration,
    pub health: Arc<Health>,
}

/// Run `call` within `deadline`, noting in `health` what it says of the database.
async fn bounded<T>(
    health: &Health,
    dialect: Dialect,
    deadline: Duration,
    call: impl Future<Output = Result<T>>,
) -> Result<T> {
    if health.is_down() {
        metrics::store_unavailable("down");
        return Err(StoreError::unavailable(
            "store unreachable (a call failed less than a second ago)",
        ));
    }
    match tokio::time::timeout(deadline, call).await {
        Ok(Ok(v)) => {
            health.mark_up();
            Ok(v)
        }
        Ok(Err(e)) => {
            if e.kind == ErrorKind::Unavailable && dialect == Dialect::Postgres {
                health.mark_down();
                metrics::store_unavailable("unreachable");
            }
            Err(e)
        }
        Err(_) => {
            metrics::store_unavailable("deadline");
            Err(StoreError::unavailable(format!(
                "store call over its {} ms deadline",
                deadline.as_millis()
            )))
        }
    }
}

#[async_trait]
impl Backend for Deadlined {
    fn dialect(&self) -> Dialect {
        self.inner.dialect()
    }

    async fn migrate(&self, migrations: &[&str]) -> Result<()> {
        // Start-up: waits its turn behind other instances' migrations, unbounded.
        self.inner.migrate(migrations).await
    }

    async fn execute(&self, sql: &str, params: Vec<Value>) -> Result<u64> {
        let call = self.inner.execute(sql, params);
        bounded(&self.health, self.dialect(), self.deadline, call).await
    }

    async fn query(&self, sql: &str, params: Vec<Value>) -> Result<Vec<Row>> {
        let call = self.inner.query(sql, params);
        bounded(&self.health, self.dialect(), self.deadline, call).await
    }

    async fn query_visit(
        &self,
        sql: &str,
        params: Vec<Value>,
        visit: Box<dyn Visit>,
    ) -> Result<Box<dyn Visit>> {
        let call = self.inner.query_visit(sql, params, visit);
        bounded(&self.health, self.dialect(), self.deadline, call).await
    }

    async fn begin(&self) -> Result<Box<dyn Tx>> {
        let call = self.inner.begin();
        let tx = bounded(&self.health, self.dialect(), self.deadline, call).await?;
        Ok(Box::new(DeadlinedTx {
            inner: tx,
            dialect: self.dialect(),
            deadline: self.deadline,
            health: self.health.clone(),
        }))
    }
}

struct DeadlinedTx {
    inner: Box<dyn Tx>,
    dialect: Dialect,
    deadline: Duration,
    health: Arc<Health>,
}

#[async_trait]
impl Tx for DeadlinedTx {
    async fn execute(&mut self, sql: &str, params: Vec<Value>) -> Result<u64> {
        let call = self.inner.execute(sql, params);
        bounded(&self.health, self.dialect, self.deadline, call).await
    }

    async fn execute_many(&mut self, sql: &str, rows: Vec<Vec<Value>>) -> Result<u64> {
        let call = self.inner.execute_many(sql, rows);
        bounded(&self.health, self.dialect, self.deadline, call).await
    }

    async fn insert_rows(&mut self, insert: &str, rows: Vec<Vec<Value>>) -> Result<u64> {
        let call = self.inner.insert_rows(insert, rows);
        bounded(&self.health, self.dialect, self.deadline, call).await
    }

    async fn query(&mut self, sql: &str, params: Vec<Value>) -> Result<Vec<Row>> {
        let call = self.inner.query(sql, params);
        bounded(&self.health, self.dialect, self.deadline, call).await
    }

    async fn commit(self: Box<Self>) -> Result<()> {
        let DeadlinedTx {
            inner,
            dialect,
            deadline,
            health,
        } = *self;
        bounded(&health, dialect, deadline, inner.commit()).await
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// A database that never answers, or refuses every connection.
    struct Stuck(Dialect, bool);

    #[async_trait]
    impl Backend for Stuck {
        fn dialect(&self) -> Dialect {
            self.0
        }
        async fn migrate(&self, _: &[&str]) -> Result<()> {
            Ok(())
        }
        async fn execute(&self, _: &str, _: Vec<Value>) -> Result<u64> {
            if self.1 {
                return Err(StoreError::unavailable("connection refused"));
            }
            std::future::pending().await
        }
        async fn query(&self, _: &str, _: Vec<Value>) -> Result<Vec<Row>> {
            std::future::pending().await
        }
        async fn query_visit(
            &self,
            _: &str,
            _: Vec<Value>,
            _: Box<dyn Visit>,
        ) -> Result<Box<dyn Visit>> {
            std::future::pending().await
        }
        async fn begin(&self) -> Result<Box<dyn Tx>> {
            std::future::pending().await
        }
    }

    fn wrap(dialect: Dialect, refuses: bool) -> Deadlined {
        Deadlined {
            inner: Arc::new(Stuck(dialect, refuses)),
            deadline: Duration::from_millis(50),
            health: Default::default(),
        }
    }

    #[tokio::test]
    async fn a_hung_database_fails_calls_at_the_deadline() {
        let db = wrap(Dialect::Postgres, false);
        let started = Instant::now();
        let e = db.query("SELECT 1", vec![]).await.unwrap_err();
        assert_eq!(e.kind, ErrorKind::Unavailable);
        assert!(started.elapsed() < Duration::from_secs(1));
        assert!(db.begin().await.is_err());
        // A timeout says nothing of the server being gone: nothing fails early.
        assert!(!db.health.is_down());
    }

    #[tokio::test]
    async fn a_refusing_postgres_is_down_for_a_moment_and_sqlite_busy_never_is() {
        let db = wrap(Dialect::Postgres, true);
        assert!(db.execute("x", vec![]).await.is_err());
        assert!(db.health.is_down());
        // Failed at once, without reaching the server (which would hang on query).
        let started = Instant::now();
        assert!(db.query("x", vec![]).await.is_err());
        assert!(started.elapsed() < Duration::from_millis(40));

        let sqlite = wrap(Dialect::Sqlite, true);
        assert!(sqlite.execute("x", vec![]).await.is_err());
        assert!(!sqlite.health.is_down());
    }
}

//! Every store call has a deadline, and a database that cannot be reached is noticed
//! once rather than by every caller: the backend wrapped.
//!
//! - Each statement, transaction start and commit gives up after the deadline with
//!   `Unavailable` (the caller answers 503 or serves what it holds; a background task
//!   tries again on its next round). Request paths use a short one (`store.
//!   request_deadline_ms`), background work a long one.
//! - PostgreSQL refusing connections marks the store down for `PROBE_EVERY`: calls in
//!   that time fail at once instead of each waiting on a dead server; the first call
//!   after it probes again.
//! - PostgreSQL not answering within a deadline (a hung server, a frozen host) marks it
//!   degraded until a background probe (`SELECT 1`, every `PROBE_EVERY`) is answered:
//!   meanwhile every call fails at once, so a hung database costs one deadline in all,
//!   not one per request. (SQLite's "busy" and slow statements are contention on this
//!   host, not an outage: they never mark the store down.)

use super::sql::{Backend, Dialect, ErrorKind, Result, Row, StoreError, Tx, Value, Visit};
use crate::observe::metrics;
use async_trait::async_trait;
use std::future::Future;
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::Arc;
use std::time::{Duration, Instant};

/// How long the store counts as down after a connection failure, and how often a
/// degraded store is probed.
pub const PROBE_EVERY: Duration = Duration::from_secs(1);
/// A probe's own deadline.
const PROBE_DEADLINE: Duration = Duration::from_secs(2);

/// Whether the database answered lately; shared by every deadline of one store.
#[derive(Debug)]
pub struct Health {
    origin: Instant,
    /// Milliseconds after `origin` until which the store counts as down (0: up).
    down_until_ms: AtomicU64,
    /// A call ran past its deadline and no probe has been answered since.
    degraded: AtomicBool,
    /// A background probe is running.
    probing: AtomicBool,
}

impl Default for Health {
    fn default() -> Self {
        Health {
            origin: Instant::now(),
            down_until_ms: AtomicU64::new(0),
            degraded: AtomicBool::new(false),
            probing: AtomicBool::new(false),
        }
    }
}

impl Health {
    fn now_ms(&self) -> u64 {
        self.origin.elapsed().as_millis() as u64
    }

    /// Whether the store is known to be down (or hung) right now.
    pub fn is_down(&self) -> bool {
        self.degraded.load(Ordering::Relaxed)
            || self.now_ms() < self.down_until_ms.load(Ordering::Relaxed)
    }

    fn mark_down(&self) {
        let until = self.now_ms() + PROBE_EVERY.as_millis() as u64;
        self.down_until_ms.store(until, Ordering::Relaxed);
    }

    fn mark_up(&self) {
        self.down_until_ms.store(0, Ordering::Relaxed);
    }

    /// A call ran past its deadline: degraded until `db` answers a probe, which one
    /// background task sends every `PROBE_EVERY`.
    fn degrade(self: &Arc<Self>, db: &Arc<dyn Backend>) {
        if !self.degraded.swap(true, Ordering::Relaxed) {
            log::warn!(
                "store: a call ran past its deadline; calls fail at once until a probe is answered"
            );
        }
        if self.probing.swap(true, Ordering::AcqRel) {
            return;
        }
        let (health, db) = (self.clone(), db.clone());
        tokio::spawn(async move {
            loop {
                tokio::time::sleep(PROBE_EVERY).await;
                let probe = db.query("SELECT 1", Vec::new());
                if let Ok(Ok(_)) = tokio::time::timeout(PROBE_DEADLINE, probe).await {
                    health.mark_up();
                    health.degraded.store(false, Ordering::Relaxed);
                    health.probing.store(false, Ordering::Release);
                    log::warn!("store: answering again");
                    return;
                }
            }
        });
    }
}

/// A backend whose calls end by a deadline.
pub struct Deadlined {
    pub inner: Arc<dyn Backend>,
    pub deadline: Duration,
    pub health: Arc<Health>,
}

/// What a deadline guards: the database (probed when a call hangs), its dialect, the
/// deadline and the health every guard of the store shares.
#[derive(Clone)]
struct Guard {
    db: Arc<dyn Backend>,
    dialect: Dialect,
    deadline: Duration,
    health: Arc<Health>,
}

/// Run `call` within the guard's deadline, noting in its health what it says of the
/// database.
async fn bounded<T>(guard: &Guard, call: impl Future<Output = Result<T>>) -> Result<T> {
    let Guard {
        db,
        dialect,
        deadline,
        health,
    } = guard;
    let (dialect, deadline) = (*dialect, *deadline);
    if health.is_down() {
        metrics::store_unavailable("down");
        return Err(StoreError::unavailable(
            "store unreachable (refused or hung lately; probing)",
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
            if dialect == Dialect::Postgres {
                health.degrade(db);
            }
            metrics::store_unavailable("deadline");
            Err(StoreError::unavailable(format!(
                "store call over its {} ms deadline",
                deadline.as_millis()
            )))
        }
    }
}

impl Deadlined {
    fn guard(&self) -> Guard {
        Guard {
            db: self.inner.clone(),
            dialect: self.inner.dialect(),
            deadline: self.deadline,
            health: self.health.clone(),
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
        bounded(&self.guard(), call).await
    }

    async fn query(&self, sql: &str, params: Vec<Value>) -> Result<Vec<Row>> {
        let call = self.inner.query(sql, params);
        bounded(&self.guard(), call).await
    }

    async fn query_visit(
        &self,
        sql: &str,
        params: Vec<Value>,
        visit: Box<dyn Visit>,
    ) -> Result<Box<dyn Visit>> {
        let call = self.inner.query_visit(sql, params, visit);
        bounded(&self.guard(), call).await
    }

    async fn begin(&self) -> Result<Box<dyn Tx>> {
        let call = self.inner.begin();
        let guard = self.guard();
        let tx = bounded(&guard, call).await?;
        Ok(Box::new(DeadlinedTx { inner: tx, guard }))
    }
}

struct DeadlinedTx {
    inner: Box<dyn Tx>,
    guard: Guard,
}

#[async_trait]
impl Tx for DeadlinedTx {
    async fn execute(&mut self, sql: &str, params: Vec<Value>) -> Result<u64> {
        let call = self.inner.execute(sql, params);
        bounded(&self.guard, call).await
    }

    async fn execute_many(&mut self, sql: &str, rows: Vec<Vec<Value>>) -> Result<u64> {
        let call = self.inner.execute_many(sql, rows);
        bounded(&self.guard, call).await
    }

    async fn insert_rows(&mut self, insert: &str, rows: Vec<Vec<Value>>) -> Result<u64> {
        let call = self.inner.insert_rows(insert, rows);
        bounded(&self.guard, call).await
    }

    async fn query(&mut self, sql: &str, params: Vec<Value>) -> Result<Vec<Row>> {
        let call = self.inner.query(sql, params);
        bounded(&self.guard, call).await
    }

    async fn commit(self: Box<Self>) -> Result<()> {
        let DeadlinedTx { inner, guard } = *self;
        bounded(&guard, inner.commit()).await
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
        // A hung server is degraded: the next calls fail at once, not at the deadline.
        assert!(db.health.is_down());
        let started = Instant::now();
        assert!(db.begin().await.is_err());
        assert!(started.elapsed() < Duration::from_millis(40));
        // SQLite's slow statements are this host's contention, not an outage.
        let sqlite = wrap(Dialect::Sqlite, false);
        assert!(sqlite.query("SELECT 1", vec![]).await.is_err());
        assert!(!sqlite.health.is_down());
    }

    /// A database that hangs until `thawed`, then answers.
    struct Frozen(Arc<AtomicBool>);

    #[async_trait]
    impl Backend for Frozen {
        fn dialect(&self) -> Dialect {
            Dialect::Postgres
        }
        async fn migrate(&self, _: &[&str]) -> Result<()> {
            Ok(())
        }
        async fn execute(&self, _: &str, _: Vec<Value>) -> Result<u64> {
            Ok(0)
        }
        async fn query(&self, _: &str, _: Vec<Value>) -> Result<Vec<Row>> {
            while !self.0.load(Ordering::Relaxed) {
                tokio::time::sleep(Duration::from_millis(10)).await;
            }
            Ok(Vec::new())
        }
        async fn query_visit(
            &self,
            _: &str,
            _: Vec<Value>,
            v: Box<dyn Visit>,
        ) -> Result<Box<dyn Visit>> {
            Ok(v)
        }
        async fn begin(&self) -> Result<Box<dyn Tx>> {
            std::future::pending().await
        }
    }

    #[tokio::test]
    async fn a_degraded_store_comes_back_once_a_probe_is_answered() {
        let thawed = Arc::new(AtomicBool::new(false));
        let db = Deadlined {
            inner: Arc::new(Frozen(thawed.clone())),
            deadline: Duration::from_millis(50),
            health: Default::default(),
        };
        assert!(db.query("x", vec![]).await.is_err());
        assert!(db.health.is_down());
        tokio::time::sleep(PROBE_EVERY + Duration::from_millis(200)).await;
        assert!(db.health.is_down(), "a probe that hangs keeps it degraded");
        thawed.store(true, Ordering::Relaxed);
        let until = Instant::now() + PROBE_EVERY * 4;
        while db.health.is_down() && Instant::now() < until {
            tokio::time::sleep(Duration::from_millis(20)).await;
        }
        assert!(!db.health.is_down(), "the probe's answer ends it");
        assert!(db.query("x", vec![]).await.is_ok());
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

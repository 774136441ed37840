//! The shared store for several instances: PostgreSQL through `tokio-postgres`, pooled
//! by `deadpool-postgres`.
//!
//! The pool's connections (transactions and writes) live on the store's own runtime
//! thread: their I/O never depends on which of Pingora's runtimes happened to open them,
//! and a client handle works from any of them. Reads outside a transaction go to a few
//! connections per thread instead, pipelined (`postgres_reads.rs`). Transactions are
//! serializable; a conflict surfaces as `ErrorKind::Conflict` and the repository tries
//! the whole transaction again (`store::retry_conflicts`).

use super::postgres_reads::ReadConns;
use super::postgres_wire::{error, execute_on, query_on, refs};
use super::sql::{
    row_width, values_for, Backend, Dialect, Result, Row, StoreError, Tx, Value, Visit,
};
use async_trait::async_trait;
use deadpool_postgres::{Manager, ManagerConfig, Pool, RecyclingMethod};
use std::time::Duration;
use tokio_postgres::binary_copy::BinaryCopyInWriter;
use tokio_postgres::types::ToSql;

/// Connections per instance.
const POOL_SIZE: usize = 8;
/// How long a caller waits for a connection (or for one to be opened).
const POOL_WAIT: Duration = Duration::from_secs(5);
/// Any one statement; a stuck database fails calls instead of holding them.
const STATEMENT_TIMEOUT_MS: u64 = 10_000;
/// A fixed key for `pg_advisory_lock`: one instance migrates at a time.
const MIGRATION_LOCK: i64 = 0x6368_6169_6e65_6467; // "chainedg"

pub struct Postgres {
    config: tokio_postgres::Config,
    /// The pool and the runtime its connections live on, made in the process that uses
    /// them: `-d` forks after the store is opened (and migrated), and a runtime's
    /// threads do not survive a fork, so the daemon makes its own on first use.
    pooled: std::sync::Mutex<Option<std::sync::Arc<Pooled>>>,
    /// Reads outside a transaction: a few connections per thread (`postgres_reads.rs`).
    reads: ReadConns,
}

struct Pooled {
    pid: u32,
    pool: Pool,
    runtime: Option<tokio::runtime::Runtime>,
}

impl Drop for Pooled {
    fn drop(&mut self) {
        // Dropping a runtime blocks; this may run inside another runtime.
        if let Some(rt) = self.runtime.take() {
            rt.shutdown_background();
        }
    }
}

/// Opens connections on the store's runtime and keeps their tasks there.
struct ConnectOnStoreRuntime {
    handle: tokio::runtime::Handle,
}

impl deadpool_postgres::Connect for ConnectOnStoreRuntime {
    fn connect(
        &self,
        pg_config: &tokio_postgres::Config,
    ) -> futures_util::future::BoxFuture<
        '_,
        std::result::Result<
            (tokio_postgres::Client, tokio::task::JoinHandle<()>),
            tokio_postgres::Error,
        >,
    > {
        let pg_config = pg_config.clone();
        let handle = self.handle.clone();
        Box::pin(async move {
            let spawn_on = handle.clone();
            let opened = handle
                .spawn(async move {
                    let (client, connection) = pg_config.connect(tokio_postgres::NoTls).await?;
                    let task = spawn_on.spawn(async move {
                        if let Err(e) = connection.await {
                            log::warn!("postgres connection: {e}");
                        }
                    });
                    Ok((client, task))
                })
                .await;
            match opened {
                Ok(r) => r,
                // The runtime stops only when the pool (owned beside it) is dropped, which
                // no call in flight allows: the task panicked.
                Err(e) => std::panic::resume_unwind(
                    e.try_into_panic()
                        .unwrap_or_else(|_| Box::new("postgres store runtime stopped")),
                ),
            }
        })
    }
}

impl Postgres {
    /// A pool on `url` (`postgres://user:pass@host:port/db`); connections open on demand.
    pub fn open(url: &str) -> Result<Postgres> {
        let mut config: tokio_postgres::Config = url
            .parse()
            .map_err(|e| StoreError::other(format!("postgres url: {e}")))?;
        config.options(format!("-c statement_timeout={STATEMENT_TIMEOUT_MS}"));
        config.connect_timeout(POOL_WAIT);
        config.application_name("chainedge");
        let pg = Postgres {
            reads: ReadConns::new(config.clone()),
            config,
            pooled: std::sync::Mutex::new(None),
        };
        pg.pooled()?;
        Ok(pg)
    }

    /// This process's pool (made now if there is none, or only the parent's).
    fn pooled(&self) -> Result<std::sync::Arc<Pooled>> {
        let mut held = self
            .pooled
            .lock()
            .map_err(|_| StoreError::other("postgres pool lock poisoned"))?;
        let pid = std::process::id();
        if let Some(p) = held.as_ref().filter(|p| p.pid == pid) {
            return Ok(p.clone());
        }
        if let Some(parents) = held.take() {
            // Its runtime's threads stayed in the parent: nothing here can stop them.
            std::mem::forget(parents);
        }
        let runtime = tokio::runtime::Builder::new_multi_thread()
            .worker_threads(1)
            .thread_name("chainedge-postgres")
            .enable_all()
            .build()
            .map_err(|e| StoreError::other(format!("postgres runtime: {e}")))?;
        let manager = Manager::from_connect(
            self.config.clone(),
            ConnectOnStoreRuntime {
                handle: runtime.handle().clone(),
            },
            ManagerConfig {
                recycling_method: RecyclingMethod::Fast,
            },
        );
        let pool = Pool::builder(manager)
            .max_size(POOL_SIZE)
            .wait_timeout(Some(POOL_WAIT))
            .create_timeout(Some(POOL_WAIT))
            .runtime(deadpool_postgres::Runtime::Tokio1)
            .build()
            .map_err(|e| StoreError::other(format!("postgres pool: {e}")))?;
        let pooled = std::sync::Arc::new(Pooled {
            pid,
            pool,
            runtime: Some(runtime),
        });
        *held = Some(pooled.clone());
        Ok(pooled)
    }

    async fn client(&self) -> Result<deadpool_postgres::Object> {
        let pooled = self.pooled()?;
        pooled
            .pool
            .get()
            .await
            .map_err(|e| StoreError::unavailable(format!("postgres: {e}")))
    }
}

#[async_trait]
impl Backend for Postgres {
    fn dialect(&self) -> Dialect {
        Dialect::Postgres
    }

    async fn migrate(&self, migrations: &[&str]) -> Result<()> {
        let client = self.client().await?;
        // Instances starting together: the first migrates, the others wait and find it done.
        client
            .execute("SELECT pg_advisory_lock($1)", &[&MIGRATION_LOCK])
            .await
            .map_err(error)?;
        let result = async {
            client
                .batch_execute(
                    "CREATE TABLE IF NOT EXISTS schema_version (version BIGINT NOT NULL)",
                )
                .await
                .map_err(error)?;
            let version: i64 = client
                .query_opt("SELECT version FROM schema_version", &[])
                .await
                .map_err(error)?
                .map(|r| r.get(0))
                .unwrap_or(0);
            for (i, sql) in migrations.iter().enumerate().skip(version as usize) {
                let step = format!(
                    "BEGIN; {} DELETE FROM schema_version; INSERT INTO schema_version VALUES ({}); COMMIT;",
                    Dialect::Postgres.render(sql),
                    i + 1
                );
                if let Err(e) = client.batch_execute(&step).await {
                    let _ = client.batch_execute("ROLLBACK").await;
                    return Err(error(e));
                }
            }
            Ok(())
        }
        .await;
        let _ = client
            .execute("SELECT pg_advisory_unlock($1)", &[&MIGRATION_LOCK])
            .await;
        result
    }

    async fn execute(&self, sql: &str, params: Vec<Value>) -> Result<u64> {
        let client = self.client().await?;
        execute_on(&client, sql, &params).await
    }

    async fn query(&self, sql: &str, params: Vec<Value>) -> Result<Vec<Row>> {
        super::postgres_wire::rows(self.reads.query(sql, &params).await?)
    }

    async fn query_visit(
        &self,
        sql: &str,
        params: Vec<Value>,
        mut visit: Box<dyn Visit>,
    ) -> Result<Box<dyn Visit>> {
        for row in self.reads.query(sql, &params).await? {
            visit.row(&super::postgres_wire::PgCells(&row))?;
        }
        Ok(visit)
    }

    async fn begin(&self) -> Result<Box<dyn Tx>> {
        let client = self.client().await?;
        client
            .batch_execute("BEGIN ISOLATION LEVEL SERIALIZABLE")
            .await
            .map_err(error)?;
        Ok(Box::new(PgTx {
            client: Some(client),
        }))
    }
}

struct PgTx {
    /// `None` once committed.
    client: Option<deadpool_postgres::Object>,
}

impl PgTx {
    fn client(&self) -> Result<&deadpool_postgres::Object> {
        self.client
            .as_ref()
            .ok_or_else(|| StoreError::other("transaction already ended"))
    }
}

#[async_trait]
impl Tx for PgTx {
    async fn execute(&mut self, sql: &str, params: Vec<Value>) -> Result<u64> {
        execute_on(self.client()?, sql, &params).await
    }

    async fn query(&mut self, sql: &str, params: Vec<Value>) -> Result<Vec<Row>> {
        query_on(self.client()?, sql, &params).await
    }

    async fn execute_many(&mut self, sql: &str, rows: Vec<Vec<Value>>) -> Result<u64> {
        let c = self.client()?;
        let st = c.prepare_cached(sql).await.map_err(error)?;
        let mut changed = 0;
        // Sent without waiting for each answer (tokio-postgres pipelines the requests of
        // one connection), a bounded number at a time.
        for chunk in rows.chunks(512) {
            let params: Vec<_> = chunk.iter().map(|p| refs(p)).collect();
            let runs = params.iter().map(|p| c.execute(&st, p));
            changed += futures_util::future::try_join_all(runs)
                .await
                .map_err(error)?
                .into_iter()
                .sum::<u64>();
        }
        Ok(changed)
    }

    /// By `COPY … FROM STDIN BINARY`: the rows stream to the server in one command,
    /// with no statement to plan or run per row or per chunk.
    async fn insert_rows(&mut self, insert: &str, rows: Vec<Vec<Value>>) -> Result<u64> {
        let Some(columns) = row_width(&rows)? else {
            return Ok(0);
        };
        let target = insert
            .strip_prefix("INSERT INTO ")
            .ok_or_else(|| StoreError::other("insert_rows: not an INSERT INTO"))?;
        let c = self.client()?;
        // The columns' types as the server infers them for one row (prepared once per
        // connection): the binary format carries no types of its own.
        let one = c
            .prepare_cached(&values_for(insert, columns, 1))
            .await
            .map_err(error)?;
        let sink = c
            .copy_in(&format!("COPY {target} FROM STDIN BINARY"))
            .await
            .map_err(error)?;
        let writer = BinaryCopyInWriter::new(sink, one.params());
        let mut writer = std::pin::pin!(writer);
        let mut values: Vec<&(dyn ToSql + Sync)> = Vec::with_capacity(columns);
        for row in &rows {
            values.clear();
            values.extend(row.iter().map(|v| v as &(dyn ToSql + Sync)));
            writer.as_mut().write(&values).await.map_err(error)?;
        }
        writer.as_mut().finish().await.map_err(error)
    }

    async fn commit(mut self: Box<Self>) -> Result<()> {
        let client = self
            .client
            .take()
            .ok_or_else(|| StoreError::other("no transaction"))?;
        match client.batch_execute("COMMIT").await {
            Ok(()) => Ok(()),
            Err(e) => {
                // A failed COMMIT has ended the transaction; the connection is reusable
                // only if it still answers.
                let _ = client.batch_execute("ROLLBACK").await;
                Err(error(e))
            }
        }
    }
}

impl Drop for PgTx {
    fn drop(&mut self) {
        if let Some(client) = self.client.take() {
            // Not committed: roll back before the connection goes back to the pool. A
            // drop cannot wait, so the rollback runs on its own; if it cannot, the
            // connection is taken out of the pool instead of returned half-way.
            match tokio::runtime::Handle::try_current() {
                Ok(rt) => {
                    rt.spawn(async move {
                        if client.batch_execute("ROLLBACK").await.is_err() {
                            let _ = deadpool_postgres::Object::take(client);
                        }
                    });
                }
                Err(_) => {
                    let _ = deadpool_postgres::Object::take(client);
                }
            }
        }
    }
}

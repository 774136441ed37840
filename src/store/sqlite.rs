//! The embedded store: one SQLite file, nothing to install.
//!
//! One writing connection, used by one statement at a time on tokio's blocking threads
//! (SQLite calls block). A transaction holds the connection's gate from `BEGIN IMMEDIATE`
//! to `COMMIT`, so its statements never interleave with another caller's.
//!
//! Reads outside a transaction go to read-only connections beside it (`READERS`, each on
//! a thread of its own: `sqlite_readers.rs`): in WAL mode they run at the same time as
//! each other and as the writer, each seeing what was committed when it began, so a page
//! of wallet history never waits for an indexer commit or for another reader.

use super::sql::{
    insert_chunks, row_width, values_for, Backend, Cells, Dialect, ErrorKind, Result, Row,
    StoreError, Tx, Value, Visit,
};
use super::sqlite_readers::Readers;
use async_trait::async_trait;
use rusqlite::types::ValueRef;
use rusqlite::{Connection, OpenFlags};
use std::collections::HashMap;
use std::path::Path;
use std::sync::{Arc, LazyLock, Mutex};
use tokio::sync::OwnedMutexGuard;

/// Read-only connections: reads at once, at most (each keeps its own page cache, and
/// its own thread).
const READERS: usize = 4;

pub struct Sqlite {
    /// First, so dropped first: the readers close before the writer (`Readers`' drop).
    readers: Readers,
    conn: Arc<Mutex<Connection>>,
    /// Held by a transaction (or a single statement) for as long as it uses `conn`.
    gate: Arc<tokio::sync::Mutex<()>>,
}

impl Sqlite {
    pub fn open(path: &Path) -> Result<Sqlite> {
        if let Some(dir) = path.parent() {
            let _ = std::fs::create_dir_all(dir);
        }
        let conn = Connection::open(path).map_err(error)?;
        conn.pragma_update(None, "journal_mode", "WAL")
            .map_err(error)?;
        // FULL: an acknowledged write survives a crash of the process or the machine.
        conn.pragma_update(None, "synchronous", "FULL")
            .map_err(error)?;
        conn.pragma_update(None, "foreign_keys", "ON")
            .map_err(error)?;
        // A multi-row statement inside a transaction keeps the pages it changes in a
        // statement journal; past 64 KiB SQLite spills it to a temporary file, and the
        // index's bulk inserts did: 19,000 of a backfill's 43,000 `pwrite` calls.
        conn.pragma_update(None, "temp_store", "MEMORY")
            .map_err(error)?;
        conn.busy_timeout(std::time::Duration::from_secs(5))
            .map_err(error)?;
        // Room for every chunk size of `insert_rows` for each bulk-written table beside
        // the other statements (the default keeps 16).
        conn.set_prepared_statement_cache_capacity(64);
        // Opened after the writer: the file exists and is in WAL mode.
        let readers = (0..READERS)
            .map(|_| {
                let flags = OpenFlags::SQLITE_OPEN_READ_ONLY | OpenFlags::SQLITE_OPEN_NO_MUTEX;
                let reader = Connection::open_with_flags(path, flags).map_err(error)?;
                reader
                    .busy_timeout(std::time::Duration::from_secs(5))
                    .map_err(error)?;
                Ok(reader)
            })
            .collect::<Result<Vec<_>>>()?;
        Ok(Sqlite {
            conn: Arc::new(Mutex::new(conn)),
            gate: Arc::new(tokio::sync::Mutex::new(())),
            readers: Readers::start(readers)?,
        })
    }
}

fn error(e: rusqlite::Error) -> StoreError {
    let kind = match e.sqlite_error_code() {
        Some(rusqlite::ErrorCode::ConstraintViolation) => ErrorKind::Conflict,
        Some(rusqlite::ErrorCode::DatabaseBusy | rusqlite::ErrorCode::DatabaseLocked) => {
            ErrorKind::Unavailable
        }
        _ => ErrorKind::Other,
    };
    StoreError {
        kind,
        message: format!("sqlite: {e}"),
    }
}

/// `$1` parameters as SQLite's numbered `?1` (the store's SQL has no `$` elsewhere).
fn numbered(sql: &str) -> String {
    // Byte for byte (`$` and `?` are both one byte): run per read, so no per-char pushes.
    let mut text = sql.as_bytes().to_vec();
    for i in 1..text.len() {
        if text[i - 1] == b'$' && text[i].is_ascii_digit() {
            text[i - 1] = b'?';
        }
    }
    String::from_utf8(text).unwrap_or_else(|_| sql.to_string())
}

/// Bound by reference: a row's text and bytes are not copied to be inserted.
impl rusqlite::ToSql for Value {
    fn to_sql(&self) -> rusqlite::Result<rusqlite::types::ToSqlOutput<'_>> {
        use rusqlite::types::ToSqlOutput::Borrowed;
        Ok(Borrowed(match self {
            Value::Null => ValueRef::Null,
            Value::Int(n) => ValueRef::Integer(*n),
            Value::Text(s) => ValueRef::Text(s.as_bytes()),
            Value::Bytes(b) => ValueRef::Blob(b),
        }))
    }
}

fn from_sql(v: ValueRef<'_>) -> Value {
    match v {
        ValueRef::Null => Value::Null,
        ValueRef::Integer(n) => Value::Int(n),
        // The schema has no REAL columns; a float would be a bug, kept visible.
        ValueRef::Real(f) => Value::Text(f.to_string()),
        // Checked first (the common case, valid UTF-8, is one pass and one copy).
        ValueRef::Text(t) => Value::Text(match std::str::from_utf8(t) {
            Ok(s) => s.to_owned(),
            Err(_) => String::from_utf8_lossy(t).into_owned(),
        }),
        ValueRef::Blob(b) => Value::Bytes(b.to_vec()),
    }
}

fn execute_on(conn: &Connection, sql: &str, params: &[Value]) -> Result<u64> {
    execute_rows(conn, sql, std::slice::from_ref(&params))
}

/// One statement, prepared once, run for each row.
fn execute_rows<P: AsRef<[Value]>>(conn: &Connection, sql: &str, rows: &[P]) -> Result<u64> {
    let mut st = conn.prepare_cached(&numbered(sql)).map_err(error)?;
    let mut changed = 0;
    for params in rows {
        changed += st
            .execute(rusqlite::params_from_iter(params.as_ref()))
            .map_err(error)? as u64;
    }
    Ok(changed)
}

/// `Tx::insert_rows` on the writer: one cached statement per chunk size.
fn insert_on(conn: &Connection, insert: &str, rows: &[Vec<Value>]) -> Result<u64> {
    let Some(columns) = row_width(rows)? else {
        return Ok(0);
    };
    let mut changed = 0;
    let mut rest = rows;
    for n in insert_chunks(rows.len()) {
        let (chunk, next) = rest.split_at(n);
        rest = next;
        let mut st = conn
            .prepare_cached(&chunk_text(insert, columns, n))
            .map_err(error)?;
        changed += st
            .execute(rusqlite::params_from_iter(chunk.iter().flatten()))
            .map_err(error)? as u64;
    }
    Ok(changed)
}

/// `insert`'s numbered statement for `rows` rows (kilobytes of `?N` for a full chunk),
/// written once per statement and chunk size: the store's inserts are constants of the
/// code and the sizes `insert_chunks`' powers of two, so the map stays small.
fn chunk_text(insert: &str, columns: usize, rows: usize) -> Arc<str> {
    type Texts = HashMap<String, HashMap<usize, Arc<str>>>;
    static TEXTS: LazyLock<Mutex<Texts>> = LazyLock::new(Mutex::default);
    let mut texts = TEXTS.lock().unwrap_or_else(|p| p.into_inner());
    if let Some(text) = texts.get(insert).and_then(|sizes| sizes.get(&rows)) {
        return text.clone();
    }
    let text: Arc<str> = numbered(&values_for(insert, columns, rows)).into();
    texts
        .entry(insert.to_string())
        .or_default()
        .insert(rows, text.clone());
    text
}

fn query_on(conn: &Connection, sql: &str, params: &[Value]) -> Result<Vec<Row>> {
    let mut st = conn.prepare_cached(&numbered(sql)).map_err(error)?;
    let columns = st.column_count();
    let mut rows = st
        .query(rusqlite::params_from_iter(params))
        .map_err(error)?;
    let mut out = Vec::new();
    while let Some(r) = rows.next().map_err(error)? {
        let mut row = Vec::with_capacity(columns);
        for i in 0..columns {
            row.push(from_sql(r.get_ref(i).map_err(error)?));
        }
        out.push(Row(row));
    }
    Ok(out)
}

/// `query_on`, each row handed to `visit` as it is stepped to.
fn visit_on(
    conn: &Connection,
    sql: &str,
    params: &[Value],
    mut visit: Box<dyn Visit>,
) -> Result<Box<dyn Visit>> {
    let mut st = conn.prepare_cached(&numbered(sql)).map_err(error)?;
    let mut rows = st
        .query(rusqlite::params_from_iter(params))
        .map_err(error)?;
    while let Some(r) = rows.next().map_err(error)? {
        visit.row(&SqliteCells(r))?;
    }
    Ok(visit)
}

struct SqliteCells<'a, 'b>(&'a rusqlite::Row<'b>);

impl Cells for SqliteCells<'_, '_> {
    fn text(&self, i: usize) -> Result<Option<&str>> {
        match self.0.get_ref(i).map_err(error)? {
            ValueRef::Null => Ok(None),
            ValueRef::Text(t) => std::str::from_utf8(t)
                .map(Some)
                .map_err(|_| StoreError::other(format!("column {i}: not UTF-8"))),
            v => Err(StoreError::other(format!(
                "column {i}: text expected, {v:?}"
            ))),
        }
    }

    fn int(&self, i: usize) -> Result<Option<i64>> {
        match self.0.get_ref(i).map_err(error)? {
            ValueRef::Null => Ok(None),
            ValueRef::Integer(n) => Ok(Some(n)),
            v => Err(StoreError::other(format!(
                "column {i}: integer expected, {v:?}"
            ))),
        }
    }
}

/// Run `f` on the connection on a blocking thread.
async fn blocking<T: Send + 'static>(
    conn: &Arc<Mutex<Connection>>,
    f: impl FnOnce(&mut Connection) -> Result<T> + Send + 'static,
) -> Result<T> {
    let conn = conn.clone();
    tokio::task::spawn_blocking(move || {
        let mut c = conn
            .lock()
            .map_err(|_| StoreError::other("sqlite connection lock poisoned"))?;
        f(&mut c)
    })
    .await
    .map_err(|e| StoreError::other(format!("store task: {e}")))?
}

#[async_trait]
impl Backend for Sqlite {
    fn dialect(&self) -> Dialect {
        Dialect::Sqlite
    }

    async fn migrate(&self, migrations: &[&str]) -> Result<()> {
        let _gate = self.gate.lock().await;
        let steps: Vec<String> = migrations.iter().map(|m| m.to_string()).collect();
        blocking(&self.conn, move |conn| {
            let version: usize = conn
                .query_row("PRAGMA user_version", [], |r| r.get(0))
                .map_err(error)?;
            for (i, sql) in steps.iter().enumerate().skip(version) {
                let tx = conn.transaction().map_err(error)?;
                tx.execute_batch(sql).map_err(error)?;
                tx.pragma_update(None, "user_version", i + 1)
                    .map_err(error)?;
                tx.commit().map_err(error)?;
            }
            Ok(())
        })
        .await
    }

    async fn execute(&self, sql: &str, params: Vec<Value>) -> Result<u64> {
        let _gate = self.gate.lock().await;
        let sql = sql.to_string();
        blocking(&self.conn, move |c| execute_on(c, &sql, &params)).await
    }

    async fn query(&self, sql: &str, params: Vec<Value>) -> Result<Vec<Row>> {
        let sql = sql.to_string();
        self.readers.run(move |c| query_on(c, &sql, &params)).await
    }

    async fn query_visit(
        &self,
        sql: &str,
        params: Vec<Value>,
        visit: Box<dyn Visit>,
    ) -> Result<Box<dyn Visit>> {
        let sql = sql.to_string();
        self.readers
            .run(move |c| visit_on(c, &sql, &params, visit))
            .await
    }

    async fn begin(&self) -> Result<Box<dyn Tx>> {
        let gate = self.gate.clone().lock_owned().await;
        blocking(&self.conn, |c| {
            c.execute_batch("BEGIN IMMEDIATE").map_err(error)
        })
        .await?;
        Ok(Box::new(SqliteTx {
            conn: self.conn.clone(),
            open: true,
            _gate: gate,
        }))
    }
}

struct SqliteTx {
    conn: Arc<Mutex<Connection>>,
    /// Not yet committed: rolled back when dropped.
    open: bool,
    // Declared last: released after the rollback in `drop`.
    _gate: OwnedMutexGuard<()>,
}

#[async_trait]
impl Tx for SqliteTx {
    async fn execute(&mut self, sql: &str, params: Vec<Value>) -> Result<u64> {
        let sql = sql.to_string();
        blocking(&self.conn, move |c| execute_on(c, &sql, &params)).await
    }

    async fn query(&mut self, sql: &str, params: Vec<Value>) -> Result<Vec<Row>> {
        let sql = sql.to_string();
        blocking(&self.conn, move |c| query_on(c, &sql, &params)).await
    }

    async fn insert_rows(&mut self, insert: &str, rows: Vec<Vec<Value>>) -> Result<u64> {
        let insert = insert.to_string();
        blocking(&self.conn, move |c| insert_on(c, &insert, &rows)).await
    }

    async fn execute_many(&mut self, sql: &str, rows: Vec<Vec<Value>>) -> Result<u64> {
        let sql = sql.to_string();
        // One trip to the blocking pool for all rows (the statement is cached).
        blocking(&self.conn, move |c| execute_rows(c, &sql, &rows)).await
    }

    async fn commit(mut self: Box<Self>) -> Result<()> {
        blocking(&self.conn, |c| c.execute_batch("COMMIT").map_err(error)).await?;
        self.open = false;
        Ok(())
    }
}

impl Drop for SqliteTx {
    fn drop(&mut self) {
        if self.open {
            // A rollback is a local, short write: done here, before the gate opens, so
            // the next caller never finds a transaction still open.
            if let Ok(c) = self.conn.lock() {
                let _ = c.execute_batch("ROLLBACK");
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::numbered;
    use super::{Backend, Sqlite, Value};

    /// Closed after reads, the store leaves everything in the database file itself (the
    /// readers close before the writer, which checkpoints the WAL): a copy of the file
    /// alone, as `bench/cluster.sh` makes of a store the CLI wrote, holds every row.
    #[tokio::test]
    async fn a_closed_store_is_whole_in_its_file() {
        let dir = std::env::temp_dir().join(format!("chainedge-sqlite-{}", std::process::id()));
        let _ = std::fs::remove_dir_all(&dir);
        let path = dir.join("store.db");
        let store = Sqlite::open(&path).unwrap();
        store
            .execute("CREATE TABLE t (v INTEGER NOT NULL)", vec![])
            .await
            .unwrap();
        store.query("SELECT v FROM t", vec![]).await.unwrap();
        store
            .execute("INSERT INTO t (v) VALUES ($1)", vec![Value::Int(7)])
            .await
            .unwrap();
        assert_eq!(
            store.query("SELECT v FROM t", vec![]).await.unwrap().len(),
            1
        );
        drop(store);
        assert!(
            !dir.join("store.db-wal").exists(),
            "the WAL was not checkpointed"
        );
        let copy = dir.join("copy.db");
        std::fs::copy(&path, &copy).unwrap();
        let rows = Sqlite::open(&copy)
            .unwrap()
            .query("SELECT v FROM t", vec![])
            .await
            .unwrap();
        assert_eq!(rows.len(), 1);
        let _ = std::fs::remove_dir_all(&dir);
    }

    #[test]
    fn dollar_parameters_become_numbered() {
        assert_eq!(
            numbered("UPDATE t SET a = $2 WHERE id = $1 AND b = '$x'"),
            "UPDATE t SET a = ?2 WHERE id = ?1 AND b = '$x'"
        );
        // Multi-byte text around a parameter stays whole; a `$` at either end is kept.
        assert_eq!(numbered("$ é = $10 ü$"), "$ é = ?10 ü$");
    }
}

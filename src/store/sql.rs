//! The few things the store's queries need from a database, the same for SQLite and
//! PostgreSQL: values, rows, statements with `$1`-style parameters, transactions.
//!
//! The repositories (`store/mod.rs`, `store/console.rs`) are written once against this;
//! each backend (`sqlite.rs`, `postgres.rs`) turns it into its driver's calls. Queries are
//! kept to SQL both understand (no `rowid`, no `INSERT OR IGNORE`); the migrations are one
//! list, with the two type names that differ rendered per backend (`Dialect::render`).

use async_trait::async_trait;

/// A value going into or coming out of a statement.
#[derive(Debug, Clone, PartialEq)]
pub enum Value {
    Null,
    Int(i64),
    Text(String),
    Bytes(Vec<u8>),
}

impl From<i64> for Value {
    fn from(v: i64) -> Self {
        Value::Int(v)
    }
}

impl From<bool> for Value {
    fn from(v: bool) -> Self {
        Value::Int(v as i64)
    }
}

impl From<&str> for Value {
    fn from(v: &str) -> Self {
        Value::Text(v.to_string())
    }
}

impl From<String> for Value {
    fn from(v: String) -> Self {
        Value::Text(v)
    }
}

impl From<&String> for Value {
    fn from(v: &String) -> Self {
        Value::Text(v.clone())
    }
}

impl From<&[u8]> for Value {
    fn from(v: &[u8]) -> Self {
        Value::Bytes(v.to_vec())
    }
}

impl From<&[u8; 32]> for Value {
    fn from(v: &[u8; 32]) -> Self {
        Value::Bytes(v.to_vec())
    }
}

impl<T: Into<Value>> From<Option<T>> for Value {
    fn from(v: Option<T>) -> Self {
        v.map_or(Value::Null, Into::into)
    }
}

/// Statement parameters: `params![a, b]` is `vec![Value::from(a), Value::from(b)]`.
macro_rules! params {
    ($($v:expr),* $(,)?) => {
        vec![$($crate::store::sql::Value::from($v)),*]
    };
}
pub(crate) use params;

/// One result row.
#[derive(Debug, Clone)]
pub struct Row(pub Vec<Value>);

impl Row {
    fn at(&self, i: usize) -> Result<&Value> {
        self.0
            .get(i)
            .ok_or_else(|| StoreError::other(format!("no column {i}")))
    }

    pub fn text(&self, i: usize) -> Result<String> {
        self.opt_text(i)?
            .ok_or_else(|| StoreError::other(format!("column {i} is NULL")))
    }

    /// `text`, moved out of the row (an empty text left): for rows read once, no copy.
    pub fn take_text(&mut self, i: usize) -> Result<String> {
        self.take_opt_text(i)?
            .ok_or_else(|| StoreError::other(format!("column {i} is NULL")))
    }

    pub fn take_opt_text(&mut self, i: usize) -> Result<Option<String>> {
        match self.0.get_mut(i) {
            Some(Value::Text(s)) => Ok(Some(std::mem::take(s))),
            _ => self.opt_text(i),
        }
    }

    pub fn opt_text(&self, i: usize) -> Result<Option<String>> {
        match self.at(i)? {
            Value::Null => Ok(None),
            Value::Text(s) => Ok(Some(s.clone())),
            v => Err(StoreError::other(format!(
                "column {i}: text expected, {v:?}"
            ))),
        }
    }

    pub fn int(&self, i: usize) -> Result<i64> {
        self.opt_int(i)?
            .ok_or_else(|| StoreError::other(format!("column {i} is NULL")))
    }

    pub fn opt_int(&self, i: usize) -> Result<Option<i64>> {
        match self.at(i)? {
            Value::Null => Ok(None),
            Value::Int(n) => Ok(Some(*n)),
            v => Err(StoreError::other(format!(
                "column {i}: integer expected, {v:?}"
            ))),
        }
    }

    pub fn bytes(&self, i: usize) -> Result<Vec<u8>> {
        match self.at(i)? {
            Value::Bytes(b) => Ok(b.clone()),
            v => Err(StoreError::other(format!(
                "column {i}: bytes expected, {v:?}"
            ))),
        }
    }

    pub fn is_null(&self, i: usize) -> Result<bool> {
        Ok(matches!(self.at(i)?, Value::Null))
    }
}

#[derive(Debug, Clone, Copy, PartialEq)]
pub enum ErrorKind {
    /// A concurrent transaction won (a unique constraint, a serialization failure): the
    /// whole transaction may be tried again.
    Conflict,
    /// The database cannot be reached (down, pool exhausted, timed out).
    Unavailable,
    Other,
}

#[derive(Debug, Clone)]
pub struct StoreError {
    pub kind: ErrorKind,
    pub message: String,
}

impl StoreError {
    /// The error as callers see it: 503 `store_unavailable` when the store could not be
    /// reached, else 500.
    pub fn to_api_error(&self) -> crate::errors::ApiError {
        use crate::errors::ApiError;
        match self.kind {
            ErrorKind::Unavailable => ApiError::store_unavailable(),
            _ => ApiError::internal("store failure"),
        }
    }

    pub fn other(message: impl Into<String>) -> Self {
        StoreError {
            kind: ErrorKind::Other,
            message: message.into(),
        }
    }

    pub fn unavailable(message: impl Into<String>) -> Self {
        StoreError {
            kind: ErrorKind::Unavailable,
            message: message.into(),
        }
    }

    pub fn conflict(message: impl Into<String>) -> Self {
        StoreError {
            kind: ErrorKind::Conflict,
            message: message.into(),
        }
    }
}

impl std::fmt::Display for StoreError {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(&self.message)
    }
}

impl std::error::Error for StoreError {}

pub type Result<T> = std::result::Result<T, StoreError>;

/// How a migration that concerns SQLite alone begins.
pub const SQLITE_ONLY: &str = "-- sqlite only";

/// Which SQL a backend speaks where the two differ.
#[derive(Debug, Clone, Copy, PartialEq)]
pub enum Dialect {
    Sqlite,
    Postgres,
}

impl Dialect {
    /// A migration as this backend runs it. The list is written for SQLite; PostgreSQL
    /// names two of its types differently (SQLite's `INTEGER` is 64-bit), has no rowid
    /// tables to opt out of (`WITHOUT ROWID`), and has nothing to run for a version that
    /// only concerns SQLite's storage (`SQLITE_ONLY`).
    pub fn render(self, sql: &str) -> String {
        match self {
            Dialect::Sqlite => sql.to_string(),
            Dialect::Postgres if sql.starts_with(SQLITE_ONLY) => String::new(),
            Dialect::Postgres => sql
                .replace("INTEGER", "BIGINT")
                .replace("BLOB", "BYTEA")
                .replace(") WITHOUT ROWID;", ");"),
        }
    }
}

/// One row's cells, borrowed from the database's own buffers (`Backend::query_visit`).
pub trait Cells {
    fn text(&self, i: usize) -> Result<Option<&str>>;
    fn int(&self, i: usize) -> Result<Option<i64>>;

    /// `text` of a column that is never NULL.
    fn text_of(&self, i: usize) -> Result<&str> {
        self.text(i)?
            .ok_or_else(|| StoreError::other(format!("column {i} is NULL")))
    }

    /// `int` of a column that is never NULL.
    fn int_of(&self, i: usize) -> Result<i64> {
        self.int(i)?
            .ok_or_else(|| StoreError::other(format!("column {i} is NULL")))
    }
}

/// What a statement's rows are handed to, one at a time, where they are read (SQLite: on
/// the reader's thread), so a page can be built from them without a `Value` and a
/// `String` per cell first.
pub trait Visit: Send + std::any::Any {
    fn row(&mut self, cells: &dyn Cells) -> Result<()>;
}

/// A database the store runs on.
#[async_trait]
pub trait Backend: Send + Sync {
    fn dialect(&self) -> Dialect;
    /// Bring the schema up to `migrations.len()`, each step in its own transaction; safe
    /// when several instances start at once.
    async fn migrate(&self, migrations: &[&str]) -> Result<()>;
    /// One statement in its own transaction: rows changed.
    async fn execute(&self, sql: &str, params: Vec<Value>) -> Result<u64>;
    async fn query(&self, sql: &str, params: Vec<Value>) -> Result<Vec<Row>>;
    /// `query`, each row handed to `visit` instead of copied out; `visit` comes back.
    async fn query_visit(
        &self,
        sql: &str,
        params: Vec<Value>,
        visit: Box<dyn Visit>,
    ) -> Result<Box<dyn Visit>>;
    /// A transaction that sees no concurrent writer's partial work (SQLite: `BEGIN
    /// IMMEDIATE`; PostgreSQL: serializable). Dropped without `commit`, it rolls back.
    async fn begin(&self) -> Result<Box<dyn Tx>>;
}

#[async_trait]
pub trait Tx: Send {
    async fn execute(&mut self, sql: &str, params: Vec<Value>) -> Result<u64>;
    /// The same statement once per parameter row, in order, prepared once (PostgreSQL
    /// pipelines them): rows changed in all. For bulk writes (the chain index).
    async fn execute_many(&mut self, sql: &str, rows: Vec<Vec<Value>>) -> Result<u64>;
    /// `rows` for `insert` (`INSERT INTO t (c1, …, ck)`, no `VALUES`), many to a
    /// command instead of one statement each (SQLite: `INSERT_CHUNK` rows to a statement,
    /// `insert_chunks`; PostgreSQL: one binary `COPY`). Rows inserted in all. Every row
    /// has the columns' count of values.
    async fn insert_rows(&mut self, insert: &str, rows: Vec<Vec<Value>>) -> Result<u64>;
    async fn query(&mut self, sql: &str, params: Vec<Value>) -> Result<Vec<Row>>;
    async fn commit(self: Box<Self>) -> Result<()>;
}

/// Rows one statement of `Tx::insert_rows` carries at most.
pub const INSERT_CHUNK: usize = 128;

/// How `insert_rows` splits `n` rows: powers of two, largest first, each at most
/// `INSERT_CHUNK`, so a connection prepares at most eight statements per table whatever
/// the batches' sizes.
pub fn insert_chunks(mut n: usize) -> impl Iterator<Item = usize> {
    std::iter::from_fn(move || {
        if n == 0 {
            return None;
        }
        let chunk = if n >= INSERT_CHUNK {
            INSERT_CHUNK
        } else {
            1 << n.ilog2()
        };
        n -= chunk;
        Some(chunk)
    })
}

/// The width every row of an `insert_rows` call shares (`None`: no rows), checked before
/// anything is written: a row of another width would shift every value after it in a
/// chunk (SQLite) or stop the `COPY` half-way (PostgreSQL).
pub fn row_width(rows: &[Vec<Value>]) -> Result<Option<usize>> {
    let Some(width) = rows.first().map(Vec::len) else {
        return Ok(None);
    };
    match rows.iter().position(|r| r.len() != width) {
        Some(i) => Err(StoreError::other(format!(
            "insert_rows: row {i} has {} values, the first {width}",
            rows[i].len()
        ))),
        None => Ok(Some(width)),
    }
}

/// `insert` with `VALUES` for `rows` rows of `columns` values, numbered `$1` on.
pub fn values_for(insert: &str, columns: usize, rows: usize) -> String {
    use std::fmt::Write;
    let mut sql = String::with_capacity(insert.len() + 8 + rows * columns * 6);
    sql.push_str(insert);
    sql.push_str(" VALUES ");
    for r in 0..rows {
        sql.push_str(if r == 0 { "(" } else { ", (" });
        for c in 0..columns {
            let sep = if c == 0 { "" } else { ", " };
            let _ = write!(sql, "{sep}${}", r * columns + c + 1);
        }
        sql.push(')');
    }
    sql
}

/// The first row, if any.
pub async fn query_opt(tx: &mut dyn Tx, sql: &str, params: Vec<Value>) -> Result<Option<Row>> {
    Ok(tx.query(sql, params).await?.into_iter().next())
}

#[cfg(test)]
mod tests {
    use super::{insert_chunks, row_width, values_for, Dialect, Row, Value, INSERT_CHUNK};

    #[test]
    fn a_sqlite_only_migration_is_nothing_on_postgres() {
        let rebuild = "-- sqlite only\nCREATE TABLE t (n INTEGER) WITHOUT ROWID;";
        assert_eq!(Dialect::Postgres.render(rebuild), "");
        assert_eq!(Dialect::Sqlite.render(rebuild), rebuild);
        assert_eq!(
            Dialect::Postgres.render("CREATE TABLE t (n INTEGER, b BLOB);"),
            "CREATE TABLE t (n BIGINT, b BYTEA);"
        );
        assert_eq!(
            Dialect::Postgres.render("CREATE TABLE t (n INTEGER PRIMARY KEY) WITHOUT ROWID;"),
            "CREATE TABLE t (n BIGINT PRIMARY KEY);"
        );
    }

    #[test]
    fn taking_text_moves_it_out_and_checks_like_reading() {
        let mut row = Row(vec![Value::Text("a".into()), Value::Null, Value::Int(3)]);
        assert_eq!(row.take_text(0).unwrap(), "a");
        assert_eq!(row.take_opt_text(1).unwrap(), None);
        assert!(row.take_text(1).is_err(), "NULL is not text");
        assert!(row.take_text(2).is_err(), "an integer is not text");
        assert!(row.take_text(3).is_err(), "no such column");
    }

    #[test]
    fn rows_of_another_width_are_refused_before_anything_is_written() {
        let row = |n: usize| vec![Value::Int(1); n];
        assert_eq!(row_width(&[]).unwrap(), None);
        assert_eq!(row_width(&[row(3), row(3)]).unwrap(), Some(3));
        let e = row_width(&[row(3), row(2), row(4)]).unwrap_err();
        assert!(e.to_string().contains("row 1 has 2 values"), "{e}");
    }

    #[test]
    fn rows_split_into_a_few_statement_sizes() {
        assert_eq!(insert_chunks(0).count(), 0);
        assert_eq!(insert_chunks(1).collect::<Vec<_>>(), [1]);
        assert_eq!(insert_chunks(7).collect::<Vec<_>>(), [4, 2, 1]);
        let n = 2 * INSERT_CHUNK + 100;
        let chunks: Vec<_> = insert_chunks(n).collect();
        assert_eq!(chunks, [INSERT_CHUNK, INSERT_CHUNK, 64, 32, 4]);
        assert_eq!(chunks.iter().sum::<usize>(), n);
        // Every size any batch can need: at most eight statements per table.
        let mut sizes: Vec<_> = (1..1000).flat_map(insert_chunks).collect();
        sizes.sort_unstable();
        sizes.dedup();
        assert_eq!(sizes.len(), INSERT_CHUNK.ilog2() as usize + 1);
    }

    #[test]
    fn values_are_numbered_row_by_row() {
        assert_eq!(
            values_for("INSERT INTO t (a, b)", 2, 2),
            "INSERT INTO t (a, b) VALUES ($1, $2), ($3, $4)"
        );
        assert_eq!(
            values_for("INSERT INTO t (a)", 1, 1),
            "INSERT INTO t (a) VALUES ($1)"
        );
    }
}

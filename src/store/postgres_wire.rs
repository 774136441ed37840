//! How the store's values, rows and errors cross to PostgreSQL and back, and one
//! statement run on a connection: shared by the pool's connections (`postgres.rs`) and
//! the per-thread read connections (`postgres_reads.rs`).

use super::sql::{Cells, ErrorKind, Result, Row, StoreError, Value};
use bytes::BytesMut;
use deadpool_postgres::ClientWrapper;
use tokio_postgres::error::SqlState;
use tokio_postgres::types::{to_sql_checked, FromSql, IsNull, ToSql, Type};

pub(super) fn error(e: tokio_postgres::Error) -> StoreError {
    let kind = match e.code() {
        Some(c)
            if *c == SqlState::T_R_SERIALIZATION_FAILURE
                || *c == SqlState::T_R_DEADLOCK_DETECTED
                || *c == SqlState::UNIQUE_VIOLATION =>
        {
            ErrorKind::Conflict
        }
        // The server going away or not taking connections (shutting down, starting,
        // recovering, out of connection slots): an outage (503), not a fault (500).
        Some(c) if unavailable(c.code()) => ErrorKind::Unavailable,
        Some(_) => ErrorKind::Other,
        // No SQL state: the connection failed.
        None => ErrorKind::Unavailable,
    };
    // A server's refusal reads "db error" by itself: its code and message say which.
    let message = match e.as_db_error() {
        Some(db) => format!("postgres: {} {}", db.code().code(), db.message()),
        None => format!("postgres: {e}"),
    };
    StoreError { kind, message }
}

/// SQLSTATEs of a server that is not there to answer: class 08 (connection exception),
/// `57P01`-`57P05` (`admin_shutdown`, `crash_shutdown`, `cannot_connect_now`, ...; not
/// `57014`, a cancelled statement) and `too_many_connections`.
fn unavailable(code: &str) -> bool {
    code.starts_with("08") || code.starts_with("57P") || code == "53300"
}

impl ToSql for Value {
    fn to_sql(
        &self,
        ty: &Type,
        out: &mut BytesMut,
    ) -> std::result::Result<IsNull, Box<dyn std::error::Error + Sync + Send>> {
        match self {
            Value::Null => Ok(IsNull::Yes),
            Value::Int(n) => match *ty {
                Type::INT4 => i32::try_from(*n)?.to_sql(ty, out),
                Type::INT2 => i16::try_from(*n)?.to_sql(ty, out),
                Type::BOOL => (*n != 0).to_sql(ty, out),
                _ => n.to_sql(ty, out),
            },
            Value::Text(s) => s.as_str().to_sql(ty, out),
            Value::Bytes(b) => b.as_slice().to_sql(ty, out),
        }
    }

    fn accepts(_: &Type) -> bool {
        true
    }

    to_sql_checked!();
}

impl<'a> FromSql<'a> for Value {
    fn from_sql(
        ty: &Type,
        raw: &'a [u8],
    ) -> std::result::Result<Self, Box<dyn std::error::Error + Sync + Send>> {
        Ok(match *ty {
            Type::INT8 => Value::Int(i64::from_sql(ty, raw)?),
            Type::INT4 => Value::Int(i32::from_sql(ty, raw)?.into()),
            Type::INT2 => Value::Int(i16::from_sql(ty, raw)?.into()),
            Type::BOOL => Value::Int(bool::from_sql(ty, raw)?.into()),
            Type::BYTEA => Value::Bytes(Vec::<u8>::from_sql(ty, raw)?),
            _ => Value::Text(String::from_sql(ty, raw)?),
        })
    }

    fn from_sql_null(
        _: &Type,
    ) -> std::result::Result<Self, Box<dyn std::error::Error + Sync + Send>> {
        Ok(Value::Null)
    }

    fn accepts(_: &Type) -> bool {
        true
    }
}

pub(super) fn refs(params: &[Value]) -> Vec<&(dyn ToSql + Sync)> {
    params.iter().map(|p| p as &(dyn ToSql + Sync)).collect()
}

pub(super) fn rows(rows: Vec<tokio_postgres::Row>) -> Result<Vec<Row>> {
    rows.into_iter()
        .map(|r| {
            (0..r.len())
                .map(|i| {
                    r.try_get::<_, Value>(i)
                        .map_err(|e| StoreError::other(format!("postgres column {i}: {e}")))
                })
                .collect::<Result<Vec<_>>>()
                .map(Row)
        })
        .collect()
}

// Statements are prepared once per connection (`prepare_cached`): preparing each time
// doubled the round trips of every read.
pub(super) async fn execute_on(c: &ClientWrapper, sql: &str, params: &[Value]) -> Result<u64> {
    let st = c.prepare_cached(sql).await.map_err(error)?;
    c.execute(&st, &refs(params)).await.map_err(error)
}

pub(super) async fn query_on(c: &ClientWrapper, sql: &str, params: &[Value]) -> Result<Vec<Row>> {
    rows(query_rows(c, sql, params).await?)
}

/// `query_on`'s rows as the server sent them.
pub(super) async fn query_rows(
    c: &ClientWrapper,
    sql: &str,
    params: &[Value],
) -> Result<Vec<tokio_postgres::Row>> {
    let st = c.prepare_cached(sql).await.map_err(error)?;
    c.query(&st, &refs(params)).await.map_err(error)
}

/// A row's cells read in place (`Backend::query_visit`).
pub(super) struct PgCells<'a>(pub &'a tokio_postgres::Row);

impl Cells for PgCells<'_> {
    fn text(&self, i: usize) -> Result<Option<&str>> {
        self.0
            .try_get::<_, Option<&str>>(i)
            .map_err(|e| StoreError::other(format!("postgres column {i}: {e}")))
    }

    fn int(&self, i: usize) -> Result<Option<i64>> {
        match self.0.try_get::<_, Value>(i) {
            Ok(Value::Int(n)) => Ok(Some(n)),
            Ok(Value::Null) => Ok(None),
            Ok(v) => Err(StoreError::other(format!(
                "postgres column {i}: integer expected, {v:?}"
            ))),
            Err(e) => Err(StoreError::other(format!("postgres column {i}: {e}"))),
        }
    }
}

#[cfg(test)]
mod tests {
    #[test]
    fn a_server_going_away_is_an_outage_not_a_fault() {
        for code in ["57P01", "57P02", "57P03", "08006", "53300"] {
            assert!(super::unavailable(code), "{code}");
        }
        for code in ["57014", "23505", "42P01", "40001"] {
            assert!(!super::unavailable(code), "{code}");
        }
    }
}

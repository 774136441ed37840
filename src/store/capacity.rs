//! The consensus-layer capacity series (`src/capture/capacity.rs` samples it): one row per
//! (minute, host) with the most requests the host served in one second of that minute
//! and the minute's totals. Several instances on one store add their totals; the peak
//! kept is the highest one instance saw.

use super::sql::{params, StoreError, Value};
use super::Store;

/// One host's minute.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct HostMinute {
    /// Unix seconds at the start of the minute.
    pub minute: i64,
    pub host: String,
    pub family: String,
    pub peak_rps: i64,
    pub requests: i64,
    pub failures: i64,
}

/// One minute of the series: the hosts' ceilings summed.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct SeriesPoint {
    pub minute: i64,
    pub rps_ceiling: i64,
    pub hosts: i64,
    pub requests: i64,
    pub failures: i64,
}

impl Store {
    /// Add a sampled minute per host (one transaction).
    pub async fn record_capacity(&self, rows: &[HostMinute]) -> Result<(), StoreError> {
        if rows.is_empty() {
            return Ok(());
        }
        let mut tx = self.db.begin().await?;
        let values = rows
            .iter()
            .map(|r| params![r.minute, &r.host, &r.family, r.peak_rps, r.requests, r.failures])
            .collect();
        tx.execute_many(
            "INSERT INTO cl_capacity (minute, host, family, peak_rps, requests, failures) \
             VALUES ($1, $2, $3, $4, $5, $6) \
             ON CONFLICT (minute, host) DO UPDATE SET \
             peak_rps = CASE WHEN excluded.peak_rps > cl_capacity.peak_rps \
                        THEN excluded.peak_rps ELSE cl_capacity.peak_rps END, \
             requests = cl_capacity.requests + excluded.requests, \
             failures = cl_capacity.failures + excluded.failures",
            values,
        )
        .await?;
        tx.commit().await
    }

    /// Minutes in `[from, to)` (Unix seconds), oldest first, the hosts of `family` only
    /// when given.
    pub async fn capacity_series(
        &self,
        from: i64,
        to: i64,
        family: Option<&str>,
    ) -> Result<Vec<SeriesPoint>, StoreError> {
        let rows = self
            .db
            .query(
                // PostgreSQL sums BIGINT as NUMERIC: cast back (SQLite reads it as integer).
                "SELECT minute, CAST(SUM(peak_rps) AS BIGINT), COUNT(*), \
                 CAST(SUM(requests) AS BIGINT), CAST(SUM(failures) AS BIGINT) \
                 FROM cl_capacity WHERE minute >= $1 AND minute < $2 \
                 AND ($3 = '' OR family = $3) GROUP BY minute ORDER BY minute",
                params![from, to, family.unwrap_or("")],
            )
            .await?;
        rows.iter()
            .map(|r| {
                Ok(SeriesPoint {
                    minute: r.int(0)?,
                    rps_ceiling: r.int(1)?,
                    hosts: r.int(2)?,
                    requests: r.int(3)?,
                    failures: r.int(4)?,
                })
            })
            .collect()
    }

    /// Drop minutes before `before` (Unix seconds): rows removed.
    pub async fn prune_capacity(&self, before: i64) -> Result<u64, StoreError> {
        self.db
            .execute(
                "DELETE FROM cl_capacity WHERE minute < $1",
                vec![Value::Int(before)],
            )
            .await
    }
}

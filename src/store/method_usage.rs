//! The per-method usage breakdown (`src/usage/breakdown.rs` gathers it): each key's
//! calls, errors and latency histogram by ten-minute slot, chain and method, added up
//! by the request log's writer and read for the console's breakdown.

use super::sql::{params, Row, StoreError, Tx};
use super::Store;

/// Upper bounds of the latency buckets, in milliseconds; the last bucket is above them.
pub const BUCKET_BOUNDS_MS: [u64; 11] = [1, 2, 5, 10, 25, 50, 100, 250, 500, 1000, 2500];
pub const BUCKETS: usize = BUCKET_BOUNDS_MS.len() + 1;

/// What a group is counted under.
#[derive(Debug, Clone, PartialEq, Eq, Hash)]
pub struct Group {
    pub key_id: String,
    pub tenant_id: String,
    /// The slot's start, Unix seconds.
    pub slot: i64,
    /// `eth`, `polygon`, `sol`, `base`, or `other` for routes of no chain.
    pub chain: String,
    pub method: String,
}

/// A group's counts.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct MethodCounts {
    pub calls: i64,
    pub errors: i64,
    pub latency_us: i64,
    pub buckets: [i64; BUCKETS],
}

impl MethodCounts {
    pub fn add(&mut self, other: &MethodCounts) {
        self.calls += other.calls;
        self.errors += other.errors;
        self.latency_us = self.latency_us.saturating_add(other.latency_us);
        for (a, b) in self.buckets.iter_mut().zip(other.buckets) {
            *a += b;
        }
    }

    /// The upper bound (ms) of the bucket holding the `q` quantile (0 < q ≤ 1); `None`
    /// without calls, and for the open last bucket its lower bound.
    pub fn quantile_ms(&self, q: f64) -> Option<u64> {
        let total: i64 = self.buckets.iter().sum();
        if total == 0 {
            return None;
        }
        let rank = ((total as f64) * q).ceil().max(1.0) as i64;
        let mut seen = 0;
        for (i, n) in self.buckets.iter().enumerate() {
            seen += n;
            if seen >= rank {
                return Some(BUCKET_BOUNDS_MS.get(i).copied().unwrap_or(2500));
            }
        }
        None
    }
}

/// A tenant's breakdown over a span: one row per key, chain and method.
#[derive(Debug, Clone, PartialEq)]
pub struct MethodRow {
    pub key_id: String,
    pub chain: String,
    pub method: String,
    pub counts: MethodCounts,
}

const BUCKET_COLUMNS: &str = "b0, b1, b2, b3, b4, b5, b6, b7, b8, b9, b10, b11";

/// Add each group's counts to its row, in the caller's transaction.
pub(super) async fn add(
    tx: &mut dyn Tx,
    groups: &[(Group, MethodCounts)],
) -> Result<(), StoreError> {
    let sums: Vec<String> = (0..BUCKETS)
        .map(|i| format!("b{i} = method_usage.b{i} + excluded.b{i}"))
        .collect();
    let sql = format!(
        "INSERT INTO method_usage (key_id, tenant_id, slot, chain, method, calls, errors, latency_us, {BUCKET_COLUMNS})
         VALUES ($1, $2, $3, $4, $5, $6, $7, $8, $9, $10, $11, $12, $13, $14, $15, $16, $17, $18, $19, $20)
         ON CONFLICT (key_id, slot, chain, method) DO UPDATE SET
             calls = method_usage.calls + excluded.calls, errors = method_usage.errors + excluded.errors,
             latency_us = method_usage.latency_us + excluded.latency_us, {}",
        sums.join(", ")
    );
    for (g, c) in groups {
        let mut p = params![
            &g.key_id,
            &g.tenant_id,
            g.slot,
            &g.chain,
            &g.method,
            c.calls,
            c.errors,
            c.latency_us
        ];
        p.extend(c.buckets.iter().map(|b| (*b).into()));
        tx.execute(&sql, p).await?;
    }
    Ok(())
}

fn method_row(r: &Row) -> Result<MethodRow, StoreError> {
    let mut buckets = [0; BUCKETS];
    for (i, b) in buckets.iter_mut().enumerate() {
        *b = r.int(6 + i)?;
    }
    Ok(MethodRow {
        key_id: r.text(0)?,
        chain: r.text(1)?,
        method: r.text(2)?,
        counts: MethodCounts {
            calls: r.int(3)?,
            errors: r.int(4)?,
            latency_us: r.int(5)?,
            buckets,
        },
    })
}

impl Store {
    /// A tenant's breakdown over slots in `[from, to)`, optionally of one key, summed
    /// per key, chain and method; at most `limit` rows, busiest first.
    pub async fn method_usage(
        &self,
        tenant: &str,
        key: Option<&str>,
        from: i64,
        to: i64,
        limit: i64,
    ) -> Result<Vec<MethodRow>, StoreError> {
        let sums: Vec<String> = (0..BUCKETS)
            .map(|i| format!("CAST(SUM(b{i}) AS BIGINT)"))
            .collect();
        let sql = format!(
            "SELECT key_id, chain, method, CAST(SUM(calls) AS BIGINT), CAST(SUM(errors) AS BIGINT),
                    CAST(SUM(latency_us) AS BIGINT), {}
             FROM method_usage WHERE tenant_id = $1 AND slot >= $2 AND slot < $3
             AND ($4 = '' OR key_id = $4)
             GROUP BY key_id, chain, method ORDER BY SUM(calls) DESC, key_id, chain, method LIMIT $5",
            sums.join(", ")
        );
        let rows = self
            .db
            .query(&sql, params![tenant, from, to, key.unwrap_or(""), limit])
            .await?;
        rows.iter().map(method_row).collect()
    }

    /// A tenant's breakdown over slots in `[from, to)`, optionally of one key, summed
    /// per `step` seconds (positive; a multiple of the ten-minute slot to sum whole
    /// slots): each step's start and counts, oldest first; steps with nothing are absent.
    pub async fn method_usage_series(
        &self,
        tenant: &str,
        key: Option<&str>,
        from: i64,
        to: i64,
        step: i64,
    ) -> Result<Vec<(i64, MethodCounts)>, StoreError> {
        if step <= 0 {
            return Err(StoreError::other(format!("a series step of {step} s")));
        }
        let sums: Vec<String> = (0..BUCKETS)
            .map(|i| format!("CAST(SUM(b{i}) AS BIGINT)"))
            .collect();
        // The step is a checked number, written into the statement so both dialects
        // divide integers of the slot's own type.
        let sql = format!(
            "SELECT CAST((slot / {step}) * {step} AS BIGINT) AS at, CAST(SUM(calls) AS BIGINT),
                    CAST(SUM(errors) AS BIGINT), CAST(SUM(latency_us) AS BIGINT), {}
             FROM method_usage WHERE tenant_id = $1 AND slot >= $2 AND slot < $3
             AND ($4 = '' OR key_id = $4)
             GROUP BY 1 ORDER BY 1",
            sums.join(", ")
        );
        let rows = self
            .db
            .query(&sql, params![tenant, from, to, key.unwrap_or("")])
            .await?;
        rows.iter()
            .map(|r| {
                let mut buckets = [0; BUCKETS];
                for (i, b) in buckets.iter_mut().enumerate() {
                    *b = r.int(4 + i)?;
                }
                let counts = MethodCounts {
                    calls: r.int(1)?,
                    errors: r.int(2)?,
                    latency_us: r.int(3)?,
                    buckets,
                };
                Ok((r.int(0)?, counts))
            })
            .collect()
    }

    /// Drop slots before `before`: rows removed.
    pub async fn prune_method_usage(&self, before: i64) -> Result<u64, StoreError> {
        self.db
            .execute("DELETE FROM method_usage WHERE slot < $1", params![before])
            .await
    }
}

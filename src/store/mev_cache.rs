//! MEV-cache samples (`src/capture/sol/mev_cache.rs` takes them): per host and scrape, the hits
//! counter, its increase since the host's previous scrape and the time between the two.

use super::sql::{params, StoreError};
use super::Store;

#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Sample {
    pub host: String,
    /// Unix milliseconds.
    pub at: i64,
    pub hits_total: i64,
    pub increase: i64,
    pub interval_ms: i64,
}

/// A host's hits over a span: the increase and the time it covers.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct HostHits {
    pub host: String,
    pub increase: i64,
    pub covered_ms: i64,
    pub samples: i64,
    pub last_at: i64,
}

impl Store {
    pub async fn record_mev_cache(&self, samples: &[Sample]) -> Result<(), StoreError> {
        if samples.is_empty() {
            return Ok(());
        }
        let mut tx = self.db.begin().await?;
        let rows = samples
            .iter()
            .map(|s| params![&s.host, s.at, s.hits_total, s.increase, s.interval_ms])
            .collect();
        tx.execute_many(
            "INSERT INTO sol_mev_cache_samples (host, at, hits_total, increase, interval_ms) \
             VALUES ($1, $2, $3, $4, $5) ON CONFLICT (host, at) DO NOTHING",
            rows,
        )
        .await?;
        tx.commit().await
    }

    /// Per host, the samples taken at or after `since` (Unix ms), summed.
    pub async fn mev_cache_hits_since(&self, since: i64) -> Result<Vec<HostHits>, StoreError> {
        let rows = self
            .db
            .query(
                "SELECT host, CAST(SUM(increase) AS BIGINT), CAST(SUM(interval_ms) AS BIGINT), \
                 COUNT(*), MAX(at) FROM sol_mev_cache_samples WHERE at >= $1 GROUP BY host",
                params![since],
            )
            .await?;
        rows.iter()
            .map(|r| {
                Ok(HostHits {
                    host: r.text(0)?,
                    increase: r.int(1)?,
                    covered_ms: r.int(2)?,
                    samples: r.int(3)?,
                    last_at: r.int(4)?,
                })
            })
            .collect()
    }

    /// One host's samples in `[from, to)` (Unix ms), oldest first, at most `limit`.
    pub async fn mev_cache_series(
        &self,
        host: &str,
        from: i64,
        to: i64,
        limit: i64,
    ) -> Result<Vec<Sample>, StoreError> {
        let rows = self
            .db
            .query(
                "SELECT host, at, hits_total, increase, interval_ms FROM sol_mev_cache_samples \
                 WHERE host = $1 AND at >= $2 AND at < $3 ORDER BY at LIMIT $4",
                params![host, from, to, limit],
            )
            .await?;
        rows.iter()
            .map(|r| {
                Ok(Sample {
                    host: r.text(0)?,
                    at: r.int(1)?,
                    hits_total: r.int(2)?,
                    increase: r.int(3)?,
                    interval_ms: r.int(4)?,
                })
            })
            .collect()
    }

    pub async fn prune_mev_cache(&self, before: i64) -> Result<u64, StoreError> {
        self.db
            .execute(
                "DELETE FROM sol_mev_cache_samples WHERE at < $1",
                params![before],
            )
            .await
    }
}

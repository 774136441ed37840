//! Per-key usage (`src/usage/` gathers it): one row per key and minute, and the same
//! counts per key and hour, added in one transaction. Several instances on one store
//! add their counts; the minute rows serve the last day, the hour rows the month and
//! the exports, each pruned on its own span.

use super::sql::{params, Row, StoreError};
use super::Store;
use std::collections::BTreeMap;

/// What one key did in one span of time.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, serde::Serialize)]
pub struct Counts {
    pub calls: i64,
    pub compute_units: i64,
    pub errors: i64,
    pub rate_limited: i64,
}

impl Counts {
    pub fn add(&mut self, other: &Counts) {
        self.calls += other.calls;
        self.compute_units += other.compute_units;
        self.errors += other.errors;
        self.rate_limited += other.rate_limited;
    }
}

/// One key's minute, as the gatherer hands it over.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct UsageRow {
    pub key_id: String,
    pub tenant_id: String,
    /// Unix seconds at the start of the minute.
    pub minute: i64,
    pub counts: Counts,
}

/// Which rows a query reads: minutes (recent, fine) or hours (long spans).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Grain {
    Minute,
    Hour,
}

impl Grain {
    fn table(self) -> (&'static str, &'static str) {
        match self {
            Grain::Minute => ("key_usage_minutes", "minute"),
            Grain::Hour => ("key_usage_hours", "hour"),
        }
    }
}

/// One bucket of an export: a key's counts from `start` for one step.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ExportRow {
    pub start: i64,
    pub key_id: String,
    pub tenant_id: String,
    pub counts: Counts,
}

/// What an export reads: `[from, to)` per `step` seconds from `grain` rows, one tenant's
/// or one key's when given, at most `limit` rows.
#[derive(Debug, Clone, Copy)]
pub struct ExportQuery<'a> {
    pub grain: Grain,
    pub from: i64,
    pub to: i64,
    pub step: i64,
    pub tenant: Option<&'a str>,
    pub key: Option<&'a str>,
    pub limit: i64,
}

const SUMS: &str = "CAST(SUM(calls) AS BIGINT), CAST(SUM(compute_units) AS BIGINT), \
                    CAST(SUM(errors) AS BIGINT), CAST(SUM(rate_limited) AS BIGINT)";

fn counts_at(r: &Row, first: usize) -> Result<Counts, StoreError> {
    Ok(Counts {
        calls: r.int(first)?,
        compute_units: r.int(first + 1)?,
        errors: r.int(first + 2)?,
        rate_limited: r.int(first + 3)?,
    })
}

/// What `record_journaled_usage` did.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Journaled {
    Written,
    AlreadyIn,
}

/// Add `rows` to the minute rows and their hours to the hour rows, inside `tx`.
async fn add_usage(tx: &mut dyn super::sql::Tx, rows: &[UsageRow]) -> Result<(), StoreError> {
    let mut hours: BTreeMap<(&str, i64), (&str, Counts)> = BTreeMap::new();
    for r in rows {
        let e = hours
            .entry((r.key_id.as_str(), r.minute / 3600 * 3600))
            .or_insert((r.tenant_id.as_str(), Counts::default()));
        e.1.add(&r.counts);
    }
    let upsert = |table: &str, column: &str| {
        format!(
            "INSERT INTO {table} (key_id, {column}, tenant_id, calls, compute_units, errors, \
             rate_limited) VALUES ($1, $2, $3, $4, $5, $6, $7) \
             ON CONFLICT (key_id, {column}) DO UPDATE SET \
             calls = {table}.calls + excluded.calls, \
             compute_units = {table}.compute_units + excluded.compute_units, \
             errors = {table}.errors + excluded.errors, \
             rate_limited = {table}.rate_limited + excluded.rate_limited"
        )
    };
    let values = |key: &str, at: i64, tenant: &str, c: &Counts| {
        params![
            key,
            at,
            tenant,
            c.calls,
            c.compute_units,
            c.errors,
            c.rate_limited
        ]
    };
    if rows.is_empty() {
        return Ok(());
    }
    tx.execute_many(
        &upsert("key_usage_minutes", "minute"),
        rows.iter()
            .map(|r| values(&r.key_id, r.minute, &r.tenant_id, &r.counts))
            .collect(),
    )
    .await?;
    tx.execute_many(
        &upsert("key_usage_hours", "hour"),
        hours
            .iter()
            .map(|((key, hour), (tenant, c))| values(key, *hour, tenant, c))
            .collect(),
    )
    .await?;
    Ok(())
}

impl Store {
    /// Add gathered minutes, and their hours, in one transaction: all or nothing, so a
    /// failed flush can be retried whole without counting anything twice.
    pub async fn record_usage(&self, rows: &[UsageRow]) -> Result<(), StoreError> {
        if rows.is_empty() {
            return Ok(());
        }
        let mut tx = self.db.begin().await?;
        add_usage(tx.as_mut(), rows).await?;
        tx.commit().await
    }

    /// Add the rows of journal `journal`'s batches `from..=to`, and move its cursor to
    /// `to`, in one transaction. A range the cursor already covers is not added again
    /// (a retried flush whose first try committed after all): `AlreadyIn`.
    pub async fn record_journaled_usage(
        &self,
        rows: &[UsageRow],
        journal: &str,
        from: u64,
        to: u64,
    ) -> Result<Journaled, StoreError> {
        let mut tx = self.db.begin().await?;
        let cursor = super::sql::query_opt(
            tx.as_mut(),
            "SELECT seq FROM usage_journals WHERE journal_id = $1",
            params![journal],
        )
        .await?
        .map(|r| r.int(0))
        .transpose()?
        .unwrap_or(0);
        if cursor >= to as i64 {
            return Ok(Journaled::AlreadyIn);
        }
        if cursor + 1 != from as i64 {
            // Batches are committed in order and whole; say so if that ever breaks.
            log::warn!("usage journal {journal}: cursor {cursor}, adding {from}..={to}");
        }
        add_usage(tx.as_mut(), rows).await?;
        let now = super::now();
        tx.execute(
            "INSERT INTO usage_journals (journal_id, seq, updated_at) VALUES ($1, $2, $3) \
             ON CONFLICT (journal_id) DO UPDATE SET seq = excluded.seq, \
             updated_at = excluded.updated_at",
            params![journal, to as i64, now],
        )
        .await?;
        tx.commit().await?;
        Ok(Journaled::Written)
    }

    /// Journal `journal`'s cursor: the last batch its rows are in (0: none yet).
    pub async fn journal_cursor(&self, journal: &str) -> Result<u64, StoreError> {
        Ok(self
            .query_opt(
                "SELECT seq FROM usage_journals WHERE journal_id = $1",
                params![journal],
            )
            .await?
            .map(|r| r.int(0))
            .transpose()?
            .unwrap_or(0)
            .max(0) as u64)
    }

    /// A journal whose files are gone: its cursor is no longer needed.
    pub async fn forget_journal(&self, journal: &str) -> Result<(), StoreError> {
        self.db
            .execute(
                "DELETE FROM usage_journals WHERE journal_id = $1",
                params![journal],
            )
            .await
            .map(|_| ())
    }

    /// One key's counts in `[from, to)` (Unix seconds), summed per `step` seconds from
    /// the epoch (buckets with nothing are absent), oldest first.
    pub async fn key_usage(
        &self,
        key_id: &str,
        grain: Grain,
        from: i64,
        to: i64,
        step: i64,
    ) -> Result<Vec<(i64, Counts)>, StoreError> {
        let (table, column) = grain.table();
        let rows = self
            .db
            .query(
                &format!(
                    "SELECT ({column} / $4) * $4 AS bucket, {SUMS} FROM {table} \
                     WHERE key_id = $1 AND {column} >= $2 AND {column} < $3 \
                     GROUP BY bucket ORDER BY bucket"
                ),
                params![key_id, from, to, step.max(1)],
            )
            .await?;
        rows.iter()
            .map(|r| Ok((r.int(0)?, counts_at(r, 1)?)))
            .collect()
    }

    /// Every key's counts in `[from, to)` per `step`, one tenant's or one key's when
    /// asked; at most `limit` rows, ordered by bucket then key.
    pub async fn usage_export(&self, q: &ExportQuery<'_>) -> Result<Vec<ExportRow>, StoreError> {
        let (table, column) = q.grain.table();
        let rows = self
            .db
            .query(
                &format!(
                    "SELECT ({column} / $4) * $4 AS bucket, key_id, MIN(tenant_id), {SUMS} \
                     FROM {table} WHERE {column} >= $1 AND {column} < $2 \
                     AND ($5 = '' OR tenant_id = $5) AND ($6 = '' OR key_id = $6) \
                     GROUP BY bucket, key_id ORDER BY bucket, key_id LIMIT $3"
                ),
                params![
                    q.from,
                    q.to,
                    q.limit,
                    q.step.max(1),
                    q.tenant.unwrap_or(""),
                    q.key.unwrap_or("")
                ],
            )
            .await?;
        rows.iter()
            .map(|r| {
                Ok(ExportRow {
                    start: r.int(0)?,
                    key_id: r.text(1)?,
                    tenant_id: r.text(2)?,
                    counts: counts_at(r, 3)?,
                })
            })
            .collect()
    }

    /// Whether `key_id` is one of the console keys of `tenant` (revoked ones included:
    /// their usage stays readable).
    pub async fn key_of_tenant(&self, key_id: &str, tenant: &str) -> Result<bool, StoreError> {
        Ok(self
            .query_opt(
                "SELECT 1 FROM api_keys WHERE id = $1 AND tenant_id = $2 AND user_id IS NOT NULL",
                params![key_id, tenant],
            )
            .await?
            .is_some())
    }

    /// Drop minutes before `minutes_before` and hours before `hours_before`: rows removed.
    pub async fn prune_usage(
        &self,
        minutes_before: i64,
        hours_before: i64,
    ) -> Result<u64, StoreError> {
        let m = self
            .db
            .execute(
                "DELETE FROM key_usage_minutes WHERE minute < $1",
                params![minutes_before],
            )
            .await?;
        let h = self
            .db
            .execute(
                "DELETE FROM key_usage_hours WHERE hour < $1",
                params![hours_before],
            )
            .await?;
        // A journal's cursor outlives its files only if the instance that replayed
        // them stopped between the two; a month is long past any replay.
        let j = self
            .db
            .execute(
                "DELETE FROM usage_journals WHERE updated_at < $1",
                params![super::now() - 30 * 86400],
            )
            .await?;
        Ok(m + h + j)
    }
}

//! Solana watchlist entries (SPEC "SolWatchlistEntry"), per tenant, and the dead
//! letters of every webhook push (watchlist entries and transaction hooks): deliveries
//! that failed every attempt, kept for the tenant to read (the newest
//! [`DEAD_LETTERS_KEPT`] per entry).

use super::sql::{params, Row, StoreError};
use super::Store;

/// Dead letters kept per entry (older ones are dropped as new ones arrive).
pub const DEAD_LETTERS_KEPT: i64 = 100;

#[derive(Debug, Clone, PartialEq, Eq)]
pub struct WatchEntry {
    pub id: String,
    pub tenant_id: String,
    pub pubkey: String,
    pub commitment: String,
    pub callback_type: String,
    pub callback_url: String,
    /// Unix seconds.
    pub created_at: i64,
}

/// Whose dead letters: each push keeps its own.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Letters {
    SolWatchlist,
    TxHooks,
}

impl Letters {
    /// The push's name in the delivery log (`store/deliveries.rs`).
    pub fn push(self) -> &'static str {
        match self {
            Letters::SolWatchlist => "sol_watchlist",
            Letters::TxHooks => "tx_hooks",
        }
    }

    pub(super) fn table(self) -> &'static str {
        match self {
            Letters::SolWatchlist => "sol_watchlist_dead_letters",
            Letters::TxHooks => "tx_hook_dead_letters",
        }
    }
}

#[derive(Debug, Clone, PartialEq, Eq)]
pub struct DeadLetter {
    pub id: String,
    pub entry_id: String,
    pub tenant_id: String,
    /// The delivery's JSON body, as it would have been sent.
    pub payload: String,
    pub attempts: i64,
    pub last_error: String,
    pub created_at: i64,
}

const ENTRY_COLUMNS: &str =
    "id, tenant_id, pubkey, commitment, callback_type, callback_url, created_at";

fn entry(r: &Row) -> Result<WatchEntry, StoreError> {
    Ok(WatchEntry {
        id: r.text(0)?,
        tenant_id: r.text(1)?,
        pubkey: r.text(2)?,
        commitment: r.text(3)?,
        callback_type: r.text(4)?,
        callback_url: r.text(5)?,
        created_at: r.int(6)?,
    })
}

impl Store {
    /// Add an entry unless the tenant already has `max` (then `Ok(false)`); counted and
    /// inserted in one transaction, so concurrent creates cannot pass the bound.
    pub async fn add_watch_entry(&self, e: &WatchEntry, max: i64) -> Result<bool, StoreError> {
        let mut tx = self.db.begin().await?;
        let n = tx
            .query(
                "SELECT COUNT(*) FROM sol_watchlist WHERE tenant_id = $1",
                params![&e.tenant_id],
            )
            .await?
            .first()
            .map(|r| r.int(0))
            .transpose()?
            .unwrap_or(0);
        if n >= max {
            return Ok(false);
        }
        tx.execute(
            &format!(
                "INSERT INTO sol_watchlist ({ENTRY_COLUMNS}) VALUES ($1, $2, $3, $4, $5, $6, $7)"
            ),
            params![
                &e.id,
                &e.tenant_id,
                &e.pubkey,
                &e.commitment,
                &e.callback_type,
                &e.callback_url,
                e.created_at
            ],
        )
        .await?;
        tx.commit().await?;
        Ok(true)
    }

    /// A tenant's entries, oldest first.
    pub async fn watch_entries(&self, tenant_id: &str) -> Result<Vec<WatchEntry>, StoreError> {
        let rows = self
            .db
            .query(
                &format!(
                    "SELECT {ENTRY_COLUMNS} FROM sol_watchlist WHERE tenant_id = $1 \
                     ORDER BY created_at, id"
                ),
                params![tenant_id],
            )
            .await?;
        rows.iter().map(entry).collect()
    }

    /// Every entry (the push service's registry at start-up).
    pub async fn all_watch_entries(&self) -> Result<Vec<WatchEntry>, StoreError> {
        let rows = self
            .db
            .query(
                &format!("SELECT {ENTRY_COLUMNS} FROM sol_watchlist ORDER BY created_at, id"),
                vec![],
            )
            .await?;
        rows.iter().map(entry).collect()
    }

    /// One entry, only if `tenant_id` owns it.
    pub async fn watch_entry(
        &self,
        tenant_id: &str,
        id: &str,
    ) -> Result<Option<WatchEntry>, StoreError> {
        let rows = self
            .db
            .query(
                &format!(
                    "SELECT {ENTRY_COLUMNS} FROM sol_watchlist WHERE id = $1 AND tenant_id = $2"
                ),
                params![id, tenant_id],
            )
            .await?;
        rows.first().map(entry).transpose()
    }

    /// Delete an entry `tenant_id` owns, with its dead letters and delivery log: whether
    /// it existed.
    pub async fn delete_watch_entry(&self, tenant_id: &str, id: &str) -> Result<bool, StoreError> {
        let mut tx = self.db.begin().await?;
        let n = tx
            .execute(
                "DELETE FROM sol_watchlist WHERE id = $1 AND tenant_id = $2",
                params![id, tenant_id],
            )
            .await?;
        if n > 0 {
            tx.execute(
                "DELETE FROM sol_watchlist_dead_letters WHERE entry_id = $1",
                params![id],
            )
            .await?;
            tx.execute(
                "DELETE FROM push_deliveries WHERE push = 'sol_watchlist' AND entry_id = $1",
                params![id],
            )
            .await?;
        }
        tx.commit().await?;
        Ok(n > 0)
    }

    /// Keep a delivery that failed every attempt, and only the newest
    /// [`DEAD_LETTERS_KEPT`] of its entry.
    pub async fn add_dead_letter(&self, of: Letters, d: &DeadLetter) -> Result<(), StoreError> {
        let table = of.table();
        let mut tx = self.db.begin().await?;
        tx.execute(
            &format!(
                "INSERT INTO {table} \
                 (id, entry_id, tenant_id, payload, attempts, last_error, created_at) \
                 VALUES ($1, $2, $3, $4, $5, $6, $7)"
            ),
            params![
                &d.id,
                &d.entry_id,
                &d.tenant_id,
                &d.payload,
                d.attempts,
                &d.last_error,
                d.created_at
            ],
        )
        .await?;
        tx.execute(
            &format!(
                "DELETE FROM {table} WHERE entry_id = $1 AND id NOT IN \
                 (SELECT id FROM {table} WHERE entry_id = $1 \
                  ORDER BY created_at DESC, id DESC LIMIT $2)"
            ),
            params![&d.entry_id, DEAD_LETTERS_KEPT],
        )
        .await?;
        tx.commit().await
    }

    /// An entry's dead letters, newest first (the caller checked the tenant owns it).
    pub async fn dead_letters(
        &self,
        of: Letters,
        entry_id: &str,
    ) -> Result<Vec<DeadLetter>, StoreError> {
        let sql = format!(
            "SELECT id, entry_id, tenant_id, payload, attempts, last_error, created_at \
             FROM {} WHERE entry_id = $1 ORDER BY created_at DESC, id DESC",
            of.table()
        );
        let rows = self.db.query(&sql, params![entry_id]).await?;
        rows.iter()
            .map(|r| {
                Ok(DeadLetter {
                    id: r.text(0)?,
                    entry_id: r.text(1)?,
                    tenant_id: r.text(2)?,
                    payload: r.text(3)?,
                    attempts: r.int(4)?,
                    last_error: r.text(5)?,
                    created_at: r.int(6)?,
                })
            })
            .collect()
    }
}

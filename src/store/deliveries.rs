//! The delivery log of the webhook pushes (Solana watchlist entries, transaction
//! hooks): each entry's newest deliveries, delivered or not, so a tenant sees what
//! reached its endpoint; and the hand-made changes to a dead letter (a retry that
//! delivered removes it, one that failed counts its attempt).

use super::sol_watchlist::{DeadLetter, Letters};
use super::sql::{params, StoreError};
use super::Store;

/// Deliveries kept per entry (older ones are dropped as new ones arrive).
pub const DELIVERIES_KEPT: i64 = 50;

/// One delivery of one entry: every attempt it took, and how it ended.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Delivery {
    pub delivery_id: String,
    /// Unix milliseconds of its last attempt.
    pub at_ms: i64,
    pub delivered: bool,
    pub attempts: i64,
    /// Why the last attempt failed ("" when delivered).
    pub error: String,
}

impl Store {
    /// Record how a delivery ended (a repeat of the same delivery replaces its row), and
    /// keep only the entry's newest [`DELIVERIES_KEPT`].
    pub async fn record_delivery(
        &self,
        of: Letters,
        entry_id: &str,
        d: &Delivery,
    ) -> Result<(), StoreError> {
        let push = of.push();
        let mut tx = self.db.begin().await?;
        tx.execute(
            "INSERT INTO push_deliveries \
             (push, entry_id, delivery_id, at_ms, delivered, attempts, error) \
             VALUES ($1, $2, $3, $4, $5, $6, $7) \
             ON CONFLICT (push, entry_id, delivery_id) DO UPDATE SET \
             at_ms = excluded.at_ms, delivered = excluded.delivered, \
             attempts = excluded.attempts, error = excluded.error",
            params![
                push,
                entry_id,
                &d.delivery_id,
                d.at_ms,
                d.delivered as i64,
                d.attempts,
                &d.error
            ],
        )
        .await?;
        tx.execute(
            "DELETE FROM push_deliveries WHERE push = $1 AND entry_id = $2 \
             AND delivery_id NOT IN (SELECT delivery_id FROM push_deliveries \
             WHERE push = $1 AND entry_id = $2 ORDER BY at_ms DESC, delivery_id DESC LIMIT $3)",
            params![push, entry_id, DELIVERIES_KEPT],
        )
        .await?;
        tx.commit().await
    }

    /// An entry's deliveries, newest first (the caller checked the tenant owns it).
    pub async fn deliveries(
        &self,
        of: Letters,
        entry_id: &str,
    ) -> Result<Vec<Delivery>, StoreError> {
        let rows = self
            .db
            .query(
                "SELECT delivery_id, at_ms, delivered, attempts, error FROM push_deliveries \
                 WHERE push = $1 AND entry_id = $2 ORDER BY at_ms DESC, delivery_id DESC",
                params![of.push(), entry_id],
            )
            .await?;
        rows.iter()
            .map(|r| {
                Ok(Delivery {
                    delivery_id: r.text(0)?,
                    at_ms: r.int(1)?,
                    delivered: r.int(2)? != 0,
                    attempts: r.int(3)?,
                    error: r.text(4)?,
                })
            })
            .collect()
    }

    /// One dead letter of an entry.
    pub async fn dead_letter(
        &self,
        of: Letters,
        entry_id: &str,
        id: &str,
    ) -> Result<Option<DeadLetter>, StoreError> {
        Ok(self
            .dead_letters(of, entry_id)
            .await?
            .into_iter()
            .find(|d| d.id == id))
    }

    /// A retried dead letter: gone when `delivered`, else its attempts and last error
    /// updated. `Ok(false)`: it was no longer there (another retry took it).
    pub async fn retried_dead_letter(
        &self,
        of: Letters,
        letter: &DeadLetter,
        delivered: bool,
    ) -> Result<bool, StoreError> {
        let table = of.table();
        let changed = if delivered {
            self.db
                .execute(
                    &format!("DELETE FROM {table} WHERE entry_id = $1 AND id = $2"),
                    params![&letter.entry_id, &letter.id],
                )
                .await?
        } else {
            self.db
                .execute(
                    &format!(
                        "UPDATE {table} SET attempts = $3, last_error = $4 \
                         WHERE entry_id = $1 AND id = $2"
                    ),
                    params![
                        &letter.entry_id,
                        &letter.id,
                        letter.attempts,
                        &letter.last_error
                    ],
                )
                .await?
        };
        Ok(changed > 0)
    }
}

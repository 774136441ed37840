//! What the pushes of followed transactions read and write (`capture::txs::push`): the
//! status changes in order (`tx_events`, written with the change itself by
//! `update_tx`), the tenants' webhooks (`tx_hooks`) and the webhook dispatcher's cursor.

use super::sql::{params, Row, StoreError};
use super::Store;

/// One status change of one tenant's transaction.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct TxEvent {
    /// Increasing in the order the changes were made.
    pub id: i64,
    pub tenant_id: String,
    pub key_id: String,
    pub chain: String,
    pub hash: String,
    pub status: String,
    /// The change as JSON (`state::tx_push::event_body`).
    pub body: String,
    pub created_at: i64,
}

/// A tenant's webhook for its transactions' status changes.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct TxHook {
    pub id: String,
    pub tenant_id: String,
    pub callback_url: String,
    pub created_at: i64,
}

const EVENT_COLUMNS: &str = "id, tenant_id, key_id, chain, hash, status, body, created_at";
const HOOK_COLUMNS: &str = "id, tenant_id, callback_url, created_at";

fn event(r: &Row) -> Result<TxEvent, StoreError> {
    Ok(TxEvent {
        id: r.int(0)?,
        tenant_id: r.text(1)?,
        key_id: r.text(2)?,
        chain: r.text(3)?,
        hash: r.text(4)?,
        status: r.text(5)?,
        body: r.text(6)?,
        created_at: r.int(7)?,
    })
}

fn hook(r: &Row) -> Result<TxHook, StoreError> {
    Ok(TxHook {
        id: r.text(0)?,
        tenant_id: r.text(1)?,
        callback_url: r.text(2)?,
        created_at: r.int(3)?,
    })
}

impl Store {
    /// Changes after `after`, every tenant's, in order, at most `limit`.
    pub async fn tx_events_after(
        &self,
        after: i64,
        limit: i64,
    ) -> Result<Vec<TxEvent>, StoreError> {
        let sql =
            format!("SELECT {EVENT_COLUMNS} FROM tx_events WHERE id > $1 ORDER BY id LIMIT $2");
        let rows = self.db.query(&sql, params![after, limit]).await?;
        rows.iter().map(event).collect()
    }

    /// One tenant's changes after `after`, in order, at most `limit` (a channel's replay).
    pub async fn tenant_tx_events_after(
        &self,
        tenant_id: &str,
        after: i64,
        limit: i64,
    ) -> Result<Vec<TxEvent>, StoreError> {
        let sql = format!(
            "SELECT {EVENT_COLUMNS} FROM tx_events WHERE tenant_id = $1 AND id > $2 \
             ORDER BY id LIMIT $3"
        );
        let rows = self
            .db
            .query(&sql, params![tenant_id, after, limit])
            .await?;
        rows.iter().map(event).collect()
    }

    /// The newest change's id (0 when there is none).
    pub async fn last_tx_event(&self) -> Result<i64, StoreError> {
        let rows = self
            .db
            .query("SELECT COALESCE(MAX(id), 0) FROM tx_events", vec![])
            .await?;
        rows.first().map(|r| r.int(0)).unwrap_or(Ok(0))
    }

    /// Where the push named `name` got to, if it ever started.
    pub async fn push_cursor(&self, name: &str) -> Result<Option<i64>, StoreError> {
        let rows = self
            .db
            .query(
                "SELECT last_id FROM push_cursors WHERE name = $1",
                params![name],
            )
            .await?;
        rows.first().map(|r| r.int(0)).transpose()
    }

    pub async fn set_push_cursor(&self, name: &str, last_id: i64) -> Result<(), StoreError> {
        self.db
            .execute(
                "INSERT INTO push_cursors (name, last_id) VALUES ($1, $2) \
                 ON CONFLICT (name) DO UPDATE SET last_id = excluded.last_id",
                params![name, last_id],
            )
            .await
            .map(drop)
    }

    /// Add a hook unless the tenant already has `max` (then `Ok(false)`), counted and
    /// inserted in one transaction.
    pub async fn add_tx_hook(&self, h: &TxHook, max: i64) -> Result<bool, StoreError> {
        let mut tx = self.db.begin().await?;
        let rows = tx
            .query(
                "SELECT COUNT(*) FROM tx_hooks WHERE tenant_id = $1",
                params![&h.tenant_id],
            )
            .await?;
        if rows.first().map(|r| r.int(0)).transpose()?.unwrap_or(0) >= max {
            return Ok(false);
        }
        tx.execute(
            &format!("INSERT INTO tx_hooks ({HOOK_COLUMNS}) VALUES ($1, $2, $3, $4)"),
            params![&h.id, &h.tenant_id, &h.callback_url, h.created_at],
        )
        .await?;
        tx.commit().await?;
        Ok(true)
    }

    /// A tenant's hooks, oldest first.
    pub async fn tx_hooks(&self, tenant_id: &str) -> Result<Vec<TxHook>, StoreError> {
        let sql = format!(
            "SELECT {HOOK_COLUMNS} FROM tx_hooks WHERE tenant_id = $1 ORDER BY created_at, id"
        );
        let rows = self.db.query(&sql, params![tenant_id]).await?;
        rows.iter().map(hook).collect()
    }

    /// One hook, only if `tenant_id` owns it.
    pub async fn tx_hook(&self, tenant_id: &str, id: &str) -> Result<Option<TxHook>, StoreError> {
        let sql = format!("SELECT {HOOK_COLUMNS} FROM tx_hooks WHERE id = $1 AND tenant_id = $2");
        let rows = self.db.query(&sql, params![id, tenant_id]).await?;
        rows.first().map(hook).transpose()
    }

    /// Delete a hook `tenant_id` owns, with its dead letters and delivery log: whether it
    /// existed.
    pub async fn delete_tx_hook(&self, tenant_id: &str, id: &str) -> Result<bool, StoreError> {
        let mut tx = self.db.begin().await?;
        let n = tx
            .execute(
                "DELETE FROM tx_hooks WHERE id = $1 AND tenant_id = $2",
                params![id, tenant_id],
            )
            .await?;
        if n > 0 {
            tx.execute(
                "DELETE FROM tx_hook_dead_letters WHERE entry_id = $1",
                params![id],
            )
            .await?;
            tx.execute(
                "DELETE FROM push_deliveries WHERE push = 'tx_hooks' AND entry_id = $1",
                params![id],
            )
            .await?;
        }
        tx.commit().await?;
        Ok(n > 0)
    }
}

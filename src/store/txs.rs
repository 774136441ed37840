//! Transactions the edge follows (`capture::txs`): one row per chain, hash and tenant
//! that sent it, with what became of it. Bounded per tenant (the oldest go first) and
//! pruned once settled past the retention.

use super::sql::{params, StoreError};
use super::Store;

/// Where a followed transaction stands.
pub const PENDING: &str = "pending";
pub const INCLUDED: &str = "included";
pub const FINAL: &str = "final";
pub const FAILED: &str = "failed";
pub const REPLACED: &str = "replaced";
pub const DROPPED: &str = "dropped";
/// Solana: its blockhash expired before it landed.
pub const EXPIRED: &str = "expired";

/// A transaction to follow, decoded.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct NewTx {
    pub chain: String,
    /// How it went out (`tracking::PUBLIC`, `PRIVATE`, `BUNDLE`).
    pub route: String,
    pub hash: String,
    pub tenant_id: String,
    pub key_id: String,
    pub sender: String,
    pub nonce: i64,
    /// Solana: the blockhash it was signed against.
    pub recent_blockhash: Option<String>,
    pub raw: String,
    /// Unix seconds.
    pub submitted_at: i64,
}

/// A followed transaction as the store has it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct TrackedTx {
    pub chain: String,
    pub hash: String,
    pub tenant_id: String,
    pub key_id: String,
    pub sender: String,
    pub nonce: i64,
    pub raw: String,
    pub status: String,
    pub block_number: Option<i64>,
    pub block_hash: Option<String>,
    pub tx_index: Option<i64>,
    pub replaced_by: Option<String>,
    pub resends: i64,
    pub submitted_at: i64,
    pub updated_at: i64,
    /// When no node was seen holding it, while it is neither mined nor replaced.
    pub missing_since: Option<i64>,
    pub included_at: Option<i64>,
    /// Why it reverted, when it `failed` and the node says.
    pub revert_reason: Option<String>,
    /// Solana: the blockhash it was signed against.
    pub recent_blockhash: Option<String>,
    /// How it went out (`tracking::PUBLIC`, `PRIVATE`, `BUNDLE`).
    pub route: String,
}

/// What the follower learnt of one transaction (every tenant's row of it moves).
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct TxChange {
    pub status: String,
    pub block_number: Option<i64>,
    pub block_hash: Option<String>,
    pub tx_index: Option<i64>,
    pub replaced_by: Option<String>,
    pub missing_since: Option<i64>,
    pub included_at: Option<i64>,
    pub resends: i64,
    pub revert_reason: Option<String>,
}

const COLUMNS: &str = "chain, hash, tenant_id, key_id, sender, nonce, raw, status, block_number, \
     block_hash, tx_index, replaced_by, resends, submitted_at, updated_at, missing_since, \
     included_at, revert_reason, recent_blockhash, route";

fn tracked(r: &super::sql::Row) -> Result<TrackedTx, StoreError> {
    Ok(TrackedTx {
        chain: r.text(0)?,
        hash: r.text(1)?,
        tenant_id: r.text(2)?,
        key_id: r.text(3)?,
        sender: r.text(4)?,
        nonce: r.int(5)?,
        raw: r.text(6)?,
        status: r.text(7)?,
        block_number: r.opt_int(8)?,
        block_hash: r.opt_text(9)?,
        tx_index: r.opt_int(10)?,
        replaced_by: r.opt_text(11)?,
        resends: r.int(12)?,
        submitted_at: r.int(13)?,
        updated_at: r.int(14)?,
        missing_since: r.opt_int(15)?,
        included_at: r.opt_int(16)?,
        revert_reason: r.opt_text(17)?,
        recent_blockhash: r.opt_text(18)?,
        route: r.text(19)?,
    })
}

impl Store {
    /// Start following `txs` (a resend of one already followed changes nothing), then
    /// keep each of their tenants to at most its newest `per_tenant` rows (a second
    /// that would cross the bound goes whole).
    pub async fn track_txs(&self, txs: &[NewTx], per_tenant: i64) -> Result<(), StoreError> {
        if txs.is_empty() {
            return Ok(());
        }
        let mut tx = self.db.begin().await?;
        let rows = txs
            .iter()
            .map(|t| {
                params![
                    &t.chain,
                    &t.hash,
                    &t.tenant_id,
                    &t.key_id,
                    &t.sender,
                    t.nonce,
                    &t.raw,
                    PENDING,
                    t.submitted_at,
                    t.recent_blockhash.as_deref(),
                    &t.route
                ]
            })
            .collect();
        tx.execute_many(
            "INSERT INTO tracked_txs (chain, hash, tenant_id, key_id, sender, nonce, raw, status, \
             resends, submitted_at, updated_at, recent_blockhash, route) \
             VALUES ($1, $2, $3, $4, $5, $6, $7, $8, 0, $9, $9, $10, $11) \
             ON CONFLICT (chain, hash, tenant_id) DO NOTHING",
            rows,
        )
        .await?;
        let mut tenants: Vec<&str> = txs.iter().map(|t| t.tenant_id.as_str()).collect();
        tenants.sort_unstable();
        tenants.dedup();
        for tenant in tenants {
            tx.execute(
                "DELETE FROM tracked_txs WHERE tenant_id = $1 AND submitted_at <= (\
                 SELECT submitted_at FROM tracked_txs WHERE tenant_id = $1 \
                 ORDER BY submitted_at DESC LIMIT 1 OFFSET $2)",
                params![tenant, per_tenant],
            )
            .await?;
        }
        tx.commit().await
    }

    /// Rows of `tracked_txs` matching `filter` (the SQL after `WHERE`, with its order
    /// and limit), every column read.
    async fn txs_where(
        &self,
        filter: &str,
        params: Vec<super::sql::Value>,
    ) -> Result<Vec<TrackedTx>, StoreError> {
        let sql = format!("SELECT {COLUMNS} FROM tracked_txs WHERE {filter}");
        let rows = self.db.query(&sql, params).await?;
        rows.iter().map(tracked).collect()
    }

    /// One tenant's transaction, if that tenant sent it.
    pub async fn tracked_tx(
        &self,
        chain: &str,
        hash: &str,
        tenant_id: &str,
    ) -> Result<Option<TrackedTx>, StoreError> {
        let filter = "chain = $1 AND hash = $2 AND tenant_id = $3";
        let found = self.txs_where(filter, params![chain, hash, tenant_id]);
        Ok(found.await?.into_iter().next())
    }

    /// The transactions one key sent, the newest first, at most `limit`.
    pub async fn key_txs(&self, key_id: &str, limit: i64) -> Result<Vec<TrackedTx>, StoreError> {
        let filter = "key_id = $1 ORDER BY submitted_at DESC, hash LIMIT $2";
        self.txs_where(filter, params![key_id, limit]).await
    }

    /// A chain's transactions not settled yet (pending or included), the least recently
    /// looked at first, one row per hash, at most `limit`.
    pub async fn open_txs(&self, chain: &str, limit: i64) -> Result<Vec<TrackedTx>, StoreError> {
        let filter = "chain = $1 AND status IN ($2, $3) ORDER BY updated_at, hash LIMIT $4";
        let mut out = self
            .txs_where(filter, params![chain, PENDING, INCLUDED, limit])
            .await?;
        out.dedup_by(|a, b| a.hash == b.hash);
        Ok(out)
    }

    /// Other followed transactions of the same sender and nonce, not themselves
    /// replaced or dropped, the newest first: what may have taken `hash`'s place.
    pub async fn same_nonce(
        &self,
        chain: &str,
        sender: &str,
        nonce: i64,
        hash: &str,
    ) -> Result<Vec<String>, StoreError> {
        let rows = self
            .db
            .query(
                "SELECT DISTINCT hash, submitted_at FROM tracked_txs WHERE chain = $1 \
                 AND sender = $2 AND nonce = $3 AND hash <> $4 AND status NOT IN ($5, $6) \
                 ORDER BY submitted_at DESC LIMIT 8",
                params![chain, sender, nonce, hash, REPLACED, DROPPED],
            )
            .await?;
        rows.iter().map(|r| r.text(0)).collect()
    }

    /// Record what became of `hash` on `chain` (every tenant's row of it), at `now`;
    /// with `event` (a status change, as JSON), the change goes on every owner's push in
    /// the same transaction: a change is never stored without its push, nor pushed twice.
    pub async fn update_tx(
        &self,
        chain: &str,
        hash: &str,
        change: &TxChange,
        now: i64,
        event: Option<&str>,
    ) -> Result<(), StoreError> {
        let mut tx = self.db.begin().await?;
        tx.execute(
            "UPDATE tracked_txs SET status = $3, block_number = $4, block_hash = $5, \
             tx_index = $6, replaced_by = $7, missing_since = $8, included_at = $9, \
             resends = $10, updated_at = $11, revert_reason = $12 WHERE chain = $1 AND hash = $2",
            params![
                chain,
                hash,
                &change.status,
                change.block_number,
                change.block_hash.as_deref(),
                change.tx_index,
                change.replaced_by.as_deref(),
                change.missing_since,
                change.included_at,
                change.resends,
                now,
                change.revert_reason.as_deref()
            ],
        )
        .await?;
        if let Some(body) = event {
            let owners = tx
                .query(
                    "SELECT tenant_id, key_id FROM tracked_txs WHERE chain = $1 AND hash = $2 \
                     ORDER BY tenant_id",
                    params![chain, hash],
                )
                .await?;
            // Ids in commit order: one follower writes per chain, and two writers at
            // once (a lease changing hands) collide on the key and one retries.
            let last = tx
                .query("SELECT COALESCE(MAX(id), 0) FROM tx_events", vec![])
                .await?
                .first()
                .map(|r| r.int(0))
                .transpose()?
                .unwrap_or(0);
            let rows = owners
                .iter()
                .enumerate()
                .map(|(i, r)| {
                    Ok(params![
                        last + 1 + i as i64,
                        r.text(0)?,
                        r.text(1)?,
                        chain,
                        hash,
                        &change.status,
                        body,
                        now
                    ])
                })
                .collect::<Result<Vec<_>, StoreError>>()?;
            tx.execute_many(
                "INSERT INTO tx_events (id, tenant_id, key_id, chain, hash, status, body, \
                 created_at) VALUES ($1, $2, $3, $4, $5, $6, $7, $8)",
                rows,
            )
            .await?;
        }
        tx.commit().await
    }

    /// Forget settled transactions (final, failed, replaced, dropped) last changed before
    /// `before` (Unix seconds), and the pushed changes older than that.
    pub async fn prune_txs(&self, before: i64) -> Result<u64, StoreError> {
        // The newest change stays whatever its age: the next id counts on from it, so
        // a cursor never meets an id again.
        self.db
            .execute(
                "DELETE FROM tx_events WHERE created_at < $1 \
                 AND id < (SELECT MAX(id) FROM tx_events)",
                params![before],
            )
            .await?;
        self.db
            .execute(
                "DELETE FROM tracked_txs WHERE status IN ($1, $2, $3, $4) AND updated_at < $5",
                params![FINAL, FAILED, REPLACED, DROPPED, before],
            )
            .await
    }
}

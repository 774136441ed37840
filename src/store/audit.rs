//! The audit log: every change to a tenant's keys and plan, by whom and when, written in
//! the transaction that made the change (a change is never in the store without its
//! entry). Console users see their tenant's (`GET /v1/audit`); the operator's CLI
//! changes appear with no user.

use super::sql::{params, Row, StoreError, Tx};
use super::{now_us, Store};

/// How long entries are kept.
pub const KEPT_SECS: i64 = 90 * 86_400;
/// Actions that change nothing a key may do: a member renaming in a loop must not push
/// a key rotation, a join or an invitation out of the log, so of these only the newest
/// `KEPT_CHURN_PER_TENANT` are kept, and a tenant makes at most `RENAMES_PER_HOUR`.
pub const CHURN_ACTIONS: &[&str] = &["key.rename"];
pub const KEPT_CHURN_PER_TENANT: i64 = 1000;
pub const RENAMES_PER_HOUR: i64 = 120;

/// One change, as the audit log shows it.
#[derive(Debug, Clone, PartialEq, serde::Serialize)]
pub struct AuditEntry {
    pub at_us: i64,
    /// The console user who made it; `None`: the operator (CLI).
    pub user_id: Option<String>,
    /// How that user is known: email, wallet address, or Google name.
    pub user: Option<String>,
    /// `key.create`, `key.rename`, `key.restrict`, `key.rotate`, `key.revoke`,
    /// `plan.request`, `plan.approve`, `plan.reject`.
    pub action: String,
    /// The key's id, or the plan.
    pub target: String,
    /// What changed, in words: a key's name, the new restrictions, the plans.
    pub detail: String,
}

/// Add an entry inside the change's own transaction, and keep the tenant's newest.
pub(super) async fn record(
    tx: &mut dyn Tx,
    tenant: &str,
    user: Option<&str>,
    action: &str,
    target: &str,
    detail: &str,
) -> Result<(), StoreError> {
    tx.execute(
        "INSERT INTO audit_events (tenant_id, at_us, user_id, action, target, detail)
         VALUES ($1, $2, $3, $4, $5, $6)",
        params![tenant, now_us(), user, action, target, detail],
    )
    .await?;
    let oldest_kept = now_us() - KEPT_SECS * 1_000_000;
    tx.execute(
        "DELETE FROM audit_events WHERE tenant_id = $1 AND at_us < $2",
        params![tenant, oldest_kept],
    )
    .await?;
    if CHURN_ACTIONS.contains(&action) {
        tx.execute(
            "DELETE FROM audit_events WHERE tenant_id = $1 AND action = $2 AND at_us < (
                 SELECT MIN(at_us) FROM (
                     SELECT at_us FROM audit_events WHERE tenant_id = $1 AND action = $2
                     ORDER BY at_us DESC LIMIT $3) AS newest)",
            params![tenant, action, KEPT_CHURN_PER_TENANT],
        )
        .await?;
    }
    Ok(())
}

fn entry(r: &Row) -> Result<AuditEntry, StoreError> {
    Ok(AuditEntry {
        at_us: r.int(0)?,
        user_id: r.opt_text(1)?,
        user: r.opt_text(2)?,
        action: r.text(3)?,
        target: r.text(4)?,
        detail: r.text(5)?,
    })
}

impl Store {
    /// A tenant's audit log, newest first, at most `limit`, older than `before` (µs)
    /// when given: a page, `before` being the last `at_us` of the page above.
    pub async fn audit_log(
        &self,
        tenant: &str,
        limit: i64,
        before: Option<i64>,
    ) -> Result<Vec<AuditEntry>, StoreError> {
        let rows = self
            .db
            .query(
                "SELECT a.at_us, a.user_id,
                    COALESCE(u.email, u.display_name, u.wallet_evm, u.wallet_solana),
                    a.action, a.target, a.detail
                 FROM audit_events a LEFT JOIN users u ON u.id = a.user_id
                 WHERE a.tenant_id = $1 AND a.at_us < $3 ORDER BY a.at_us DESC LIMIT $2",
                params![tenant, limit, before.unwrap_or(i64::MAX)],
            )
            .await?;
        rows.iter().map(entry).collect()
    }

    /// How many `action` entries a tenant has since `since_us` (a budget's count).
    pub async fn audit_count_since(
        &self,
        tenant: &str,
        action: &str,
        since_us: i64,
    ) -> Result<i64, StoreError> {
        let rows = self
            .db
            .query(
                "SELECT COUNT(*) FROM audit_events WHERE tenant_id = $1 AND action = $2 AND at_us >= $3",
                params![tenant, action, since_us],
            )
            .await?;
        rows.first().map_or(Ok(0), |r| r.int(0))
    }
}

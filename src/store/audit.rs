//! The audit log: every change to a tenant's keys and plan, by whom and when, written in
//! the transaction that made the change (a change is never in the store without its
//! entry). Console users see their tenant's (`GET /v1/audit`); the operator's CLI
//! changes appear with no user.

use super::sql::{params, Row, StoreError, Tx};
use super::{now_us, Store};

/// Entries a tenant keeps: the newest, cut when one is added past it.
pub const KEPT_PER_TENANT: i64 = 1000;

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
    tx.execute(
        "DELETE FROM audit_events WHERE tenant_id = $1 AND at_us < (
             SELECT MIN(at_us) FROM (
                 SELECT at_us FROM audit_events WHERE tenant_id = $1
                 ORDER BY at_us DESC LIMIT $2) AS newest)",
        params![tenant, KEPT_PER_TENANT],
    )
    .await?;
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
    /// A tenant's audit log, newest first, at most `limit`.
    pub async fn audit_log(&self, tenant: &str, limit: i64) -> Result<Vec<AuditEntry>, StoreError> {
        let rows = self
            .db
            .query(
                "SELECT a.at_us, a.user_id,
                    COALESCE(u.email, u.display_name, u.wallet_evm, u.wallet_solana),
                    a.action, a.target, a.detail
                 FROM audit_events a LEFT JOIN users u ON u.id = a.user_id
                 WHERE a.tenant_id = $1 ORDER BY a.at_us DESC LIMIT $2",
                params![tenant, limit],
            )
            .await?;
        rows.iter().map(entry).collect()
    }
}

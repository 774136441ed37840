//! Tenants as an operator sees them (`chainedge tenants list` / `show`): plan, billing,
//! features, and how many users and active keys each has. Never a key's secret.

use super::sql::{params, Row, StoreError};
use super::{parse_list, Store};

/// One tenant, for the operator's CLI.
#[derive(Debug, Clone, serde::Serialize)]
pub struct TenantInfo {
    pub id: String,
    pub name: String,
    pub plan: String,
    pub features: Vec<String>,
    pub trial_ends_at: Option<i64>,
    pub subscription_ends_at: Option<i64>,
    pub created_at: i64,
    pub user_count: i64,
    pub active_key_count: i64,
}

const COLUMNS: &str = "SELECT t.id, t.name, t.plan, t.features, t.trial_ends_at, \
     t.subscription_ends_at, t.created_at, \
     (SELECT COUNT(*) FROM users u WHERE u.tenant_id = t.id), \
     (SELECT COUNT(*) FROM api_keys k WHERE k.tenant_id = t.id AND k.revoked_at IS NULL) \
     FROM tenants t";

fn tenant_info(r: &Row) -> Result<TenantInfo, StoreError> {
    Ok(TenantInfo {
        id: r.text(0)?,
        name: r.text(1)?,
        plan: r.text(2)?,
        features: parse_list(&r.text(3)?),
        trial_ends_at: r.opt_int(4)?,
        subscription_ends_at: r.opt_int(5)?,
        created_at: r.int(6)?,
        user_count: r.int(7)?,
        active_key_count: r.int(8)?,
    })
}

/// A user of a tenant, for the operator's CLI.
#[derive(Debug, Clone, serde::Serialize)]
pub struct TenantUser {
    pub id: String,
    pub email: Option<String>,
    pub display_name: Option<String>,
    pub created_at: i64,
}

impl Store {
    /// Tenants oldest first (within one second, by id), optionally on one plan; at most
    /// `limit`.
    pub async fn list_tenants(
        &self,
        plan: Option<&str>,
        limit: i64,
    ) -> Result<Vec<TenantInfo>, StoreError> {
        let rows = match plan {
            Some(plan) => {
                self.db
                    .query(
                        &format!(
                            "{COLUMNS} WHERE t.plan = $1 ORDER BY t.created_at, t.id LIMIT $2"
                        ),
                        params![plan, limit],
                    )
                    .await?
            }
            None => {
                self.db
                    .query(
                        &format!("{COLUMNS} ORDER BY t.created_at, t.id LIMIT $1"),
                        params![limit],
                    )
                    .await?
            }
        };
        rows.iter().map(tenant_info).collect()
    }

    /// One tenant by id.
    pub async fn tenant(&self, id: &str) -> Result<Option<TenantInfo>, StoreError> {
        self.query_opt(&format!("{COLUMNS} WHERE t.id = $1"), params![id])
            .await?
            .as_ref()
            .map(tenant_info)
            .transpose()
    }

    /// A tenant's users, oldest first (at most 1,000: a console tenant has one).
    pub async fn tenant_users(&self, id: &str) -> Result<Vec<TenantUser>, StoreError> {
        let rows = self
            .db
            .query(
                "SELECT id, email, display_name, created_at FROM users WHERE tenant_id = $1 \
                 ORDER BY created_at, id LIMIT 1000",
                params![id],
            )
            .await?;
        rows.iter()
            .map(|r| {
                Ok(TenantUser {
                    id: r.text(0)?,
                    email: r.opt_text(1)?,
                    display_name: r.opt_text(2)?,
                    created_at: r.int(3)?,
                })
            })
            .collect()
    }
}

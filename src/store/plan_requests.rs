//! Plan change requests: a console user asks for another plan, an operator approves or
//! rejects it with the CLI. One row per tenant: its latest request.

use super::sql::{params, query_opt, Row, StoreError};
use super::{now, Store};

/// A tenant's latest plan request.
#[derive(Debug, Clone, PartialEq, serde::Serialize)]
pub struct PlanRequest {
    pub tenant_id: String,
    pub user_id: String,
    pub plan: String,
    /// The plan the tenant was on when it asked.
    pub from_plan: String,
    /// `pending`, `approved`, `rejected` or `applied` (a self-service plan).
    pub status: String,
    pub created_at: i64,
    pub decided_at: Option<i64>,
}

const COLUMNS: &str =
    "SELECT tenant_id, user_id, plan, from_plan, status, created_at, decided_at FROM plan_requests";

fn plan_request(r: &Row) -> Result<PlanRequest, StoreError> {
    Ok(PlanRequest {
        tenant_id: r.text(0)?,
        user_id: r.text(1)?,
        plan: r.text(2)?,
        from_plan: r.text(3)?,
        status: r.text(4)?,
        created_at: r.int(5)?,
        decided_at: r.opt_int(6)?,
    })
}

impl Store {
    /// Record a request for `plan` (replacing the tenant's earlier one); with `apply`
    /// (a self-service plan) the tenant moves to it in the same transaction.
    pub async fn request_plan(
        &self,
        tenant: &str,
        user: &str,
        plan: &str,
        apply: bool,
    ) -> Result<PlanRequest, StoreError> {
        let mut tx = self.db.begin().await?;
        let from = query_opt(
            tx.as_mut(),
            "SELECT plan FROM tenants WHERE id = $1",
            params![tenant],
        )
        .await?
        .ok_or_else(|| StoreError::other("no such tenant"))?
        .text(0)?;
        let (status, decided) = if apply {
            ("applied", Some(now()))
        } else {
            ("pending", None)
        };
        tx.execute(
            "INSERT INTO plan_requests (tenant_id, user_id, plan, from_plan, status, created_at, decided_at)
             VALUES ($1, $2, $3, $4, $5, $6, $7)
             ON CONFLICT (tenant_id) DO UPDATE SET user_id = $2, plan = $3, from_plan = $4,
                 status = $5, created_at = $6, decided_at = $7",
            params![tenant, user, plan, &from, status, now(), decided],
        )
        .await?;
        if apply {
            tx.execute(
                "UPDATE tenants SET plan = $2 WHERE id = $1",
                params![tenant, plan],
            )
            .await?;
        }
        let detail = format!("from {from}: {status}");
        super::audit::record(
            tx.as_mut(),
            tenant,
            Some(user),
            "plan.request",
            plan,
            &detail,
        )
        .await?;
        let row = query_opt(
            tx.as_mut(),
            &format!("{COLUMNS} WHERE tenant_id = $1"),
            params![tenant],
        )
        .await?
        .ok_or_else(|| StoreError::other("plan request just written is missing"))?;
        tx.commit().await?;
        plan_request(&row)
    }

    /// The tenant's latest plan request.
    pub async fn plan_request(&self, tenant: &str) -> Result<Option<PlanRequest>, StoreError> {
        self.query_opt(&format!("{COLUMNS} WHERE tenant_id = $1"), params![tenant])
            .await?
            .map(|r| plan_request(&r))
            .transpose()
    }

    /// Requests waiting for an operator, oldest first.
    pub async fn pending_plan_requests(&self) -> Result<Vec<PlanRequest>, StoreError> {
        let rows = self
            .db
            .query(
                &format!("{COLUMNS} WHERE status = 'pending' ORDER BY created_at, tenant_id"),
                params![],
            )
            .await?;
        rows.iter().map(plan_request).collect()
    }

    /// Approve (the tenant moves to the plan asked for) or reject the tenant's pending
    /// request; `None` when it has none.
    pub async fn decide_plan_request(
        &self,
        tenant: &str,
        approve: bool,
        expected_plan: Option<&str>,
    ) -> Result<Decision, StoreError> {
        let mut tx = self.db.begin().await?;
        let Some(row) = query_opt(
            tx.as_mut(),
            &format!("{COLUMNS} WHERE tenant_id = $1 AND status = 'pending'"),
            params![tenant],
        )
        .await?
        else {
            return Ok(Decision::NothingPending);
        };
        let mut req = plan_request(&row)?;
        // The request may have been replaced since the operator read it: decide only
        // the plan the operator named.
        if expected_plan.is_some_and(|p| p != req.plan) {
            return Ok(Decision::OtherPlan(req.plan));
        }
        req.status = if approve { "approved" } else { "rejected" }.into();
        req.decided_at = Some(now());
        tx.execute(
            "UPDATE plan_requests SET status = $2, decided_at = $3 WHERE tenant_id = $1",
            params![tenant, req.status.as_str(), req.decided_at],
        )
        .await?;
        if approve {
            tx.execute(
                "UPDATE tenants SET plan = $2 WHERE id = $1",
                params![tenant, req.plan.as_str()],
            )
            .await?;
        }
        let action = if approve {
            "plan.approve"
        } else {
            "plan.reject"
        };
        let detail = format!("from {}", req.from_plan);
        super::audit::record(tx.as_mut(), tenant, None, action, &req.plan, &detail).await?;
        tx.commit().await?;
        Ok(Decision::Decided(req))
    }
}

/// What became of an operator's decision on a plan request.
#[derive(Debug)]
pub enum Decision {
    Decided(PlanRequest),
    NothingPending,
    /// The pending request is for this plan, not the one the operator named.
    OtherPlan(String),
}

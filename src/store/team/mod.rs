//! Teams: a tenant's members and their roles, invitations by emailed code, and which
//! tenant a console session acts in. Every user owns the tenant made at its first
//! sign-in (its home) and may be a member of others; each change is audited in its own
//! transaction.

mod invites;

pub use invites::{
    InviteInfo, INVITE_MAIL_WINDOW_SECS, MAX_INVITE_MAILS_PER_ADDRESS, MAX_INVITE_MAILS_PER_TENANT,
    MAX_PENDING_INVITES,
};

use super::audit;
use super::console::UserRow;
use super::sql::{params, query_opt, Row, StoreError, Tx};
use super::{now, Store};

/// What a member may do in its tenant.
#[derive(Debug, Clone, Copy, PartialEq, Eq, serde::Serialize)]
#[serde(rename_all = "lowercase")]
pub enum Role {
    /// Everything, including members, invitations and plan changes.
    Owner,
    /// Keys (create, rename, restrict, rotate, revoke) and everything a viewer sees.
    Developer,
    /// Reads only: keys without secrets, usage, request logs, the audit log.
    Viewer,
}

impl Role {
    pub fn parse(s: &str) -> Option<Role> {
        match s {
            "owner" => Some(Role::Owner),
            "developer" => Some(Role::Developer),
            "viewer" => Some(Role::Viewer),
            _ => None,
        }
    }
    pub fn as_str(self) -> &'static str {
        match self {
            Role::Owner => "owner",
            Role::Developer => "developer",
            Role::Viewer => "viewer",
        }
    }
    /// May create, change and revoke keys (and so see a new secret once).
    pub fn writes_keys(self) -> bool {
        self != Role::Viewer
    }
    /// May manage members, invitations and the plan.
    pub fn manages_team(self) -> bool {
        self == Role::Owner
    }
}

/// A signed-in user in the tenant it acts in.
#[derive(Debug, Clone)]
pub struct Member {
    pub user: UserRow,
    pub tenant_id: String,
    pub role: Role,
}

impl Member {
    /// Acting in the tenant made at its first sign-in.
    pub fn at_home(&self) -> bool {
        self.tenant_id == self.user.tenant_id
    }
}

/// A member as the team page lists it.
#[derive(Debug, Clone, serde::Serialize)]
pub struct MemberInfo {
    pub user_id: String,
    /// How the user is known: email, display name or wallet address.
    pub name: Option<String>,
    pub role: Role,
    pub joined_at: i64,
}

/// A tenant a user belongs to.
#[derive(Debug, Clone, serde::Serialize)]
pub struct Membership {
    pub tenant_id: String,
    pub name: String,
    pub role: Role,
}

/// Most members one tenant may have.
pub const MAX_MEMBERS: i64 = 50;
/// Why a team change was not made.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Refused {
    NotFound,
    /// The tenant would be left without an owner.
    LastOwner,
    /// A user cannot leave (or be removed from) the tenant made at its sign-up.
    HomeTenant,
    AlreadyMember,
    /// The invitation was sent to another address than the joining user's.
    OtherAddress,
    TooMany,
    /// Too many invitation mails lately: to this address, or from this team.
    TooManyMails {
        to_address: bool,
    },
}

pub(super) const USER_NAME: &str =
    "COALESCE(u.email, u.display_name, u.wallet_evm, u.wallet_solana)";

pub(super) fn role_at(r: &Row, i: usize) -> Result<Role, StoreError> {
    let text = r.text(i)?;
    Role::parse(&text).ok_or_else(|| StoreError::other(format!("unknown role {text}")))
}

impl Store {
    /// The user of a session in the tenant it acts in: `active` when the user is still a
    /// member there, else its home tenant. `None`: no such user.
    pub async fn member(
        &self,
        user_id: &str,
        active: Option<&str>,
    ) -> Result<Option<Member>, StoreError> {
        let Some(user) = self.user(user_id).await? else {
            return Ok(None);
        };
        let home = user.tenant_id.clone();
        for tenant in active.into_iter().chain([home.as_str()]) {
            let row = self
                .query_opt(
                    "SELECT role FROM members WHERE tenant_id = $1 AND user_id = $2",
                    params![tenant, user_id],
                )
                .await?;
            if let Some(r) = row {
                let (tenant_id, role) = (tenant.to_string(), role_at(&r, 0)?);
                return Ok(Some(Member {
                    user,
                    tenant_id,
                    role,
                }));
            }
        }
        Err(StoreError::other(
            "user without a membership in its home tenant",
        ))
    }

    /// Every tenant the user belongs to, its home first.
    pub async fn memberships(&self, user_id: &str) -> Result<Vec<Membership>, StoreError> {
        let rows = self
            .db
            .query(
                "SELECT m.tenant_id, t.name, m.role FROM members m
                 JOIN tenants t ON t.id = m.tenant_id
                 JOIN users u ON u.id = m.user_id
                 WHERE m.user_id = $1
                 ORDER BY CASE WHEN u.tenant_id = m.tenant_id THEN 0 ELSE 1 END, m.created_at",
                params![user_id],
            )
            .await?;
        rows.iter()
            .map(|r| {
                Ok(Membership {
                    tenant_id: r.text(0)?,
                    name: r.text(1)?,
                    role: role_at(r, 2)?,
                })
            })
            .collect()
    }

    /// Make `tenant` the one the session acts in; false when the user is not a member.
    pub async fn switch_tenant(
        &self,
        token_hash: &[u8; 32],
        user_id: &str,
        tenant: &str,
    ) -> Result<bool, StoreError> {
        Ok(self
            .db
            .execute(
                "UPDATE sessions SET tenant_id = $3 WHERE token_sha256 = $1 AND user_id = $2
                 AND EXISTS (SELECT 1 FROM members WHERE tenant_id = $3 AND user_id = $2)",
                params![token_hash, user_id, tenant],
            )
            .await?
            == 1)
    }

    /// A tenant's members, owners first.
    pub async fn members(&self, tenant: &str) -> Result<Vec<MemberInfo>, StoreError> {
        let rows = self
            .db
            .query(
                &format!(
                    "SELECT m.user_id, {USER_NAME}, m.role, m.created_at FROM members m
                     JOIN users u ON u.id = m.user_id WHERE m.tenant_id = $1
                     ORDER BY CASE m.role WHEN 'owner' THEN 0 WHEN 'developer' THEN 1 ELSE 2 END,
                              m.created_at, m.user_id"
                ),
                params![tenant],
            )
            .await?;
        rows.iter()
            .map(|r| {
                Ok(MemberInfo {
                    user_id: r.text(0)?,
                    name: r.opt_text(1)?,
                    role: role_at(r, 2)?,
                    joined_at: r.int(3)?,
                })
            })
            .collect()
    }

    /// Change a member's role; the last owner keeps its role.
    pub async fn set_role(
        &self,
        tenant: &str,
        by: &str,
        user_id: &str,
        role: Role,
    ) -> Result<Result<(), Refused>, StoreError> {
        self.retry_conflicts(|mut tx| async move {
            let current = match current_role(tx.as_mut(), tenant, user_id).await? {
                Some(r) => r,
                None => return Ok(Err(Refused::NotFound)),
            };
            if current == Role::Owner
                && role != Role::Owner
                && owners(tx.as_mut(), tenant).await? <= 1
            {
                return Ok(Err(Refused::LastOwner));
            }
            tx.execute(
                "UPDATE members SET role = $3 WHERE tenant_id = $1 AND user_id = $2",
                params![tenant, user_id, role.as_str()],
            )
            .await?;
            let detail = format!("{} to {}", current.as_str(), role.as_str());
            audit::record(
                tx.as_mut(),
                tenant,
                Some(by),
                "member.role",
                user_id,
                &detail,
            )
            .await?;
            tx.commit().await?;
            Ok(Ok(()))
        })
        .await
    }

    /// Remove a member (or let one leave). Keys it made stay the tenant's; its console
    /// sessions fall back to its home tenant at their next request.
    pub async fn remove_member(
        &self,
        tenant: &str,
        by: &str,
        user_id: &str,
    ) -> Result<Result<(), Refused>, StoreError> {
        self.retry_conflicts(|mut tx| async move {
            let current = match current_role(tx.as_mut(), tenant, user_id).await? {
                Some(r) => r,
                None => return Ok(Err(Refused::NotFound)),
            };
            let home = query_opt(
                tx.as_mut(),
                "SELECT 1 FROM users WHERE id = $1 AND tenant_id = $2",
                params![user_id, tenant],
            )
            .await?;
            if home.is_some() {
                return Ok(Err(Refused::HomeTenant));
            }
            if current == Role::Owner && owners(tx.as_mut(), tenant).await? <= 1 {
                return Ok(Err(Refused::LastOwner));
            }
            tx.execute(
                "DELETE FROM members WHERE tenant_id = $1 AND user_id = $2",
                params![tenant, user_id],
            )
            .await?;
            let action = if by == user_id {
                "member.leave"
            } else {
                "member.remove"
            };
            audit::record(
                tx.as_mut(),
                tenant,
                Some(by),
                action,
                user_id,
                current.as_str(),
            )
            .await?;
            tx.commit().await?;
            Ok(Ok(()))
        })
        .await
    }
}

pub(super) async fn current_role(
    tx: &mut dyn Tx,
    tenant: &str,
    user_id: &str,
) -> Result<Option<Role>, StoreError> {
    query_opt(
        tx,
        "SELECT role FROM members WHERE tenant_id = $1 AND user_id = $2",
        params![tenant, user_id],
    )
    .await?
    .map(|r| role_at(&r, 0))
    .transpose()
}

pub(super) async fn owners(tx: &mut dyn Tx, tenant: &str) -> Result<i64, StoreError> {
    count_in(
        tx,
        "SELECT COUNT(*) FROM members WHERE tenant_id = $1 AND role = 'owner'",
        params![tenant],
    )
    .await
}

/// A `SELECT COUNT(*)` statement's count.
pub(super) async fn count_in(
    tx: &mut dyn Tx,
    sql: &str,
    params: Vec<super::sql::Value>,
) -> Result<i64, StoreError> {
    Ok(query_opt(tx, sql, params)
        .await?
        .map(|r| r.int(0))
        .transpose()?
        .unwrap_or(0))
}

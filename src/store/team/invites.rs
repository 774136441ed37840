//! A team's invitations: made by emailed code (its hash kept, the pending ones bounded,
//! the mails to one address and from one team bounded per window), listed, revoked,
//! and joined by the invited address.

use super::*;

/// A pending invitation.
#[derive(Debug, Clone, serde::Serialize)]
pub struct InviteInfo {
    pub id: String,
    pub email: String,
    pub role: Role,
    pub invited_by: String,
    pub created_at: i64,
    pub expires_at: i64,
}

/// Pending invitations one tenant may have at once.
pub const MAX_PENDING_INVITES: i64 = 20;
/// Invitation mails in `INVITE_MAIL_WINDOW_SECS`: to one address (from any team; a
/// re-invitation replaces the pending one, so the pending cap alone never bound this),
/// and from one team.
pub const MAX_INVITE_MAILS_PER_ADDRESS: i64 = 3;
pub const MAX_INVITE_MAILS_PER_TENANT: i64 = 30;
pub const INVITE_MAIL_WINDOW_SECS: i64 = 3600;

impl Store {
    /// Invite `email` (normalised) as `role`, valid for `ttl` seconds. An earlier pending
    /// invitation of the same address is replaced. `code_hash`: the emailed code's hash.
    pub async fn invite(
        &self,
        tenant: &str,
        by: &str,
        email: &str,
        role: Role,
        code_hash: &[u8; 32],
        ttl: i64,
    ) -> Result<Result<InviteInfo, Refused>, StoreError> {
        self.retry_conflicts(|mut tx| async move {
            let t = now();
            let member = query_opt(
                tx.as_mut(),
                "SELECT 1 FROM members m JOIN users u ON u.id = m.user_id
                 WHERE m.tenant_id = $1 AND u.email = $2",
                params![tenant, email],
            )
            .await?;
            if member.is_some() {
                return Ok(Err(Refused::AlreadyMember));
            }
            // Every invitation row is a mail sent (replaced ones are kept, revoked).
            let since = t - INVITE_MAIL_WINDOW_SECS;
            let to_address = count_in(
                tx.as_mut(),
                "SELECT COUNT(*) FROM invites WHERE email = $1 AND created_at > $2",
                params![email, since],
            )
            .await?;
            let from_tenant = count_in(
                tx.as_mut(),
                "SELECT COUNT(*) FROM invites WHERE tenant_id = $1 AND created_at > $2",
                params![tenant, since],
            )
            .await?;
            if to_address >= MAX_INVITE_MAILS_PER_ADDRESS || from_tenant >= MAX_INVITE_MAILS_PER_TENANT {
                let to_address = to_address >= MAX_INVITE_MAILS_PER_ADDRESS;
                return Ok(Err(Refused::TooManyMails { to_address }));
            }
            let replaced = query_opt(
                tx.as_mut(),
                "SELECT id FROM invites WHERE tenant_id = $1 AND email = $2
                 AND accepted_at IS NULL AND revoked_at IS NULL",
                params![tenant, email],
            )
            .await?;
            if let Some(old) = replaced {
                tx.execute(
                    "UPDATE invites SET revoked_at = $3 WHERE tenant_id = $1 AND email = $2
                     AND accepted_at IS NULL AND revoked_at IS NULL",
                    params![tenant, email, t],
                )
                .await?;
                let old_id = old.text(0)?;
                let detail = format!("{email}: replaced by a new invitation");
                audit::record(tx.as_mut(), tenant, Some(by), "invite.revoke", &old_id, &detail).await?;
            }
            let members = count_in(tx.as_mut(), "SELECT COUNT(*) FROM members WHERE tenant_id = $1", params![tenant]).await?;
            let pending = count_in(
                tx.as_mut(),
                "SELECT COUNT(*) FROM invites WHERE tenant_id = $1 AND accepted_at IS NULL
                 AND revoked_at IS NULL AND expires_at > $2",
                params![tenant, t],
            )
            .await?;
            if pending >= MAX_PENDING_INVITES || members + pending >= MAX_MEMBERS {
                return Ok(Err(Refused::TooMany));
            }
            let id = uuid::Uuid::new_v4().to_string();
            tx.execute(
                "INSERT INTO invites (id, tenant_id, email, role, code_sha256, invited_by, created_at, expires_at)
                 VALUES ($1, $2, $3, $4, $5, $6, $7, $8)",
                params![&id, tenant, email, role.as_str(), code_hash, by, t, t + ttl],
            )
            .await?;
            let detail = format!("{email} as {}", role.as_str());
            audit::record(tx.as_mut(), tenant, Some(by), "member.invite", &id, &detail).await?;
            tx.commit().await?;
            Ok(Ok(InviteInfo {
                id,
                email: email.to_string(),
                role,
                invited_by: by.to_string(),
                created_at: t,
                expires_at: t + ttl,
            }))
        })
        .await
    }

    /// A tenant's pending invitations, newest first.
    pub async fn invites(&self, tenant: &str) -> Result<Vec<InviteInfo>, StoreError> {
        let rows = self
            .db
            .query(
                "SELECT id, email, role, invited_by, created_at, expires_at FROM invites
                 WHERE tenant_id = $1 AND accepted_at IS NULL AND revoked_at IS NULL
                 AND expires_at > $2 ORDER BY created_at DESC, id",
                params![tenant, now()],
            )
            .await?;
        rows.iter()
            .map(|r| {
                Ok(InviteInfo {
                    id: r.text(0)?,
                    email: r.text(1)?,
                    role: role_at(r, 2)?,
                    invited_by: r.text(3)?,
                    created_at: r.int(4)?,
                    expires_at: r.int(5)?,
                })
            })
            .collect()
    }

    /// Withdraw a pending invitation; false when the tenant has none by that id.
    pub async fn revoke_invite(
        &self,
        tenant: &str,
        by: &str,
        id: &str,
    ) -> Result<bool, StoreError> {
        self.retry_conflicts(|mut tx| async move {
            let changed = tx
                .execute(
                    "UPDATE invites SET revoked_at = $3 WHERE id = $1 AND tenant_id = $2
                     AND accepted_at IS NULL AND revoked_at IS NULL",
                    params![id, tenant, now()],
                )
                .await?;
            if changed == 1 {
                audit::record(tx.as_mut(), tenant, Some(by), "invite.revoke", id, "").await?;
                tx.commit().await?;
            }
            Ok(changed == 1)
        })
        .await
    }

    /// Accept the invitation whose code hashes to `code_hash`: the user joins its tenant
    /// with its role; the code works once. Returns the tenant joined.
    pub async fn join(
        &self,
        user_id: &str,
        code_hash: &[u8; 32],
    ) -> Result<Result<Membership, Refused>, StoreError> {
        self.retry_conflicts(|mut tx| async move {
            let t = now();
            let Some(inv) = query_opt(
                tx.as_mut(),
                "SELECT i.id, i.tenant_id, i.role, t.name, i.email FROM invites i JOIN tenants t ON t.id = i.tenant_id
                 WHERE i.code_sha256 = $1 AND i.accepted_at IS NULL AND i.revoked_at IS NULL
                 AND i.expires_at > $2",
                params![code_hash, t],
            )
            .await?
            else {
                return Ok(Err(Refused::NotFound));
            };
            let (id, tenant, role, name) = (inv.text(0)?, inv.text(1)?, role_at(&inv, 2)?, inv.text(3)?);
            // An invitation is for the address it was mailed to: a code forwarded, leaked
            // or read over a shoulder joins no one else (a wallet-only user has none).
            let own = query_opt(tx.as_mut(), "SELECT email FROM users WHERE id = $1", params![user_id])
                .await?
                .map(|r| r.opt_text(0))
                .transpose()?
                .flatten();
            let invited = inv.text(4)?;
            if !own.is_some_and(|e| e.trim().eq_ignore_ascii_case(invited.trim())) {
                return Ok(Err(Refused::OtherAddress));
            }
            let already = query_opt(
                tx.as_mut(),
                "SELECT 1 FROM members WHERE tenant_id = $1 AND user_id = $2",
                params![&tenant, user_id],
            )
            .await?;
            if already.is_some() {
                return Ok(Err(Refused::AlreadyMember));
            }
            tx.execute(
                "INSERT INTO members (tenant_id, user_id, role, created_at) VALUES ($1, $2, $3, $4)",
                params![&tenant, user_id, role.as_str(), t],
            )
            .await?;
            tx.execute(
                "UPDATE invites SET accepted_by = $2, accepted_at = $3 WHERE id = $1",
                params![&id, user_id, t],
            )
            .await?;
            audit::record(tx.as_mut(), &tenant, Some(user_id), "member.join", user_id, role.as_str()).await?;
            tx.commit().await?;
            Ok(Ok(Membership { tenant_id: tenant, name, role }))
        })
        .await
    }
}

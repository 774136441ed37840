//! Team routes (`/v1/team*`): members and roles, invitations by emailed code, and which
//! tenant the session acts in. Owners manage; every member reads; each change is audited
//! by the store in its own transaction.

use super::{bad, json_reply, member_of, parse, require, session};
use crate::console::{db, email, random_token, Console};
use crate::crypto::sha256;
use crate::errors::ApiError;
use crate::handlers::Request;
use crate::reply::Reply;
use crate::store::team::{
    InviteInfo, Refused, Role, INVITE_MAIL_WINDOW_SECS, MAX_INVITE_MAILS_PER_ADDRESS,
    MAX_INVITE_MAILS_PER_TENANT,
};
use serde::Deserialize;
use serde_json::json;

/// How long an invitation's code works.
const INVITE_TTL_SECS: i64 = 7 * 86_400;

/// `GET /v1/team`: the tenant the session acts in, the member's role, every member, and
/// (for an owner) the pending invitations.
pub(super) async fn show(console: &Console, req: &Request<'_>) -> Result<Reply, ApiError> {
    let m = member_of(console, session(req)?).await?;
    let members = db(console.store.members(&m.tenant_id)).await?;
    let invites = if m.role.manages_team() {
        db(console.store.invites(&m.tenant_id)).await?
    } else {
        Vec::new()
    };
    let name = db(console.store.tenant(&m.tenant_id))
        .await?
        .map(|t| t.name)
        .unwrap_or_default();
    let members: Vec<_> = members
        .iter()
        .map(|x| {
            json!({
                "user_id": x.user_id,
                "name": x.name,
                "role": x.role,
                "joined_at": super::super::rfc3339(x.joined_at),
                "you": x.user_id == m.user.id,
            })
        })
        .collect();
    json_reply(
        200,
        json!({
            "tenant": {"id": m.tenant_id, "name": name},
            "role": m.role,
            "members": members,
            "invites": invites.iter().map(invite_json).collect::<Vec<_>>(),
        }),
    )
}

fn invite_json(i: &InviteInfo) -> serde_json::Value {
    json!({
        "id": i.id,
        "email": i.email,
        "role": i.role,
        "invited_by": i.invited_by,
        "created_at": super::super::rfc3339(i.created_at),
        "expires_at": super::super::rfc3339(i.expires_at),
    })
}

#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
struct NewInvite {
    email: String,
    role: String,
}

fn role_of(raw: &str) -> Result<Role, ApiError> {
    Role::parse(raw).ok_or_else(|| bad("invalid_request", "role is owner, developer or viewer"))
}

fn refused(r: Refused) -> ApiError {
    match r {
        Refused::NotFound => ApiError::new(404, "not_found", "no such member or invitation"),
        Refused::LastOwner => ApiError::new(409, "last_owner", "a team keeps at least one owner"),
        Refused::HomeTenant => ApiError::new(
            409,
            "home_tenant",
            "a user stays a member of the tenant made at its sign-up",
        ),
        Refused::AlreadyMember => {
            ApiError::new(409, "already_member", "already a member of this team")
        }
        Refused::OtherAddress => ApiError::new(
            403,
            "invite_for_another_address",
            "this invitation was sent to another email address: sign in with that address to accept it",
        ),
        Refused::TooMany => ApiError::new(
            409,
            "too_many_invites",
            "the team has as many members and pending invitations as it may",
        ),
        Refused::TooManyMails { to_address } => {
            let (why, max) = if to_address {
                (
                    "this address was invited too often lately",
                    MAX_INVITE_MAILS_PER_ADDRESS,
                )
            } else {
                (
                    "this team sent too many invitations lately",
                    MAX_INVITE_MAILS_PER_TENANT,
                )
            };
            super::too_many(
                "too_many_invites",
                &format!("{why} (at most {max} an hour); wait a while"),
                INVITE_MAIL_WINDOW_SECS,
            )
        }
    }
}

/// `POST /v1/team/invites` `{"email", "role"}`: email an invitation code (owners only).
/// The code is in the email alone, stored hashed; an earlier invitation of the address
/// is replaced.
pub(super) async fn invite(console: &Console, req: &Request<'_>) -> Result<Reply, ApiError> {
    let m = member_of(console, session(req)?).await?;
    require(&m, Role::manages_team, "invite members")?;
    let asked: NewInvite = parse(&req.body)?;
    let role = role_of(&asked.role)?;
    let to = email::normalize(&asked.email)
        .ok_or_else(|| bad("invalid_email", "not a valid email address"))?;
    if !console.mailer.enabled() {
        return Err(ApiError::new(
            503,
            "email_disabled",
            "email delivery is not configured",
        ));
    }
    let code = format!("inv_{}", random_token(24));
    let made = db(console.store.invite(
        &m.tenant_id,
        &m.user.id,
        &to,
        role,
        &sha256(&code),
        INVITE_TTL_SECS,
    ))
    .await?
    .map_err(refused)?;
    let team = db(console.store.tenant(&m.tenant_id))
        .await?
        .map(|t| t.name)
        .unwrap_or_default();
    let sent = console
        .mailer
        .send_invite(&to, &team, role.as_str(), &code, INVITE_TTL_SECS)
        .await;
    if let Err(e) = sent {
        log::warn!("team invitation not delivered: {e}");
        let _ = db(console
            .store
            .revoke_invite(&m.tenant_id, &m.user.id, &made.id))
        .await;
        return Err(ApiError::new(
            502,
            "email_delivery_failed",
            "the invitation could not be sent",
        ));
    }
    json_reply(201, invite_json(&made))
}

/// `DELETE /v1/team/invites/{id}`: withdraw a pending invitation (owners only).
pub(super) async fn revoke_invite(console: &Console, req: &Request<'_>) -> Result<Reply, ApiError> {
    let m = member_of(console, session(req)?).await?;
    require(&m, Role::manages_team, "withdraw invitations")?;
    let id = req.params.first().cloned().unwrap_or_default();
    if !db(console.store.revoke_invite(&m.tenant_id, &m.user.id, &id)).await? {
        return Err(refused(Refused::NotFound));
    }
    Ok(Reply::empty(204))
}

#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
struct Join {
    code: String,
}

/// `POST /v1/team/join` `{"code"}`: accept an invitation; the session then acts in the
/// team joined.
pub(super) async fn join(console: &Console, req: &Request<'_>) -> Result<Reply, ApiError> {
    let s = session(req)?;
    let code = parse::<Join>(&req.body)?.code;
    let invalid = || {
        ApiError::new(
            404,
            "invalid_invite",
            "no such invitation, or it was used, withdrawn or expired",
        )
    };
    // No code is that long: refused like any wrong code, without hashing it.
    if code.len() > 128 {
        return Err(invalid());
    }
    let joined = db(console.store.join(&s.user_id, &sha256(code.trim())))
        .await?
        .map_err(|r| match r {
            Refused::NotFound => invalid(),
            other => refused(other),
        })?;
    db(console
        .store
        .switch_tenant(&s.token_hash, &s.user_id, &joined.tenant_id))
    .await?;
    json_reply(200, json!(joined))
}

#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
struct RoleChange {
    role: String,
}

/// `PATCH /v1/team/members/{user_id}` `{"role"}` (owners only).
pub(super) async fn set_role(console: &Console, req: &Request<'_>) -> Result<Reply, ApiError> {
    let m = member_of(console, session(req)?).await?;
    require(&m, Role::manages_team, "change roles")?;
    let role = role_of(&parse::<RoleChange>(&req.body)?.role)?;
    let user = req.params.first().cloned().unwrap_or_default();
    db(console
        .store
        .set_role(&m.tenant_id, &m.user.id, &user, role))
    .await?
    .map_err(refused)?;
    json_reply(200, json!({"user_id": user, "role": role}))
}

/// `DELETE /v1/team/members/{user_id}`: an owner removes a member, or a member leaves
/// (its own id). Keys the member made stay the team's.
pub(super) async fn remove(console: &Console, req: &Request<'_>) -> Result<Reply, ApiError> {
    let m = member_of(console, session(req)?).await?;
    let user = req.params.first().cloned().unwrap_or_default();
    if user != m.user.id {
        require(&m, Role::manages_team, "remove members")?;
    }
    db(console.store.remove_member(&m.tenant_id, &m.user.id, &user))
        .await?
        .map_err(refused)?;
    Ok(Reply::empty(204))
}

#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
struct Switch {
    tenant_id: String,
}

/// `POST /v1/team/switch` `{"tenant_id"}`: act in another tenant the user belongs to.
pub(super) async fn switch(console: &Console, req: &Request<'_>) -> Result<Reply, ApiError> {
    let s = session(req)?;
    let to = parse::<Switch>(&req.body)?.tenant_id;
    if !db(console.store.switch_tenant(&s.token_hash, &s.user_id, &to)).await? {
        return Err(ApiError::new(
            404,
            "not_found",
            "not a member of that tenant",
        ));
    }
    let m = db(console.store.member(&s.user_id, Some(&to)))
        .await?
        .ok_or_else(|| ApiError::internal("session without a user"))?;
    json_reply(200, json!({"tenant_id": m.tenant_id, "role": m.role}))
}

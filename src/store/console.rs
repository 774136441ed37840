//! Console tables: users and their sign-in identities, and the keys console users make
//! (sessions are `sessions`). One-time codes and wallet challenges are `sign_in`.

use super::audit;
use super::sql::{params, query_opt, Row, StoreError, Tx};
use super::{now, now_us, parse_list, KeyInfo, Store};
use crate::crypto::sha256;
use crate::key_restrictions::RestrictionsDoc;

pub use super::sessions::SessionRow;
pub use super::sign_in::{Challenge, ChallengeBounds, CodeBounds, CodeCheck, GuessGuard, Issued};

/// How a person signed in; each maps to one user.
#[derive(Debug, Clone)]
pub enum Identity {
    Email(String),
    WalletEvm(String),
    WalletSolana(String),
    /// An OIDC subject with the provider-verified email and profile.
    Google {
        sub: String,
        email: Option<String>,
        name: Option<String>,
        picture: Option<String>,
    },
}

impl Identity {
    pub fn provider(&self) -> &'static str {
        match self {
            Identity::Email(_) => "email",
            Identity::WalletEvm(_) => "wallet_evm",
            Identity::WalletSolana(_) => "wallet_solana",
            Identity::Google { .. } => "google",
        }
    }
    fn column(&self) -> &'static str {
        match self {
            Identity::Email(_) => "email",
            Identity::WalletEvm(_) => "wallet_evm",
            Identity::WalletSolana(_) => "wallet_solana",
            Identity::Google { .. } => "google_sub",
        }
    }
    fn value(&self) -> &str {
        match self {
            Identity::Email(v) | Identity::WalletEvm(v) | Identity::WalletSolana(v) => v,
            Identity::Google { sub, .. } => sub,
        }
    }
}

#[derive(Debug, Clone)]
pub struct UserRow {
    pub id: String,
    pub tenant_id: String,
    pub email: Option<String>,
    pub display_name: Option<String>,
    pub avatar_url: Option<String>,
    pub created_at: i64,
    pub updated_at: i64,
}

/// Most keys one user may hold at once.
pub const MAX_KEYS_PER_USER: i64 = 25;

impl Store {
    /// The user behind an identity, created (with its own tenant on `plan`) on first
    /// sign-in. One transaction, so concurrent first sign-ins make one user.
    pub async fn user_for(&self, id: &Identity, plan: &str) -> Result<String, StoreError> {
        self.retry_conflicts(|mut tx| async move {
            let user = user_for_in(tx.as_mut(), id, plan).await?;
            tx.commit().await?;
            Ok(user)
        })
        .await
    }

    pub async fn user(&self, user_id: &str) -> Result<Option<UserRow>, StoreError> {
        let Some(r) = self
            .query_opt(
                "SELECT id, tenant_id, email, display_name, avatar_url, created_at, updated_at
                 FROM users WHERE id = $1",
                params![user_id],
            )
            .await?
        else {
            return Ok(None);
        };
        Ok(Some(UserRow {
            id: r.text(0)?,
            tenant_id: r.text(1)?,
            email: r.opt_text(2)?,
            display_name: r.opt_text(3)?,
            avatar_url: r.opt_text(4)?,
            created_at: r.int(5)?,
            updated_at: r.int(6)?,
        }))
    }

    /// The user's active default key, creating one if there is none. Returns the key and,
    /// when it was just created, its raw secret; `None` when there is none and the user
    /// already holds `MAX_KEYS_PER_USER` keys (the default counts among them). Atomic: two
    /// concurrent first calls get the same key (and the partial unique index forbids a
    /// second default).
    pub async fn bootstrap_default_key(
        &self,
        user: &UserRow,
        scopes: &[String],
    ) -> Result<Option<(KeyInfo, Option<String>)>, StoreError> {
        self.retry_conflicts(|mut tx| async move {
            let existing = query_opt(
                tx.as_mut(),
                &format!(
                    "{KEY_COLUMNS} WHERE user_id = $1 AND is_default = 1 AND revoked_at IS NULL"
                ),
                params![&user.id],
            )
            .await?;
            if let Some(k) = existing {
                tx.commit().await?;
                return Ok(Some((key_info(&k)?, None)));
            }
            if active_keys(tx.as_mut(), &user.id, &user.tenant_id).await? >= MAX_KEYS_PER_USER {
                return Ok(None);
            }
            let (id, raw) = insert_key(
                tx.as_mut(),
                &user.tenant_id,
                Some(&user.id),
                "default",
                scopes,
                true,
                None,
            )
            .await?;
            audit_created(
                tx.as_mut(),
                &user.tenant_id,
                Some(&user.id),
                &id,
                "default",
                scopes,
                None,
            )
            .await?;
            let k = key_by_id(tx.as_mut(), &id).await?;
            tx.commit().await?;
            Ok(Some((k, Some(raw))))
        })
        .await
    }

    /// Active keys console users made in a tenant (the operator's CLI keys are not
    /// listed).
    pub async fn tenant_keys(&self, tenant: &str) -> Result<Vec<KeyInfo>, StoreError> {
        let rows = self
            .db
            .query(
                &format!(
                    "{KEY_COLUMNS} WHERE tenant_id = $1 AND user_id IS NOT NULL AND revoked_at IS NULL ORDER BY {KEY_ORDER}"
                ),
                params![tenant],
            )
            .await?;
        rows.iter().map(key_info).collect()
    }

    /// Create a key for a user in a tenant; `None` when the user already holds the
    /// maximum there.
    pub async fn create_user_key(
        &self,
        tenant: &str,
        user_id: &str,
        name: &str,
        scopes: &[String],
        restrictions: &RestrictionsDoc,
    ) -> Result<Option<(KeyInfo, String)>, StoreError> {
        let restrictions = stored(restrictions);
        let restrictions = restrictions.as_deref();
        self.retry_conflicts(|mut tx| async move {
            if active_keys(tx.as_mut(), user_id, tenant).await? >= MAX_KEYS_PER_USER {
                return Ok(None);
            }
            let (id, raw) = insert_key(
                tx.as_mut(),
                tenant,
                Some(user_id),
                name,
                scopes,
                false,
                restrictions,
            )
            .await?;
            audit_created(
                tx.as_mut(),
                tenant,
                Some(user_id),
                &id,
                name,
                scopes,
                restrictions,
            )
            .await?;
            let k = key_by_id(tx.as_mut(), &id).await?;
            tx.commit().await?;
            Ok(Some((k, raw)))
        })
        .await
    }

    /// Rename one of a tenant's active console keys and/or replace its restrictions
    /// (`actor` is audited): the key as it is now and its hash (for the key cache), or
    /// `None` when the tenant has no such active key.
    pub async fn update_user_key(
        &self,
        tenant: &str,
        actor: &str,
        key_id: &str,
        name: Option<&str>,
        restrictions: Option<&RestrictionsDoc>,
    ) -> Result<Option<(KeyInfo, [u8; 32])>, StoreError> {
        let restrictions = restrictions.map(stored);
        self.retry_conflicts(|mut tx| {
            let restrictions = restrictions.clone();
            async move {
                let Some((hash, _)) = active_tenant_key(tx.as_mut(), key_id, tenant).await? else {
                    return Ok(None);
                };
                let user = Some(actor);
                if let Some(name) = name {
                    tx.execute(
                        "UPDATE api_keys SET name = $2 WHERE id = $1",
                        params![key_id, name],
                    )
                    .await?;
                    audit::record(tx.as_mut(), tenant, user, "key.rename", key_id, name).await?;
                }
                if let Some(r) = restrictions {
                    tx.execute(
                        "UPDATE api_keys SET restrictions = $2 WHERE id = $1",
                        params![key_id, r.as_deref()],
                    )
                    .await?;
                    let detail = r.as_deref().unwrap_or("none");
                    audit::record(tx.as_mut(), tenant, user, "key.restrict", key_id, detail)
                        .await?;
                }
                let k = key_by_id(tx.as_mut(), key_id).await?;
                tx.commit().await?;
                Ok(Some((k, hash.try_into().unwrap_or([0; 32]))))
            }
        })
        .await
    }

    /// Revoke one of a tenant's active console keys; returns its hash (for the key
    /// cache), or `None` when the tenant has no such active key.
    pub async fn revoke_user_key(
        &self,
        tenant: &str,
        actor: &str,
        key_id: &str,
    ) -> Result<Option<[u8; 32]>, StoreError> {
        self.retry_conflicts(|mut tx| async move {
            let Some((hash, name)) = active_tenant_key(tx.as_mut(), key_id, tenant).await? else {
                return Ok(None);
            };
            tx.execute(
                "UPDATE api_keys SET revoked_at = $2 WHERE id = $1",
                params![key_id, now()],
            )
            .await?;
            audit::record(
                tx.as_mut(),
                tenant,
                Some(actor),
                "key.revoke",
                key_id,
                &name,
            )
            .await?;
            tx.commit().await?;
            Ok(hash.try_into().ok())
        })
        .await
    }

    /// Replace one of a tenant's console keys by a new secret with the same name, scopes,
    /// restrictions and maker. The old key is revoked; a default key's replacement is the
    /// default (so rotating never adds a key to the user's count). Returns (new key, raw,
    /// old hash).
    pub async fn rotate_user_key(
        &self,
        tenant: &str,
        actor: &str,
        key_id: &str,
    ) -> Result<Option<(KeyInfo, String, [u8; 32])>, StoreError> {
        self.retry_conflicts(|mut tx| async move {
            let old = query_opt(
                tx.as_mut(),
                "SELECT name, scopes, secret_sha256, restrictions, user_id, is_default FROM api_keys
                 WHERE id = $1 AND tenant_id = $2 AND user_id IS NOT NULL AND revoked_at IS NULL",
                params![key_id, tenant],
            )
            .await?;
            let Some(old) = old else {
                return Ok(None);
            };
            let (name, scopes, hash) = (old.text(0)?, old.text(1)?, old.bytes(2)?);
            let (restrictions, maker) = (old.opt_text(3)?, old.text(4)?);
            let is_default = old.int(5)? != 0;
            tx.execute(
                "UPDATE api_keys SET revoked_at = $2 WHERE id = $1",
                params![key_id, now()],
            )
            .await?;
            let (id, raw) = insert_key(
                tx.as_mut(),
                tenant,
                Some(&maker),
                &name,
                &parse_list(&scopes),
                is_default,
                restrictions.as_deref(),
            )
            .await?;
            let detail = format!("{name}: replaced by {id}");
            audit::record(
                tx.as_mut(),
                tenant,
                Some(actor),
                "key.rotate",
                key_id,
                &detail,
            )
            .await?;
            let k = key_by_id(tx.as_mut(), &id).await?;
            tx.commit().await?;
            let hash: [u8; 32] = hash.try_into().unwrap_or([0; 32]);
            Ok(Some((k, raw, hash)))
        })
        .await
    }
}

/// How many active keys a user holds in a tenant, inside a transaction.
async fn active_keys(tx: &mut dyn Tx, user_id: &str, tenant: &str) -> Result<i64, StoreError> {
    Ok(query_opt(
        tx,
        "SELECT COUNT(*) FROM api_keys WHERE user_id = $1 AND tenant_id = $2 AND revoked_at IS NULL",
        params![user_id, tenant],
    )
    .await?
    .map(|r| r.int(0))
    .transpose()?
    .unwrap_or(0))
}

/// One of a tenant's active console keys inside a transaction: its hash and name.
async fn active_tenant_key(
    tx: &mut dyn Tx,
    key_id: &str,
    tenant: &str,
) -> Result<Option<(Vec<u8>, String)>, StoreError> {
    let row = query_opt(
        tx,
        "SELECT secret_sha256, name FROM api_keys
         WHERE id = $1 AND tenant_id = $2 AND user_id IS NOT NULL AND revoked_at IS NULL",
        params![key_id, tenant],
    )
    .await?;
    row.map(|r| Ok((r.bytes(0)?, r.text(1)?))).transpose()
}

/// `user_for` inside its transaction.
async fn user_for_in(tx: &mut dyn Tx, id: &Identity, plan: &str) -> Result<String, StoreError> {
    let sql = format!("SELECT id FROM users WHERE {} = $1", id.column());
    if let Some(r) = query_opt(tx, &sql, params![id.value()]).await? {
        return r.text(0);
    }
    let t = now();
    if let Identity::Google {
        sub,
        email: Some(email),
        name,
        picture,
    } = id
    {
        // The provider verified this email: an existing email user is the same person.
        if let Some(r) = query_opt(
            tx,
            "SELECT id FROM users WHERE email = $1 AND google_sub IS NULL",
            params![email],
        )
        .await?
        {
            let user = r.text(0)?;
            tx.execute(
                "UPDATE users SET google_sub = $2, display_name = COALESCE(display_name, $3),
                 avatar_url = COALESCE(avatar_url, $4), updated_at = $5 WHERE id = $1",
                params![&user, sub, name.as_deref(), picture.as_deref(), t],
            )
            .await?;
            return Ok(user);
        }
    }
    let tenant = uuid::Uuid::new_v4().to_string();
    let user = uuid::Uuid::new_v4().to_string();
    tx.execute(
        "INSERT INTO tenants (id, name, plan, created_at) VALUES ($1, $2, $3, $4)",
        params![&tenant, id.value(), plan, t],
    )
    .await?;
    tx.execute(
        &format!(
            "INSERT INTO users (id, tenant_id, {}, created_at, updated_at) VALUES ($1, $2, $3, $4, $4)",
            id.column()
        ),
        params![&user, &tenant, id.value(), t],
    )
    .await?;
    tx.execute(
        "INSERT INTO members (tenant_id, user_id, role, created_at) VALUES ($1, $2, 'owner', $3)",
        params![&tenant, &user, t],
    )
    .await?;
    if let Identity::Google {
        email,
        name,
        picture,
        ..
    } = id
    {
        tx.execute(
            "UPDATE users SET display_name = $2, avatar_url = $3 WHERE id = $1",
            params![&user, name.as_deref(), picture.as_deref()],
        )
        .await?;
        // Unless another account already holds that email.
        if let Some(email) = email {
            tx.execute(
                "UPDATE users SET email = $2 WHERE id = $1
                 AND NOT EXISTS (SELECT 1 FROM users WHERE email = $2)",
                params![&user, email],
            )
            .await?;
        }
    }
    Ok(user)
}

/// A key as listed; its last use is the newest minute its usage holds, or past the
/// minutes' retention the newest hour.
pub(super) const KEY_COLUMNS: &str =
    "SELECT id, name, prefix, scopes, is_default, created_at, revoked_at, restrictions,
        COALESCE((SELECT MAX(minute) FROM key_usage_minutes WHERE key_id = api_keys.id),
                 (SELECT MAX(hour) FROM key_usage_hours WHERE key_id = api_keys.id)),
        user_id
     FROM api_keys";

/// Keys in the order they were made.
pub(super) const KEY_ORDER: &str = "created_at, created_us, id";

pub(super) fn key_info(r: &Row) -> Result<KeyInfo, StoreError> {
    Ok(KeyInfo {
        id: r.text(0)?,
        name: r.text(1)?,
        key_prefix: r.text(2)?,
        scopes: parse_list(&r.text(3)?),
        is_default: r.int(4)? != 0,
        created_at: r.int(5)?,
        revoked: !r.is_null(6)?,
        restrictions: r
            .opt_text(7)?
            .and_then(|t| serde_json::from_str(&t).ok())
            .unwrap_or_default(),
        last_used_at: r.opt_int(8)?,
        created_by: r.opt_text(9)?,
    })
}

/// A new key in its tenant's audit log: its name, scopes and restrictions.
pub(super) async fn audit_created(
    tx: &mut dyn Tx,
    tenant: &str,
    user: Option<&str>,
    id: &str,
    name: &str,
    scopes: &[String],
    restrictions: Option<&str>,
) -> Result<(), StoreError> {
    let detail = format!(
        "{name} ({}){}",
        scopes.join(", "),
        restrictions.map_or(String::new(), |r| format!(", restricted to {r}"))
    );
    audit::record(tx, tenant, user, "key.create", id, &detail).await
}

/// Restrictions as stored: JSON, or NULL when they restrict nothing.
pub(super) fn stored(r: &RestrictionsDoc) -> Option<String> {
    (!r.is_empty()).then(|| serde_json::to_string(r).unwrap_or_default())
}

async fn key_by_id(tx: &mut dyn Tx, id: &str) -> Result<KeyInfo, StoreError> {
    let r = query_opt(tx, &format!("{KEY_COLUMNS} WHERE id = $1"), params![id])
        .await?
        .ok_or_else(|| StoreError::other("key just inserted is missing"))?;
    key_info(&r)
}

pub(super) async fn insert_key(
    tx: &mut dyn Tx,
    tenant: &str,
    user: Option<&str>,
    name: &str,
    scopes: &[String],
    is_default: bool,
    restrictions: Option<&str>,
) -> Result<(String, String), StoreError> {
    let id = uuid::Uuid::new_v4().to_string();
    let raw = super::new_key_secret();
    let prefix: String = raw.chars().take(10).collect();
    tx.execute(
        "INSERT INTO api_keys (id, tenant_id, user_id, name, prefix, secret_sha256, scopes, is_default, created_at, created_us, restrictions)
         VALUES ($1, $2, $3, $4, $5, $6, $7, $8, $9, $10, $11)",
        params![
            &id,
            tenant,
            user,
            name,
            prefix,
            &sha256(&raw),
            serde_json::to_string(scopes).unwrap_or_else(|_| "[]".into()),
            is_default,
            now(),
            now_us(),
            restrictions
        ],
    )
    .await?;
    Ok((id, raw))
}

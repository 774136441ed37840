//! Console tables: users and their sign-in identities, sessions (hashed tokens), one-time
//! email codes (hashed), wallet sign-in challenges, and per-user keys.

use super::{now, parse_list, KeyInfo, Store};
use crate::crypto::sha256;
use rusqlite::{params, OptionalExtension, TransactionBehavior};

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

#[derive(Debug, Clone)]
pub struct SessionRow {
    pub user_id: String,
    pub provider: String,
    pub expires_at: i64,
    pub revoked: bool,
}

/// Outcome of checking a one-time code.
#[derive(Debug, PartialEq)]
pub enum CodeCheck {
    Ok,
    /// Wrong code; attempts left on the current code.
    Wrong,
    Expired,
    TooManyAttempts,
    /// No code was requested (or all were used).
    NoCode,
}

pub struct Challenge {
    pub kind: String,
    pub subject: String,
    pub message: String,
    pub expires_at: i64,
}

/// Most keys one user may hold at once.
pub const MAX_KEYS_PER_USER: i64 = 25;

impl Store {
    /// The user behind an identity, created (with its own tenant on `plan`) on first
    /// sign-in. One transaction, so concurrent first sign-ins make one user.
    pub fn user_for(&mut self, id: &Identity, plan: &str) -> rusqlite::Result<String> {
        let tx = self
            .conn
            .transaction_with_behavior(TransactionBehavior::Immediate)?;
        let sql = format!("SELECT id FROM users WHERE {} = ?1", id.column());
        if let Some(user) = tx
            .query_row(&sql, [id.value()], |r| r.get::<_, String>(0))
            .optional()?
        {
            tx.commit()?;
            return Ok(user);
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
            if let Some(user) = tx
                .query_row(
                    "SELECT id FROM users WHERE email = ?1 AND google_sub IS NULL",
                    [email],
                    |r| r.get::<_, String>(0),
                )
                .optional()?
            {
                tx.execute(
                    "UPDATE users SET google_sub = ?2, display_name = COALESCE(display_name, ?3),
                     avatar_url = COALESCE(avatar_url, ?4), updated_at = ?5 WHERE id = ?1",
                    params![user, sub, name, picture, t],
                )?;
                tx.commit()?;
                return Ok(user);
            }
        }
        let tenant = uuid::Uuid::new_v4().to_string();
        let user = uuid::Uuid::new_v4().to_string();
        tx.execute(
            "INSERT INTO tenants (id, name, plan, created_at) VALUES (?1, ?2, ?3, ?4)",
            params![tenant, id.value(), plan, t],
        )?;
        tx.execute(
            &format!(
                "INSERT INTO users (id, tenant_id, {}, created_at, updated_at) VALUES (?1, ?2, ?3, ?4, ?4)",
                id.column()
            ),
            params![user, tenant, id.value(), t],
        )?;
        if let Identity::Google {
            email,
            name,
            picture,
            ..
        } = id
        {
            tx.execute(
                "UPDATE users SET display_name = ?2, avatar_url = ?3 WHERE id = ?1",
                params![user, name, picture],
            )?;
            // Unless another account already holds that email.
            tx.execute(
                "UPDATE OR IGNORE users SET email = ?2 WHERE id = ?1",
                params![user, email],
            )?;
        }
        tx.commit()?;
        Ok(user)
    }

    pub fn user(&self, user_id: &str) -> rusqlite::Result<Option<UserRow>> {
        self.conn
            .query_row(
                "SELECT id, tenant_id, email, display_name, avatar_url, created_at, updated_at
                 FROM users WHERE id = ?1",
                [user_id],
                |r| {
                    Ok(UserRow {
                        id: r.get(0)?,
                        tenant_id: r.get(1)?,
                        email: r.get(2)?,
                        display_name: r.get(3)?,
                        avatar_url: r.get(4)?,
                        created_at: r.get(5)?,
                        updated_at: r.get(6)?,
                    })
                },
            )
            .optional()
    }

    pub fn create_session(
        &self,
        token_hash: &[u8; 32],
        user_id: &str,
        provider: &str,
        expires_at: i64,
    ) -> rusqlite::Result<()> {
        self.conn.execute(
            "INSERT INTO sessions (token_sha256, user_id, provider, created_at, expires_at)
             VALUES (?1, ?2, ?3, ?4, ?5)",
            params![&token_hash[..], user_id, provider, now(), expires_at],
        )?;
        Ok(())
    }

    pub fn session(&self, token_hash: &[u8; 32]) -> rusqlite::Result<Option<SessionRow>> {
        self.conn
            .query_row(
                "SELECT user_id, provider, expires_at, revoked_at FROM sessions WHERE token_sha256 = ?1",
                [&token_hash[..]],
                |r| {
                    Ok(SessionRow {
                        user_id: r.get(0)?,
                        provider: r.get(1)?,
                        expires_at: r.get(2)?,
                        revoked: r.get::<_, Option<i64>>(3)?.is_some(),
                    })
                },
            )
            .optional()
    }

    pub fn extend_session(&self, token_hash: &[u8; 32], expires_at: i64) -> rusqlite::Result<bool> {
        Ok(self.conn.execute(
            "UPDATE sessions SET expires_at = ?2 WHERE token_sha256 = ?1 AND revoked_at IS NULL",
            params![&token_hash[..], expires_at],
        )? == 1)
    }

    pub fn revoke_session(&self, token_hash: &[u8; 32]) -> rusqlite::Result<()> {
        self.conn.execute(
            "UPDATE sessions SET revoked_at = ?2 WHERE token_sha256 = ?1 AND revoked_at IS NULL",
            params![&token_hash[..], now()],
        )?;
        Ok(())
    }

    /// The user's active default key, creating one if there is none. Returns the key and,
    /// when it was just created, its raw secret. Atomic: two concurrent first calls get
    /// the same key (and the partial unique index forbids a second default).
    pub fn bootstrap_default_key(
        &mut self,
        user: &UserRow,
        scopes: &[String],
    ) -> rusqlite::Result<(KeyInfo, Option<String>)> {
        let tx = self
            .conn
            .transaction_with_behavior(TransactionBehavior::Immediate)?;
        let existing = tx
            .query_row(
                &format!(
                    "{KEY_COLUMNS} WHERE user_id = ?1 AND is_default = 1 AND revoked_at IS NULL"
                ),
                [&user.id],
                key_info,
            )
            .optional()?;
        if let Some(k) = existing {
            tx.commit()?;
            return Ok((k, None));
        }
        let (id, raw) = insert_key(
            &tx,
            &user.tenant_id,
            Some(&user.id),
            "default",
            scopes,
            true,
        )?;
        let k = tx.query_row(&format!("{KEY_COLUMNS} WHERE id = ?1"), [&id], key_info)?;
        tx.commit()?;
        Ok((k, Some(raw)))
    }

    /// Active keys of one user.
    pub fn user_keys(&self, user_id: &str) -> rusqlite::Result<Vec<KeyInfo>> {
        let mut st = self.conn.prepare(&format!(
            "{KEY_COLUMNS} WHERE user_id = ?1 AND revoked_at IS NULL ORDER BY created_at, rowid"
        ))?;
        let rows = st.query_map([user_id], key_info)?;
        rows.collect()
    }

    /// Create a key for a user; `None` when the user already holds the maximum.
    pub fn create_user_key(
        &mut self,
        user: &UserRow,
        name: &str,
        scopes: &[String],
    ) -> rusqlite::Result<Option<(KeyInfo, String)>> {
        let tx = self
            .conn
            .transaction_with_behavior(TransactionBehavior::Immediate)?;
        let active: i64 = tx.query_row(
            "SELECT COUNT(*) FROM api_keys WHERE user_id = ?1 AND revoked_at IS NULL",
            [&user.id],
            |r| r.get(0),
        )?;
        if active >= MAX_KEYS_PER_USER {
            return Ok(None);
        }
        let (id, raw) = insert_key(&tx, &user.tenant_id, Some(&user.id), name, scopes, false)?;
        let k = tx.query_row(&format!("{KEY_COLUMNS} WHERE id = ?1"), [&id], key_info)?;
        tx.commit()?;
        Ok(Some((k, raw)))
    }

    /// Revoke one of the user's active keys; returns its hash (for the key cache), or
    /// `None` when the user has no such active key.
    pub fn revoke_user_key(
        &self,
        user_id: &str,
        key_id: &str,
    ) -> rusqlite::Result<Option<[u8; 32]>> {
        let hash: Option<Vec<u8>> = self
            .conn
            .query_row(
                "SELECT secret_sha256 FROM api_keys WHERE id = ?1 AND user_id = ?2 AND revoked_at IS NULL",
                [key_id, user_id],
                |r| r.get(0),
            )
            .optional()?;
        let Some(hash) = hash else { return Ok(None) };
        self.conn.execute(
            "UPDATE api_keys SET revoked_at = ?2 WHERE id = ?1",
            params![key_id, now()],
        )?;
        Ok(hash.try_into().ok())
    }

    /// Replace one of the user's keys by a new secret with the same name and scopes. The
    /// old key is revoked; the new one is never the default (so `/v1/auth/me` makes a
    /// fresh default after the default was rotated). Returns (new key, raw, old hash).
    pub fn rotate_user_key(
        &mut self,
        user: &UserRow,
        key_id: &str,
    ) -> rusqlite::Result<Option<(KeyInfo, String, [u8; 32])>> {
        let tx = self
            .conn
            .transaction_with_behavior(TransactionBehavior::Immediate)?;
        let old = tx
            .query_row(
                "SELECT name, scopes, secret_sha256 FROM api_keys WHERE id = ?1 AND user_id = ?2 AND revoked_at IS NULL",
                [key_id, &user.id],
                |r| Ok((r.get::<_, String>(0)?, r.get::<_, String>(1)?, r.get::<_, Vec<u8>>(2)?)),
            )
            .optional()?;
        let Some((name, scopes, hash)) = old else {
            return Ok(None);
        };
        tx.execute(
            "UPDATE api_keys SET revoked_at = ?2 WHERE id = ?1",
            params![key_id, now()],
        )?;
        let (id, raw) = insert_key(
            &tx,
            &user.tenant_id,
            Some(&user.id),
            &name,
            &parse_list(&scopes),
            false,
        )?;
        let k = tx.query_row(&format!("{KEY_COLUMNS} WHERE id = ?1"), [&id], key_info)?;
        tx.commit()?;
        let hash: [u8; 32] = hash.try_into().unwrap_or([0; 32]);
        Ok(Some((k, raw, hash)))
    }

    /// Record a new one-time code for `email`; returns how many codes were issued for it
    /// in the last `window` seconds (including this one).
    pub fn store_code(
        &self,
        email: &str,
        code_hash: &[u8; 32],
        ttl: i64,
        window: i64,
    ) -> rusqlite::Result<i64> {
        let t = now();
        self.conn.execute(
            "INSERT INTO login_codes (id, email, code_sha256, created_at, expires_at) VALUES (?1, ?2, ?3, ?4, ?5)",
            params![uuid::Uuid::new_v4().to_string(), email, &code_hash[..], t, t + ttl],
        )?;
        // Old rows are of no use; keep the table small.
        self.conn.execute(
            "DELETE FROM login_codes WHERE expires_at < ?1",
            params![t - 86400],
        )?;
        self.conn.query_row(
            "SELECT COUNT(*) FROM login_codes WHERE email = ?1 AND created_at > ?2",
            params![email, t - window],
            |r| r.get(0),
        )
    }

    /// Check a code against the latest unused code of `email`. A right code is used up;
    /// a wrong one counts an attempt.
    pub fn check_code(
        &mut self,
        email: &str,
        code_hash: &[u8; 32],
        max_attempts: i64,
    ) -> rusqlite::Result<CodeCheck> {
        let tx = self
            .conn
            .transaction_with_behavior(TransactionBehavior::Immediate)?;
        let row = tx
            .query_row(
                "SELECT id, code_sha256, expires_at, attempts FROM login_codes
                 WHERE email = ?1 AND used_at IS NULL ORDER BY created_at DESC, rowid DESC LIMIT 1",
                [email],
                |r| {
                    Ok((
                        r.get::<_, String>(0)?,
                        r.get::<_, Vec<u8>>(1)?,
                        r.get::<_, i64>(2)?,
                        r.get::<_, i64>(3)?,
                    ))
                },
            )
            .optional()?;
        let Some((id, hash, expires_at, attempts)) = row else {
            return Ok(CodeCheck::NoCode);
        };
        let result = if expires_at <= now() {
            CodeCheck::Expired
        } else if attempts >= max_attempts {
            CodeCheck::TooManyAttempts
        } else if crate::crypto::secret_eq(&hash, code_hash) {
            tx.execute(
                "UPDATE login_codes SET used_at = ?2 WHERE id = ?1",
                params![id, now()],
            )?;
            CodeCheck::Ok
        } else {
            tx.execute(
                "UPDATE login_codes SET attempts = attempts + 1 WHERE id = ?1",
                [&id],
            )?;
            CodeCheck::Wrong
        };
        tx.commit()?;
        Ok(result)
    }

    pub fn store_challenge(&self, nonce: &str, c: &Challenge) -> rusqlite::Result<()> {
        let t = now();
        self.conn.execute(
            "DELETE FROM challenges WHERE expires_at < ?1",
            params![t - 3600],
        )?;
        self.conn.execute(
            "INSERT INTO challenges (nonce, kind, subject, message, created_at, expires_at) VALUES (?1, ?2, ?3, ?4, ?5, ?6)",
            params![nonce, c.kind, c.subject, c.message, t, c.expires_at],
        )?;
        Ok(())
    }

    /// Use up a challenge: returns it once, then never again.
    pub fn take_challenge(&mut self, nonce: &str) -> rusqlite::Result<Option<Challenge>> {
        let tx = self
            .conn
            .transaction_with_behavior(TransactionBehavior::Immediate)?;
        let c = tx
            .query_row(
                "SELECT kind, subject, message, expires_at FROM challenges WHERE nonce = ?1 AND used_at IS NULL",
                [nonce],
                |r| {
                    Ok(Challenge {
                        kind: r.get(0)?,
                        subject: r.get(1)?,
                        message: r.get(2)?,
                        expires_at: r.get(3)?,
                    })
                },
            )
            .optional()?;
        if c.is_some() {
            tx.execute(
                "UPDATE challenges SET used_at = ?2 WHERE nonce = ?1",
                params![nonce, now()],
            )?;
        }
        tx.commit()?;
        Ok(c)
    }
}

pub(super) const KEY_COLUMNS: &str =
    "SELECT id, name, prefix, scopes, is_default, created_at, revoked_at FROM api_keys";

pub(super) fn key_info(r: &rusqlite::Row) -> rusqlite::Result<KeyInfo> {
    Ok(KeyInfo {
        id: r.get(0)?,
        name: r.get(1)?,
        key_prefix: r.get(2)?,
        scopes: parse_list(&r.get::<_, String>(3)?),
        is_default: r.get(4)?,
        created_at: r.get(5)?,
        revoked: r.get::<_, Option<i64>>(6)?.is_some(),
    })
}

pub(super) fn insert_key(
    conn: &rusqlite::Connection,
    tenant: &str,
    user: Option<&str>,
    name: &str,
    scopes: &[String],
    is_default: bool,
) -> rusqlite::Result<(String, String)> {
    let id = uuid::Uuid::new_v4().to_string();
    let raw = super::new_key_secret();
    let prefix: String = raw.chars().take(10).collect();
    conn.execute(
        "INSERT INTO api_keys (id, tenant_id, user_id, name, prefix, secret_sha256, scopes, is_default, created_at)
         VALUES (?1, ?2, ?3, ?4, ?5, ?6, ?7, ?8, ?9)",
        params![
            id,
            tenant,
            user,
            name,
            prefix,
            &sha256(&raw)[..],
            serde_json::to_string(scopes).unwrap_or_else(|_| "[]".into()),
            is_default,
            now()
        ],
    )?;
    Ok((id, raw))
}

//! Console sessions: the SHA-256 of each session token, its user, its expiry and the
//! tenant it acts in (`team`).

use super::sql::{params, StoreError};
use super::{now, Store};

#[derive(Debug, Clone)]
pub struct SessionRow {
    pub user_id: String,
    pub provider: String,
    pub expires_at: i64,
    pub revoked: bool,
    /// The tenant it acts in (`store::team`); `None`: the user's own.
    pub tenant_id: Option<String>,
}

impl Store {
    pub async fn create_session(
        &self,
        token_hash: &[u8; 32],
        user_id: &str,
        provider: &str,
        expires_at: i64,
    ) -> Result<(), StoreError> {
        self.db
            .execute(
                "INSERT INTO sessions (token_sha256, user_id, provider, created_at, expires_at)
                 VALUES ($1, $2, $3, $4, $5)",
                params![token_hash, user_id, provider, now(), expires_at],
            )
            .await?;
        Ok(())
    }

    pub async fn session(&self, token_hash: &[u8; 32]) -> Result<Option<SessionRow>, StoreError> {
        let Some(r) = self
            .query_opt(
                "SELECT user_id, provider, expires_at, revoked_at, tenant_id FROM sessions WHERE token_sha256 = $1",
                params![token_hash],
            )
            .await?
        else {
            return Ok(None);
        };
        Ok(Some(SessionRow {
            user_id: r.text(0)?,
            provider: r.text(1)?,
            expires_at: r.int(2)?,
            revoked: !r.is_null(3)?,
            tenant_id: r.opt_text(4)?,
        }))
    }

    pub async fn extend_session(
        &self,
        token_hash: &[u8; 32],
        expires_at: i64,
    ) -> Result<bool, StoreError> {
        Ok(self
            .db
            .execute(
                "UPDATE sessions SET expires_at = $2 WHERE token_sha256 = $1 AND revoked_at IS NULL",
                params![token_hash, expires_at],
            )
            .await?
            == 1)
    }

    pub async fn revoke_session(&self, token_hash: &[u8; 32]) -> Result<(), StoreError> {
        self.db
            .execute(
                "UPDATE sessions SET revoked_at = $2 WHERE token_sha256 = $1 AND revoked_at IS NULL",
                params![token_hash, now()],
            )
            .await?;
        Ok(())
    }
}

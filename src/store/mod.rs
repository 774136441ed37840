//! The embedded SQLite store: tenants, users and API keys. Secrets are stored only as
//! SHA-256 hashes. Callers on the async runtime reach it through `spawn_blocking`.

pub mod console;

use rusqlite::{params, Connection, OptionalExtension};

use std::path::Path;
use std::time::{SystemTime, UNIX_EPOCH};

/// Schema versions, applied in order at open (PRAGMA user_version tracks progress).
const MIGRATIONS: &[&str] = &[
    r#"
CREATE TABLE tenants (
    id TEXT PRIMARY KEY,
    name TEXT NOT NULL,
    plan TEXT NOT NULL,
    trial_ends_at INTEGER,
    subscription_ends_at INTEGER,
    features TEXT NOT NULL DEFAULT '[]',
    created_at INTEGER NOT NULL
);
CREATE TABLE users (
    id TEXT PRIMARY KEY,
    tenant_id TEXT NOT NULL REFERENCES tenants(id),
    email TEXT UNIQUE,
    display_name TEXT,
    avatar_url TEXT,
    created_at INTEGER NOT NULL,
    updated_at INTEGER NOT NULL
);
CREATE TABLE api_keys (
    id TEXT PRIMARY KEY,
    tenant_id TEXT NOT NULL REFERENCES tenants(id),
    user_id TEXT REFERENCES users(id),
    name TEXT NOT NULL,
    prefix TEXT NOT NULL,
    secret_sha256 BLOB NOT NULL UNIQUE,
    scopes TEXT NOT NULL DEFAULT '[]',
    is_default INTEGER NOT NULL DEFAULT 0,
    created_at INTEGER NOT NULL,
    revoked_at INTEGER
);
CREATE INDEX api_keys_tenant ON api_keys(tenant_id);
"#,
    r#"
ALTER TABLE users ADD COLUMN wallet_evm TEXT;
ALTER TABLE users ADD COLUMN wallet_solana TEXT;
CREATE UNIQUE INDEX users_wallet_evm ON users(wallet_evm) WHERE wallet_evm IS NOT NULL;
CREATE UNIQUE INDEX users_wallet_solana ON users(wallet_solana) WHERE wallet_solana IS NOT NULL;
CREATE INDEX api_keys_user ON api_keys(user_id);
-- At most one active default key per user, whatever races the application loses.
CREATE UNIQUE INDEX api_keys_one_default ON api_keys(user_id)
    WHERE is_default = 1 AND revoked_at IS NULL;
CREATE TABLE sessions (
    token_sha256 BLOB PRIMARY KEY,
    user_id TEXT NOT NULL REFERENCES users(id),
    provider TEXT NOT NULL,
    created_at INTEGER NOT NULL,
    expires_at INTEGER NOT NULL,
    revoked_at INTEGER
);
CREATE TABLE login_codes (
    id TEXT PRIMARY KEY,
    email TEXT NOT NULL,
    code_sha256 BLOB NOT NULL,
    created_at INTEGER NOT NULL,
    expires_at INTEGER NOT NULL,
    attempts INTEGER NOT NULL DEFAULT 0,
    used_at INTEGER
);
CREATE INDEX login_codes_email ON login_codes(email, created_at);
CREATE TABLE challenges (
    nonce TEXT PRIMARY KEY,
    kind TEXT NOT NULL,
    subject TEXT NOT NULL,
    message TEXT NOT NULL,
    created_at INTEGER NOT NULL,
    expires_at INTEGER NOT NULL,
    used_at INTEGER
);
"#,
    r#"
ALTER TABLE users ADD COLUMN google_sub TEXT;
CREATE UNIQUE INDEX users_google_sub ON users(google_sub) WHERE google_sub IS NOT NULL;
"#,
];

pub struct Store {
    conn: Connection,
}

#[derive(Debug, Clone)]
pub struct KeyRecord {
    pub key_id: String,
    pub tenant_id: String,
    pub user_id: Option<String>,
    pub plan: String,
    pub scopes: Vec<String>,
    pub features: Vec<String>,
    pub trial_ends_at: Option<i64>,
    pub subscription_ends_at: Option<i64>,
    pub revoked: bool,
}

#[derive(Debug, Clone, serde::Serialize)]
pub struct KeyInfo {
    pub id: String,
    pub name: String,
    pub key_prefix: String,
    pub scopes: Vec<String>,
    pub is_default: bool,
    pub created_at: i64,
    pub revoked: bool,
}

pub fn now() -> i64 {
    SystemTime::now()
        .duration_since(UNIX_EPOCH)
        .map(|d| d.as_secs() as i64)
        .unwrap_or(0)
}

/// A new API key: `ce_` + 256 random bits, base64url. Returned once, stored hashed.
pub fn new_key_secret() -> String {
    use base64::Engine;
    let bytes: [u8; 32] = rand::random();
    format!(
        "ce_{}",
        base64::engine::general_purpose::URL_SAFE_NO_PAD.encode(bytes)
    )
}

impl Store {
    pub fn open(path: &Path) -> rusqlite::Result<Store> {
        if let Some(dir) = path.parent() {
            let _ = std::fs::create_dir_all(dir);
        }
        let conn = Connection::open(path)?;
        conn.pragma_update(None, "journal_mode", "WAL")?;
        // FULL: an acknowledged write survives a crash of the process or the machine.
        conn.pragma_update(None, "synchronous", "FULL")?;
        conn.pragma_update(None, "foreign_keys", "ON")?;
        conn.busy_timeout(std::time::Duration::from_secs(5))?;
        let mut store = Store { conn };
        store.migrate()?;
        Ok(store)
    }

    fn migrate(&mut self) -> rusqlite::Result<()> {
        let version: usize = self
            .conn
            .query_row("PRAGMA user_version", [], |r| r.get(0))?;
        for (i, sql) in MIGRATIONS.iter().enumerate().skip(version) {
            let tx = self.conn.transaction()?;
            tx.execute_batch(sql)?;
            tx.pragma_update(None, "user_version", i + 1)?;
            tx.commit()?;
        }
        Ok(())
    }

    pub fn create_tenant(&self, name: &str, plan: &str) -> rusqlite::Result<String> {
        let id = uuid::Uuid::new_v4().to_string();
        self.conn.execute(
            "INSERT INTO tenants (id, name, plan, created_at) VALUES (?1, ?2, ?3, ?4)",
            params![id, name, plan, now()],
        )?;
        Ok(id)
    }

    pub fn set_plan(&self, tenant: &str, plan: &str) -> rusqlite::Result<bool> {
        Ok(self.conn.execute(
            "UPDATE tenants SET plan = ?2 WHERE id = ?1",
            params![tenant, plan],
        )? == 1)
    }

    /// Set or clear (`None`) the trial and subscription ends, unix seconds.
    pub fn set_billing(
        &self,
        tenant: &str,
        trial_ends_at: Option<Option<i64>>,
        subscription_ends_at: Option<Option<i64>>,
    ) -> rusqlite::Result<()> {
        if let Some(t) = trial_ends_at {
            self.conn.execute(
                "UPDATE tenants SET trial_ends_at = ?2 WHERE id = ?1",
                params![tenant, t],
            )?;
        }
        if let Some(t) = subscription_ends_at {
            self.conn.execute(
                "UPDATE tenants SET subscription_ends_at = ?2 WHERE id = ?1",
                params![tenant, t],
            )?;
        }
        Ok(())
    }

    pub fn set_features(&self, tenant: &str, features: &[String]) -> rusqlite::Result<bool> {
        let f = serde_json::to_string(features).unwrap_or_else(|_| "[]".into());
        Ok(self.conn.execute(
            "UPDATE tenants SET features = ?2 WHERE id = ?1",
            params![tenant, f],
        )? == 1)
    }

    pub fn tenant_exists(&self, tenant: &str) -> rusqlite::Result<bool> {
        Ok(self
            .conn
            .query_row("SELECT 1 FROM tenants WHERE id = ?1", [tenant], |_| Ok(()))
            .optional()?
            .is_some())
    }

    /// Create a key; returns (id, raw secret). The secret is not kept.
    pub fn create_key(
        &self,
        tenant: &str,
        user: Option<&str>,
        name: &str,
        scopes: &[String],
        is_default: bool,
    ) -> rusqlite::Result<(String, String)> {
        console::insert_key(&self.conn, tenant, user, name, scopes, is_default)
    }

    pub fn list_keys(&self, tenant: &str) -> rusqlite::Result<Vec<KeyInfo>> {
        let mut st = self.conn.prepare(&format!(
            "{} WHERE tenant_id = ?1 ORDER BY created_at, rowid",
            console::KEY_COLUMNS
        ))?;
        let rows = st.query_map([tenant], console::key_info)?;
        rows.collect()
    }

    /// Revoke a key; returns its secret hash so caches can drop it at once.
    pub fn revoke_key(&self, key_id: &str) -> rusqlite::Result<Option<[u8; 32]>> {
        let hash: Option<Vec<u8>> = self
            .conn
            .query_row(
                "SELECT secret_sha256 FROM api_keys WHERE id = ?1",
                [key_id],
                |r| r.get(0),
            )
            .optional()?;
        self.conn.execute(
            "UPDATE api_keys SET revoked_at = ?2 WHERE id = ?1 AND revoked_at IS NULL",
            params![key_id, now()],
        )?;
        Ok(hash.and_then(|h| h.try_into().ok()))
    }

    pub fn lookup_key(&self, hash: &[u8; 32]) -> rusqlite::Result<Option<KeyRecord>> {
        self.conn
            .query_row(
                "SELECT k.id, k.tenant_id, k.user_id, t.plan, k.scopes, t.features, t.trial_ends_at,
                        t.subscription_ends_at, k.revoked_at
                 FROM api_keys k JOIN tenants t ON t.id = k.tenant_id WHERE k.secret_sha256 = ?1",
                [&hash[..]],
                |r| {
                    Ok(KeyRecord {
                        key_id: r.get(0)?,
                        tenant_id: r.get(1)?,
                        user_id: r.get(2)?,
                        plan: r.get(3)?,
                        scopes: parse_list(&r.get::<_, String>(4)?),
                        features: parse_list(&r.get::<_, String>(5)?),
                        trial_ends_at: r.get(6)?,
                        subscription_ends_at: r.get(7)?,
                        revoked: r.get::<_, Option<i64>>(8)?.is_some(),
                    })
                },
            )
            .optional()
    }
}

fn parse_list(s: &str) -> Vec<String> {
    serde_json::from_str(s).unwrap_or_default()
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::crypto::sha256;

    #[test]
    fn keys_are_stored_hashed_and_revocable() {
        let dir = std::env::temp_dir().join(format!("chainedge-store-{}", uuid::Uuid::new_v4()));
        let store = Store::open(&dir.join("t.db")).unwrap();
        let t = store.create_tenant("acme", "pro").unwrap();
        let (id, raw) = store
            .create_key(&t, None, "k", &["rpc:read".into()], false)
            .unwrap();
        assert!(raw.starts_with("ce_") && raw.len() == 46);
        let rec = store.lookup_key(&sha256(&raw)).unwrap().unwrap();
        assert_eq!((rec.plan.as_str(), rec.revoked), ("pro", false));
        // The raw secret appears nowhere in the table.
        let n: i64 = store
            .conn
            .query_row(
                "SELECT COUNT(*) FROM api_keys WHERE secret_sha256 = ?1 OR prefix = ?1",
                [&raw],
                |r| r.get(0),
            )
            .unwrap();
        assert_eq!(n, 0);
        assert_eq!(store.revoke_key(&id).unwrap(), Some(sha256(&raw)));
        assert!(store.lookup_key(&sha256(&raw)).unwrap().unwrap().revoked);
        assert!(store.lookup_key(&sha256("ce_nope")).unwrap().is_none());
        let _ = std::fs::remove_dir_all(dir);
    }
}

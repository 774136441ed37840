//! What the edge keeps: tenants, users, API keys (hashed), sessions (hashed), sign-in
//! codes and challenges. One interface, two databases: SQLite (embedded, the default)
//! and PostgreSQL (shared by several instances), chosen in the config (`store:`).
//!
//! The repositories here and in `console.rs` are written once, in SQL both databases
//! run (`sql.rs`), with `$1` parameters; the migrations are one list. Nothing here runs
//! on the proxying path: keys are read through the key cache (`auth::keys`) on a miss.

pub mod capacity;
pub mod console;
pub mod deadline;
pub mod index;
pub mod mev_cache;
pub mod postgres;
pub mod sign_in;
pub mod sol_stake;
pub mod sol_watchlist;
pub mod sql;
pub mod sqlite;
pub mod tenants;
pub mod usage;

/// How secrets (API keys, session tokens, codes) are hashed before the store sees them.
pub use crate::crypto::sha256;
use sql::{params, Backend, ErrorKind, Row, StoreError, Tx};
use std::future::Future;
use std::path::PathBuf;
use std::sync::Arc;
use std::time::{SystemTime, UNIX_EPOCH};
/// Schema versions, applied in order at open (SQLite tracks progress in `user_version`,
/// PostgreSQL in `schema_version`). Written in SQL both run; `Dialect::render` maps the
/// two type names PostgreSQL spells differently. Append only: a version once released
/// is never edited.
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
    // Creation order within one second, without SQLite's `rowid` (rows from before this
    // version sort first, as `rowid` had them).
    r#"
ALTER TABLE api_keys ADD COLUMN created_us INTEGER NOT NULL DEFAULT 0;
ALTER TABLE login_codes ADD COLUMN created_us INTEGER NOT NULL DEFAULT 0;
"#,
    // The chain index (`src/index/`, `store/index.rs`): the last committed block per chain,
    // the recent blocks' hashes (to find a reorg's common ancestor), one row per wallet
    // and transfer, and token metadata.
    r#"
CREATE TABLE index_cursor (
    chain TEXT PRIMARY KEY,
    number INTEGER NOT NULL,
    hash TEXT NOT NULL,
    updated_at INTEGER NOT NULL
);
CREATE TABLE index_blocks (
    chain TEXT NOT NULL,
    number INTEGER NOT NULL,
    hash TEXT NOT NULL,
    parent_hash TEXT NOT NULL,
    PRIMARY KEY (chain, number)
);
CREATE TABLE wallet_transfers (
    chain TEXT NOT NULL,
    address TEXT NOT NULL,
    block INTEGER NOT NULL,
    tx_index INTEGER NOT NULL,
    log_index INTEGER NOT NULL,
    seq INTEGER NOT NULL,
    direction TEXT NOT NULL,
    kind TEXT NOT NULL,
    token TEXT NOT NULL,
    counterparty TEXT NOT NULL,
    token_id TEXT,
    amount TEXT NOT NULL,
    tx_hash TEXT NOT NULL,
    ts INTEGER NOT NULL,
    PRIMARY KEY (chain, address, block, tx_index, log_index, seq)
);
CREATE INDEX wallet_transfers_block ON wallet_transfers(chain, block);
CREATE TABLE tokens (
    chain TEXT NOT NULL,
    address TEXT NOT NULL,
    name TEXT,
    symbol TEXT,
    decimals INTEGER,
    fetched_at INTEGER NOT NULL,
    PRIMARY KEY (chain, address)
);
"#,
    // The consensus-layer capacity series (`src/capacity.rs`, `store/capacity.rs`): per
    // minute and host, the most requests it served in one second, and the minute's totals.
    r#"
CREATE TABLE cl_capacity (
    minute INTEGER NOT NULL,
    host TEXT NOT NULL,
    family TEXT NOT NULL,
    peak_rps INTEGER NOT NULL,
    requests INTEGER NOT NULL,
    failures INTEGER NOT NULL,
    PRIMARY KEY (minute, host)
);
"#,
    // Solana epoch stake snapshots (`src/sol_stake.rs`, `store/sol_stake.rs`): one row per
    // captured epoch (its cursor: the last vote account done, and when it was complete),
    // and the stake accounts delegated in that epoch.
    r#"
CREATE TABLE sol_stake_epochs (
    epoch INTEGER PRIMARY KEY,
    slot INTEGER NOT NULL,
    started_at INTEGER NOT NULL,
    last_voter TEXT NOT NULL,
    completed_at INTEGER,
    accounts INTEGER NOT NULL
);
CREATE TABLE sol_stake_accounts (
    epoch INTEGER NOT NULL,
    pubkey TEXT NOT NULL,
    voter TEXT NOT NULL,
    stake INTEGER NOT NULL,
    activation_epoch INTEGER NOT NULL,
    deactivation_epoch INTEGER,
    PRIMARY KEY (epoch, pubkey)
);
CREATE INDEX sol_stake_by_voter ON sol_stake_accounts(voter, pubkey, epoch);
CREATE INDEX sol_stake_by_pubkey ON sol_stake_accounts(pubkey, epoch);
"#,
    // Solana watchlists (`store/sol_watchlist.rs`): entries per tenant, and the deliveries
    // that failed every attempt (dead letters), readable by the entry's tenant.
    r#"
CREATE TABLE sol_watchlist (
    id TEXT PRIMARY KEY,
    tenant_id TEXT NOT NULL,
    pubkey TEXT NOT NULL,
    commitment TEXT NOT NULL,
    callback_type TEXT NOT NULL,
    callback_url TEXT NOT NULL,
    created_at INTEGER NOT NULL
);
CREATE INDEX sol_watchlist_by_tenant ON sol_watchlist(tenant_id, created_at);
CREATE TABLE sol_watchlist_dead_letters (
    id TEXT PRIMARY KEY,
    entry_id TEXT NOT NULL,
    tenant_id TEXT NOT NULL,
    payload TEXT NOT NULL,
    attempts INTEGER NOT NULL,
    last_error TEXT NOT NULL,
    created_at INTEGER NOT NULL
);
CREATE INDEX sol_dead_letters_by_entry ON sol_watchlist_dead_letters(entry_id, created_at);
"#,
    // Solana MEV-cache samples (`src/mev_cache.rs`, `store/mev_cache.rs`).
    r#"
CREATE TABLE sol_mev_cache_samples (
    host TEXT NOT NULL,
    at INTEGER NOT NULL,
    hits_total INTEGER NOT NULL,
    increase INTEGER NOT NULL,
    interval_ms INTEGER NOT NULL,
    PRIMARY KEY (host, at)
);
CREATE INDEX sol_mev_cache_by_time ON sol_mev_cache_samples(at);
"#,
    // Per-key usage (`src/usage/`, `store/usage.rs`): counts per key and minute, and
    // the same rolled up per hour (written together, kept for different spans).
    r#"
CREATE TABLE key_usage_minutes (
    key_id TEXT NOT NULL,
    minute INTEGER NOT NULL,
    tenant_id TEXT NOT NULL,
    calls INTEGER NOT NULL,
    compute_units INTEGER NOT NULL,
    errors INTEGER NOT NULL,
    rate_limited INTEGER NOT NULL,
    PRIMARY KEY (key_id, minute)
);
CREATE INDEX key_usage_minutes_by_time ON key_usage_minutes(minute);
CREATE TABLE key_usage_hours (
    key_id TEXT NOT NULL,
    hour INTEGER NOT NULL,
    tenant_id TEXT NOT NULL,
    calls INTEGER NOT NULL,
    compute_units INTEGER NOT NULL,
    errors INTEGER NOT NULL,
    rate_limited INTEGER NOT NULL,
    PRIMARY KEY (key_id, hour)
);
CREATE INDEX key_usage_hours_by_time ON key_usage_hours(hour);
CREATE INDEX key_usage_hours_by_tenant ON key_usage_hours(tenant_id, hour);
"#,
    // Sign-in abuse bounds (`console/api.rs`): codes and challenges remember the client
    // address that asked (outstanding ones are bounded per client), and each email
    // address keeps a budget of wrong guesses that a new code does not reset.
    r#"
ALTER TABLE login_codes ADD COLUMN client TEXT NOT NULL DEFAULT '';
CREATE INDEX login_codes_client ON login_codes(client, created_at);
ALTER TABLE challenges ADD COLUMN client TEXT NOT NULL DEFAULT '';
CREATE INDEX challenges_client ON challenges(client, expires_at);
CREATE INDEX challenges_subject ON challenges(subject, expires_at);
CREATE TABLE login_guards (
    email TEXT PRIMARY KEY,
    failures INTEGER NOT NULL,
    last_failure INTEGER NOT NULL,
    locked_until INTEGER NOT NULL
);
-- Scopes are enforced from this version on: a key made without any (the CLI's old
-- default) keeps what it could do, reads and writes.
UPDATE api_keys SET scopes = '["rpc:read","rpc:write"]' WHERE scopes = '[]';
"#,
    // Each instance's usage journal (`src/usage/journal.rs`): the last batch whose counts
    // are in the usage rows, moved in the same transaction as the rows.
    r#"
CREATE TABLE usage_journals (
    journal_id TEXT PRIMARY KEY,
    seq INTEGER NOT NULL,
    updated_at INTEGER NOT NULL
);
"#,
];

/// A handle on the store; cheap to clone.
#[derive(Clone)]
pub struct Store {
    /// `raw` within this handle's deadline.
    db: Arc<dyn Backend>,
    raw: Arc<dyn Backend>,
    health: Arc<deadline::Health>,
}

/// A store call's deadline off the request path (flushes, captures, the CLI): past the
/// pool's wait and PostgreSQL's statement limit, so only a hung database reaches it.
pub const BACKGROUND_DEADLINE: std::time::Duration = std::time::Duration::from_secs(20);

/// Which database the store runs on.
pub enum Target {
    Sqlite(PathBuf),
    /// A `postgres://` URL (it holds the password: it comes from a secret reference).
    Postgres(String),
}

impl Target {
    /// The store the configuration names.
    pub fn from_config(cfg: &crate::config::Loaded) -> Result<Target, StoreError> {
        match (&cfg.store_postgres, &cfg.store_path) {
            (Some(url), _) => Ok(Target::Postgres(url.expose().to_string())),
            (None, Some(path)) => Ok(Target::Sqlite(path.clone())),
            (None, None) => Err(StoreError::other("no store configured")),
        }
    }

    /// What to call it in messages (never the URL: it holds the password).
    pub fn describe(&self) -> String {
        match self {
            Target::Sqlite(path) => format!("sqlite {}", path.display()),
            Target::Postgres(_) => "postgres".into(),
        }
    }
}

impl Store {
    /// Open the store and bring its schema up to date.
    pub async fn open(target: &Target) -> Result<Store, StoreError> {
        let db: Arc<dyn Backend> = match target {
            Target::Sqlite(path) => Arc::new(sqlite::Sqlite::open(path)?),
            Target::Postgres(url) => Arc::new(postgres::Postgres::open(url)?),
        };
        db.migrate(MIGRATIONS).await?;
        Ok(Store::deadlined(
            db,
            Default::default(),
            BACKGROUND_DEADLINE,
        ))
    }

    fn deadlined(
        raw: Arc<dyn Backend>,
        health: Arc<deadline::Health>,
        deadline: std::time::Duration,
    ) -> Store {
        Store {
            db: Arc::new(deadline::Deadlined {
                inner: raw.clone(),
                deadline,
                health: health.clone(),
            }),
            raw,
            health,
        }
    }

    /// The same store, its calls given up after `deadline` (the request path's).
    pub fn with_deadline(&self, deadline: std::time::Duration) -> Store {
        Store::deadlined(self.raw.clone(), self.health.clone(), deadline)
    }

    /// Whether the database is known to be unreachable right now.
    pub fn is_down(&self) -> bool {
        self.health.is_down()
    }

    pub fn dialect(&self) -> sql::Dialect {
        self.db.dialect()
    }

    async fn query_opt(
        &self,
        sql: &str,
        params: Vec<sql::Value>,
    ) -> Result<Option<Row>, StoreError> {
        Ok(self.db.query(sql, params).await?.into_iter().next())
    }

    pub async fn create_tenant(&self, name: &str, plan: &str) -> Result<String, StoreError> {
        let id = uuid::Uuid::new_v4().to_string();
        self.db
            .execute(
                "INSERT INTO tenants (id, name, plan, created_at) VALUES ($1, $2, $3, $4)",
                params![&id, name, plan, now()],
            )
            .await?;
        Ok(id)
    }

    pub async fn set_plan(&self, tenant: &str, plan: &str) -> Result<bool, StoreError> {
        Ok(self
            .db
            .execute(
                "UPDATE tenants SET plan = $2 WHERE id = $1",
                params![tenant, plan],
            )
            .await?
            == 1)
    }

    /// Set or clear (`None`) the trial and subscription ends, unix seconds.
    pub async fn set_billing(
        &self,
        tenant: &str,
        trial_ends_at: Option<Option<i64>>,
        subscription_ends_at: Option<Option<i64>>,
    ) -> Result<(), StoreError> {
        if let Some(t) = trial_ends_at {
            self.db
                .execute(
                    "UPDATE tenants SET trial_ends_at = $2 WHERE id = $1",
                    params![tenant, t],
                )
                .await?;
        }
        if let Some(t) = subscription_ends_at {
            self.db
                .execute(
                    "UPDATE tenants SET subscription_ends_at = $2 WHERE id = $1",
                    params![tenant, t],
                )
                .await?;
        }
        Ok(())
    }

    pub async fn set_features(
        &self,
        tenant: &str,
        features: &[String],
    ) -> Result<bool, StoreError> {
        let f = serde_json::to_string(features).unwrap_or_else(|_| "[]".into());
        Ok(self
            .db
            .execute(
                "UPDATE tenants SET features = $2 WHERE id = $1",
                params![tenant, f],
            )
            .await?
            == 1)
    }

    pub async fn tenant_exists(&self, tenant: &str) -> Result<bool, StoreError> {
        Ok(self
            .query_opt("SELECT 1 FROM tenants WHERE id = $1", params![tenant])
            .await?
            .is_some())
    }

    /// Create a key; returns (id, raw secret). The secret is not kept.
    pub async fn create_key(
        &self,
        tenant: &str,
        user: Option<&str>,
        name: &str,
        scopes: &[String],
        is_default: bool,
    ) -> Result<(String, String), StoreError> {
        let mut tx = self.db.begin().await?;
        let created =
            console::insert_key(tx.as_mut(), tenant, user, name, scopes, is_default).await?;
        tx.commit().await?;
        Ok(created)
    }

    pub async fn list_keys(&self, tenant: &str) -> Result<Vec<KeyInfo>, StoreError> {
        let rows = self
            .db
            .query(
                &format!(
                    "{} WHERE tenant_id = $1 ORDER BY {}",
                    console::KEY_COLUMNS,
                    console::KEY_ORDER
                ),
                params![tenant],
            )
            .await?;
        rows.iter().map(console::key_info).collect()
    }

    /// Revoke a key; returns its secret hash so caches can drop it at once.
    pub async fn revoke_key(&self, key_id: &str) -> Result<Option<[u8; 32]>, StoreError> {
        let hash = self
            .query_opt(
                "SELECT secret_sha256 FROM api_keys WHERE id = $1",
                params![key_id],
            )
            .await?
            .map(|r| r.bytes(0))
            .transpose()?;
        self.db
            .execute(
                "UPDATE api_keys SET revoked_at = $2 WHERE id = $1 AND revoked_at IS NULL",
                params![key_id, now()],
            )
            .await?;
        Ok(hash.and_then(|h| h.try_into().ok()))
    }

    pub async fn lookup_key(&self, hash: &[u8; 32]) -> Result<Option<KeyRecord>, StoreError> {
        self.key_where("k.secret_sha256 = $1", params![hash]).await
    }

    /// The key with this id, as `lookup_key` gives it (a held channel's recheck).
    pub async fn key_standing_by_id(&self, id: &str) -> Result<Option<KeyRecord>, StoreError> {
        self.key_where("k.id = $1", params![id]).await
    }

    async fn key_where(
        &self,
        condition: &str,
        params: Vec<sql::Value>,
    ) -> Result<Option<KeyRecord>, StoreError> {
        let Some(r) = self
            .query_opt(
                &format!(
                    "SELECT k.id, k.tenant_id, k.user_id, t.plan, k.scopes, t.features, t.trial_ends_at,
                        t.subscription_ends_at, k.revoked_at, k.secret_sha256
                 FROM api_keys k JOIN tenants t ON t.id = k.tenant_id WHERE {condition}"
                ),
                params,
            )
            .await?
        else {
            return Ok(None);
        };
        Ok(Some(KeyRecord {
            key_id: r.text(0)?,
            tenant_id: r.text(1)?,
            user_id: r.opt_text(2)?,
            plan: r.text(3)?,
            scopes: parse_list(&r.text(4)?),
            features: parse_list(&r.text(5)?),
            trial_ends_at: r.opt_int(6)?,
            subscription_ends_at: r.opt_int(7)?,
            revoked: !r.is_null(8)?,
            secret_sha256: r.bytes(9)?.try_into().unwrap_or([0; 32]),
        }))
    }

    /// Run a transaction, again from the start when a concurrent one won (PostgreSQL's
    /// serializable transactions, a unique index two first sign-ins both reached).
    async fn retry_conflicts<T, F, Fut>(&self, mut attempt: F) -> Result<T, StoreError>
    where
        F: FnMut(Box<dyn Tx>) -> Fut,
        Fut: Future<Output = Result<T, StoreError>>,
    {
        const ATTEMPTS: usize = 5;
        for n in 1.. {
            let tx = self.db.begin().await?;
            match attempt(tx).await {
                Err(e) if e.kind == ErrorKind::Conflict && n < ATTEMPTS => {
                    tokio::time::sleep(std::time::Duration::from_millis(5 * n as u64)).await;
                }
                other => return other,
            }
        }
        unreachable!("the loop returns")
    }
}

/// `Store::open` from outside any runtime (start-up, the CLI).
pub fn open_blocking(target: &Target) -> Result<Store, StoreError> {
    tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()
        .map_err(|e| StoreError::other(format!("runtime: {e}")))?
        .block_on(Store::open(target))
}

/// Microseconds since the epoch: orders rows made within the same second.
pub fn now_us() -> i64 {
    SystemTime::now()
        .duration_since(UNIX_EPOCH)
        .map(|d| d.as_micros() as i64)
        .unwrap_or(0)
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
    /// What the key is known by in the cache and in revocation notices.
    pub secret_sha256: [u8; 32],
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

pub(crate) fn parse_list(s: &str) -> Vec<String> {
    serde_json::from_str(s).unwrap_or_default()
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::crypto::sha256;

    // The whole repository runs on both databases in tests/store.rs; this one needs the
    // raw table.
    #[tokio::test]
    async fn a_key_secret_is_never_stored() {
        let dir = std::env::temp_dir().join(format!("chainedge-store-{}", uuid::Uuid::new_v4()));
        let store = Store::open(&Target::Sqlite(dir.join("t.db")))
            .await
            .unwrap();
        let t = store.create_tenant("acme", "pro").await.unwrap();
        let (_, raw) = store
            .create_key(&t, None, "k", &["rpc:read".into()], false)
            .await
            .unwrap();
        let rows = store
            .db
            .query(
                "SELECT COUNT(*) FROM api_keys WHERE secret_sha256 = $1 OR prefix = $1 OR scopes LIKE $2",
                params![&raw, format!("%{raw}%")],
            )
            .await
            .unwrap();
        assert_eq!(rows[0].int(0).unwrap(), 0);
        assert!(store.lookup_key(&sha256(&raw)).await.unwrap().is_some());
        let _ = std::fs::remove_dir_all(dir);
    }
}

//! What the edge keeps: tenants, users, API keys (hashed), sessions (hashed), sign-in
//! codes and challenges. One interface, two databases: SQLite (embedded, the default)
//! and PostgreSQL (shared by several instances), chosen in the config (`store:`).
//!
//! The repositories here and in `console.rs` are written once, in SQL both databases
//! run (`sql.rs`), with `$1` parameters; the migrations are one list. Nothing here runs
//! on the proxying path: keys are read through the key cache (`auth::keys`) on a miss.

pub mod audit;
pub mod capacity;
pub mod console;
pub mod plan_requests;
pub mod requests;
/// What an owner may narrow a key to, as stored with it.
pub use crate::key_restrictions::RestrictionsDoc;
pub mod deadline;
pub mod deliveries;
pub mod index;
pub mod index_balances;
pub mod index_history;
pub mod index_nfts;
pub mod method_usage;
pub mod mev_cache;
mod migrations;
#[cfg(test)]
mod migrations_tests;
pub mod nft_pages;
pub mod postgres;
mod postgres_reads;
mod postgres_wire;
pub mod sessions;
pub mod sign_in;
pub mod sol_stake;
pub mod sol_watchlist;
pub mod sql;
pub mod sqlite;
mod sqlite_readers;
pub mod team;
pub mod tenants;
pub mod tx_push;
pub mod txs;
pub mod usage;

/// How secrets (API keys, session tokens, codes) are hashed before the store sees them.
pub use crate::crypto::sha256;
use sql::{params, Backend, ErrorKind, Row, StoreError, Tx};
use std::future::Future;
use std::path::PathBuf;
use std::sync::Arc;
// Rows stamp wall-clock time from the clock, as everything else does.
use crate::clock::{now, now_us};

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
        db.migrate(migrations::MIGRATIONS).await?;
        let store = Store::deadlined(db, Default::default(), BACKGROUND_DEADLINE);
        store.catch_up_nft_holdings().await?;
        Ok(store)
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

    /// `sql`'s rows handed to `visit` where they are read, borrowed (`Backend::query_visit`);
    /// `visit` comes back with what it gathered.
    async fn visit<V: sql::Visit>(
        &self,
        sql: &str,
        params: Vec<sql::Value>,
        visit: V,
    ) -> Result<V, StoreError> {
        let back: Box<dyn std::any::Any> =
            self.db.query_visit(sql, params, Box::new(visit)).await?;
        back.downcast::<V>()
            .map(|v| *v)
            .map_err(|_| StoreError::other("a visitor came back as another type"))
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

    /// The operator's plan change, audited with it (`plan.set`).
    pub async fn set_plan(&self, tenant: &str, plan: &str) -> Result<bool, StoreError> {
        self.operator_change(
            tenant,
            "UPDATE tenants SET plan = $2 WHERE id = $1",
            plan,
            "plan.set",
        )
        .await
    }

    /// One tenant column set by the operator (CLI), and its audit entry, in one
    /// transaction: whether the tenant exists.
    async fn operator_change(
        &self,
        tenant: &str,
        update: &str,
        value: &str,
        action: &str,
    ) -> Result<bool, StoreError> {
        let mut tx = self.db.begin().await?;
        if tx.execute(update, params![tenant, value]).await? != 1 {
            return Ok(false);
        }
        audit::record(tx.as_mut(), tenant, None, action, value, "by the operator").await?;
        tx.commit().await?;
        Ok(true)
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
        let update = "UPDATE tenants SET features = $2 WHERE id = $1";
        self.operator_change(tenant, update, &f, "features.set")
            .await
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
        restrictions: &RestrictionsDoc,
    ) -> Result<(String, String), StoreError> {
        let stored = console::stored(restrictions);
        let mut tx = self.db.begin().await?;
        let created = console::insert_key(
            tx.as_mut(),
            tenant,
            user,
            name,
            scopes,
            is_default,
            stored.as_deref(),
        )
        .await?;
        console::audit_created(
            tx.as_mut(),
            tenant,
            user,
            &created.0,
            name,
            scopes,
            stored.as_deref(),
        )
        .await?;
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
        let mut tx = self.db.begin().await?;
        let Some(row) = sql::query_opt(
            tx.as_mut(),
            "SELECT secret_sha256, tenant_id, name, revoked_at FROM api_keys WHERE id = $1",
            params![key_id],
        )
        .await?
        else {
            return Ok(None);
        };
        if row.is_null(3)? {
            tx.execute(
                "UPDATE api_keys SET revoked_at = $2 WHERE id = $1",
                params![key_id, now()],
            )
            .await?;
            audit::record(
                tx.as_mut(),
                &row.text(1)?,
                None,
                "key.revoke",
                key_id,
                &row.text(2)?,
            )
            .await?;
        }
        tx.commit().await?;
        Ok(row.bytes(0)?.try_into().ok())
    }

    /// Replace an active key's restrictions (the CLI); its hash, for the caches.
    pub async fn set_key_restrictions(
        &self,
        key_id: &str,
        restrictions: &RestrictionsDoc,
    ) -> Result<Option<[u8; 32]>, StoreError> {
        let mut tx = self.db.begin().await?;
        let Some(row) = sql::query_opt(
            tx.as_mut(),
            "SELECT secret_sha256, tenant_id FROM api_keys WHERE id = $1 AND revoked_at IS NULL",
            params![key_id],
        )
        .await?
        else {
            return Ok(None);
        };
        let stored = console::stored(restrictions);
        tx.execute(
            "UPDATE api_keys SET restrictions = $2 WHERE id = $1",
            params![key_id, stored.as_deref()],
        )
        .await?;
        let detail = stored.as_deref().unwrap_or("none");
        audit::record(
            tx.as_mut(),
            &row.text(1)?,
            None,
            "key.restrict",
            key_id,
            detail,
        )
        .await?;
        tx.commit().await?;
        Ok(row.bytes(0)?.try_into().ok())
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
                        t.subscription_ends_at, k.revoked_at, k.secret_sha256, k.restrictions
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
            restrictions: stored_restrictions(r.opt_text(10)?.as_deref())?.map(std::sync::Arc::new),
        }))
    }

    /// Run a transaction, again from the start when a concurrent one won (PostgreSQL's
    /// serializable transactions, a unique index two first sign-ins both reached).
    /// The waits between tries double (5 ms to 160 ms) and each is drawn at random up
    /// to its bound: with fixed waits, transactions that conflicted once wait the same
    /// and meet again (three writers creating keys on PostgreSQL exhausted five tries
    /// of 5-20 ms under load, a 500 to a caller).
    async fn retry_conflicts<T, F, Fut>(&self, mut attempt: F) -> Result<T, StoreError>
    where
        F: FnMut(Box<dyn Tx>) -> Fut,
        Fut: Future<Output = Result<T, StoreError>>,
    {
        const ATTEMPTS: u32 = 8;
        for n in 1.. {
            let tx = self.db.begin().await?;
            match attempt(tx).await {
                Err(e) if e.kind == ErrorKind::Conflict && n < ATTEMPTS => {
                    let bound_ms = 5u64 << (n - 1).min(5);
                    let wait = rand::Rng::gen_range(&mut rand::thread_rng(), 1..=bound_ms);
                    tokio::time::sleep(std::time::Duration::from_millis(wait)).await;
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

/// A key's restrictions as stored; a stored value that no longer compiles fails the
/// lookup (the key is refused, not served unrestricted).
fn stored_restrictions(
    text: Option<&str>,
) -> Result<Option<crate::key_restrictions::Restrictions>, StoreError> {
    let Some(text) = text else { return Ok(None) };
    let doc = serde_json::from_str(text)
        .map_err(|e| StoreError::other(format!("stored key restrictions: {e}")))?;
    crate::key_restrictions::Restrictions::compile(&doc)
        .map_err(|e| StoreError::other(format!("stored key restrictions: {e}")))
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
    /// What its owner narrowed it to (`key_restrictions`); `None`: nothing.
    pub restrictions: Option<std::sync::Arc<crate::key_restrictions::Restrictions>>,
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
    /// What its owner narrowed it to; empty when nothing.
    pub restrictions: crate::key_restrictions::RestrictionsDoc,
    /// The start of the last minute it was used in (as usage has recorded it).
    pub last_used_at: Option<i64>,
    /// The console user who made it; `None`: the operator's CLI.
    pub created_by: Option<String>,
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
            .create_key(
                &t,
                None,
                "k",
                &["rpc:read".into()],
                false,
                &Default::default(),
            )
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

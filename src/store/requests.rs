//! Each key's request log (`src/usage/requests.rs` gathers it): the newest requests per
//! key, written in batches by the background writer, each key pruned to what it keeps.

use super::method_usage::{Group, MethodCounts};
use super::sql::{params, StoreError};
use super::Store;

/// One request (or WebSocket upgrade) of a key, as its log shows it: never a body, a
/// parameter or a secret.
#[derive(Debug, Clone, PartialEq)]
pub struct RequestRow {
    pub key_id: String,
    pub tenant_id: String,
    /// When it finished, in microseconds since the epoch.
    pub at_us: i64,
    /// The route's name (`eth.rpc`, `eth.wallet.balance`).
    pub route: String,
    /// The JSON-RPC method (`batch` for a batch), else the HTTP method.
    pub method: String,
    /// 0: the client left before an answer.
    pub status: u16,
    /// The edge's error code, when it answered one.
    pub error: Option<String>,
    pub latency_us: u64,
    /// The host that answered, for a request a node served.
    pub upstream: Option<String>,
}

impl Store {
    /// Add `rows` and cut each of their keys' logs to its newest `keep`, and add the
    /// same requests' per-method `groups` (`method_usage`), in one transaction.
    pub async fn add_requests(
        &self,
        rows: &[RequestRow],
        keep: usize,
        groups: &[(Group, MethodCounts)],
    ) -> Result<(), StoreError> {
        let mut tx = self.db.begin().await?;
        super::method_usage::add(tx.as_mut(), groups).await?;
        for r in rows {
            tx.execute(
                "INSERT INTO key_requests (key_id, tenant_id, at_us, route, method, status, error, latency_us, upstream)
                 VALUES ($1, $2, $3, $4, $5, $6, $7, $8, $9)",
                params![
                    &r.key_id,
                    &r.tenant_id,
                    r.at_us,
                    &r.route,
                    &r.method,
                    r.status as i64,
                    r.error.as_deref(),
                    r.latency_us.min(i64::MAX as u64) as i64,
                    r.upstream.as_deref()
                ],
            )
            .await?;
        }
        let mut keys: Vec<&str> = rows.iter().map(|r| r.key_id.as_str()).collect();
        keys.sort_unstable();
        keys.dedup();
        for key in keys {
            tx.execute(
                "DELETE FROM key_requests WHERE key_id = $1 AND at_us < (
                     SELECT MIN(at_us) FROM (
                         SELECT at_us FROM key_requests WHERE key_id = $1
                         ORDER BY at_us DESC LIMIT $2) AS newest)",
                params![key, keep as i64],
            )
            .await?;
        }
        tx.commit().await
    }

    /// One key's log, newest first, at most `limit`.
    pub async fn key_requests(
        &self,
        key_id: &str,
        limit: usize,
    ) -> Result<Vec<RequestRow>, StoreError> {
        let rows = self
            .db
            .query(
                "SELECT key_id, tenant_id, at_us, route, method, status, error, latency_us, upstream
                 FROM key_requests WHERE key_id = $1 ORDER BY at_us DESC LIMIT $2",
                params![key_id, limit as i64],
            )
            .await?;
        rows.iter()
            .map(|r| {
                Ok(RequestRow {
                    key_id: r.text(0)?,
                    tenant_id: r.text(1)?,
                    at_us: r.int(2)?,
                    route: r.text(3)?,
                    method: r.text(4)?,
                    status: r.int(5)?.clamp(0, u16::MAX as i64) as u16,
                    error: r.opt_text(6)?,
                    latency_us: r.int(7)?.max(0) as u64,
                    upstream: r.opt_text(8)?,
                })
            })
            .collect()
    }
}

//! API-key identity: `Authorization: Bearer <key>` or `x-token: <key>`, resolved through an
//! in-memory LRU keyed by the key's SHA-256; the store is touched only on a miss. Entries
//! live at most `ttl`, which bounds how stale a revocation made elsewhere can be when no
//! notice arrives; a revocation through this instance, or announced by another one or the
//! CLI over `cluster.redis`, evicts at once.

use crate::crypto::sha256;
use crate::errors::ApiError;
use crate::store::{KeyRecord, Store};
use lru::LruCache;
use std::num::NonZeroUsize;
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

/// A cached lookup: when it was made, and the key (or `None`: no such key).
type CachedKey = (Instant, Option<Arc<KeyRecord>>);

pub struct KeyAuth {
    store: Store,
    /// Where revocations are announced to the other instances (`cluster`), if any.
    notices: std::sync::OnceLock<crate::cluster::NoticeSender>,
    cache: Mutex<LruCache<[u8; 32], CachedKey>>,
    ttl: Duration,
}

impl KeyAuth {
    pub fn new(store: Store, capacity: usize, ttl: Duration) -> Self {
        KeyAuth {
            store,
            notices: std::sync::OnceLock::new(),
            cache: Mutex::new(LruCache::new(
                NonZeroUsize::new(capacity.max(1)).unwrap_or(NonZeroUsize::MIN),
            )),
            ttl,
        }
    }

    /// The key's record, or `None` if no such key exists.
    pub async fn resolve(&self, secret: &str) -> Result<Option<Arc<KeyRecord>>, ApiError> {
        let hash = sha256(secret);
        if let Ok(mut c) = self.cache.lock() {
            if let Some((at, rec)) = c.get(&hash) {
                if at.elapsed() < self.ttl {
                    return Ok(rec.clone());
                }
            }
        }
        let rec = self
            .store
            .lookup_key(&hash)
            .await
            .map_err(|e| {
                log::error!("key lookup: {e}");
                ApiError::internal("key store unavailable")
            })?
            .map(Arc::new);
        if let Ok(mut c) = self.cache.lock() {
            c.put(hash, (Instant::now(), rec.clone()));
        }
        Ok(rec)
    }

    /// Drop a key from the cache (a revocation announced by another instance).
    pub fn evict(&self, hash: &[u8; 32]) {
        if let Ok(mut c) = self.cache.lock() {
            c.pop(hash);
        }
    }

    /// A key was revoked or rotated through this instance: drop it here and announce it
    /// to the others.
    pub fn revoked(&self, hash: &[u8; 32]) {
        self.evict(hash);
        if let Some(tx) = self.notices.get() {
            // A full queue loses the notice; the cache TTL still bounds the key's life.
            let _ = tx.try_send(*hash);
        }
    }

    /// A tenant's plan, features or billing changed: forget its cached keys, so their next
    /// request reads the tenant as it is now.
    pub fn evict_tenant(&self, tenant: &str) {
        if let Ok(mut c) = self.cache.lock() {
            let stale: Vec<[u8; 32]> = c
                .iter()
                .filter(|(_, (_, record))| record.as_ref().is_some_and(|r| r.tenant_id == tenant))
                .map(|(hash, _)| *hash)
                .collect();
            for hash in stale {
                c.pop(&hash);
            }
        }
    }

    /// Forget every cached key (notices may have been missed).
    pub fn clear(&self) {
        if let Ok(mut c) = self.cache.lock() {
            c.clear();
        }
    }

    /// Announce revocations through the cluster from now on.
    pub fn announce_to(&self, notices: crate::cluster::NoticeSender) {
        let _ = self.notices.set(notices);
    }
}

/// The presented API key: `Authorization: Bearer`, or `x-token` unless `bearer_only`.
/// `Err` when a credential header is present but malformed.
pub fn presented<'a>(
    authorization: Option<&'a str>,
    x_token: Option<&'a str>,
    bearer_only: bool,
) -> Result<Option<&'a str>, ApiError> {
    if let Some(a) = authorization {
        let token = a
            .strip_prefix("Bearer ")
            .or_else(|| a.strip_prefix("bearer "))
            .map(str::trim)
            .filter(|t| !t.is_empty())
            .ok_or_else(|| {
                ApiError::new(
                    401,
                    "unauthorized",
                    "Authorization must be 'Bearer <API key>'",
                )
            })?;
        return Ok(Some(token));
    }
    if bearer_only {
        return Ok(None);
    }
    Ok(x_token.map(str::trim).filter(|t| !t.is_empty()))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn credential_headers() {
        assert_eq!(
            presented(Some("Bearer abc"), None, false).unwrap(),
            Some("abc")
        );
        assert_eq!(presented(None, Some("abc"), false).unwrap(), Some("abc"));
        assert_eq!(presented(None, Some("abc"), true).unwrap(), None);
        assert!(presented(Some("Basic abc"), None, false).is_err());
        assert!(presented(Some("Bearer "), None, false).is_err());
        assert_eq!(presented(None, None, false).unwrap(), None);
    }
}

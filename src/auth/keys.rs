//! API-key identity: `Authorization: Bearer <key>` or `x-token: <key>`, resolved through an
//! in-memory LRU keyed by the key's SHA-256; the store is touched only on a miss. Entries
//! live at most `ttl`, which bounds how stale a revocation made elsewhere can be when no
//! notice arrives; a revocation through this instance, or announced by another one or the
//! CLI over `cluster.redis`, evicts at once. While the store cannot be read, an entry past
//! its TTL is still believed for up to `stale` after it was read (Kong's serve-stale):
//! an outage of the database does not turn away the keys already in use.

use crate::crypto::sha256;
use crate::errors::ApiError;
use crate::observe::metrics;
use crate::store::sql::StoreError;
use crate::store::{KeyRecord, Store};
use lru::LruCache;
use std::num::NonZeroUsize;
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

/// A cached lookup: when it was made, and the key (or `None`: no such key).
type CachedKey = (Instant, Option<Arc<KeyRecord>>);

/// Where revocations (key hashes) are queued for the cluster link to publish to the
/// other instances.
pub type NoticeSender = tokio::sync::mpsc::Sender<[u8; 32]>;

pub struct KeyAuth {
    store: Store,
    /// Where revocations are announced to the other instances (`cluster`), if any.
    notices: std::sync::OnceLock<NoticeSender>,
    cache: Mutex<LruCache<[u8; 32], CachedKey>>,
    ttl: Duration,
    stale: Duration,
    /// Every key evicted as revoked (here, or announced by another instance): what open
    /// WebSocket sessions and channels listen to, to close at once.
    revocations: tokio::sync::broadcast::Sender<Revoked>,
}

/// A revocation as held sessions hear it: the key's hash, and its id when this
/// instance had the key cached (a firehose channel knows its key by id alone).
#[derive(Debug, Clone)]
pub struct Revoked {
    pub hash: [u8; 32],
    pub key_id: Option<String>,
}

/// Whether a key may still be used, as far as a held session needs to know.
#[derive(Debug, Clone, Copy, PartialEq)]
pub enum Standing {
    Valid,
    /// Revoked, deleted, or its trial or subscription lapsed.
    Ended,
}

impl KeyAuth {
    pub fn new(store: Store, capacity: usize, ttl: Duration, stale: Duration) -> Self {
        KeyAuth {
            store,
            notices: std::sync::OnceLock::new(),
            cache: Mutex::new(LruCache::new(
                NonZeroUsize::new(capacity.max(1)).unwrap_or(NonZeroUsize::MIN),
            )),
            ttl,
            stale: stale.max(ttl),
            revocations: tokio::sync::broadcast::channel(256).0,
        }
    }

    /// How long a cached key is believed: a held session rechecks its key this often.
    pub fn ttl(&self) -> Duration {
        self.ttl
    }

    /// Revocations from now on (a receiver that lagged rechecks its own key).
    pub fn revocations(&self) -> tokio::sync::broadcast::Receiver<Revoked> {
        self.revocations.subscribe()
    }

    /// Whether the key behind `hash` is still usable: the cached record while it is
    /// fresh, else the store's. A store that cannot be reached keeps the key valid (the
    /// session was admitted; revocations still arrive as notices).
    pub async fn standing(&self, hash: &[u8; 32]) -> Standing {
        let cached = self.cache.lock().ok().and_then(|mut c| {
            c.get(hash)
                .filter(|(at, _)| at.elapsed() < self.ttl)
                .map(|(_, rec)| rec.clone())
        });
        let rec = match cached {
            Some(rec) => rec,
            None => match self.fresh(hash).await {
                Ok(rec) => rec,
                // `fresh` has logged it.
                Err(_) => return Standing::Valid,
            },
        };
        match rec {
            Some(r) if super::check_standing(&r, crate::clock::now()).is_ok() => Standing::Valid,
            _ => Standing::Ended,
        }
    }

    /// The key's record read from the store now, past the cache (and cached): on a miss,
    /// and for handing out something that outlives the request (a firehose token).
    pub async fn fresh(&self, hash: &[u8; 32]) -> Result<Option<Arc<KeyRecord>>, ApiError> {
        self.read(hash).await.map_err(|e| {
            log::error!("key lookup: {e}");
            e.to_api_error()
        })
    }

    async fn read(&self, hash: &[u8; 32]) -> Result<Option<Arc<KeyRecord>>, StoreError> {
        let rec = self.store.lookup_key(hash).await?.map(Arc::new);
        if let Ok(mut c) = self.cache.lock() {
            c.put(*hash, (Instant::now(), rec.clone()));
        }
        Ok(rec)
    }

    /// The key's record, or `None` if no such key exists.
    pub async fn resolve(&self, secret: &str) -> Result<Option<Arc<KeyRecord>>, ApiError> {
        let hash = sha256(secret);
        let held = self
            .cache
            .lock()
            .ok()
            .and_then(|mut c| c.get(&hash).map(|(at, rec)| (at.elapsed(), rec.clone())));
        if let Some((age, rec)) = &held {
            if *age < self.ttl {
                return Ok(rec.clone());
            }
        }
        match self.read(&hash).await {
            Ok(rec) => Ok(rec),
            Err(e) => match held {
                Some((age, rec)) if age < self.stale => {
                    metrics::key_served_stale();
                    log::debug!("key lookup failed ({e}); cached record kept");
                    Ok(rec)
                }
                _ => {
                    log::error!("key lookup: {e}");
                    Err(e.to_api_error())
                }
            },
        }
    }

    /// Drop a key from the cache (a revocation announced by another instance), and end
    /// the sessions held with it.
    pub fn evict(&self, hash: &[u8; 32]) {
        let key_id = self
            .cache
            .lock()
            .ok()
            .and_then(|mut c| c.pop(hash))
            .and_then(|(_, rec)| rec.map(|r| r.key_id.clone()));
        // No receiver (no session open) is not an error.
        let _ = self.revocations.send(Revoked {
            hash: *hash,
            key_id,
        });
    }

    /// Whether the key with id `key_id` is still usable, read from the store (a held
    /// channel that knows its key by id); a store that cannot be reached keeps it.
    pub async fn standing_by_id(&self, key_id: &str) -> Standing {
        match self.store.key_standing_by_id(key_id).await {
            Ok(Some(rec)) if super::check_standing(&rec, crate::clock::now()).is_ok() => {
                Standing::Valid
            }
            Ok(_) => Standing::Ended,
            Err(e) => {
                log::warn!("key recheck: {e}");
                Standing::Valid
            }
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

    /// Notices may have been missed: every cached key is read again on its next use
    /// (kept as a stale fallback while the store cannot be read).
    pub fn expire_all(&self) {
        let Some(expired) = Instant::now().checked_sub(self.ttl) else {
            return;
        };
        if let Ok(mut c) = self.cache.lock() {
            for (_, (at, _)) in c.iter_mut() {
                *at = (*at).min(expired);
            }
        }
    }

    /// Announce revocations through the cluster from now on.
    pub fn announce_to(&self, notices: NoticeSender) {
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

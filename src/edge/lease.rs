//! How long a held WebSocket session or channel may live: until its key is revoked or
//! lapses, or the grant it was opened with (a firehose token) expires. A revocation made
//! here or announced over `cluster.redis` is heard at once; one made where no notice
//! reaches this instance is found by a recheck every quarter of the key cache's TTL.

use crate::auth::keys::{KeyAuth, Revoked, Standing};
use std::time::Duration;
use tokio::sync::broadcast::{self, error::RecvError};
use tokio::time::{Instant, Interval, MissedTickBehavior};

/// What a session's key is known by.
pub(super) enum Holder {
    /// The key's hash (a session opened with the key itself).
    Hash([u8; 32]),
    /// The key's id (a channel opened with a token the key was given).
    Id(String),
}

pub(super) struct Lease {
    holder: Option<Holder>,
    notices: Option<broadcast::Receiver<Revoked>>,
    recheck: Interval,
    expires: Option<Instant>,
}

/// What woke the lease.
enum Woke {
    Notice(Result<Revoked, RecvError>),
    Recheck,
    Expired,
}

impl Lease {
    /// A lease for a session held by `holder` (none: anonymous, never revoked), ending at
    /// `expires_at` (Unix seconds) if given.
    pub(super) fn new(keys: &KeyAuth, holder: Option<Holder>, expires_at: Option<i64>) -> Lease {
        let every = (keys.ttl() / 4).max(Duration::from_millis(250));
        let mut recheck = tokio::time::interval_at(Instant::now() + every, every);
        recheck.set_missed_tick_behavior(MissedTickBehavior::Skip);
        let expires = expires_at.map(|at| {
            let left = at.saturating_sub(crate::clock::now()).max(0) as u64;
            Instant::now() + Duration::from_secs(left)
        });
        Lease {
            notices: holder.as_ref().map(|_| keys.revocations()),
            holder,
            recheck,
            expires,
        }
    }

    /// Resolves with the reason once the session must end; pending while it may live.
    pub(super) async fn ended(&mut self, keys: &KeyAuth) -> &'static str {
        loop {
            let held = self.holder.is_some();
            let woke = tokio::select! {
                n = next_notice(&mut self.notices) => Woke::Notice(n),
                _ = self.recheck.tick(), if held => Woke::Recheck,
                _ = expiry(self.expires) => Woke::Expired,
            };
            match woke {
                Woke::Notice(Ok(r)) if self.is_holder(&r) => return "API key revoked or changed",
                Woke::Notice(Ok(_)) => {}
                // Notices were missed: look at the key itself.
                Woke::Notice(Err(RecvError::Lagged(_))) | Woke::Recheck => {
                    if self.standing(keys).await == Standing::Ended {
                        return "API key revoked or lapsed";
                    }
                }
                Woke::Notice(Err(RecvError::Closed)) => self.notices = None,
                Woke::Expired => return "token expired",
            }
        }
    }

    fn is_holder(&self, r: &Revoked) -> bool {
        match &self.holder {
            Some(Holder::Hash(h)) => *h == r.hash,
            Some(Holder::Id(id)) => r.key_id.as_deref() == Some(id.as_str()),
            None => false,
        }
    }

    async fn standing(&self, keys: &KeyAuth) -> Standing {
        match &self.holder {
            Some(Holder::Hash(h)) => keys.standing(h).await,
            Some(Holder::Id(id)) => keys.standing_by_id(id).await,
            None => Standing::Valid,
        }
    }
}

async fn next_notice(rx: &mut Option<broadcast::Receiver<Revoked>>) -> Result<Revoked, RecvError> {
    match rx {
        Some(rx) => rx.recv().await,
        None => std::future::pending().await,
    }
}

async fn expiry(at: Option<Instant>) {
    match at {
        Some(at) => tokio::time::sleep_until(at).await,
        None => std::future::pending().await,
    }
}

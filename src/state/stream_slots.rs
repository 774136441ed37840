//! The MEV-Share stream's slots: one open stream per user, across every instance of a
//! clustered edge (this instance's slot first, which also bounds its streams, then the
//! user's lease). A slot is a guard: dropping it frees the slot.

use crate::cluster::leases::{Lease, Leases, Place};
use crate::errors::ApiError;
use std::collections::HashSet;
use std::sync::{Arc, Mutex};

/// Who holds an open stream: here, and (clustered) on any instance.
pub struct StreamSlots {
    held: Mutex<HashSet<String>>,
    leases: Arc<Leases>,
}

/// Holding one user's slot; dropping it frees the slot.
pub struct Slot {
    slots: Arc<StreamSlots>,
    user: String,
    _lease: Option<Lease>,
}

impl Drop for Slot {
    fn drop(&mut self) {
        if let Ok(mut held) = self.slots.held.lock() {
            held.remove(&self.user);
            crate::observe::metrics::STREAMS_OPEN.set(held.len() as i64);
        }
    }
}

impl StreamSlots {
    pub fn new(leases: Arc<Leases>) -> StreamSlots {
        StreamSlots {
            held: Mutex::default(),
            leases,
        }
    }

    /// The user's one slot: this instance's first (it also bounds this instance's
    /// streams), then the user's place across instances.
    pub async fn acquire(self: &Arc<Self>, user: &str, max: usize) -> Result<Slot, ApiError> {
        let mut slot = self.acquire_here(user, max)?;
        match self.leases.take("mev_share", user, 1).await {
            Place::Granted(lease) => slot._lease = Some(lease),
            Place::Full => return Err(already_open()),
        }
        Ok(slot)
    }

    fn acquire_here(self: &Arc<Self>, user: &str, max: usize) -> Result<Slot, ApiError> {
        let mut held = self
            .held
            .lock()
            .map_err(|_| ApiError::internal("stream slots"))?;
        if held.contains(user) {
            return Err(already_open());
        }
        if held.len() >= max {
            // Not SPEC's `no_mev_share_upstream` (no healthy host): the hosts are fine,
            // this instance holds `streams.max_streams` streams. Temporary: retry later.
            return Err(ApiError::new(
                503,
                "stream_capacity_reached",
                "this instance holds as many streams as it may; retry shortly",
            )
            .with_field("retry_after_sec", CAPACITY_RETRY_SECS)
            .with_header("Retry-After", CAPACITY_RETRY_SECS.to_string()));
        }
        held.insert(user.to_string());
        crate::observe::metrics::STREAMS_OPEN.set(held.len() as i64);
        Ok(Slot {
            slots: self.clone(),
            user: user.to_string(),
            _lease: None,
        })
    }
}

/// When a client refused for capacity should try again: streams end at least this often
/// somewhere on a busy instance, and a reconnect storm is spread by clients' jitter.
const CAPACITY_RETRY_SECS: u64 = 5;

fn already_open() -> ApiError {
    ApiError::new(
        429,
        "stream_cap_exceeded",
        "this user already has an open stream",
    )
}

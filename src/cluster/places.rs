//! Places held per owner under a cap (a key's WebSocket connections, its
//! subscriptions): counted on this instance first, then leased across instances
//! (`leases`) when clustered. A place is a guard: dropping it frees it both ways.

use super::leases::{Lease, Leases, Place};
use std::collections::HashMap;
use std::sync::{Arc, Mutex};

/// Places held per owner (API key, user, or client address when anonymous) under a cap,
/// leased under `scope` when clustered.
pub struct OwnerPlaces {
    scope: &'static str,
    open: Mutex<HashMap<String, usize>>,
    leases: Arc<Leases>,
}

/// One held place; dropping it frees the place here and gives its lease back.
pub struct OwnerPlace {
    all: Arc<OwnerPlaces>,
    owner: String,
    _lease: Option<Lease>,
}

impl Drop for OwnerPlace {
    fn drop(&mut self) {
        let mut open = self.all.open.lock().unwrap_or_else(|p| p.into_inner());
        if let Some(n) = open.get_mut(&self.owner) {
            *n -= 1;
            if *n == 0 {
                open.remove(&self.owner);
            }
        }
    }
}

impl OwnerPlaces {
    pub fn new(scope: &'static str, leases: Arc<Leases>) -> OwnerPlaces {
        OwnerPlaces {
            scope,
            open: Mutex::default(),
            leases,
        }
    }

    /// A place among the owner's `cap`: on this instance first, then across instances;
    /// `None` when every place is held.
    pub async fn take(self: &Arc<Self>, owner: String, cap: usize) -> Option<OwnerPlace> {
        let mut place = {
            let mut open = self.open.lock().unwrap_or_else(|p| p.into_inner());
            let n = open.entry(owner.clone()).or_insert(0);
            if *n >= cap {
                return None;
            }
            *n += 1;
            OwnerPlace {
                all: self.clone(),
                owner,
                _lease: None,
            }
        };
        match self.leases.take(self.scope, &place.owner, cap).await {
            Place::Granted(lease) => place._lease = Some(lease),
            Place::Full => return None,
        }
        Some(place)
    }
}

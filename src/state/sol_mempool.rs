//! The Solana mempool the edge can see. Solana has no public mempool: transactions go
//! to the leaders directly. The source here is **the transactions this instance's
//! senders accepted** (`/v1/sol/sender/tx` and `/bundle`), followed until they land by
//! `capture::sol::mempool`. Each entry belongs to the tenant whose key sent it: the
//! routes show a tenant its own only. Kept for [`WINDOW`] and at most [`CAPACITY`]
//! transactions (the oldest dropped first).

use serde_json::Value;
use std::collections::VecDeque;
use std::sync::Mutex;
use std::time::Duration;

/// How long a transaction is kept (mempool.space's rate window).
pub const WINDOW: Duration = Duration::from_secs(150);
pub const CAPACITY: usize = 10_000;

#[derive(Debug, Clone, PartialEq)]
pub enum Fate {
    Pending,
    Landed { slot: u64, after_ms: i64 },
    Failed { slot: u64, error: Value },
}

#[derive(Debug, Clone)]
pub struct Seen {
    /// The tenant whose key sent it.
    pub tenant: String,
    pub signature: String,
    pub fee_payer: String,
    /// `sender` or `bundle`.
    pub source: &'static str,
    /// Unix milliseconds.
    pub first_seen: i64,
    pub fate: Fate,
}

#[derive(Default)]
pub struct SolMempool {
    seen: Mutex<VecDeque<Seen>>,
}

impl SolMempool {
    /// A transaction a sender just had accepted.
    pub fn record(&self, tenant: &str, signature: &str, fee_payer: &str, source: &'static str) {
        let mut seen = self.seen.lock().unwrap_or_else(|p| p.into_inner());
        if seen
            .iter()
            .any(|s| s.signature == signature && s.tenant == tenant)
        {
            return;
        }
        if seen.len() >= CAPACITY {
            seen.pop_front();
        }
        seen.push_back(Seen {
            tenant: tenant.to_string(),
            signature: signature.to_string(),
            fee_payer: fee_payer.to_string(),
            source,
            first_seen: crate::clock::now_ms(),
            fate: Fate::Pending,
        });
    }

    /// What `tenant` sent inside the window, oldest first (`None`: every tenant's).
    pub fn window_of(&self, tenant: Option<&str>) -> Vec<Seen> {
        let mut all = self.window();
        if let Some(t) = tenant {
            all.retain(|s| s.tenant == t);
        }
        all
    }

    /// What is inside the window now, oldest first.
    pub fn window(&self) -> Vec<Seen> {
        let cutoff = crate::clock::now_ms() - WINDOW.as_millis() as i64;
        let mut seen = self.seen.lock().unwrap_or_else(|p| p.into_inner());
        while seen.front().is_some_and(|s| s.first_seen < cutoff) {
            seen.pop_front();
        }
        seen.iter().cloned().collect()
    }

    /// The signatures still pending, each once.
    pub fn pending(&self) -> Vec<String> {
        let mut sigs: Vec<String> = self
            .window()
            .into_iter()
            .filter(|s| s.fate == Fate::Pending)
            .map(|s| s.signature)
            .collect();
        sigs.sort();
        sigs.dedup();
        sigs
    }

    /// What became of `signature`.
    pub fn settle(&self, signature: &str, fate: Fate) {
        let mut seen = self.seen.lock().unwrap_or_else(|p| p.into_inner());
        for s in seen.iter_mut().filter(|s| s.signature == signature) {
            s.fate = fate.clone();
        }
    }
}

//! The peer graph's snapshots (`/v1/eth/intel/peer-graph`), by depth: a graph is
//! walked at most once per freshness span per depth, and concurrent asks share one walk.

use std::collections::HashMap;
use std::future::Future;
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

/// Snapshots by depth; one walk at a time.
#[derive(Default)]
pub struct PeerGraphs {
    snapshots: Mutex<HashMap<u8, (Instant, Arc<String>)>>,
    walking: tokio::sync::Mutex<()>,
}

impl PeerGraphs {
    /// The graph of `depth` taken less than `fresh` ago, else the one `walk` makes now
    /// (kept; a request that waited for another's walk takes that one's).
    pub async fn get_or_walk<E, F, Fut>(
        &self,
        depth: u8,
        fresh: Duration,
        walk: F,
    ) -> Result<Arc<String>, E>
    where
        F: FnOnce() -> Fut,
        Fut: Future<Output = Result<String, E>>,
    {
        if let Some(body) = self.fresh(depth, fresh) {
            return Ok(body);
        }
        let _walk = self.walking.lock().await;
        if let Some(body) = self.fresh(depth, fresh) {
            return Ok(body);
        }
        let body = Arc::new(walk().await?);
        if let Ok(mut s) = self.snapshots.lock() {
            s.insert(depth, (Instant::now(), body.clone()));
        }
        Ok(body)
    }

    fn fresh(&self, depth: u8, fresh: Duration) -> Option<Arc<String>> {
        let s = self.snapshots.lock().ok()?;
        s.get(&depth)
            .filter(|(at, _)| at.elapsed() < fresh)
            .map(|(_, b)| b.clone())
    }
}

//! The cache's tracker: the head and finalized block of each pool in use, and reorgs.

use super::*;
use crate::rpc::beacon_finality::{BeaconFinality, EXECUTION_POOL};

/// Follows the head and the finalized block of each pool the cache serves, and tells
/// a reorg by a head whose parent (or whose own hash at a height seen before) is not
/// what the edge had.
pub struct Tracker {
    pub gateway: Arc<Gateway>,
    pub pools: Arc<Pools>,
}

/// How many recent heights' hashes are kept to tell a reorg.
const RECENT: usize = 256;

#[async_trait::async_trait]
impl pingora_core::services::background::BackgroundService for Tracker {
    async fn start(&self, mut shutdown: pingora_core::server::ShutdownWatch) {
        let cache = &self.gateway.cache;
        if !cache.enabled() {
            return;
        }
        let mut recent: HashMap<String, BTreeMap<u64, String>> = HashMap::new();
        let mut beacon = BeaconFinality::default();
        let mut tick = tokio::time::interval(Duration::from_millis(cache.conf.track_interval_ms));
        tick.set_missed_tick_behavior(tokio::time::MissedTickBehavior::Delay);
        loop {
            tokio::select! {
                _ = tick.tick() => {}
                _ = shutdown.changed() => return,
            }
            for (name, view) in &cache.views {
                if !view.used.load(Ordering::Relaxed) {
                    continue;
                }
                let Some(pool) = self.pools.get(name) else {
                    continue;
                };
                let seen = recent.entry(name.clone()).or_default();
                if let Err(e) = self.track(pool, view, seen).await {
                    log::debug!("cache tracker: {name}: {e}");
                }
                if name == EXECUTION_POOL {
                    self.beacon_finality(pool, view, &mut beacon).await;
                }
            }
        }
    }
}

impl Tracker {
    async fn track(
        &self,
        pool: &crate::pools::Pool,
        view: &ChainView,
        seen: &mut BTreeMap<u64, String>,
    ) -> Result<(), String> {
        let calls = [
            Request::new(
                Id::index(0),
                "eth_getBlockByNumber",
                serde_json::json!(["latest", false]),
            ),
            Request::new(
                Id::index(1),
                "eth_getBlockByNumber",
                serde_json::json!(["finalized", false]),
            ),
        ];
        let body = Bytes::from(serde_json::to_vec(&calls).unwrap_or_default());
        let need = need_for(pool, BlockNeed::Head);
        let reply = self
            .gateway
            .read(pool, MethodClass::Read, need, &body, "cache-tracker")
            .await
            .map_err(|e| e.message)?;
        let answers: Vec<Response> =
            serde_json::from_slice(&reply.body).map_err(|e| e.to_string())?;
        let mut head = None;
        let mut finalized = None;
        for a in answers {
            let slot = a.id.as_index();
            if let Ok(block) = a.into_result() {
                match slot {
                    Some(0) => head = Some(block),
                    Some(1) => finalized = Some(block),
                    _ => {}
                }
            }
        }
        let head = head.ok_or("no head")?;
        let field = |b: &Value, k: &str| b.get(k).and_then(Value::as_str).map(str::to_string);
        let number = field(&head, "number")
            .and_then(|h| quantity(&h))
            .ok_or("head number")?;
        let hash = field(&head, "hash").ok_or("head hash")?;
        let parent = field(&head, "parentHash").unwrap_or_default();
        let mut reorged = seen.get(&number).is_some_and(|h| *h != hash);
        if let Some(below) = number.checked_sub(1).and_then(|n| seen.get(&n)) {
            reorged |= *below != parent;
        }
        if reorged {
            log::info!(
                "cache: reorg on {} at block {number}; answers not final dropped",
                pool.name
            );
            metrics::cache_reorg(&pool.name);
            self.gateway.cache.reorg(&pool.name);
            seen.retain(|n, _| *n < number);
            if let Some(n) = number.checked_sub(1) {
                seen.insert(n, parent.clone());
            }
        }
        seen.insert(number, hash);
        while seen.len() > RECENT {
            seen.pop_first();
        }
        view.head.store(number, Ordering::Relaxed);
        if let Some(f) = finalized
            .as_ref()
            .and_then(|b| field(b, "number"))
            .and_then(|h| quantity(&h))
        {
            // The finalized block only moves forward.
            view.finalized.fetch_max(f, Ordering::Relaxed);
            metrics::cache_finalized(&pool.name, view.finalized.load(Ordering::Relaxed));
        }
        Ok(())
    }
}

impl Tracker {
    /// Move the finalized block forward to the beacon pool's finalized checkpoint, once
    /// an execution node answers that checkpoint's hash at its number.
    async fn beacon_finality(
        &self,
        pool: &crate::pools::Pool,
        view: &ChainView,
        beacon: &mut BeaconFinality,
    ) {
        let Some(block) = beacon.poll(&self.pools, &self.gateway.client).await else {
            return;
        };
        if block.0 <= view.finalized.load(Ordering::Relaxed) {
            return;
        }
        let agreed = match &beacon.checked {
            Some((checked, verdict)) if *checked == block => *verdict,
            _ => {
                let params = serde_json::json!([format!("{:#x}", block.0), false]);
                let Ok((answer, _)) = self
                    .gateway
                    .read_call(pool, "eth_getBlockByNumber", params, "cache-tracker")
                    .await
                else {
                    return; // asked again next round
                };
                let hash = answer.get("hash").and_then(Value::as_str);
                let verdict = hash.is_some_and(|h| h.eq_ignore_ascii_case(&block.1));
                if !verdict {
                    log::warn!(
                        "cache: the beacon pool's finalized block {} is not the execution pool's; not used",
                        block.0
                    );
                }
                beacon.checked = Some((block.clone(), verdict));
                verdict
            }
        };
        if agreed {
            view.finalized.fetch_max(block.0, Ordering::Relaxed);
            metrics::cache_finalized(&pool.name, view.finalized.load(Ordering::Relaxed));
        }
    }
}

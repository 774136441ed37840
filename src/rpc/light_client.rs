//! The beacon light client followed in the background (`rpc.verify.root.light_client`):
//! bootstrapped from the operator's checkpoint, fed each round the beacon pool's sync
//! committee updates, finality and optimistic updates. What it trusts (the execution
//! block of its signed head, and of each finalized header) anchors the execution pool's
//! answers in place of a majority of its hosts (`src/rpc/anchor.rs`).
//!
//! A beacon host whose update does not verify is logged and the next host asked; one
//! that is only behind is passed over quietly. Until the client is synced (or when it
//! refused its checkpoint) anchors fall back to the majority, and say so.

use super::need::Need;
use super::Gateway;
use crate::config::LightClientConf;
use crate::errors::ApiError;
use crate::jsonrpc::methods::MethodClass;
use crate::jsonrpc::{Id, Request};
use crate::observe::metrics;
use crate::pools::{Host, Pool, Pools};
use crate::verify::block::{check_header, HeaderFacts};
use crate::verify::light_client::network::Network;
use crate::verify::light_client::types::{Bootstrap, Update, Versioned};
use crate::verify::light_client::{execution_facts, Applied, LightClient, Refusal};
use crate::verify::root::{Anchor, RootSource};
use crate::verify::state::At;
use crate::verify::{Verdict, Want};
use alloy_primitives::B256;
use serde::de::DeserializeOwned;
use serde_json::{json, Value};
use std::collections::BTreeMap;
use std::sync::{Arc, RwLock};
use std::time::Duration;

/// Trusted execution blocks kept by number (the head's and finalized ones, about one a
/// slot: a day of mainnet's 12-second slots).
const TRUSTED_KEPT: usize = 8192;
const TIMEOUT: Duration = Duration::from_secs(5);
/// A bootstrap is one committee; an update at most two (512 keys each, as hex JSON).
const MAX_ANSWER: usize = 4 * 1024 * 1024;
/// Updates asked for at once (`MAX_REQUEST_LIGHT_CLIENT_UPDATES`).
const MAX_UPDATES: u64 = 128;
const CLOCK_DISPARITY_MS: u64 = 500;

/// What the light client trusts, for the anchors to read.
#[derive(Default)]
pub struct LightRoots {
    state: RwLock<Option<Trusted>>,
}

struct Trusted {
    pool: String,
    head: Option<HeaderFacts>,
    /// When the head's slot began, and how long after it the head is still used.
    head_time: u64,
    stale_after: u64,
    finalized: Option<HeaderFacts>,
    by_number: BTreeMap<u64, HeaderFacts>,
}

impl LightRoots {
    /// The execution block of the client's signed head, when it follows `pool` and the
    /// head is recent: one `max_head_age_slots` behind the clock (a beacon pool that stopped
    /// answering, a checkpoint never followed) would answer `latest` with an old block,
    /// so the majority anchors instead, and says so.
    pub fn head(&self, pool: &str) -> Option<HeaderFacts> {
        let state = self.state.read().ok()?;
        let trusted = state.as_ref().filter(|t| t.pool == pool)?;
        let now = crate::clock::now() as u64;
        (now <= trusted.head_time.saturating_add(trusted.stale_after))
            .then_some(trusted.head)
            .flatten()
    }

    /// The execution block of the client's latest finalized header.
    pub fn finalized(&self, pool: &str) -> Option<HeaderFacts> {
        let state = self.state.read().ok()?;
        let trusted = state.as_ref().filter(|t| t.pool == pool)?;
        trusted.finalized
    }

    /// Execution block `number` of `pool`, when the client trusted it directly.
    pub fn at(&self, pool: &str, number: u64) -> Option<HeaderFacts> {
        let state = self.state.read().ok()?;
        let trusted = state.as_ref().filter(|t| t.pool == pool)?;
        trusted.by_number.get(&number).copied()
    }

    fn trust(&self, pool: &str, lc: &LightClient, applied: Applied, max_age_slots: u64) {
        let Ok(mut state) = self.state.write() else {
            return;
        };
        let trusted = state.get_or_insert_with(|| Trusted {
            pool: pool.to_string(),
            head: None,
            head_time: 0,
            stale_after: 0,
            finalized: None,
            by_number: BTreeMap::new(),
        });
        let head = execution_facts(lc.head());
        let finalized = execution_facts(lc.finalized());
        if applied.head.is_some() || trusted.head.is_none() {
            // A new signed head replaces blocks above it a reorganised head had.
            trusted.by_number.retain(|n, _| *n <= head.number);
            trusted.head = Some(head);
        }
        let network = lc.network();
        trusted.head_time = network.slot_start(lc.head().beacon.slot);
        trusted.stale_after = max_age_slots.saturating_mul(network.seconds_per_slot);
        trusted.finalized = Some(finalized);
        for block in [head, finalized] {
            trusted.by_number.insert(block.number, block);
        }
        while trusted.by_number.len() > TRUSTED_KEPT {
            trusted.by_number.pop_first();
        }
    }
}

/// The background service that follows the beacon pool.
pub struct Follower {
    pub gateway: Arc<Gateway>,
    pub pools: Arc<Pools>,
    pub conf: LightClientConf,
    pub network: Network,
}

#[async_trait::async_trait]
impl pingora_core::services::background::BackgroundService for Follower {
    async fn start(&self, mut shutdown: pingora_core::server::ShutdownWatch) {
        let poll = self
            .conf
            .poll_ms
            .map(Duration::from_millis)
            .unwrap_or(Duration::from_millis(self.network.seconds_per_slot * 500));
        let mut tick = tokio::time::interval(poll.max(Duration::from_millis(100)));
        tick.set_missed_tick_behavior(tokio::time::MissedTickBehavior::Delay);
        let mut client: Option<LightClient> = None;
        let mut refused = false;
        loop {
            tokio::select! {
                _ = tick.tick() => {}
                _ = shutdown.changed() => return,
            }
            if refused {
                continue;
            }
            if client.is_none() {
                match self.bootstrap().await {
                    Ok(None) => continue,
                    Ok(Some(lc)) => {
                        log::info!(
                            "light client: bootstrapped at slot {} (execution block {})",
                            lc.finalized().beacon.slot,
                            lc.finalized().execution.block_number
                        );
                        self.trust(&lc, Applied::default());
                        client = Some(lc);
                    }
                    Err(Fatal(why)) => {
                        log::error!("light client: {why}; answers stay anchored by majority");
                        refused = true;
                        continue;
                    }
                }
            }
            if let Some(lc) = client.as_mut() {
                self.follow(lc).await;
            }
        }
    }
}

/// A checkpoint the client will never take (older than `max_checkpoint_age_secs`).
struct Fatal(String);

impl Follower {
    /// What `lc` trusts now, for the anchors and the metrics.
    fn trust(&self, lc: &LightClient, applied: Applied) {
        let (roots, max_age) = (&self.gateway.checked.light, self.conf.max_head_age_slots);
        roots.trust(&self.conf.pool, lc, applied, max_age);
        let slots = metrics::LIGHT_CLIENT_SLOT.clone();
        let pool = self.conf.pool.as_str();
        slots
            .with_label_values(&[pool, "head"])
            .set(lc.head().beacon.slot as i64);
        slots
            .with_label_values(&[pool, "finalized"])
            .set(lc.finalized().beacon.slot as i64);
    }

    fn now(&self) -> u64 {
        self.now_ms() / 1000
    }

    fn now_ms(&self) -> u64 {
        crate::clock::now_ms() as u64
    }

    /// The slot the clock is in, allowing the spec's gossip clock disparity (500 ms): an
    /// update signed as a slot begins is not refused for a clock a little behind.
    fn current_slot(&self) -> u64 {
        self.network
            .slot_at((self.now_ms() + CLOCK_DISPARITY_MS) / 1000)
    }

    fn hosts(&self) -> Vec<Arc<Host>> {
        self.pools
            .get(&self.conf.beacon)
            .map(|p| p.candidates(None))
            .unwrap_or_default()
    }

    /// The checkpoint's bootstrap from the first beacon host that serves one that holds.
    /// `None`: no host served one yet (asked again next round).
    async fn bootstrap(&self) -> Result<Option<LightClient>, Fatal> {
        let root: B256 = self.conf.checkpoint.parse().unwrap_or_default();
        let path = format!("eth/v1/beacon/light_client/bootstrap/{root}");
        let mut last = None;
        for host in self.hosts() {
            let Some(b) = self.get::<Versioned<Bootstrap>>(&host, &path).await else {
                continue;
            };
            let now = self.now();
            let age = self.conf.max_checkpoint_age_secs;
            match LightClient::bootstrap(self.network.clone(), root, &b.data, now, age) {
                Ok(lc) => return Ok(Some(lc)),
                Err(Refusal::Stale(why)) => return Err(Fatal(why)),
                Err(Refusal::Invalid(why)) => {
                    log::warn!(
                        "light client: beacon host {} served a bad bootstrap: {why}",
                        host.id
                    );
                    last = Some(why);
                }
            }
        }
        let last = last.unwrap_or_else(|| "no beacon host answered".into());
        log::debug!("light client: no bootstrap yet ({last})");
        Ok(None)
    }

    /// One round: committees for the periods behind, then finality and the head.
    async fn follow(&self, lc: &mut LightClient) {
        let slot = self.current_slot();
        let behind = self.network.period(slot).saturating_sub(lc.period());
        if behind > 0 || !lc.knows_next_committee() {
            let count = (behind + 1).min(MAX_UPDATES);
            let path = format!(
                "eth/v1/beacon/light_client/updates?start_period={}&count={count}",
                lc.period()
            );
            self.apply_each::<Vec<Versioned<Update>>>(lc, &path, slot, |v| {
                v.into_iter().map(|u| u.data).collect()
            })
            .await;
        }
        for kind in ["finality_update", "optimistic_update"] {
            let path = format!("eth/v1/beacon/light_client/{kind}");
            self.apply_each::<Versioned<Update>>(lc, &path, slot, |u| vec![u.data])
                .await;
        }
    }

    /// `path`'s updates from the first host whose updates all hold (or are only stale).
    async fn apply_each<T: DeserializeOwned>(
        &self,
        lc: &mut LightClient,
        path: &str,
        slot: u64,
        updates: impl Fn(T) -> Vec<Update>,
    ) {
        for host in self.hosts() {
            let Some(answer) = self.get::<T>(&host, path).await else {
                continue;
            };
            let mut next = lc.clone();
            let mut forged = None;
            for update in updates(answer) {
                let outcome = next.process(&update, slot);
                let counted = match &outcome {
                    Ok(_) => "applied",
                    Err(Refusal::Stale(_)) => "stale",
                    Err(Refusal::Invalid(_)) => "refused",
                };
                metrics::LIGHT_CLIENT_UPDATES
                    .with_label_values(&[&host.id, counted])
                    .inc();
                match outcome {
                    Ok(applied) => self.trust(&next, applied),
                    Err(stale @ Refusal::Stale(_)) => {
                        log::debug!("light client: {} {path}: {}", host.id, stale.why())
                    }
                    Err(Refusal::Invalid(why)) => {
                        forged = Some(why);
                        break;
                    }
                }
            }
            match forged {
                None => {
                    *lc = next;
                    return;
                }
                Some(why) => log::warn!(
                    "light client: beacon host {} served an update that does not hold ({path}): {why}; skipped",
                    host.id
                ),
            }
        }
    }

    async fn get<T: DeserializeOwned>(&self, host: &Host, path: &str) -> Option<T> {
        let base = host.addr.path.trim_end_matches('/');
        let full = format!("{base}/{path}");
        let reply = self
            .gateway
            .client
            .send(host.call("GET", &full, "light-client"), TIMEOUT, MAX_ANSWER)
            .await
            .ok()?;
        if reply.status != 200 {
            return None;
        }
        match serde_json::from_slice(&reply.body) {
            Ok(v) => Some(v),
            Err(e) => {
                log::warn!(
                    "light client: beacon host {} answered {path} with what is not one: {e}",
                    host.id
                );
                None
            }
        }
    }
}

impl Gateway {
    /// Block `at` of `pool` as the light client trusts it. `None` (the majority decides)
    /// when no client follows the pool, it has no head yet, or the block is past its
    /// head or more than `window` blocks below it.
    pub(super) async fn light_anchor(
        &self,
        pool: &Pool,
        at: At,
        rid: &str,
    ) -> Result<Option<Anchor>, ApiError> {
        let roots = &self.checked.light;
        let Some(head) = roots.head(&pool.name) else {
            return Ok(None);
        };
        let number = match at {
            At::Latest => head.number,
            At::Finalized => match roots.finalized(&pool.name) {
                Some(f) => f.number,
                None => return Ok(None),
            },
            At::Number(n) => n,
            At::Hash(hash) => return self.light_anchor_by_hash(pool, hash, head, rid).await,
            At::Safe => return Ok(None),
        };
        self.light_anchor_at(pool, number, head, rid).await
    }

    async fn light_anchor_at(
        &self,
        pool: &Pool,
        number: u64,
        head: HeaderFacts,
        rid: &str,
    ) -> Result<Option<Anchor>, ApiError> {
        let window = self.conf.root.as_ref().map_or(0, |r| r.window);
        if number > head.number || head.number - number > window {
            return Ok(None);
        }
        let roots = &self.checked.light;
        let anchors = &self.checked.anchors;
        let trusted = |n: u64| {
            let kept = anchors
                .at_number(pool, n)
                .filter(|a| a.by == RootSource::LightClient);
            kept.map(|a| a.header).or_else(|| roots.at(&pool.name, n))
        };
        if let Some(header) = trusted(number) {
            anchors.keep(pool, light(header));
            return Ok(Some(light(header)));
        }
        let top = (number + 1..head.number).find_map(trusted).unwrap_or(head);
        let headers = self.headers_leading_to(pool, number, &top, rid).await?;
        for header in &headers {
            anchors.keep(pool, light(*header));
        }
        Ok(headers.first().map(|h| light(*h)))
    }

    /// A block named by hash is trusted when it is the block the light client trusts at
    /// its number; a block off that chain is refused.
    async fn light_anchor_by_hash(
        &self,
        pool: &Pool,
        hash: B256,
        head: HeaderFacts,
        rid: &str,
    ) -> Result<Option<Anchor>, ApiError> {
        let anchors = &self.checked.anchors;
        if let Some(kept) = anchors
            .at_hash(pool, hash)
            .filter(|a| a.by == RootSource::LightClient)
        {
            return Ok(Some(kept));
        }
        let call = Request::new(Id::index(1), "eth_getBlockByHash", json!([hash, false]));
        let reply = self
            .read(
                pool,
                MethodClass::Read,
                Need::default(),
                &call.to_bytes(),
                rid,
            )
            .await?;
        let block = serde_json::from_slice::<Value>(&reply.body)
            .ok()
            .and_then(|mut v| v.get_mut("result").map(Value::take))
            .filter(|b| b.is_object());
        let Some(Verdict::Proven(named)) = block.map(|b| check_header(&b, Want::Hash(hash))) else {
            return Ok(None);
        };
        let Some(anchor) = self.light_anchor_at(pool, named.number, head, rid).await? else {
            return Ok(None);
        };
        if anchor.header.hash != hash {
            return Err(ApiError::bad_gateway(
                "quorum_dispute",
                format!(
                    "block {hash} is not on the chain the light client follows: its block {} is {}",
                    named.number, anchor.header.hash
                ),
            ));
        }
        Ok(Some(anchor))
    }
}

fn light(header: HeaderFacts) -> Anchor {
    Anchor {
        header,
        by: RootSource::LightClient,
        agree: 0,
        asked: 0,
    }
}

//! The node side of watchlist push: one `accountSubscribe` per (account, commitment),
//! however many entries and tenants watch it, all on one PubSub WebSocket to a
//! `sol_rpc` host (capability `ws`). When that link fails, the subscriptions are
//! re-established on another host and each account is read once (`getAccountInfo`): a
//! change made while no link was up is delivered then, so none is missed.

use crate::pools::Pools;
use crate::rpc::Gateway;
use crate::state::sol_watch::{Change, Command, Key};
use crate::streams::node_link::NodeLink;
use serde_json::{json, Value};
use std::collections::HashMap;
use std::sync::Arc;
use std::time::Duration;
use tokio::sync::mpsc;

pub const POOL: &str = "sol_rpc";
const REQUEST_ID: &str = "sol-watchlist";

/// What a watched account looked like last (to deliver changes only, once each).
fn fingerprint(value: &Value) -> (Option<u64>, Value, Value) {
    (
        value["lamports"].as_u64(),
        value["owner"].clone(),
        value["data"].clone(),
    )
}

struct Watched {
    sub: Option<u64>,
    last: Option<(Option<u64>, Value, Value)>,
}

pub struct Driver {
    pub pools: Arc<Pools>,
    pub gateway: Arc<Gateway>,
    pub commands: mpsc::UnboundedReceiver<Command>,
    pub changes: mpsc::Sender<Change>,
}

/// The link's side of the registry: what is watched, under which node subscription,
/// on which node.
struct Linked {
    watched: HashMap<Key, Watched>,
    by_sub: HashMap<u64, Key>,
    link: Option<NodeLink>,
    /// The host a link just failed on, passed over when the next one opens.
    avoid: Option<String>,
    backoff: Duration,
}

impl Linked {
    /// Give up the link (its host is avoided next).
    fn drop_link(&mut self) {
        self.avoid = self.link.take().map(|l| l.host.id.clone());
    }
}

/// How opening a link went.
enum Opened {
    Up,
    /// Not now: try again (the wait, if any, is over).
    Retry,
    /// The registry has gone away: stop.
    Closed,
}

impl Driver {
    pub async fn run(mut self) {
        let mut s = Linked {
            watched: HashMap::new(),
            by_sub: HashMap::new(),
            link: None,
            avoid: None,
            backoff: Duration::from_millis(200),
        };
        loop {
            if s.link.is_none() && !s.watched.is_empty() {
                match self.open_link(&mut s).await {
                    Opened::Up => {}
                    Opened::Retry => continue,
                    Opened::Closed => return,
                }
            }
            let Some(l) = s.link.as_mut() else {
                // Nothing watched: wait for the first command.
                match self.commands.recv().await {
                    None => return,
                    Some(cmd) => self.apply_offline(cmd, &mut s.watched).await,
                }
                continue;
            };
            tokio::select! {
                cmd = self.commands.recv() => match cmd {
                    None => return,
                    Some(cmd) => self.apply(cmd, &mut s).await,
                },
                note = l.notification() => match note {
                    Ok(v) => self.notified(&v, &mut s).await,
                    Err(e) => {
                        log::info!("watchlist: link to {} ended ({e}); moving", l.host.id);
                        l.host.record_failure(&format!("pubsub: {e}"));
                        s.drop_link();
                    }
                },
            }
        }
    }

    /// Open a link to a host of the pool and subscribe every watched account on it, then
    /// fill the gap (what changed while no subscription was up). With no host to take
    /// it, wait (still taking commands), backing off.
    async fn open_link(&mut self, s: &mut Linked) -> Opened {
        if let Some(pool) = self.pools.get(POOL) {
            s.link = NodeLink::open(pool, s.avoid.as_deref()).await;
        }
        let Some(l) = s.link.as_mut() else {
            let sleep = tokio::time::sleep(s.backoff);
            tokio::pin!(sleep);
            s.backoff = (s.backoff * 2).min(Duration::from_secs(5));
            loop {
                tokio::select! {
                    _ = &mut sleep => return Opened::Retry,
                    cmd = self.commands.recv() => match cmd {
                        None => return Opened::Closed,
                        Some(cmd) => self.apply_offline(cmd, &mut s.watched).await,
                    },
                }
            }
        };
        s.backoff = Duration::from_millis(200);
        s.by_sub.clear();
        let keys: Vec<Key> = s.watched.keys().cloned().collect();
        for key in keys {
            match subscribe(l, &key).await {
                Ok(id) => {
                    s.by_sub.insert(id, key.clone());
                    if let Some(w) = s.watched.get_mut(&key) {
                        w.sub = Some(id);
                    }
                }
                Err(e) => {
                    log::warn!("watchlist: accountSubscribe on {}: {e}", l.host.id);
                    s.drop_link();
                    return Opened::Retry;
                }
            }
        }
        for (key, w) in s.watched.iter_mut() {
            if let Some(change) = self.read_now(key, w).await {
                let _ = self.changes.send(change).await;
            }
        }
        Opened::Up
    }

    /// A command while the link is up: subscribe or unsubscribe on it.
    async fn apply(&self, cmd: Command, s: &mut Linked) {
        let Some(l) = s.link.as_mut() else {
            return self.apply_offline(cmd, &mut s.watched).await;
        };
        match cmd {
            Command::Watch(key) => {
                if s.watched.contains_key(&key) {
                    return;
                }
                let mut w = Watched {
                    sub: None,
                    last: None,
                };
                self.baseline(&key, &mut w).await;
                match subscribe(l, &key).await {
                    Ok(id) => {
                        w.sub = Some(id);
                        s.by_sub.insert(id, key.clone());
                    }
                    Err(e) => {
                        log::warn!("watchlist: accountSubscribe on {}: {e}", l.host.id);
                        s.drop_link();
                    }
                }
                s.watched.insert(key, w);
            }
            Command::Unwatch(key) => {
                if let Some(id) = s.watched.remove(&key).and_then(|w| w.sub) {
                    s.by_sub.remove(&id);
                    if l.call("accountUnsubscribe", json!([id])).await.is_err() {
                        s.drop_link();
                    }
                }
            }
        }
    }

    /// A node notification: the change, when the account differs from what was
    /// delivered last.
    async fn notified(&self, v: &Value, s: &mut Linked) {
        let params = &v["params"];
        let Some(key) = params["subscription"]
            .as_u64()
            .and_then(|id| s.by_sub.get(&id))
        else {
            return;
        };
        let result = &params["result"];
        if let Some(w) = s.watched.get_mut(key) {
            let slot = result["context"]["slot"].as_u64();
            if let Some(change) = changed(key, w, slot, &result["value"]) {
                let _ = self.changes.send(change).await;
            }
        }
    }

    /// A command while no link is up: the registry changes; subscriptions follow when a
    /// link opens.
    async fn apply_offline(&self, cmd: Command, watched: &mut HashMap<Key, Watched>) {
        match cmd {
            Command::Watch(key) => {
                if let std::collections::hash_map::Entry::Vacant(slot) = watched.entry(key) {
                    let mut w = Watched {
                        sub: None,
                        last: None,
                    };
                    self.baseline(slot.key(), &mut w).await;
                    slot.insert(w);
                }
            }
            Command::Unwatch(key) => {
                watched.remove(&key);
            }
        }
    }

    /// The account's state now, over HTTP.
    async fn account(&self, key: &Key) -> Option<(Option<u64>, Value)> {
        let pool = self.pools.get(POOL)?;
        let (answer, _) = self
            .gateway
            .read_call(
                pool,
                "getAccountInfo",
                json!([key.pubkey, {"encoding": "base64", "commitment": key.commitment}]),
                REQUEST_ID,
            )
            .await
            .ok()?;
        Some((answer["context"]["slot"].as_u64(), answer["value"].clone()))
    }

    /// What a newly watched account looks like, so only later changes are delivered.
    async fn baseline(&self, key: &Key, w: &mut Watched) {
        if let Some((_, value)) = self.account(key).await {
            w.last = Some(fingerprint(&value));
        }
    }

    /// After a link (re)opens: the account now, as a change if it differs from the last.
    async fn read_now(&self, key: &Key, w: &mut Watched) -> Option<Change> {
        let (slot, value) = self.account(key).await?;
        changed(key, w, slot, &value)
    }
}

/// A change to deliver, when `value` differs from what was delivered last.
fn changed(key: &Key, w: &mut Watched, slot: Option<u64>, value: &Value) -> Option<Change> {
    let print = fingerprint(value);
    if w.last.as_ref() == Some(&print) {
        return None;
    }
    w.last = Some(print);
    Some(Change {
        pubkey: key.pubkey.clone(),
        commitment: key.commitment.clone(),
        slot: slot.unwrap_or(0),
        account: value.clone(),
    })
}

async fn subscribe(l: &mut NodeLink, key: &Key) -> Result<u64, String> {
    let id = l
        .call(
            "accountSubscribe",
            json!([key.pubkey, {"encoding": "base64", "commitment": key.commitment}]),
        )
        .await?;
    id.as_u64()
        .ok_or_else(|| "accountSubscribe: no subscription id".to_string())
}

//! Solana watchlist push: every entry (`/v1/sol/watchlist`) watches one account at one
//! commitment level; a change of that account is delivered to the entry's callback, by
//! webhook (`webhook.rs`) or on the tenant's own WebSocket channel (`/ws/sol/watchlist`,
//! `edge/sol_watch_ws.rs`). This is the registry and the delivery; the push service
//! running the node link and the reconciliation is `capture::sol::watch`.
//!
//! One node subscription serves every entry on the same (account, commitment), whoever
//! owns it (`capture::sol::watch::upstream`). The registry of entries is loaded from the
//! store at start, updated at once by this instance's create and delete, and re-read
//! every [`RECONCILE`] so entries made on another instance sharing the store are watched
//! too.
//!
//! **The delivery** (webhook body and WebSocket message alike):
//! `{"type": "account_changed", "delivery_id", "entry_id", "pubkey", "commitment",
//! "slot", "account": {lamports, owner, executable, rent_epoch (string), space, data
//! (base64), data_encoding} | null (closed), "sent_at"}`. Deliveries of one entry may
//! arrive out of order when one is retried: `slot` orders them.

use crate::config::secrets::Secret;
use crate::config::WatchlistConf;
use crate::pools::Pools;
use crate::rpc::Gateway;
use crate::state::{deliveries, webhook};
use crate::store::sol_watchlist::{DeadLetter, Letters, WatchEntry};
use crate::store::Store;
use bytes::Bytes;
use serde_json::{json, Value};
use std::collections::HashMap;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::{Arc, Mutex};
use std::time::Duration;
use tokio::sync::{broadcast, mpsc};

/// What the registry asks of the link.
#[derive(Debug)]
pub enum Command {
    Watch(Key),
    Unwatch(Key),
}

/// One shared subscription: an account at a commitment level.
#[derive(Debug, Clone, PartialEq, Eq, Hash)]
pub struct Key {
    pub pubkey: String,
    pub commitment: String,
}

/// How often the registry is re-read from the store.
pub const RECONCILE: Duration = Duration::from_secs(5);
/// Messages buffered for WebSocket channels (a channel that falls further behind is
/// closed as a slow consumer).
const WS_BUFFER: usize = 4096;

/// A watched account changed (from the node side).
#[derive(Debug, Clone)]
pub struct Change {
    pub pubkey: String,
    pub commitment: String,
    pub slot: u64,
    /// The node's account value (`getAccountInfo` / `accountNotification` shape), or
    /// null when the account was closed.
    pub account: Value,
}

/// A message for the WebSocket channels: the tenant and client id it is for.
#[derive(Debug)]
pub struct WsPush {
    pub tenant_id: String,
    pub client_id: String,
    pub text: String,
}

pub struct SolWatch {
    conf: WatchlistConf,
    secret: Option<Secret>,
    store: Store,
    pools: Arc<Pools>,
    gateway: Arc<Gateway>,
    registry: Mutex<HashMap<Key, Vec<WatchEntry>>>,
    commands: mpsc::UnboundedSender<Command>,
    /// Taken by `start` (the link's end of `commands`).
    pending_commands: Mutex<Option<mpsc::UnboundedReceiver<Command>>>,
    ws: broadcast::Sender<Arc<WsPush>>,
    sender: webhook::Sender,
    in_flight: AtomicUsize,
}

fn key_of(e: &WatchEntry) -> Key {
    Key {
        pubkey: e.pubkey.clone(),
        commitment: e.commitment.clone(),
    }
}

impl SolWatch {
    pub fn new(
        conf: WatchlistConf,
        secret: Option<Secret>,
        store: Store,
        pools: Arc<Pools>,
        gateway: Arc<Gateway>,
    ) -> Arc<SolWatch> {
        let (commands, rx) = mpsc::unbounded_channel();
        let sender = webhook::Sender::new(&conf.webhook);
        Arc::new(SolWatch {
            conf,
            secret,
            store,
            pools,
            gateway,
            registry: Mutex::new(HashMap::new()),
            commands,
            pending_commands: Mutex::new(Some(rx)),
            ws: broadcast::channel(WS_BUFFER).0,
            sender,
            in_flight: AtomicUsize::new(0),
        })
    }

    pub fn conf(&self) -> &WatchlistConf {
        &self.conf
    }

    /// Whether webhook entries can be signed here.
    pub fn webhooks_enabled(&self) -> bool {
        self.secret.is_some()
    }

    /// An entry's webhook signing secret (hex), when webhooks are configured.
    pub fn entry_secret(&self, entry_id: &str) -> Option<String> {
        self.secret
            .as_ref()
            .map(|m| webhook::entry_secret(m, webhook::SOL_WATCHLIST, entry_id))
    }

    /// The ranges callbacks may resolve to besides public addresses.
    /// The client entries are delivered with (tests and retries by hand use it too).
    pub fn sender(&self) -> &webhook::Sender {
        &self.sender
    }

    pub fn allow(&self) -> &[crate::net_policy::Cidr] {
        self.sender.allow()
    }

    /// The commands for the node link, taken once (by the push service that runs it).
    pub fn take_commands(&self) -> Option<mpsc::UnboundedReceiver<Command>> {
        (self.pending_commands.lock())
            .unwrap_or_else(|p| p.into_inner())
            .take()
    }

    pub fn pools(&self) -> &Arc<Pools> {
        &self.pools
    }

    pub fn gateway(&self) -> &Arc<Gateway> {
        &self.gateway
    }

    /// Messages for the WebSocket channels.
    pub fn ws_feed(&self) -> broadcast::Receiver<Arc<WsPush>> {
        self.ws.subscribe()
    }

    /// A new entry is watched from now (this instance's create).
    pub fn added(&self, entry: WatchEntry) {
        let key = key_of(&entry);
        let mut reg = self.registry.lock().unwrap_or_else(|p| p.into_inner());
        let list = reg.entry(key.clone()).or_default();
        if list.iter().any(|e| e.id == entry.id) {
            return;
        }
        list.push(entry);
        if list.len() == 1 {
            let _ = self.commands.send(Command::Watch(key));
        }
    }

    /// An entry is no longer watched (this instance's delete).
    pub fn removed(&self, entry_id: &str) {
        let mut reg = self.registry.lock().unwrap_or_else(|p| p.into_inner());
        let mut emptied = None;
        for (key, list) in reg.iter_mut() {
            let before = list.len();
            list.retain(|e| e.id != entry_id);
            if before != list.len() && list.is_empty() {
                emptied = Some(key.clone());
            }
        }
        if let Some(key) = emptied {
            reg.remove(&key);
            let _ = self.commands.send(Command::Unwatch(key));
        }
    }

    /// Make the registry the store's entries (added and removed elsewhere included).
    pub async fn reconcile(&self) -> Result<(), String> {
        let entries = self
            .store
            .all_watch_entries()
            .await
            .map_err(|e| format!("reading entries: {e}"))?;
        let mut fresh: HashMap<Key, Vec<WatchEntry>> = HashMap::new();
        for e in entries {
            fresh.entry(key_of(&e)).or_default().push(e);
        }
        let mut reg = self.registry.lock().unwrap_or_else(|p| p.into_inner());
        for key in reg.keys() {
            if !fresh.contains_key(key) {
                let _ = self.commands.send(Command::Unwatch(key.clone()));
            }
        }
        for key in fresh.keys() {
            if !reg.contains_key(key) {
                let _ = self.commands.send(Command::Watch(key.clone()));
            }
        }
        *reg = fresh;
        Ok(())
    }

    /// Deliver one change to every entry watching it.
    pub fn dispatch(self: &Arc<Self>, change: Change) {
        let entries = {
            let reg = self.registry.lock().unwrap_or_else(|p| p.into_inner());
            reg.get(&Key {
                pubkey: change.pubkey.clone(),
                commitment: change.commitment.clone(),
            })
            .cloned()
            .unwrap_or_default()
        };
        for entry in entries {
            let delivery_id = uuid::Uuid::new_v4().to_string();
            let body = payload(&entry, &change, &delivery_id).to_string();
            if entry.callback_type == "ws" {
                let _ = self.ws.send(Arc::new(WsPush {
                    tenant_id: entry.tenant_id.clone(),
                    client_id: entry.callback_url.clone(),
                    text: body,
                }));
                continue;
            }
            if self.in_flight.fetch_add(1, Ordering::SeqCst) >= self.conf.webhook.max_pending {
                self.in_flight.fetch_sub(1, Ordering::SeqCst);
                let this = self.clone();
                tokio::spawn(async move {
                    this.dead_letter(&entry, body, &delivery_id, (0, "delivery queue full"))
                        .await;
                });
                continue;
            }
            let this = self.clone();
            tokio::spawn(async move {
                this.deliver(entry, body, delivery_id).await;
                this.in_flight.fetch_sub(1, Ordering::SeqCst);
            });
        }
    }

    /// Every attempt of one webhook delivery, then a dead letter if none succeeded.
    async fn deliver(&self, entry: WatchEntry, body: String, delivery_id: String) {
        let Some(secret) = self.entry_secret(&entry.id) else {
            let failed = (0, "webhooks are not configured here");
            self.dead_letter(&entry, body, &delivery_id, failed).await;
            return;
        };
        let bytes = Bytes::from(body.clone());
        let sent = self
            .sender
            .deliver(&entry.callback_url, &bytes, &secret, &delivery_id)
            .await;
        match sent {
            Ok(n) => {
                let (store, of) = (&self.store, Letters::SolWatchlist);
                deliveries::record(store, of, &entry.id, &delivery_id, Ok(n)).await;
            }
            Err((attempts, last)) => {
                log::info!(
                    "watchlist: delivery {delivery_id} of entry {} failed {attempts} times: {last}",
                    entry.id
                );
                self.dead_letter(&entry, body, &delivery_id, (attempts, &last))
                    .await;
            }
        }
    }

    /// A delivery that failed every attempt: logged, and kept under its delivery id.
    async fn dead_letter(
        &self,
        entry: &WatchEntry,
        payload: String,
        delivery_id: &str,
        (attempts, why): (u32, &str),
    ) {
        let of = Letters::SolWatchlist;
        deliveries::record(
            &self.store,
            of,
            &entry.id,
            delivery_id,
            Err((attempts, why)),
        )
        .await;
        let d = DeadLetter {
            id: delivery_id.to_string(),
            entry_id: entry.id.clone(),
            tenant_id: entry.tenant_id.clone(),
            payload,
            attempts: attempts as i64,
            last_error: why.chars().take(500).collect(),
            created_at: crate::clock::now(),
        };
        if let Err(e) = self.store.add_dead_letter(Letters::SolWatchlist, &d).await {
            log::warn!(
                "watchlist: keeping a dead letter of entry {}: {e}",
                entry.id
            );
        }
    }
}

/// The delivery body.
pub fn payload(entry: &WatchEntry, change: &Change, delivery_id: &str) -> Value {
    let a = &change.account;
    // A closed account reads as no lamports and no data.
    let closed =
        a.is_null() || (a["lamports"].as_u64() == Some(0) && a["space"].as_u64().unwrap_or(0) == 0);
    let account = if closed {
        Value::Null
    } else {
        json!({
            "lamports": a["lamports"],
            "owner": a["owner"],
            "executable": a["executable"],
            "rent_epoch": a["rentEpoch"].as_u64().map(|e| e.to_string()),
            "space": a["space"],
            "data": a["data"].get(0),
            "data_encoding": "base64",
        })
    };
    json!({
        "type": "account_changed",
        "delivery_id": delivery_id,
        "entry_id": entry.id,
        "pubkey": change.pubkey,
        "commitment": change.commitment,
        "slot": change.slot,
        "account": account,
        "sent_at": crate::clock::now(),
    })
}

//! `GET /sse/eth-mev-share`: the MEV-Share hint stream, relayed event by event.
//!
//! One open stream per user, across every instance of a clustered edge (the slot is a
//! guard, released on every exit path: client gone, upstream gone, window over, process
//! shutdown; a killed instance's slots free themselves within `cluster::LEASE_TTL`). Refusals happen before the first
//! byte and use the SSE envelope. While nothing flows, a `:ping` comment goes out every
//! `ping_interval_secs`; after `mev_share_window_secs` the server ends the stream.

use crate::cluster::leases::{Lease, Leases, Place};
use crate::config::StreamsConf;
use crate::errors::ApiError;
use crate::pools::Pool;
use crate::reply::EventStream;
use crate::upstream::UpstreamClient;
use bytes::Bytes;
use std::collections::HashSet;
use std::sync::{Arc, Mutex};
use std::time::Duration;

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

/// Open the caller's stream: the slot and an upstream first (refusals happen here, before
/// any byte goes out), then a producer relaying hints as the upstream framed them, a
/// `:ping` comment whenever nothing flowed for `ping_interval_secs`, and the end of the
/// stream after `mev_share_window_secs` or when the upstream ends (the client reconnects).
pub async fn open(
    slots: &Arc<StreamSlots>,
    user: &str,
    pool: Option<&Pool>,
    client: &UpstreamClient,
    conf: &StreamsConf,
    request_id: &str,
) -> Result<EventStream, ApiError> {
    let slot = slots.acquire(user, conf.max_streams).await?;
    let hosts = pool.map(|p| p.candidates(None)).unwrap_or_default();
    if hosts.is_empty() {
        return Err(ApiError::new(
            503,
            "no_mev_share_upstream",
            "no healthy MEV-Share host",
        ));
    }
    let mut upstream = None;
    let mut last = String::new();
    for host in &hosts {
        let call = host.call("GET", &host.addr.path, request_id);
        match client.open(call, Duration::from_secs(5)).await {
            Ok((200, s)) => {
                upstream = Some((host.id.clone(), s));
                break;
            }
            Ok((status, _)) => last = format!("{}: HTTP {status}", host.id),
            Err(e) => {
                host.record_failure(&format!("mev-share: {e}"));
                last = format!("{}: {e}", host.id);
            }
        }
    }
    let Some((host_id, mut up)) = upstream else {
        return Err(ApiError::new(
            502,
            "mev_share_unavailable",
            format!("no MEV-Share upstream answered ({last})"),
        ));
    };
    let window = Duration::from_secs(conf.mev_share_window_secs);
    let ping_every = Duration::from_secs(conf.ping_interval_secs);
    let headers = vec![
        ("Cache-Control", "no-cache".to_string()),
        ("X-Accel-Buffering", "no".to_string()),
    ];
    Ok(EventStream::spawn(
        "text/event-stream",
        headers,
        Some(host_id),
        16,
        move |out| async move {
            let _slot = slot;
            // The upstream is read by its own task, so waiting for a chunk can be cut
            // short by the ping timer without cancelling a read half-way.
            let (tx, mut rx) = tokio::sync::mpsc::channel::<Bytes>(16);
            let _reader = AbortOnDrop(tokio::spawn(async move {
                while let Ok(Some(chunk)) = up.read_response_body().await {
                    if tx.send(chunk).await.is_err() {
                        break;
                    }
                }
            }));
            let window = tokio::time::sleep(window);
            tokio::pin!(window);
            loop {
                let chunk = tokio::select! {
                    _ = &mut window => break,
                    chunk = tokio::time::timeout(ping_every, rx.recv()) => chunk,
                };
                let send = match chunk {
                    Ok(Some(bytes)) => bytes,
                    Ok(None) => break,
                    Err(_idle) => Bytes::from_static(b":ping\n\n"),
                };
                if out.send(send).await.is_err() {
                    break;
                }
            }
        },
    ))
}

/// Stops the upstream reader task whichever way the stream ends.
struct AbortOnDrop(tokio::task::JoinHandle<()>);

impl Drop for AbortOnDrop {
    fn drop(&mut self) {
        self.0.abort();
    }
}

//! `GET /sse/eth-mev-share`: the MEV-Share hint stream, relayed event by event.
//!
//! One open stream per user, across every instance of a clustered edge (the slot is a
//! guard, released on every exit path: client gone, upstream gone, window over, process
//! shutdown; a killed instance's slots free themselves within `cluster::LEASE_TTL`). Refusals happen before the first
//! byte and use the SSE envelope. While nothing flows, a `:ping` comment goes out every
//! `ping_interval_secs`; after `mev_share_window_secs` the server ends the stream.

use crate::config::StreamsConf;
use crate::errors::ApiError;
use crate::pools::Pool;
use crate::reply::EventStream;
use crate::state::stream_slots::StreamSlots;
use crate::streams::first_host::{open_first, StreamAsk};
use crate::upstream::UpstreamClient;
use bytes::Bytes;
use std::sync::Arc;
use std::time::Duration;

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
    let ask = StreamAsk {
        rest: "",
        last_event_id: None,
        request_id,
        timeout: Duration::from_secs(5),
        what: "mev-share",
    };
    let (host, mut up) = open_first(client, &hosts, &ask).await.map_err(|last| {
        ApiError::new(
            502,
            "mev_share_unavailable",
            format!("no MEV-Share upstream answered ({last})"),
        )
    })?;
    let host_id = host.id.clone();
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

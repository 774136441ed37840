//! `GET /sse/eth-mev-share`: the MEV-Share hint stream, relayed event by event.
//!
//! One open stream per user (the slot is a guard, released on every exit path: client
//! gone, upstream gone, window over, process shutdown). Refusals happen before the first
//! byte and use the SSE envelope. While nothing flows, a `:ping` comment goes out every
//! `ping_interval_secs`; after `mev_share_window_secs` the server ends the stream.

use crate::config::StreamsConf;
use crate::errors::ApiError;
use crate::pools::Pool;
use crate::upstream::UpstreamClient;
use bytes::Bytes;
use pingora_http::ResponseHeader;
use pingora_proxy::Session;
use std::collections::HashSet;
use std::sync::Mutex;
use std::time::Duration;

/// Who holds an open stream.
#[derive(Default)]
pub struct StreamSlots {
    held: Mutex<HashSet<String>>,
}

/// Holding one user's slot; dropping it frees the slot.
pub struct Slot<'a> {
    slots: &'a StreamSlots,
    user: String,
}

impl Drop for Slot<'_> {
    fn drop(&mut self) {
        if let Ok(mut held) = self.slots.held.lock() {
            held.remove(&self.user);
            crate::observe::metrics::STREAMS_OPEN.set(held.len() as i64);
        }
    }
}

impl StreamSlots {
    pub fn acquire(&self, user: &str, max: usize) -> Result<Slot<'_>, ApiError> {
        let mut held = self
            .held
            .lock()
            .map_err(|_| ApiError::internal("stream slots"))?;
        if held.contains(user) {
            return Err(ApiError::new(
                429,
                "stream_cap_exceeded",
                "this user already has an open stream",
            ));
        }
        if held.len() >= max {
            return Err(ApiError::new(
                503,
                "no_mev_share_upstream",
                "stream capacity reached",
            ));
        }
        held.insert(user.to_string());
        crate::observe::metrics::STREAMS_OPEN.set(held.len() as i64);
        Ok(Slot {
            slots: self,
            user: user.to_string(),
        })
    }
}

/// Relay the stream. `Err` only before anything was written downstream.
#[allow(clippy::too_many_arguments)]
pub async fn serve(
    session: &mut Session,
    slots: &StreamSlots,
    user: &str,
    pool: Option<&Pool>,
    client: &UpstreamClient,
    conf: &StreamsConf,
    request_id: &str,
    extra_headers: &[(&'static str, String)],
) -> Result<Option<String>, ApiError> {
    let _slot = slots.acquire(user, conf.max_streams)?;
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

    let mut h = ResponseHeader::build(200, Some(8)).map_err(|_| ApiError::internal("header"))?;
    for (k, v) in [
        ("Server", "chainedge"),
        ("X-Request-Id", request_id),
        ("Content-Type", "text/event-stream"),
        ("Cache-Control", "no-cache"),
        ("X-Accel-Buffering", "no"),
    ] {
        let _ = h.insert_header(k, v);
    }
    for (k, v) in extra_headers {
        let _ = h.append_header(*k, v.as_str());
    }
    session.set_read_timeout(None);
    if session
        .write_response_header(Box::new(h), false)
        .await
        .is_err()
    {
        return Ok(Some(host_id));
    }

    // The upstream is read by its own task, so waiting for a chunk can be cut short by
    // the ping timer without cancelling a read half-way.
    let (tx, mut rx) = tokio::sync::mpsc::channel::<Bytes>(16);
    let reader = AbortOnDrop(tokio::spawn(async move {
        while let Ok(Some(chunk)) = up.read_response_body().await {
            if tx.send(chunk).await.is_err() {
                break;
            }
        }
    }));
    let window = tokio::time::sleep(Duration::from_secs(conf.mev_share_window_secs));
    tokio::pin!(window);
    let ping_every = Duration::from_secs(conf.ping_interval_secs);
    loop {
        tokio::select! {
            _ = &mut window => break,
            chunk = tokio::time::timeout(ping_every, rx.recv()) => match chunk {
                // Hints go out as the upstream framed them.
                Ok(Some(bytes)) => {
                    if session.write_response_body(Some(bytes), false).await.is_err() {
                        return Ok(Some(host_id));
                    }
                }
                // Upstream finished or failed: end the stream; the client reconnects.
                Ok(None) => break,
                Err(_idle) => {
                    if session
                        .write_response_body(Some(Bytes::from_static(b":ping\n\n")), false)
                        .await
                        .is_err()
                    {
                        return Ok(Some(host_id));
                    }
                }
            },
        }
    }
    drop(reader);
    let _ = session.write_response_body(None, true).await;
    Ok(Some(host_id))
}

/// Stops the upstream reader task whichever way the stream ends.
struct AbortOnDrop(tokio::task::JoinHandle<()>);

impl Drop for AbortOnDrop {
    fn drop(&mut self) {
        self.0.abort();
    }
}

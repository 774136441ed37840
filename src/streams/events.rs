//! Shared event streams (beacon `GET /eth/v1/events`): one node stream per (pool, topic
//! set), fanned out to every client that asked for the same topics.
//!
//! A driver task holds the node stream on the first host that answers 200. When the node
//! ends the stream or fails, the driver opens it on another host (the failed one last)
//! without closing any client; it sends the node's last `id:` as `Last-Event-ID` where the
//! node gives ids, and it never delivers the same event twice (events are remembered by
//! content for the last `RECENT` of them: a head seen on the old node is not repeated by
//! the new one). Clients get the edge's own ids (`<stream>-<seq>`), so a client that
//! reconnects with `Last-Event-ID` while the shared stream lives is given what it missed
//! from the last `RECENT` events.
//!
//! Fan-out is a bounded broadcast: a client that falls `BACKLOG` events behind is closed
//! (it reconnects with `Last-Event-ID`) rather than buffered. The last client to leave
//! stops the driver and the node stream.

use crate::errors::ApiError;
use crate::observe::metrics;
use crate::pools::Host;
use crate::reply::EventStream;
use crate::streams::first_host::{open_first, StreamAsk};
use crate::upstream::UpstreamClient;
use bytes::{Bytes, BytesMut};
use std::collections::{HashMap, VecDeque};
use std::hash::BuildHasher;
use std::sync::{Arc, Mutex, Weak};
use std::time::Duration;
use tokio::sync::{broadcast, watch};

/// Events a client may fall behind before it is closed.
const BACKLOG: usize = 256;
/// Events kept for replay and duplicate suppression.
const RECENT: usize = 256;
/// How long a node has to answer the stream's request with its head.
const OPEN_TIMEOUT: Duration = Duration::from_secs(5);
/// Largest event accepted from a node (a beacon `block` event is a few hundred bytes).
const MAX_EVENT: usize = 1 << 20;
/// Longest wait between attempts while no node gives the stream.
const MAX_BACKOFF: Duration = Duration::from_secs(2);
/// Metrics label of these streams.
const KIND: &str = "beacon_events";

/// Every shared event stream of the process.
#[derive(Default)]
pub struct EventsHub {
    streams: Mutex<HashMap<String, Weak<Shared>>>,
}

/// What a client asked for: the pool's hosts that may serve it, the node path with its
/// query (`eth/v1/events?topics=head,block`), and its identity for sharing.
pub struct EventsRequest {
    pub pool: String,
    pub hosts: Vec<Arc<Host>>,
    /// Path and query under the host's base path.
    pub rest: String,
    /// The topics, sorted and deduplicated: streams with the same set are one stream.
    pub topics: Vec<String>,
    /// The client's `Last-Event-ID`, when it reconnects.
    pub last_event_id: Option<String>,
    pub ping_every: Duration,
}

/// One node stream and its fan-out.
struct Shared {
    key: String,
    pool: String,
    /// Distinguishes this stream's ids from an earlier stream's with the same key.
    epoch: u32,
    tx: broadcast::Sender<Arc<Event>>,
    recent: Mutex<VecDeque<Arc<Event>>>,
    serving: watch::Receiver<NodeState>,
    hub: Weak<EventsHub>,
    driver: tokio::task::JoinHandle<()>,
}

/// Where the node stream stands.
#[derive(Clone)]
enum NodeState {
    Starting,
    /// A host gives the stream.
    Serving(String),
    /// Every host was tried and none gave it (the driver keeps trying while clients wait).
    Failing(String),
}

struct Event {
    seq: u64,
    /// The event as clients get it: `id:` then the node's own lines.
    wire: Bytes,
}

impl Drop for Shared {
    fn drop(&mut self) {
        self.driver.abort();
        metrics::UPSTREAM_SUBSCRIPTIONS
            .with_label_values(&[&self.pool, KIND])
            .dec();
        if let Some(hub) = self.hub.upgrade() {
            if let Ok(mut streams) = hub.streams.lock() {
                if streams
                    .get(&self.key)
                    .is_some_and(|w| w.strong_count() == 0)
                {
                    streams.remove(&self.key);
                }
            }
        }
    }
}

impl EventsHub {
    /// The client's stream: joined to the shared node stream for its topics (opened if it
    /// is the first), answered once a node serves it (502 when none does within
    /// `OPEN_TIMEOUT`).
    pub async fn subscribe(
        self: &Arc<Self>,
        client: &Arc<UpstreamClient>,
        req: EventsRequest,
        request_id: &str,
    ) -> Result<EventStream, ApiError> {
        if req.hosts.is_empty() {
            return Err(ApiError::new(
                503,
                "no_upstream",
                format!("no healthy host in pool {} serves events", req.pool),
            ));
        }
        let shared = self.shared(client, &req, request_id)?;
        let mut serving = shared.serving.clone();
        let state = tokio::time::timeout(
            OPEN_TIMEOUT * 2,
            serving.wait_for(|s| !matches!(s, NodeState::Starting)),
        )
        .await
        .ok()
        .and_then(|r| r.ok().map(|s| s.clone()));
        let host = match state {
            Some(NodeState::Serving(host)) => host,
            Some(NodeState::Failing(why)) => {
                return Err(ApiError::bad_gateway(
                    "upstream_unavailable",
                    format!("no node gave the event stream; last: {why}"),
                ))
            }
            _ => {
                return Err(ApiError::bad_gateway(
                    "upstream_unavailable",
                    "no node gave the event stream in time",
                ))
            }
        };
        let replay = shared.missed_since(req.last_event_id.as_deref());
        let mut rx = shared.tx.subscribe();
        let pool = shared.pool.clone();
        let ping_every = req.ping_every;
        metrics::SUBSCRIPTION_CLIENTS
            .with_label_values(&[&pool, KIND])
            .inc();
        let headers = vec![
            ("Cache-Control", "no-cache".to_string()),
            ("X-Accel-Buffering", "no".to_string()),
        ];
        Ok(EventStream::spawn(
            "text/event-stream",
            headers,
            Some(host),
            16,
            move |out| async move {
                let _client = ClientGauge(pool);
                let _shared = shared;
                let mut last = 0;
                for e in replay {
                    last = e.seq;
                    if out.send(e.wire.clone()).await.is_err() {
                        return;
                    }
                }
                loop {
                    let next = match tokio::time::timeout(ping_every, rx.recv()).await {
                        Ok(Ok(e)) if e.seq > last || e.seq == 0 => {
                            last = last.max(e.seq);
                            e.wire.clone()
                        }
                        Ok(Ok(_)) => continue,
                        Ok(Err(broadcast::error::RecvError::Lagged(_))) => {
                            metrics::SSE_SLOW_CONSUMERS.inc();
                            return;
                        }
                        Ok(Err(broadcast::error::RecvError::Closed)) => return,
                        Err(_idle) => Bytes::from_static(b":ping\n\n"),
                    };
                    if out.send(next).await.is_err() {
                        return;
                    }
                }
            },
        ))
    }

    fn shared(
        self: &Arc<Self>,
        client: &Arc<UpstreamClient>,
        req: &EventsRequest,
        request_id: &str,
    ) -> Result<Arc<Shared>, ApiError> {
        let key = format!("{}|{}", req.pool, req.topics.join(","));
        let mut streams = self
            .streams
            .lock()
            .map_err(|_| ApiError::internal("event streams"))?;
        if let Some(live) = streams.get(&key).and_then(Weak::upgrade) {
            return Ok(live);
        }
        let (tx, _) = broadcast::channel(BACKLOG);
        let (serving_tx, serving) = watch::channel(NodeState::Starting);
        let shared = Arc::new_cyclic(|weak: &Weak<Shared>| {
            let driver = tokio::spawn(drive(
                weak.clone(),
                client.clone(),
                req.hosts.clone(),
                req.rest.clone(),
                serving_tx,
                request_id.to_string(),
            ));
            Shared {
                key: key.clone(),
                pool: req.pool.clone(),
                epoch: rand::random(),
                tx,
                recent: Mutex::new(VecDeque::with_capacity(RECENT)),
                serving,
                hub: Arc::downgrade(self),
                driver,
            }
        });
        metrics::UPSTREAM_SUBSCRIPTIONS
            .with_label_values(&[&req.pool, KIND])
            .inc();
        streams.insert(key, Arc::downgrade(&shared));
        Ok(shared)
    }
}

impl Shared {
    /// Events after the client's `Last-Event-ID`, when it is one of this stream's and
    /// still remembered; none otherwise.
    fn missed_since(&self, last_event_id: Option<&str>) -> Vec<Arc<Event>> {
        let Some((epoch, seq)) = last_event_id.and_then(|id| id.split_once('-')) else {
            return Vec::new();
        };
        let (Ok(epoch), Ok(seq)) = (epoch.parse::<u32>(), seq.parse::<u64>()) else {
            return Vec::new();
        };
        if epoch != self.epoch {
            return Vec::new();
        }
        let recent = self.recent.lock().map(|r| r.clone()).unwrap_or_default();
        recent.into_iter().filter(|e| e.seq > seq).collect()
    }

    /// Deliver one node event once: comments (keep-alives) as they are, events with the
    /// edge's id unless one with the same content was delivered recently.
    fn deliver(&self, block: &[u8], seen: &mut Seen, next_seq: &mut u64) {
        if block.iter().all(|b| b.is_ascii_whitespace()) {
            return;
        }
        let is_comment = block
            .split(|b| *b == b'\n')
            .filter(|l| !l.is_empty())
            .all(|l| l.starts_with(b":"));
        if is_comment {
            let mut wire = BytesMut::with_capacity(block.len() + 2);
            wire.extend_from_slice(block);
            wire.extend_from_slice(b"\n\n");
            let _ = self.tx.send(Arc::new(Event {
                seq: 0,
                wire: wire.freeze(),
            }));
            return;
        }
        // Content without the node's own id: the same event from two nodes is one event.
        let content: Vec<&[u8]> = block
            .split(|b| *b == b'\n')
            .filter(|l| !l.starts_with(b"id:") && !l.starts_with(b":"))
            .collect();
        if !seen.first_time(&content) {
            return;
        }
        *next_seq += 1;
        let mut wire = BytesMut::with_capacity(block.len() + 32);
        wire.extend_from_slice(format!("id: {}-{}\n", self.epoch, next_seq).as_bytes());
        for line in content {
            wire.extend_from_slice(line);
            wire.extend_from_slice(b"\n");
        }
        wire.extend_from_slice(b"\n");
        let event = Arc::new(Event {
            seq: *next_seq,
            wire: wire.freeze(),
        });
        if let Ok(mut recent) = self.recent.lock() {
            if recent.len() == RECENT {
                recent.pop_front();
            }
            recent.push_back(event.clone());
        }
        let _ = self.tx.send(event);
    }
}

/// Events delivered recently, by a hash of their content.
struct Seen {
    hashes: VecDeque<u64>,
    state: std::collections::hash_map::RandomState,
}

impl Seen {
    fn first_time(&mut self, content: &[&[u8]]) -> bool {
        let h = self.state.hash_one(content);
        if self.hashes.contains(&h) {
            return false;
        }
        if self.hashes.len() == RECENT {
            self.hashes.pop_front();
        }
        self.hashes.push_back(h);
        true
    }
}

/// Hold the node stream while any client holds the shared stream, moving between hosts.
async fn drive(
    shared: Weak<Shared>,
    client: Arc<UpstreamClient>,
    hosts: Vec<Arc<Host>>,
    rest: String,
    serving: watch::Sender<NodeState>,
    request_id: String,
) {
    let mut seen = Seen {
        hashes: VecDeque::with_capacity(RECENT),
        state: Default::default(),
    };
    let mut next_seq = 0u64;
    let mut node_last_id: Option<String> = None;
    let mut failed: Option<String> = None;
    let mut backoff = Duration::from_millis(100);
    loop {
        let mut order = hosts.clone();
        // The host that just failed goes last, not out: it may be the only one.
        order.sort_by_key(|h| Some(&h.id) == failed.as_ref());
        let ask = StreamAsk {
            rest: &rest,
            last_event_id: node_last_id.as_deref(),
            request_id: &request_id,
            timeout: OPEN_TIMEOUT,
            what: "events",
        };
        let (host, mut session) = match open_first(&client, &order, &ask).await {
            Ok(opened) => opened,
            Err(last_error) => {
                let _ = serving.send(NodeState::Failing(last_error));
                tokio::time::sleep(backoff).await;
                backoff = (backoff * 2).min(MAX_BACKOFF);
                continue;
            }
        };
        backoff = Duration::from_millis(100);
        let _ = serving.send(NodeState::Serving(host.id.clone()));
        let mut buf = BytesMut::new();
        let reason = loop {
            match session.read_response_body().await {
                Ok(Some(chunk)) => {
                    buf.extend_from_slice(&chunk);
                    // Normalise CRLF so one splitter serves every node.
                    if buf.contains(&b'\r') {
                        let cleaned: Vec<u8> =
                            buf.iter().copied().filter(|b| *b != b'\r').collect();
                        buf = BytesMut::from(&cleaned[..]);
                    }
                    while let Some(end) = buf.windows(2).position(|w| w == b"\n\n") {
                        let block = buf.split_to(end + 2);
                        let block = &block[..end];
                        if let Some(id) = block
                            .split(|b| *b == b'\n')
                            .find_map(|l| l.strip_prefix(b"id:"))
                        {
                            node_last_id = Some(String::from_utf8_lossy(id).trim().to_string());
                        }
                        let Some(shared) = shared.upgrade() else {
                            return;
                        };
                        shared.deliver(block, &mut seen, &mut next_seq);
                    }
                    if buf.len() > MAX_EVENT {
                        break "event too large";
                    }
                }
                Ok(None) => break "the node ended the stream",
                Err(_) => break "the node's stream failed",
            }
        };
        host.record_failure(&format!("events: {reason}"));
        metrics::RESUBSCRIPTIONS
            .with_label_values(&[&host.pool, KIND, "node_failed"])
            .inc();
        failed = Some(host.id.clone());
        if shared.strong_count() == 0 {
            return;
        }
    }
}

/// Counts a client in `chainedge_subscription_clients` for as long as it is connected.
struct ClientGauge(String);

impl Drop for ClientGauge {
    fn drop(&mut self) {
        metrics::SUBSCRIPTION_CLIENTS
            .with_label_values(&[&self.0, KIND])
            .dec();
    }
}

/// The sorted, deduplicated topics of an events query (`topics=head,block` or repeated
/// `topics=`), or a 400 when there are none.
pub fn topics_of(query: Option<&str>) -> Result<Vec<String>, ApiError> {
    let mut topics: Vec<String> = query
        .unwrap_or("")
        .split('&')
        .filter_map(|p| p.strip_prefix("topics="))
        .flat_map(|v| {
            crate::routes::matcher::percent_decode(v)
                .split(',')
                .map(str::trim)
                .filter(|t| !t.is_empty())
                .map(str::to_string)
                .collect::<Vec<_>>()
        })
        .collect();
    topics.sort();
    topics.dedup();
    if topics.is_empty() {
        return Err(ApiError::invalid_params(
            "name the event topics: ?topics=head,block,...",
        ));
    }
    if topics.len() > 16
        || topics
            .iter()
            .any(|t| t.len() > 64 || !t.bytes().all(|b| b.is_ascii_alphanumeric() || b == b'_'))
    {
        return Err(ApiError::invalid_params(
            "topics are up to 16 names of letters, digits and '_'",
        ));
    }
    Ok(topics)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn topic_sets_are_sorted_and_checked() {
        assert_eq!(
            topics_of(Some("topics=head,block&topics=head")).unwrap(),
            vec!["block", "head"]
        );
        assert_eq!(
            topics_of(Some("topics=head%2Cblock")).unwrap(),
            vec!["block", "head"]
        );
        assert!(topics_of(None).is_err());
        assert!(topics_of(Some("topics=")).is_err());
        assert!(topics_of(Some("topics=head%0d%0aX-Evil:1")).is_err());
    }

    #[test]
    fn an_event_seen_twice_is_delivered_once() {
        let mut seen = Seen {
            hashes: VecDeque::new(),
            state: Default::default(),
        };
        let a: Vec<&[u8]> = vec![b"event: head", b"data: {\"slot\":\"1\"}"];
        let b: Vec<&[u8]> = vec![b"event: head", b"data: {\"slot\":\"2\"}"];
        assert!(seen.first_time(&a));
        assert!(seen.first_time(&b));
        assert!(!seen.first_time(&a));
    }
}

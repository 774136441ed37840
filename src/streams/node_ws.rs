//! A client connection's subscriptions, held on a node's WebSocket.
//!
//! Only `eth_subscribe` and `eth_unsubscribe` travel on this link (every other call of a
//! WebSocket session goes through the gateway like HTTP). The link is opened on the
//! first subscription, to the first available host of the pool with the `ws` capability
//! and a plain `ws://` endpoint. When it fails, the session closes the client with 1013
//! ("try again later") so the client reconnects and subscribes again.
//!
//! Not yet shared: each subscribing client connection holds its own node link. Sharing
//! one upstream subscription per (pool, kind, parameters) is the next step (issue 17).

use crate::address::plain_inet;
use crate::pools::Pool;
use bytes::Bytes;
use futures_util::{SinkExt, StreamExt};
use serde_json::{json, Value};
use std::collections::{HashMap, HashSet};
use std::sync::{Arc, Mutex};
use std::time::Duration;
use tokio::sync::{mpsc, oneshot};
use tokio_tungstenite::tungstenite::client::IntoClientRequest;
use tokio_tungstenite::tungstenite::http::{HeaderName, HeaderValue};
use tokio_tungstenite::tungstenite::protocol::WebSocketConfig;
use tokio_tungstenite::tungstenite::Message;

/// How long the node has to accept the link and to answer a subscribe or unsubscribe.
const NODE_TIMEOUT: Duration = Duration::from_secs(10);
/// Notifications waiting between the node link and the session.
const NOTIFICATION_BACKLOG: usize = 256;

type Pending = Arc<Mutex<HashMap<u64, oneshot::Sender<Value>>>>;

/// One client connection's subscriptions.
pub struct NodeSubscriptions {
    link: Option<Link>,
    /// Subscription ids (the node's) this client holds.
    active: HashSet<String>,
    max: usize,
    max_message: usize,
}

struct Link {
    to_node: mpsc::Sender<String>,
    pending: Pending,
    notifications: mpsc::Receiver<Bytes>,
    next_id: u64,
    task: tokio::task::JoinHandle<()>,
}

impl Drop for Link {
    fn drop(&mut self) {
        self.task.abort();
    }
}

/// Why a subscription call was not answered by the node.
pub enum SubscribeError {
    /// Too many subscriptions on this connection.
    Cap(usize),
    /// No node link could be opened or the node did not answer.
    Unavailable(String),
}

impl NodeSubscriptions {
    pub fn new(max: usize, max_message: usize) -> Self {
        NodeSubscriptions {
            link: None,
            active: HashSet::new(),
            max,
            max_message,
        }
    }

    pub fn count(&self) -> usize {
        self.active.len()
    }

    /// `eth_subscribe` on the node (opening the link if needed): the node's answer, with
    /// the client's `id` put back.
    pub async fn subscribe(
        &mut self,
        pool: &Pool,
        params: Value,
        id: Value,
        request_id: &str,
    ) -> Result<Value, SubscribeError> {
        if self.active.len() >= self.max {
            return Err(SubscribeError::Cap(self.max));
        }
        if self.link.as_ref().is_none_or(|l| l.task.is_finished()) {
            self.link = Some(open(pool, self.max_message, request_id).await?);
        }
        let answer = self.ask("eth_subscribe", params).await?;
        if let Some(sub) = answer.get("result").and_then(Value::as_str) {
            self.active.insert(sub.to_string());
        }
        Ok(with_id(answer, id))
    }

    /// `eth_unsubscribe`: on the node when this client holds the subscription, `false`
    /// otherwise (another client's id is never touched).
    pub async fn unsubscribe(&mut self, params: Value, id: Value) -> Result<Value, SubscribeError> {
        let sub = params
            .get(0)
            .and_then(Value::as_str)
            .unwrap_or_default()
            .to_string();
        if !self.active.remove(&sub) || self.link.is_none() {
            return Ok(json!({"jsonrpc": "2.0", "id": id, "result": false}));
        }
        let answer = self.ask("eth_unsubscribe", json!([sub])).await?;
        Ok(with_id(answer, id))
    }

    async fn ask(&mut self, method: &str, params: Value) -> Result<Value, SubscribeError> {
        let link = self
            .link
            .as_mut()
            .ok_or_else(|| SubscribeError::Unavailable("no node link".into()))?;
        link.next_id += 1;
        let id = link.next_id;
        let (tx, rx) = oneshot::channel();
        if let Ok(mut p) = link.pending.lock() {
            p.insert(id, tx);
        }
        let call = json!({"jsonrpc": "2.0", "id": id, "method": method, "params": params});
        let lost = || SubscribeError::Unavailable("the node link closed".into());
        link.to_node
            .send(call.to_string())
            .await
            .map_err(|_| lost())?;
        match tokio::time::timeout(NODE_TIMEOUT, rx).await {
            Ok(Ok(answer)) => Ok(answer),
            Ok(Err(_)) => Err(lost()),
            Err(_) => Err(SubscribeError::Unavailable(
                "the node did not answer".into(),
            )),
        }
    }

    /// The next notification for this client, as the node framed it. Never resolves
    /// while nothing is subscribed; `None` when the node link was lost with
    /// subscriptions active.
    pub async fn next(&mut self) -> Option<Bytes> {
        match self.link.as_mut() {
            Some(link) if !self.active.is_empty() => link.notifications.recv().await,
            _ => std::future::pending().await,
        }
    }
}

fn with_id(mut answer: Value, id: Value) -> Value {
    if let Some(o) = answer.as_object_mut() {
        o.insert("id".into(), id);
    }
    answer
}

/// A link to the first host that accepts one.
async fn open(pool: &Pool, max_message: usize, request_id: &str) -> Result<Link, SubscribeError> {
    let mut last = String::from("no host with the ws capability and a plain ws:// endpoint");
    for host in pool.candidates(Some("ws")) {
        let (addr, peer) = host.endpoint(true);
        let Some(sock) = plain_inet(peer) else {
            continue;
        };
        let url = format!("ws://{}{}", addr.authority(), addr.path);
        let mut req = match url.into_client_request() {
            Ok(r) => r,
            Err(e) => {
                last = format!("{}: {e}", host.id);
                continue;
            }
        };
        for (name, value) in &host.headers {
            if let (Ok(n), Ok(v)) = (
                HeaderName::from_bytes(name.as_bytes()),
                HeaderValue::from_str(value.expose()),
            ) {
                req.headers_mut().insert(n, v);
            }
        }
        if let Ok(v) = HeaderValue::from_str(request_id) {
            req.headers_mut().insert("x-request-id", v);
        }
        let config = WebSocketConfig::default()
            .read_buffer_size(16 * 1024)
            .max_message_size(Some(max_message))
            .max_frame_size(Some(max_message));
        let connect = async {
            let tcp = tokio::net::TcpStream::connect(sock).await?;
            tokio_tungstenite::client_async_with_config(req, tcp, Some(config))
                .await
                .map_err(std::io::Error::other)
        };
        match tokio::time::timeout(NODE_TIMEOUT, connect).await {
            Ok(Ok((ws, _))) => {
                host.record_success();
                return Ok(start(ws));
            }
            Ok(Err(e)) => {
                host.record_failure(&format!("ws: {e}"));
                last = format!("{}: {e}", host.id);
            }
            Err(_) => last = format!("{}: timed out", host.id),
        }
    }
    Err(SubscribeError::Unavailable(last))
}

fn start<S>(ws: tokio_tungstenite::WebSocketStream<S>) -> Link
where
    S: tokio::io::AsyncRead + tokio::io::AsyncWrite + Unpin + Send + 'static,
{
    let (to_node, mut outgoing) = mpsc::channel::<String>(16);
    let (note_tx, notifications) = mpsc::channel::<Bytes>(NOTIFICATION_BACKLOG);
    let pending: Pending = Arc::default();
    let answers = pending.clone();
    let task = tokio::spawn(async move {
        let (mut sink, mut source) = ws.split();
        loop {
            tokio::select! {
                call = outgoing.recv() => match call {
                    Some(text) => {
                        if sink.send(Message::text(text)).await.is_err() {
                            break;
                        }
                    }
                    None => break,
                },
                msg = source.next() => {
                    let bytes = match msg {
                        Some(Ok(Message::Text(t))) => Bytes::from(t),
                        Some(Ok(Message::Binary(b))) => b,
                        Some(Ok(Message::Close(_))) | None | Some(Err(_)) => break,
                        Some(Ok(_)) => continue,
                    };
                    let Ok(v) = serde_json::from_slice::<Value>(&bytes) else {
                        continue;
                    };
                    if let Some(id) = v.get("id").and_then(Value::as_u64) {
                        let waiter = answers.lock().ok().and_then(|mut p| p.remove(&id));
                        if let Some(w) = waiter {
                            let _ = w.send(v);
                        }
                    } else if v.get("method").and_then(Value::as_str) == Some("eth_subscription") {
                        // A session that cannot keep up loses its link (and is closed).
                        if note_tx.try_send(bytes).is_err() {
                            break;
                        }
                    }
                }
            }
        }
    });
    Link {
        to_node,
        pending,
        notifications,
        next_id: 0,
        task,
    }
}

//! A WebSocket to one node: JSON-RPC calls and subscription notifications on the same
//! connection (what a shared subscription's driver holds).

use crate::address::plain_inet;
use crate::jsonrpc::{Id, Request, Response};
use crate::pools::{Host, Pool};
use bytes::Bytes;
use futures_util::{SinkExt, StreamExt};
use serde_json::Value;
use std::collections::VecDeque;
use std::sync::Arc;
use std::time::{Duration, Instant};
use tokio::net::TcpStream;
use tokio_tungstenite::tungstenite::client::IntoClientRequest;
use tokio_tungstenite::tungstenite::http::{HeaderName, HeaderValue};
use tokio_tungstenite::tungstenite::protocol::WebSocketConfig;
use tokio_tungstenite::tungstenite::Message;
use tokio_tungstenite::WebSocketStream;

/// How long a node has to accept a link and answer a call on it.
pub(super) const NODE_TIMEOUT: Duration = Duration::from_secs(10);
/// Largest message accepted from a node.
const MAX_NODE_MESSAGE: usize = 16 << 20;

/// A WebSocket to one node: calls and notifications on the same connection.
pub(crate) struct NodeLink {
    pub(crate) host: Arc<Host>,
    pub(super) ws: WebSocketStream<TcpStream>,
    pub(super) next_id: u64,
    /// Notifications read while waiting for a call's answer.
    pub(super) waiting: VecDeque<Value>,
}

impl NodeLink {
    /// A link to the first host (other than `avoid`, when another exists) that accepts.
    pub(crate) async fn open(pool: &Pool, avoid: Option<&str>) -> Option<NodeLink> {
        let mut hosts = pool.candidates(Some("ws"));
        // The host that just failed goes last, not out: it may be the only one.
        hosts.sort_by_key(|h| Some(h.id.as_str()) == avoid);
        for host in hosts {
            let (addr, peer) = host.endpoint(true);
            let Some(sock) = plain_inet(peer) else {
                continue;
            };
            let Ok(mut req) =
                format!("ws://{}{}", addr.authority(), addr.path).into_client_request()
            else {
                continue;
            };
            for (name, value) in &host.headers {
                if let (Ok(n), Ok(v)) = (
                    HeaderName::from_bytes(name.as_bytes()),
                    HeaderValue::from_str(value.expose()),
                ) {
                    req.headers_mut().insert(n, v);
                }
            }
            let config = WebSocketConfig::default()
                .read_buffer_size(16 * 1024)
                .max_message_size(Some(MAX_NODE_MESSAGE))
                .max_frame_size(Some(MAX_NODE_MESSAGE));
            let connect = async {
                let tcp = TcpStream::connect(sock).await.map_err(|e| e.to_string())?;
                tokio_tungstenite::client_async_with_config(req, tcp, Some(config))
                    .await
                    .map_err(|e| e.to_string())
            };
            match tokio::time::timeout(NODE_TIMEOUT, connect).await {
                Ok(Ok((ws, _))) => {
                    return Some(NodeLink {
                        host,
                        ws,
                        next_id: 0,
                        waiting: VecDeque::new(),
                    })
                }
                Ok(Err(e)) => host.record_failure(&format!("subscription connect: {e}")),
                Err(_) => host.record_failure("subscription connect: timed out"),
            }
        }
        None
    }

    /// One call's `result` (a node error is an `Err`).
    pub(crate) async fn call(&mut self, method: &str, params: Value) -> Result<Value, String> {
        self.next_id += 1;
        let id = self.next_id;
        let call = Request::new(Id::Number(id.into()), method, params);
        self.ws
            .send(Message::text(
                serde_json::to_string(&call).unwrap_or_default(),
            ))
            .await
            .map_err(|e| format!("send: {e}"))?;
        let deadline = Instant::now() + NODE_TIMEOUT;
        loop {
            let left = deadline.saturating_duration_since(Instant::now());
            let v = tokio::time::timeout(left, self.read())
                .await
                .map_err(|_| format!("{method}: no answer"))??;
            if v.get("method").is_some() {
                self.waiting.push_back(v);
                continue;
            }
            match serde_json::from_value::<Response>(v) {
                Ok(answer) if answer.id == call.answer_id() => {
                    return answer
                        .into_result()
                        .map_err(|e| format!("{method}: {} {}", e.code, e.message));
                }
                _ => {}
            }
        }
    }

    pub(crate) async fn notification(&mut self) -> Result<Value, String> {
        if let Some(v) = self.waiting.pop_front() {
            return Ok(v);
        }
        loop {
            let v = self.read().await?;
            if v.get("method").is_some() {
                return Ok(v);
            }
        }
    }

    pub(super) async fn read(&mut self) -> Result<Value, String> {
        loop {
            let bytes = match self.ws.next().await {
                Some(Ok(Message::Text(t))) => Bytes::from(t),
                Some(Ok(Message::Binary(b))) => b,
                Some(Ok(Message::Close(_))) | None => return Err("node closed the link".into()),
                Some(Err(e)) => return Err(format!("link: {e}")),
                Some(Ok(_)) => continue,
            };
            if let Ok(v) = serde_json::from_slice(&bytes) {
                return Ok(v);
            }
        }
    }
}

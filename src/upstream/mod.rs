//! HTTP client toward nodes: buffered calls to plain-HTTP nodes go through the lean
//! HTTP/1.1 client of `h1`; TLS nodes and streamed calls through Pingora's pooled
//! connector. Both keep connections alive per node.

pub mod chunked;
pub mod h1;

use crate::config::secrets::Secret;
use bytes::{Bytes, BytesMut};
use pingora_core::connectors::http::Connector;
use pingora_core::protocols::http::client::HttpSession;
use pingora_core::upstreams::peer::HttpPeer;
use pingora_http::RequestHeader;
use std::time::Duration;

pub struct UpstreamClient {
    connector: Connector,
    plain: h1::H1Pool,
}

#[derive(Debug)]
pub struct UpstreamResponse {
    pub status: u16,
    pub body: Bytes,
}

#[derive(Debug)]
pub enum UpstreamError {
    Connect(String),
    Io(String),
    Timeout,
    TooLarge(usize),
}

impl std::fmt::Display for UpstreamError {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            Self::Connect(e) => write!(f, "connect: {e}"),
            Self::Io(e) => write!(f, "io: {e}"),
            Self::Timeout => write!(f, "timeout"),
            Self::TooLarge(n) => write!(f, "response exceeds {n} bytes"),
        }
    }
}

impl Default for UpstreamClient {
    fn default() -> Self {
        UpstreamClient {
            connector: Connector::new(None),
            plain: h1::H1Pool::default(),
        }
    }
}

/// One request to a node: which peer, and what to send.
pub struct Call<'a> {
    pub peer: &'a HttpPeer,
    pub authority: &'a str,
    pub method: &'static str,
    pub path: &'a str,
    /// Extra headers (provider keys come from secret references).
    pub headers: &'a [(String, Secret)],
    pub body: Option<&'a [u8]>,
    /// Content type of `body` (JSON when unset).
    pub content_type: Option<&'static str>,
    pub request_id: &'a str,
}

impl UpstreamClient {
    /// A client whose TLS peers are checked against the CAs in `ca_file` (PEM) instead
    /// of the system's roots (`None`: the system's).
    pub fn with_ca_file(ca_file: Option<String>) -> UpstreamClient {
        let mut options = pingora_core::connectors::ConnectorOptions::new(128);
        options.ca_file = ca_file;
        UpstreamClient {
            connector: Connector::new(Some(options)),
            plain: h1::H1Pool::default(),
        }
    }

    /// The pool of idle connections to plain-HTTP nodes (the lean front's passthroughs).
    pub fn plain(&self) -> &h1::H1Pool {
        &self.plain
    }

    /// Send any request and read the whole (bounded) response within `timeout`.
    pub async fn send(
        &self,
        call: Call<'_>,
        timeout: Duration,
        max_response: usize,
    ) -> Result<UpstreamResponse, UpstreamError> {
        if let Some(addr) = crate::address::plain_inet(call.peer) {
            // The lean client keeps the limit with the connection's own timer.
            return self
                .exchange_plain(addr, &call, max_response, timeout)
                .await;
        }
        // Boxed: Pingora's client future is large, and inline it would size every
        // call's future on the plain path too (and so every connection's task).
        let pingora = Box::pin(self.exchange_pingora(call, max_response));
        match tokio::time::timeout(timeout, pingora).await {
            Ok(r) => r,
            Err(_) => Err(UpstreamError::Timeout),
        }
    }

    /// Send a request and return once the response head is in: status and the session,
    /// whose body the caller reads as it arrives (event streams). `timeout` bounds the
    /// connect and the head only.
    pub async fn open(
        &self,
        call: Call<'_>,
        timeout: Duration,
    ) -> Result<(u16, HttpSession), UpstreamError> {
        match tokio::time::timeout(timeout, self.start(call, Some("text/event-stream"))).await {
            Ok(Ok(session)) => Ok((status_of(&session), session)),
            Ok(Err(e)) => Err(e),
            Err(_) => Err(UpstreamError::Timeout),
        }
    }

    /// Connect (or reuse a pooled connection), send the request, read the response head.
    async fn start(
        &self,
        call: Call<'_>,
        accept: Option<&str>,
    ) -> Result<HttpSession, UpstreamError> {
        let io = |e: Box<pingora_error::Error>| UpstreamError::Io(e.to_string());
        let mut req = RequestHeader::build(call.method, call.path.as_bytes(), None).map_err(io)?;
        req.insert_header("Host", call.authority).map_err(io)?;
        if let Some(accept) = accept {
            req.insert_header("Accept", accept).map_err(io)?;
        }
        if let Some(body) = &call.body {
            req.insert_header(
                "Content-Type",
                call.content_type.unwrap_or("application/json"),
            )
            .map_err(io)?;
            req.insert_header("Content-Length", body.len().to_string())
                .map_err(io)?;
        }
        req.insert_header("X-Request-Id", call.request_id)
            .map_err(io)?;
        for (name, value) in call.headers {
            req.insert_header(name.clone(), value.expose())
                .map_err(io)?;
        }
        let (mut session, _reused) = self
            .connector
            .get_http_session(call.peer)
            .await
            .map_err(|e| UpstreamError::Connect(e.to_string()))?;
        session
            .write_request_header(Box::new(req))
            .await
            .map_err(io)?;
        if let Some(body) = call.body {
            session
                .write_request_body(Bytes::copy_from_slice(body), true)
                .await
                .map_err(io)?;
        }
        session.finish_request_body().await.map_err(io)?;
        session.read_response_header().await.map_err(io)?;
        Ok(session)
    }

    /// A buffered call through Pingora's connector (TLS and HTTP/2 nodes).
    async fn exchange_pingora(
        &self,
        call: Call<'_>,
        max_response: usize,
    ) -> Result<UpstreamResponse, UpstreamError> {
        let io = |e: Box<pingora_error::Error>| UpstreamError::Io(e.to_string());
        let peer = call.peer;
        let mut session = self.start(call, None).await?;
        let status = status_of(&session);
        let mut buf = BytesMut::new();
        while let Some(chunk) = session.read_response_body().await.map_err(io)? {
            if buf.len() + chunk.len() > max_response {
                return Err(UpstreamError::TooLarge(max_response));
            }
            buf.extend_from_slice(&chunk);
        }
        self.connector
            .release_http_session(session, peer, Some(Duration::from_secs(60)))
            .await;
        Ok(UpstreamResponse {
            status,
            body: buf.freeze(),
        })
    }
}

impl UpstreamClient {
    /// A buffered call to a plain-HTTP node: one write out, one pooled connection.
    async fn exchange_plain(
        &self,
        addr: std::net::SocketAddr,
        call: &Call<'_>,
        max_response: usize,
        limit: Duration,
    ) -> Result<UpstreamResponse, UpstreamError> {
        let mut headers: Vec<(&str, &[u8])> = Vec::with_capacity(4 + call.headers.len());
        headers.push(("Host", call.authority.as_bytes()));
        if call.body.is_some() {
            let ct = call.content_type.unwrap_or("application/json");
            headers.push(("Content-Type", ct.as_bytes()));
        }
        headers.push(("X-Request-Id", call.request_id.as_bytes()));
        for (name, value) in call.headers {
            headers.push((name, value.expose().as_bytes()));
        }
        let req = h1::H1Request {
            method: call.method,
            path: call.path,
            headers: &headers,
            body: call.body,
        };
        self.plain
            .exchange(addr, &req, max_response, Some(limit))
            .await
    }
}

fn status_of(session: &HttpSession) -> u16 {
    session
        .response_header()
        .map(|h| h.status.as_u16())
        .unwrap_or(0)
}

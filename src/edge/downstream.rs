//! What the pipeline needs to know about a client request, whichever server read it:
//! Pingora's `Session` (HTTP/2, and whatever the lean front hands over) or the lean
//! HTTP/1.1 front's own request (`crate::front`).

use crate::errors::ApiError;
use crate::routes::Route;
use async_trait::async_trait;
use bytes::{Bytes, BytesMut};
use pingora_proxy::Session;
use std::net::IpAddr;
use std::sync::Arc;

/// A route found before the pipeline ran (the lean front matches routes to decide who
/// serves a request): the pipeline uses it instead of matching again.
pub struct PreMatch {
    pub route: Arc<Route>,
    pub params: Vec<String>,
    /// The path had `.`/`..` or encoded-slash segments.
    pub suspicious: bool,
}

#[async_trait]
pub trait Downstream: Send + Sync {
    /// The route already matched for this request, if any (taken once).
    fn take_match(&mut self) -> Option<PreMatch> {
        None
    }

    fn method(&self) -> &str;
    /// The path of the request target, without the query.
    fn path(&self) -> &str;
    fn query(&self) -> Option<&str>;
    /// The first value of a header, when it is text.
    fn header(&self, name: &str) -> Option<&str>;
    /// Every line of a list header joined with ", " (RFC 9110 §5.3: repeated lines are
    /// one list), when it is text.
    fn header_list(&self, name: &str) -> Option<String>;
    /// All `Cookie` headers joined (HTTP/2 sends each cookie as its own header).
    fn cookies(&self) -> Option<String>;
    /// The host the client addressed: `Host`, or HTTP/2's `:authority`.
    fn authority(&self) -> Option<&str>;
    fn is_upgrade(&self) -> bool;
    /// RFC 9112 §3.2: one `Host` in an HTTP/1.1 request, at most one otherwise (the lean
    /// front refuses the rest before the pipeline runs).
    fn host_is_valid(&self) -> bool {
        true
    }
    fn client_ip(&self) -> Option<IpAddr>;
    /// The edge's own address the request came in on (which listener).
    fn local_addr(&self) -> Option<std::net::SocketAddr> {
        None
    }
    fn is_tls(&self) -> bool;
    /// The whole request body; more than `limit` bytes is refused with 413.
    async fn read_body(&mut self, limit: usize) -> Result<Bytes, ApiError>;
}

/// The body could not be read (the client went away, stalled or broke the framing).
pub fn unreadable_body(e: impl std::fmt::Display) -> ApiError {
    ApiError::new(
        400,
        "invalid_body",
        format!("cannot read request body: {e}"),
    )
}

pub fn payload_too_large(limit: usize) -> ApiError {
    ApiError::new(
        413,
        "payload_too_large",
        format!("request body exceeds {limit} bytes"),
    )
}

#[async_trait]
impl Downstream for Session {
    fn method(&self) -> &str {
        self.req_header().method.as_str()
    }

    fn path(&self) -> &str {
        self.req_header().uri.path()
    }

    fn query(&self) -> Option<&str> {
        self.req_header().uri.query()
    }

    fn header(&self, name: &str) -> Option<&str> {
        self.get_header(name).and_then(|v| v.to_str().ok())
    }

    fn cookies(&self) -> Option<String> {
        let parts: Vec<&str> = self
            .req_header()
            .headers
            .get_all("cookie")
            .iter()
            .filter_map(|v| v.to_str().ok())
            .collect();
        (!parts.is_empty()).then(|| parts.join("; "))
    }

    fn header_list(&self, name: &str) -> Option<String> {
        let parts: Vec<&str> = self
            .req_header()
            .headers
            .get_all(name)
            .iter()
            .map(|v| v.to_str().ok())
            .collect::<Option<_>>()?;
        (!parts.is_empty()).then(|| parts.join(", "))
    }

    fn authority(&self) -> Option<&str> {
        Downstream::header(self, "host")
            .or_else(|| self.req_header().uri.authority().map(|a| a.as_str()))
    }

    fn is_upgrade(&self) -> bool {
        self.is_upgrade_req()
    }

    fn host_is_valid(&self) -> bool {
        let req = self.req_header();
        let hosts = req.headers.get_all("host").iter().count();
        hosts == 1 || (hosts == 0 && req.version != http::Version::HTTP_11)
    }

    fn client_ip(&self) -> Option<IpAddr> {
        self.client_addr().and_then(|a| a.as_inet()).map(|a| a.ip())
    }

    fn is_tls(&self) -> bool {
        self.digest().is_some_and(|d| d.ssl_digest.is_some())
    }

    fn local_addr(&self) -> Option<std::net::SocketAddr> {
        self.server_addr().and_then(|a| a.as_inet()).copied()
    }

    async fn read_body(&mut self, limit: usize) -> Result<Bytes, ApiError> {
        let declared =
            Downstream::header(self, "content-length").and_then(|v| v.parse::<usize>().ok());
        if declared.is_some_and(|len| len > limit) {
            return Err(payload_too_large(limit));
        }
        // Held to the front's body deadline: HTTP/2 bodies (h2 frames them, with a
        // timeout per read only) must keep coming too.
        let start = std::time::Instant::now();
        let mut buf = BytesMut::new();
        loop {
            let allowed =
                crate::deadline::body_deadline(declared.unwrap_or(buf.len()).max(buf.len()));
            let left = allowed.saturating_sub(start.elapsed());
            let chunk = tokio::time::timeout(left, self.read_request_body())
                .await
                .map_err(|_| unreadable_body("request body not received in time"))?;
            match chunk {
                Ok(Some(chunk)) => {
                    if buf.len() + chunk.len() > limit {
                        return Err(payload_too_large(limit));
                    }
                    buf.extend_from_slice(&chunk);
                }
                Ok(None) => return Ok(buf.freeze()),
                Err(e) => return Err(unreadable_body(e)),
            }
        }
    }
}

//! The request's state across the pipeline and Pingora's phases, what the pipeline
//! decided, and request ids.

use crate::address::HostAddr;
use crate::auth::Principal;
use crate::errors::Envelope;
use crate::pools::{Host, Service};
use crate::reply::{EventStream, Reply};
use crate::routes::spec::PathRule;
use crate::routes::Route;
use pingora_core::upstreams::peer::HttpPeer;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::Arc;
use std::time::Instant;

/// Per-request state carried across Pingora's phases.
pub struct Ctx {
    pub(super) started: Instant,
    pub(crate) request_id: String,
    pub(super) route: Option<Arc<Route>>,
    pub(crate) envelope: Envelope,
    pub(super) cors_headers: Vec<(&'static str, String)>,
    pub(crate) upstream: Option<String>,
    pub(crate) error_code: Option<&'static str>,
    /// How a JSON-RPC answer was checked, for the access log.
    pub(crate) verified: Option<&'static str>,
    /// How checked the caller requires it (`X-Chainedge-Require-Verified`).
    pub(crate) required: crate::verify::Verified,
    pub(super) principal: Option<Principal>,
    /// `X-RateLimit-*` headers for an admitted, rate-limited request.
    pub(super) rate_headers: Vec<(&'static str, String)>,
    /// `Set-Cookie` values (console sign-in, sliding refresh).
    pub(super) cookies: Vec<String>,
    /// What the route's channel decided of the path before authentication (its plan
    /// and rate category: the beacon API's groups).
    pub(super) path_rule: Option<PathRule>,
    /// A request handed to Pingora's proxy phases.
    pub(super) pass: Option<Pass>,
    /// Values of the route's `{param}`s (a tail is the rest of the path).
    pub(super) params: Vec<String>,
    /// The path had `.`/`..` or encoded-slash segments (tail routes only get this far).
    pub(super) path_suspicious: bool,
    /// The client behind a trusted proxy (`X-Forwarded-For`), set by the pipeline:
    /// limited and logged instead of the peer.
    pub(super) forwarded_client: Option<std::net::IpAddr>,
    /// What the request counts for in its key's usage, when not one call at the
    /// route's cost: a JSON-RPC body's calls, nothing for a WebSocket upgrade (its
    /// messages count one by one).
    pub(super) usage: Option<crate::rpc::compute_units::Cost>,
    /// JSON-RPC answers that were errors (for usage).
    pub(super) error_answers: u32,
    /// What a key's JSON-RPC body asked for (`Incoming::label`), for its request log.
    pub(super) rpc_method: Option<Box<str>>,
}

/// A passthrough: the hosts to try in order, and the path under each host's base path.
pub struct Pass {
    pub(crate) hosts: Vec<Arc<Host>>,
    pub(super) next: usize,
    /// Path (and query) relative to the host's base path; empty = the base path itself.
    pub(super) rest: String,
    /// Long-lived (SSE, WebSocket): no read timeout, no compression.
    pub(crate) stream: bool,
    /// Which of each host's services the request is for (heimdall's Tendermint RPC,
    /// LCD or metrics).
    pub(crate) service: Service,
    pub(super) current: Option<Arc<Host>>,
}

impl Pass {
    /// Where the request goes on `host`: its WebSocket endpoint for an upgrade, else
    /// the service's.
    pub(crate) fn endpoint<'h>(
        &self,
        host: &'h Host,
        upgrade: bool,
    ) -> (&'h HostAddr, &'h HttpPeer) {
        if upgrade {
            host.endpoint(true)
        } else {
            host.service(self.service)
        }
    }

    /// The request target on `host`. A `metrics_url` is the scrape URL itself, so the
    /// proxied `metrics` segment becomes that URL's path (the query kept).
    pub(crate) fn upstream_path_on(&self, host: &Host, upgrade: bool) -> String {
        let (addr, _) = self.endpoint(host, upgrade);
        if self.service == Service::Metrics && !upgrade && host.metrics.is_some() {
            return match self.rest.split_once('?') {
                Some((_, query)) => format!("{}?{query}", addr.path),
                None => addr.path.clone(),
            };
        }
        self.upstream_path(&addr.path)
    }

    /// The request target on a host whose URL path is `base`.
    fn upstream_path(&self, base: &str) -> String {
        if self.rest.is_empty() {
            base.to_string()
        } else {
            format!("{}/{}", base.trim_end_matches('/'), self.rest)
        }
    }
}

/// What the pipeline decided: answer here, proxy, or stream events.
pub(crate) enum Outcome {
    Reply(Reply),
    Proxy(Pass),
    /// An event stream (MEV-Share): served on Pingora's session only, the lean front
    /// hands these routes over.
    Stream(EventStream),
    /// A WebSocket JSON-RPC session (Pingora's session only, like streams).
    WebSocket(Box<super::ws_upgrade::WsUpgrade>),
}

/// Read timeout toward nodes on ordinary passthroughs.
pub(crate) const PASS_READ_TIMEOUT: std::time::Duration = std::time::Duration::from_secs(30);

impl Ctx {
    /// The client this request is limited as: the forwarded one, else the peer.
    pub(super) fn client(&self, peer: Option<std::net::IpAddr>) -> Option<std::net::IpAddr> {
        self.forwarded_client.or(peer)
    }

    pub(crate) fn new() -> Self {
        Ctx {
            started: Instant::now(),
            request_id: String::new(),
            route: None,
            envelope: Envelope::ChainRest,
            cors_headers: Vec::new(),
            upstream: None,
            error_code: None,
            verified: None,
            required: Default::default(),
            principal: None,
            rate_headers: Vec::new(),
            params: Vec::new(),
            path_suspicious: false,
            forwarded_client: None,
            usage: None,
            error_answers: 0,
            rpc_method: None,
            cookies: Vec::new(),
            path_rule: None,
            pass: None,
        }
    }

    /// Headers the edge sets on every response of this request, local or proxied:
    /// `Server`, `X-Request-Id`, CORS, rate and cookies. On a node's answer they replace
    /// the node's own (`replaces`), except cookies, which add up.
    pub(crate) fn edge_headers(&self) -> impl Iterator<Item = (&'static str, &str)> {
        [
            ("Server", "chainedge"),
            ("X-Request-Id", self.request_id.as_str()),
        ]
        .into_iter()
        .chain(
            self.cors_headers
                .iter()
                .chain(self.rate_headers.iter())
                .map(|(k, v)| (*k, v.as_str())),
        )
        .chain(self.cookies.iter().map(|c| ("Set-Cookie", c.as_str())))
    }

    /// Whether a node's header `name` gives way to one of `edge_headers`.
    pub(crate) fn replaces(&self, name: &str) -> bool {
        // `edge_headers` but its cookies, which add up; checked for every header of a
        // node's answer, so without building that chain.
        name.eq_ignore_ascii_case("server")
            || name.eq_ignore_ascii_case("x-request-id")
            || (self.cors_headers.iter())
                .chain(self.rate_headers.iter())
                .any(|(k, _)| k.eq_ignore_ascii_case(name))
    }

    pub(super) fn route_name(&self) -> &str {
        self.route
            .as_ref()
            .map(|r| r.name.as_str())
            .unwrap_or("unmatched")
    }
}

/// Keep a caller's well-formed `X-Request-Id` (for tracing across hops); otherwise mint one.
pub(crate) fn request_id(given: Option<&[u8]>) -> String {
    if let Some(g) = given {
        if !g.is_empty()
            && g.len() <= 64
            && g.iter()
                .all(|c| c.is_ascii_alphanumeric() || b"-_.".contains(c))
        {
            return String::from_utf8_lossy(g).into_owned();
        }
    }
    // A random process prefix, then a per-thread block (the top 8 bits) and a per-thread
    // count: unique without a counter shared between worker threads on every request.
    static PREFIX: once_cell::sync::Lazy<u32> = once_cell::sync::Lazy::new(rand::random);
    static THREADS: AtomicU64 = AtomicU64::new(0);
    thread_local! {
        static NEXT: std::cell::Cell<u64> = std::cell::Cell::new(
            (THREADS.fetch_add(1, Ordering::Relaxed) & 0xff) << 40
        );
    }
    let n = NEXT.with(|next| {
        let n = next.get();
        next.set((n & !0xff_ffff_ffff) | ((n + 1) & 0xff_ffff_ffff));
        n
    });
    let mut id = String::with_capacity(20);
    push_hex(&mut id, u64::from(*PREFIX), 8);
    push_hex(&mut id, n, 12);
    id
}

/// `digits` lower-case hex digits of `v`, zero-padded.
fn push_hex(out: &mut String, v: u64, digits: u32) {
    for i in (0..digits).rev() {
        let nibble = ((v >> (i * 4)) & 0xf) as u8;
        out.push(char::from(b"0123456789abcdef"[usize::from(nibble)]));
    }
}

#[cfg(test)]
mod tests {
    #[test]
    fn request_ids_are_twenty_hex_digits_and_distinct() {
        let a = super::request_id(None);
        let b = super::request_id(None);
        assert_eq!(a.len(), 20);
        assert!(a.bytes().all(|c| c.is_ascii_hexdigit()));
        assert_ne!(a, b);
        assert_eq!(super::request_id(Some(b"abc-1")), "abc-1");
        assert_eq!(super::request_id(Some(b"bad id")).len(), 20);
    }
}

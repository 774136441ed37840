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
    pub(crate) request_id: RequestId,
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
    pub(super) rate_headers: super::guard::RateHeaders,
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
    pub(super) rpc_method: Option<crate::rpc::MethodLabel>,
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
            request_id: RequestId::default(),
            route: None,
            envelope: Envelope::ChainRest,
            cors_headers: Vec::new(),
            upstream: None,
            error_code: None,
            verified: None,
            required: Default::default(),
            principal: None,
            rate_headers: Default::default(),
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
    pub(crate) fn try_edge_headers<E>(
        &self,
        mut f: impl FnMut(&'static str, &str) -> Result<(), E>,
    ) -> Result<(), E> {
        f("Server", "chainedge")?;
        f("X-Request-Id", &self.request_id)?;
        for (k, v) in &self.cors_headers {
            f(k, v)?;
        }
        self.rate_headers.each(&mut f)?;
        for c in &self.cookies {
            f("Set-Cookie", c)?;
        }
        Ok(())
    }

    /// `try_edge_headers` for a writer that cannot fail.
    pub(crate) fn edge_headers(&self, mut f: impl FnMut(&'static str, &str)) {
        let Ok(()) = self.try_edge_headers(|k, v| {
            f(k, v);
            Ok::<(), std::convert::Infallible>(())
        });
    }

    /// Whether a node's header `name` gives way to one of `try_edge_headers`.
    pub(crate) fn replaces(&self, name: &str) -> bool {
        // `try_edge_headers` but its cookies, which add up; checked for every header of a
        // node's answer, so by name alone (no value is formatted).
        name.eq_ignore_ascii_case("server")
            || name.eq_ignore_ascii_case("x-request-id")
            || (self.cors_headers.iter()).any(|(k, _)| k.eq_ignore_ascii_case(name))
            || self.rate_headers.names(name)
    }

    pub(super) fn route_name(&self) -> &str {
        self.route
            .as_ref()
            .map(|r| r.name.as_str())
            .unwrap_or("unmatched")
    }
}

/// Keep a caller's well-formed `X-Request-Id` (for tracing across hops); otherwise mint one.
pub(crate) fn request_id(given: Option<&[u8]>) -> RequestId {
    if let Some(id) = given.and_then(RequestId::given) {
        return id;
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
    let mut id = RequestId::default();
    id.push_hex(u64::from(*PREFIX), 8);
    id.push_hex(n, 12);
    id
}

/// A request's id, kept inline rather than on the heap (one allocation less per
/// request): a caller's id of at most `MAX` bytes of `[A-Za-z0-9._-]`, or a minted one
/// of 20 hex digits. Only ASCII is ever stored, so its bytes are always a `str`.
#[derive(Clone, Copy)]
pub(crate) struct RequestId {
    len: u8,
    bytes: [u8; RequestId::MAX],
}

impl RequestId {
    /// The longest caller's id kept.
    const MAX: usize = 64;

    fn given(g: &[u8]) -> Option<Self> {
        let fits = !g.is_empty() && g.len() <= Self::MAX;
        let plain = g
            .iter()
            .all(|c| c.is_ascii_alphanumeric() || b"-_.".contains(c));
        (fits && plain).then(|| {
            let mut id = RequestId::default();
            id.bytes[..g.len()].copy_from_slice(g);
            id.len = g.len() as u8;
            id
        })
    }

    /// `digits` lower-case hex digits of `v`, zero-padded.
    fn push_hex(&mut self, v: u64, digits: u32) {
        for i in (0..digits).rev() {
            let nibble = ((v >> (i * 4)) & 0xf) as usize;
            self.bytes[usize::from(self.len)] = b"0123456789abcdef"[nibble];
            self.len += 1;
        }
    }

    pub(crate) fn as_str(&self) -> &str {
        let ascii = &self.bytes[..usize::from(self.len)];
        // Only `given` (checked ASCII) and `push_hex` (hex digits) write the bytes.
        std::str::from_utf8(ascii).unwrap_or_default()
    }
}

impl Default for RequestId {
    fn default() -> Self {
        RequestId {
            len: 0,
            bytes: [0; RequestId::MAX],
        }
    }
}

impl std::ops::Deref for RequestId {
    type Target = str;
    fn deref(&self) -> &str {
        self.as_str()
    }
}

impl std::fmt::Debug for RequestId {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        self.as_str().fmt(f)
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
        assert_ne!(*a, *b);
        assert_eq!(&*super::request_id(Some(b"abc-1")), "abc-1");
        assert_eq!(super::request_id(Some(b"bad id")).len(), 20);
        let longest = [b'x'; 64];
        assert_eq!(super::request_id(Some(&longest)).as_bytes(), longest);
        assert_eq!(super::request_id(Some(&[b'x'; 65])).len(), 20);
        assert_eq!(super::request_id(Some(b"")).len(), 20);
    }
}

//! Channels: routes answered by more than one reply. A channel is the node's own answer
//! through a rewriting passthrough (the beacon API, the relay data API, heimdall, the
//! Base portal), an event stream the edge writes (MEV-Share, beacon events), or a
//! server-to-client WebSocket feed (the Polygon firehose, the Solana watchlist, the
//! transaction channel).
//!
//! **The channel contract**, beside the handlers': a channel is declared once, in a
//! `CHANNELS` table of its file, by the name a manifest's `handler:` uses, with what
//! the route table needs to know of it before it opens ([`ChannelTraits`]: transport,
//! pool, rules) and its opener: a function of the [`Services`] and a plain
//! [`ChannelRequest`] returning a generic outcome ([`ProxyTo`], an `EventStream` or a
//! [`PushChannel`]). The edge has matched, authenticated, authorized and limited the
//! request; it runs the outcome on whichever server took it (the node exchange, the
//! stream, the held socket) and writes the access log. A new channel edits no file in
//! `edge/`: its table goes in `TABLES` below.

pub mod admit;
mod firehose;
mod nodes;
mod sol_watch;
mod txs;

pub use crate::routes::spec::{ChannelTraits, ChannelTransport, PathRule};

use super::Services;
use crate::auth::Principal;
use crate::cluster::places::OwnerPlace;
use crate::errors::ApiError;
use crate::pools::{Host, Pool, Service};
use crate::reply::EventStream;
use crate::routes::Route;
use crate::streams::push::PushSource;
use std::future::Future;
use std::net::IpAddr;
use std::pin::Pin;
use std::sync::{Arc, LazyLock};

/// The request's headers, as a channel reads them.
pub trait Headers: Sync {
    /// The first value of a header, when it is text.
    fn header(&self, name: &str) -> Option<&str>;
}

/// What a channel's opener is given.
pub struct ChannelRequest<'a> {
    pub route: &'a Route,
    /// The path as the client sent it, still percent-encoded.
    pub path: &'a str,
    /// The path had `.`/`..` or encoded-slash segments (only tail routes get this far).
    pub path_suspicious: bool,
    /// Values of the route's `{param}`s, in order (a tail is the rest of the path).
    pub params: &'a [String],
    pub query: Option<&'a str>,
    pub method: &'a str,
    pub headers: &'a dyn Headers,
    /// What the route's path rule decided before the guard (`ChannelTraits::path_rule`).
    pub path_rule: Option<PathRule>,
    /// Who is calling, as the guard established.
    pub caller: &'a Principal,
    pub request_id: &'a str,
    /// The client's address: the socket peer, or the client a trusted proxy names.
    pub client: Option<IpAddr>,
}

/// Where a rewriting passthrough sends the request: the hosts in order, the path (and
/// query) under each host's base path, and which of its services.
pub struct ProxyTo {
    pub hosts: Vec<Arc<Host>>,
    pub rest: String,
    /// Long-lived (SSE, WebSocket): no read timeout, no compression.
    pub stream: bool,
    pub service: Service,
}

/// Who holds a push channel: what ends it besides either side.
pub enum Holder {
    /// The caller's key (revoked or lapsed ends it).
    Caller,
    /// A token given to a key: that key's standing, and the token's expiry (Unix
    /// seconds).
    Grant { key_id: String, expires: i64 },
}

/// A server-to-client WebSocket feed, admitted: the handshake's answer, the feed already
/// open (nothing sent after the 101 is missed) and the connection's place under its cap.
pub struct PushChannel {
    /// `Sec-WebSocket-Accept` for the 101.
    pub accept: String,
    /// The subprotocol the 101 names (a firehose token offered as one).
    pub protocol: Option<&'static str>,
    pub source: Box<dyn PushSource>,
    pub holder: Holder,
    pub slot: OwnerPlace,
}

/// What an opener's future comes to.
pub type Opening<'a, T> = Pin<Box<dyn Future<Output = Result<T, ApiError>> + Send + 'a>>;

/// How a channel opens, by its outcome.
pub enum Opener {
    Proxy(fn(&Services<'_>, &ChannelRequest<'_>) -> Result<ProxyTo, ApiError>),
    Stream(for<'a> fn(&'a Services<'a>, &'a ChannelRequest<'a>) -> Opening<'a, EventStream>),
    Push(for<'a> fn(&'a Services<'a>, &'a ChannelRequest<'a>) -> Opening<'a, PushChannel>),
}

/// One channel.
pub struct Channel {
    pub traits: ChannelTraits,
    pub open: Opener,
}

/// Every channel file's table.
const TABLES: &[&[Channel]] = &[
    nodes::CHANNELS,
    firehose::CHANNELS,
    sol_watch::CHANNELS,
    txs::CHANNELS,
];

static ALL: LazyLock<Vec<&'static Channel>> =
    LazyLock::new(|| TABLES.iter().flat_map(|t| t.iter()).collect());

/// Every channel's traits, in registry order: a route's `HandlerKind::Channel(i)` is the
/// `i`th.
pub fn traits() -> Vec<ChannelTraits> {
    ALL.iter().map(|c| c.traits).collect()
}

/// The channel at `index` (a place `traits` gave).
pub fn get(index: u16) -> Option<&'static Channel> {
    ALL.get(usize::from(index)).copied()
}

/// A pool by name; 503 `pool_not_configured` when the configuration has none.
pub fn pool<'s>(s: &'s Services<'_>, name: &str) -> Result<&'s Pool, ApiError> {
    s.pools.get(name).map(|p| &**p).ok_or_else(|| {
        ApiError::new(
            503,
            "pool_not_configured",
            format!("no {name} pool is configured"),
        )
    })
}

/// The pool the route's channel talks to (its own, else the route's).
pub fn route_pool<'s>(s: &'s Services<'_>, req: &ChannelRequest<'_>) -> Result<&'s Pool, ApiError> {
    pool(s, req.route.passthrough_pool().unwrap_or_default())
}

/// `rest` on `hosts` of `pool`; 503 `no_upstream` when none can serve it.
pub fn proxy_to(
    pool: &Pool,
    hosts: Vec<Arc<Host>>,
    rest: String,
    stream: bool,
) -> Result<ProxyTo, ApiError> {
    if hosts.is_empty() {
        return Err(ApiError::new(
            503,
            "no_upstream",
            format!("no healthy host in pool {} can serve this route", pool.name),
        ));
    }
    Ok(ProxyTo {
        hosts,
        rest,
        stream,
        service: Service::Main,
    })
}

/// `raw` (a request path) without its first `prefix` segments, still percent-encoded.
pub fn raw_tail(raw: &str, prefix: usize) -> &str {
    let mut rest = raw.trim_start_matches('/');
    for _ in 0..prefix {
        rest = match rest.find('/') {
            Some(i) => rest[i..].trim_start_matches('/'),
            None => "",
        };
    }
    rest
}

/// The route's tail, raw as the client sent it, with the query: what a passthrough asks
/// its pool (an operator's own, heimdall's). `..` and encoded slashes are refused.
pub fn route_tail<'r>(req: &ChannelRequest<'r>) -> Result<(&'r str, String), ApiError> {
    if req.path_suspicious {
        return Err(ApiError::new(
            400,
            "invalid_path",
            "path segments may not be '.', '..' or contain encoded slashes",
        ));
    }
    let tail = raw_tail(req.path, req.route.segments_before_tail());
    let rest = match req.query {
        Some(q) => format!("{tail}?{q}"),
        None => tail.to_string(),
    };
    Ok((tail, rest))
}

/// The generic passthrough (`HandlerKind::Passthrough`): the route's tail to its pool.
pub fn passthrough(s: &Services<'_>, req: &ChannelRequest<'_>) -> Result<ProxyTo, ApiError> {
    let pool = route_pool(s, req)?;
    let (_, rest) = route_tail(req)?;
    proxy_to(pool, pool.candidates(None), rest, false)
}

#[cfg(test)]
mod tests {
    use super::raw_tail;

    #[test]
    fn raw_tail_skips_the_route_prefix_and_keeps_encoding() {
        assert_eq!(raw_tail("/v1/polygon/heimdall/a%20b/c", 3), "a%20b/c");
        assert_eq!(raw_tail("//v1//polygon/heimdall//x", 3), "x");
        assert_eq!(raw_tail("/v1/polygon/heimdall", 3), "");
        assert_eq!(raw_tail("/bench/plain/", 2), "");
    }

    #[test]
    fn every_channel_name_is_unique_and_no_handler_shares_it() {
        let traits = super::traits();
        let handlers = super::super::registry::names();
        let mut seen = std::collections::HashSet::new();
        for t in &traits {
            assert!(seen.insert(t.name), "{} twice", t.name);
            assert!(!handlers.contains(&t.name), "{} is a handler too", t.name);
        }
    }
}

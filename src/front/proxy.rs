//! Passthroughs on the lean path: the request goes to a plain-HTTP node over the lean
//! pool's keep-alive connections in one write; the node's answer is relayed as it
//! arrives, its framing (length, chunked, or until close) untouched.
//!
//! Retries follow the Pingora path (`Edge::fail_to_connect` / `error_while_proxy`): a
//! failed connect moves to the next host; a failure after sending moves on only for GET
//! and HEAD, and only while nothing has been written to the client.

use super::chunked::{ChunkedScanner, Scan};
use super::request::LeanRequest;
use super::{date_header, header, status_line, LeanFront};
use crate::edge::downstream::Downstream;
use crate::edge::{Ctx, Pass, CALLER_ONLY_HEADERS, PASS_READ_TIMEOUT};
use crate::errors::ApiError;
use crate::observe::metrics;
use crate::pools::Host;
use crate::upstream::h1::{parse_head_visit, Framing};
use bytes::Bytes;
use std::net::SocketAddr;
use std::time::Duration;
use tokio::io::{AsyncReadExt, AsyncWriteExt};
use tokio::net::TcpStream;

/// Hop-by-hop headers (RFC 9110 §7.6.1) stay on their own hop. `transfer-encoding` is
/// not among them: the lean path never forwards chunked request bodies, and a node's
/// chunked answer is relayed as it is.
const HOP_BY_HOP: &[&str] = &[
    "connection",
    "keep-alive",
    "proxy-connection",
    "te",
    "trailer",
    "upgrade",
];
/// Largest answer head accepted from a node.
const MAX_NODE_HEAD: usize = 64 * 1024;
/// Read size toward nodes while relaying a body.
const RELAY_CHUNK: usize = 16 * 1024;

/// (status written, keep the client connection, error for the access log).
type Served = (u16, bool, Option<String>);

pub(super) async fn pass(
    front: &LeanFront,
    req: &mut LeanRequest<'_>,
    ctx: &mut Ctx,
    pass: Pass,
    closing: bool,
) -> Served {
    let body = if req.head.content_length > 0 {
        match req.read_body(front.max_body).await {
            Ok(b) => b,
            Err(e) => return front.error(req, ctx, e, closing).await,
        }
    } else {
        Bytes::new()
    };
    let method = req.head.method();
    let head_request = method == "HEAD";
    let idempotent = method == "GET" || head_request;
    let read_timeout = (!pass.stream).then_some(PASS_READ_TIMEOUT);
    for host in &pass.hosts {
        let (addr, peer) = host.endpoint(false);
        use pingora_core::upstreams::peer::Peer;
        let Some(sa) = peer.address().as_inet().copied() else {
            continue;
        };
        metrics::upstream_attempt(&host.pool, &host.id);
        ctx.upstream = Some(host.id.clone());
        let wire = encode_request(
            req,
            ctx,
            host,
            &pass.upstream_path(&addr.path),
            &body,
            pass.stream,
        );
        let connect_timeout = peer
            .options
            .connection_timeout
            .unwrap_or(Duration::from_secs(2));
        match open(front, sa, &wire, connect_timeout, read_timeout).await {
            Ok((up, buf)) => {
                host.record_success();
                return relay(
                    front,
                    req,
                    ctx,
                    sa,
                    up,
                    buf,
                    head_request,
                    closing,
                    read_timeout,
                )
                .await;
            }
            Err(Failure::Connect(e)) => {
                host.record_failure(&format!("connect: {e}"));
                metrics::upstream_failure(&host.pool, &host.id, "connect");
            }
            Err(Failure::Transport(e)) => {
                host.record_failure(&format!("proxy: {e}"));
                metrics::upstream_failure(&host.pool, &host.id, "transport");
                if !idempotent {
                    break;
                }
            }
        }
    }
    let e = ApiError::bad_gateway("upstream_unavailable", "no node of the pool could answer");
    front.error(req, ctx, e, closing).await
}

/// The request as the node sees it: its own path and Host, its secret headers, never the
/// caller's credentials or hop-by-hop headers.
fn encode_request(
    req: &LeanRequest<'_>,
    ctx: &Ctx,
    host: &Host,
    path: &str,
    body: &[u8],
    stream: bool,
) -> Vec<u8> {
    let mut w = Vec::with_capacity(req.head.len + 128 + body.len());
    let method = req.head.method();
    for part in [method, " ", path, " HTTP/1.1\r\n"] {
        w.extend_from_slice(part.as_bytes());
    }
    let ours = |name: &str| {
        ["host", "x-request-id", "content-length"]
            .iter()
            .chain(HOP_BY_HOP)
            .chain(CALLER_ONLY_HEADERS)
            .any(|h| h.eq_ignore_ascii_case(name))
            || (stream && name.eq_ignore_ascii_case("accept-encoding"))
            || host
                .headers
                .iter()
                .any(|(h, _)| h.eq_ignore_ascii_case(name))
    };
    for (name, value) in req.head.header_lines() {
        if !ours(name) {
            w.extend_from_slice(name.as_bytes());
            w.extend_from_slice(b": ");
            w.extend_from_slice(value);
            w.extend_from_slice(b"\r\n");
        }
    }
    let mut out = w;
    header(&mut out, "Host", &host.endpoint(false).0.authority());
    header(&mut out, "X-Request-Id", &ctx.request_id);
    for (name, value) in &host.headers {
        header(&mut out, name, value.expose());
    }
    if !body.is_empty() || matches!(method, "POST" | "PUT" | "PATCH") {
        header(&mut out, "Content-Length", &body.len().to_string());
    }
    out.extend_from_slice(b"\r\n");
    out.extend_from_slice(body);
    out
}

enum Failure {
    /// Nothing was sent.
    Connect(String),
    /// Sent, but no complete answer head came back.
    Transport(String),
}

/// Send the request on a pooled (or new) connection and read until the answer's head is
/// complete. A pooled connection the node closed meanwhile is replaced once.
async fn open(
    front: &LeanFront,
    addr: SocketAddr,
    wire: &[u8],
    connect_timeout: Duration,
    read_timeout: Option<Duration>,
) -> Result<(TcpStream, Vec<u8>), Failure> {
    let pool = front.edge.state.gateway.client.plain();
    if let Some(up) = pool.take(addr) {
        match exchange_head(up, wire, read_timeout).await {
            Ok(done) => return Ok(done),
            Err((true, _)) => {} // stale: nothing came back, try a fresh connection
            Err((false, e)) => return Err(Failure::Transport(e)),
        }
    }
    let up = match tokio::time::timeout(connect_timeout, TcpStream::connect(addr)).await {
        Ok(Ok(s)) => s,
        Ok(Err(e)) => return Err(Failure::Connect(e.to_string())),
        Err(_) => return Err(Failure::Connect("timed out".into())),
    };
    let _ = up.set_nodelay(true);
    exchange_head(up, wire, read_timeout)
        .await
        .map_err(|(_, e)| Failure::Transport(e))
}

/// `Err((stale, reason))`: `stale` when the connection was gone before any answer byte.
async fn exchange_head(
    mut up: TcpStream,
    wire: &[u8],
    read_timeout: Option<Duration>,
) -> Result<(TcpStream, Vec<u8>), (bool, String)> {
    if let Err(e) = up.write_all(wire).await {
        return Err((true, e.to_string()));
    }
    let mut buf = Vec::with_capacity(4096);
    loop {
        match read_up(&mut up, &mut buf, read_timeout).await {
            Ok(0) => return Err((buf.is_empty(), "connection closed before an answer".into())),
            Ok(_) => {}
            Err(e) => {
                return Err((
                    buf.is_empty() && e.kind() != std::io::ErrorKind::TimedOut,
                    e.to_string(),
                ))
            }
        }
        // `relay` parses (and checks) the head; here only its end is looked for.
        match head_end(&buf) {
            // 1xx informational answers come before the real one.
            Some(end) if buf.get(9) == Some(&b'1') => {
                buf.drain(..end);
            }
            Some(_) => return Ok((up, buf)),
            None if buf.len() > MAX_NODE_HEAD => {
                return Err((false, "answer head too large".into()))
            }
            None => {}
        }
    }
}

/// Where the head ends (after its blank line), once it is complete.
fn head_end(buf: &[u8]) -> Option<usize> {
    buf.windows(4).position(|w| w == b"\r\n\r\n").map(|i| i + 4)
}

async fn read_up(
    up: &mut TcpStream,
    buf: &mut Vec<u8>,
    timeout: Option<Duration>,
) -> std::io::Result<usize> {
    if buf.capacity() - buf.len() < 1024 {
        buf.reserve(RELAY_CHUNK);
    }
    match timeout {
        None => up.read_buf(buf).await,
        Some(t) => match tokio::time::timeout(t, up.read_buf(buf)).await {
            Ok(r) => r,
            Err(_) => Err(std::io::ErrorKind::TimedOut.into()),
        },
    }
}

/// Write the answer's head (ours: `Server`, `X-Request-Id`, CORS and rate headers) and
/// relay its body as it arrives.
#[allow(clippy::too_many_arguments)]
async fn relay(
    front: &LeanFront,
    req: &mut LeanRequest<'_>,
    ctx: &mut Ctx,
    addr: SocketAddr,
    mut up: TcpStream,
    buf: Vec<u8>,
    head_request: bool,
    closing: bool,
    read_timeout: Option<Duration>,
) -> Served {
    let mut out = Vec::with_capacity(buf.len() + 256);
    let mut lines: Vec<u8> = Vec::with_capacity(buf.len());
    let mut dated = false;
    let info = match parse_head_visit(&buf, head_request, |name, value| {
        dated |= name.eq_ignore_ascii_case("date");
        // Ours replace the node's (cookies add up).
        let skip = HOP_BY_HOP
            .iter()
            .chain(&["server", "x-request-id"])
            .any(|h| h.eq_ignore_ascii_case(name))
            || ctx
                .edge_headers()
                .any(|(k, _)| k != "Set-Cookie" && k.eq_ignore_ascii_case(name));
        if !skip {
            lines.extend_from_slice(name.as_bytes());
            lines.extend_from_slice(b": ");
            lines.extend_from_slice(value);
            lines.extend_from_slice(b"\r\n");
        }
    }) {
        Ok(Some(h)) => h,
        bad => {
            let why = match bad {
                Err(e) => e.to_string(),
                _ => "incomplete head".into(),
            };
            let e = ApiError::bad_gateway(
                "upstream_unavailable",
                format!("the node's answer was malformed: {why}"),
            );
            return front.error(req, ctx, e, closing).await;
        }
    };
    let (status, head_len, framing, node_closes) =
        (info.status, info.len, info.framing, info.close);
    status_line(&mut out, status, info.reason);
    out.extend_from_slice(&lines);
    header(&mut out, "Server", "chainedge");
    header(&mut out, "X-Request-Id", &ctx.request_id);
    if !dated {
        date_header(&mut out);
    }
    for (k, v) in ctx.edge_headers() {
        header(&mut out, k, v);
    }
    let until_close = framing == Framing::UntilClose;
    let close_client = closing || until_close;
    if close_client {
        header(&mut out, "Connection", "close");
    }
    out.extend_from_slice(b"\r\n");

    let mut rest = buf;
    rest.drain(..head_len);
    let mut relay = Relay::new(framing);
    let first = relay.take(&rest);
    let (first, err) = match first {
        Ok(n) => (n, None),
        Err(e) => (0, Some(e)),
    };
    out.extend_from_slice(&rest[..first]);
    let trailing = first < rest.len() && err.is_none();
    if let Err(e) = req.conn.write(&out).await {
        return (status, false, Some(format!("write to client: {e}")));
    }
    if let Some(e) = err {
        return (status, false, Some(format!("node answer: {e}")));
    }
    let mut chunk = Vec::new();
    let mut trailing = trailing;
    while !relay.done() {
        chunk.clear();
        match read_up(&mut up, &mut chunk, read_timeout).await {
            Ok(0) if until_close => break,
            Ok(0) => return (status, false, Some("node closed mid-answer".into())),
            Ok(_) => {}
            Err(e) => return (status, false, Some(format!("node answer: {e}"))),
        }
        let n = match relay.take(&chunk) {
            Ok(n) => n,
            Err(e) => return (status, false, Some(format!("node answer: {e}"))),
        };
        trailing |= n < chunk.len();
        if let Err(e) = req.conn.write(&chunk[..n]).await {
            return (status, false, Some(format!("write to client: {e}")));
        }
    }
    let reusable = !node_closes && !trailing && !until_close;
    front
        .edge
        .state
        .gateway
        .client
        .plain()
        .put(addr, reusable.then_some(up));
    (status, !close_client, None)
}

/// How much of the node's body is still to come.
enum Relay {
    Length(usize),
    Chunked(ChunkedScanner, bool),
    UntilClose,
}

impl Relay {
    fn new(framing: Framing) -> Self {
        match framing {
            Framing::Length(n) => Relay::Length(n),
            Framing::None => Relay::Length(0),
            Framing::Chunked => Relay::Chunked(ChunkedScanner::default(), false),
            Framing::UntilClose => Relay::UntilClose,
        }
    }

    /// How many of `bytes` belong to the body.
    fn take(&mut self, bytes: &[u8]) -> Result<usize, &'static str> {
        match self {
            Relay::Length(left) => {
                let n = bytes.len().min(*left);
                *left -= n;
                Ok(n)
            }
            Relay::Chunked(scanner, done) => match scanner.feed(bytes)? {
                Scan::More => Ok(bytes.len()),
                Scan::Done(n) => {
                    *done = true;
                    Ok(n)
                }
            },
            Relay::UntilClose => Ok(bytes.len()),
        }
    }

    fn done(&self) -> bool {
        match self {
            Relay::Length(left) => *left == 0,
            Relay::Chunked(_, done) => *done,
            Relay::UntilClose => false,
        }
    }
}

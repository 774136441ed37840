//! Passthroughs on the lean path: the request goes to a plain-HTTP node over the lean
//! client (`H1Pool::open`: one write, keep-alive pool, a stale connection replaced once);
//! the node's answer is relayed as it arrives, its framing (length, chunked, or until
//! close) untouched.
//!
//! Retries follow the Pingora path (`Edge::fail_to_connect` / `error_while_proxy`): a
//! failed connect moves to the next host; a failure after sending (no answer, or a
//! malformed head) moves on only for GET and HEAD, before anything reached the client.

use super::request::LeanRequest;
use super::{date_header, header, status_line, LeanFront};
use crate::edge::downstream::Downstream;
use crate::edge::{Ctx, Pass, CALLER_ONLY_HEADERS, PASS_READ_TIMEOUT};
use crate::errors::ApiError;
use crate::observe::metrics;
use crate::pools::Host;
use crate::upstream::chunked::{ChunkedScanner, Scan};
use crate::upstream::h1::{self, parse_head_visit, Framing, H1Request, IdleConn, OpenError};
use std::net::SocketAddr;
use std::time::Duration;
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
            Ok(b) => Some(b),
            Err(e) => return front.error(req, ctx, e, closing).await,
        }
    } else {
        None
    };
    let head_request = req.head.method() == "HEAD";
    let idempotent = head_request || req.head.method() == "GET";
    let read_timeout = (!pass.stream).then_some(PASS_READ_TIMEOUT);
    let pool = front.edge.state.gateway.client.plain();
    for host in &pass.hosts {
        let Some(addr) = host.plain_addr() else {
            continue; // `LeanFront::lean` keeps pools with TLS nodes on Pingora
        };
        metrics::upstream_attempt(&host.pool, &host.id);
        ctx.upstream = Some(host.id.clone());
        let wire = encode_request(req, ctx, host, &pass, body.as_deref());
        let connect_timeout = host.peer.options.connection_timeout;
        let kept = IdleConn::take_for(&mut req.conn.kept, addr);
        let failure = match pool
            .open(
                addr,
                &wire,
                connect_timeout,
                &mut req.conn.node_deadline,
                read_timeout,
                kept,
            )
            .await
        {
            Ok((up, buf)) => match answer_head(ctx, &buf, head_request, closing) {
                Ok(answer) => {
                    host.record_success();
                    return relay(front, req, addr, up, buf, answer, read_timeout).await;
                }
                Err(e) => OpenError::Transport(e),
            },
            Err(e) => e,
        };
        match failure {
            OpenError::Connect(e) => {
                host.record_failure(&format!("connect: {e}"));
                metrics::upstream_failure(&host.pool, &host.id, "connect");
            }
            OpenError::Transport(e) => {
                host.record_failure(&format!("proxy: {e}"));
                metrics::upstream_failure(&host.pool, &host.id, "transport");
                if !idempotent {
                    break;
                }
            }
        }
    }
    front
        .error(req, ctx, ApiError::no_node_answered(), closing)
        .await
}

/// The request as the node sees it: its own path and Host, its secret headers, never the
/// caller's credentials or hop-by-hop headers.
fn encode_request(
    req: &LeanRequest<'_>,
    ctx: &Ctx,
    host: &Host,
    pass: &Pass,
    body: Option<&[u8]>,
) -> Vec<u8> {
    let ours = |name: &str| {
        ["host", "x-request-id", "content-length"]
            .iter()
            .chain(HOP_BY_HOP)
            .chain(CALLER_ONLY_HEADERS)
            .any(|h| h.eq_ignore_ascii_case(name))
            || (pass.stream && name.eq_ignore_ascii_case("accept-encoding"))
            || host
                .headers
                .iter()
                .any(|(h, _)| h.eq_ignore_ascii_case(name))
    };
    let mut headers: Vec<(&str, &[u8])> = req
        .head
        .header_lines()
        .filter(|(name, _)| !ours(name))
        .collect();
    headers.push(("Host", host.addr.authority().as_bytes()));
    headers.push(("X-Request-Id", ctx.request_id.as_bytes()));
    for (name, value) in &host.headers {
        headers.push((name, value.expose().as_bytes()));
    }
    h1::encode(&H1Request {
        method: req.head.method(),
        path: &pass.upstream_path(&host.addr.path),
        headers: &headers,
        body,
    })
}

/// The client's answer head from the node's: the node's headers less hop-by-hop ones
/// and those the edge sets (`Ctx::edge_headers`), then ours.
struct AnswerHead {
    bytes: Vec<u8>,
    status: u16,
    /// Length of the node's head in its bytes.
    node_head_len: usize,
    framing: Framing,
    node_closes: bool,
    close_client: bool,
}

fn answer_head(
    ctx: &Ctx,
    node: &[u8],
    head_request: bool,
    closing: bool,
) -> Result<AnswerHead, String> {
    let mut lines: Vec<u8> = Vec::with_capacity(node.len());
    let mut dated = false;
    let info = parse_head_visit(node, head_request, |name, value| {
        dated |= name.eq_ignore_ascii_case("date");
        let skip = HOP_BY_HOP.iter().any(|h| h.eq_ignore_ascii_case(name)) || ctx.replaces(name);
        if !skip {
            header(&mut lines, name, value);
        }
    })
    .map_err(|e| e.to_string())?
    .ok_or("incomplete answer head")?;
    let mut bytes = Vec::with_capacity(lines.len() + 256);
    status_line(&mut bytes, info.status, info.reason);
    bytes.extend_from_slice(&lines);
    if !dated {
        date_header(&mut bytes);
    }
    for (k, v) in ctx.edge_headers() {
        header(&mut bytes, k, v.as_bytes());
    }
    let close_client = closing || info.framing == Framing::UntilClose;
    if close_client {
        header(&mut bytes, "Connection", b"close");
    }
    bytes.extend_from_slice(b"\r\n");
    Ok(AnswerHead {
        bytes,
        status: info.status,
        node_head_len: info.len,
        framing: info.framing,
        node_closes: info.close,
        close_client,
    })
}

/// Write the answer's head and relay its body as it arrives; the node connection goes
/// back to the pool when the answer ended cleanly.
async fn relay(
    front: &LeanFront,
    req: &mut LeanRequest<'_>,
    addr: SocketAddr,
    mut up: TcpStream,
    buf: Vec<u8>,
    answer: AnswerHead,
    read_timeout: Option<Duration>,
) -> Served {
    let status = answer.status;
    let mut out = answer.bytes;
    let rest = &buf[answer.node_head_len..];
    let mut relay = Relay::new(answer.framing);
    let (first, err) = match relay.take(rest) {
        Ok(n) => (n, None),
        Err(e) => (0, Some(e)),
    };
    out.extend_from_slice(&rest[..first]);
    let mut trailing = first < rest.len() && err.is_none();
    if let Err(e) = req.conn.write(&out).await {
        return (status, false, Some(format!("write to client: {e}")));
    }
    if let Some(e) = err {
        return (status, false, Some(format!("node answer: {e}")));
    }
    let until_close = answer.framing == Framing::UntilClose;
    let mut chunk = Vec::new();
    while !relay.done() {
        chunk.clear();
        match h1::read_some(
            &mut up,
            &mut chunk,
            &mut req.conn.node_deadline,
            read_timeout,
        )
        .await
        {
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
    let reusable = !answer.node_closes && !trailing && !until_close;
    if reusable {
        // Kept by this client connection for its next request (no pool lock, usually the
        // same node); the one it held before goes back to the pool.
        if let Some(old) = req.conn.kept.replace(IdleConn::new(addr, up)) {
            front.edge.state.gateway.client.plain().put_idle(old);
        }
    }
    (status, !answer.close_client, None)
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
            Relay::Chunked(scanner, done) => match scanner.feed(bytes, |_| {})? {
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

//! Passthroughs on the lean path: the request goes to a plain-HTTP node over the lean
//! client (`H1Pool::open`: one write, keep-alive pool, a stale connection replaced when
//! that cannot send a request twice); the node's answer is re-framed as it arrives: a
//! length stays a length (ours, from the parsed value), a chunked or until-close body is
//! decoded and sent on in chunks of the edge's own, trailers and extensions dropped. An
//! answer that breaks the framing rules (`h1::parse_head_visit`, `ChunkedScanner`) is a
//! 502 while nothing has been written, and the node connection is never reused.
//!
//! Retries follow the Pingora path (`Edge::fail_to_connect` / `error_while_proxy`): a
//! failed connect moves to the next host; a failure after sending (no answer, or a
//! malformed head) moves on only for GET and HEAD, before anything reached the client.

use super::answer::{date_header, header, status_line};
use super::request::LeanRequest;
use super::LeanFront;
use crate::address::plain_inet;
use crate::deadline::Deadline;
use crate::edge::retry::{self, Failure};
use crate::edge::{
    connection_options, forwarded_for, has_underscore, listed, sets_console_cookie, Ctx,
    Downstream, Listed, Pass, PASS_READ_TIMEOUT,
};
use crate::errors::ApiError;
use crate::observe::metrics;
use crate::pools::Host;
use crate::upstream::chunked::{ChunkedScanner, Scan};
use crate::upstream::h1::{
    self, lists_token, parse_head_visit, Framing, H1Request, Open, OpenError,
};
use std::net::SocketAddr;
use std::time::Duration;
use tokio::net::TcpStream;

/// (status written, keep the client connection, error for the access log).
type Served = (u16, bool, Option<String>);

pub(super) async fn pass(
    front: &LeanFront,
    req: &mut LeanRequest<'_>,
    ctx: &mut Ctx,
    pass: Pass,
    closing: bool,
) -> Served {
    let body = if req.head.content_length > 0 || req.head.chunked {
        match req.read_body(front.max_body).await {
            Ok(b) => Some(b),
            Err(e) => return front.error(req, ctx, e, closing).await,
        }
    } else {
        None
    };
    let head_request = req.head.method() == "HEAD";
    let idempotent = retry::safe_to_resend(req.head.method());
    let read_timeout = (!pass.stream).then_some(PASS_READ_TIMEOUT);
    let pool = front.edge.node_connections();
    for host in &pass.hosts {
        let Some(addr) = plain_inet(pass.endpoint(host, false).1) else {
            continue; // `LeanFront::lean` keeps pools with TLS nodes on Pingora
        };
        metrics::upstream_attempt(&host.pool, &host.id);
        ctx.served_by(&host.id);
        let wire = encode_request(req, ctx, host, &pass, body.as_deref());
        let (idle, mut timer) = pool.checkout(addr);
        let how = Open {
            connect_timeout: pass.endpoint(host, false).1.options.connection_timeout,
            read_timeout,
            until: None,
            kept: idle,
            safe_to_resend: idempotent,
        };
        let failure = match pool.open(addr, &wire, &mut timer, how).await {
            Ok((up, buf)) => match answer_head(ctx, &buf, head_request, closing) {
                Ok(answer) => {
                    let rest = &buf[answer.node_head_len..];
                    let mut body = Reframe::new(answer.framing);
                    let mut out = answer.bytes;
                    match body.take(rest, &mut out) {
                        Ok(used) => {
                            host.record_success();
                            let first = First {
                                out,
                                trailing: used < rest.len(),
                            };
                            let node = Node {
                                addr,
                                up,
                                timer,
                                closes: answer.node_closes,
                                read_timeout,
                            };
                            return relay(
                                front,
                                req,
                                node,
                                first,
                                answer.status,
                                answer.close_client,
                                body,
                            )
                            .await;
                        }
                        Err(e) => OpenError::Transport(format!("node answer: {e}")),
                    }
                }
                Err(e) => OpenError::Transport(e),
            },
            Err(e) => e,
        };
        let (kind, detail) = match failure {
            OpenError::Connect(e) => (Failure::Connect, e),
            OpenError::Transport(e) => (Failure::Transport, e),
        };
        // Nothing went to the client yet: a failed pass answers 502 below.
        if !retry::after_failure(host, kind, &detail, idempotent, false) {
            break;
        }
    }
    front
        .error(req, ctx, ApiError::no_node_answered(), closing)
        .await
}

/// The request as the node sees it: its own path and Host, its secret headers, the
/// edge's `X-Forwarded-For`; never the caller's credentials, hop-by-hop headers or the
/// headers its `Connection` header names.
fn encode_request(
    req: &LeanRequest<'_>,
    ctx: &Ctx,
    host: &Host,
    pass: &Pass,
    body: Option<&[u8]>,
) -> Vec<u8> {
    let connection: Vec<&[u8]> = req
        .head
        .header_lines()
        .filter(|(n, _)| n.eq_ignore_ascii_case("connection"))
        .map(|(_, v)| v)
        .collect();
    let options = if connection.is_empty() {
        Vec::new()
    } else {
        connection_options(&connection)
    };
    let ours = |name: &str| {
        listed(name) != Listed::None
            || has_underscore(name)
            || (pass.stream && name.eq_ignore_ascii_case("accept-encoding"))
            || options.iter().any(|o| o.eq_ignore_ascii_case(name))
            || host
                .headers
                .iter()
                .any(|(h, _)| h.eq_ignore_ascii_case(name))
    };
    // The caller's lines kept, then Host, X-Request-Id, X-Forwarded-For and the host's.
    let mut headers: Vec<(&str, &[u8])> =
        Vec::with_capacity(req.head.headers.len() + 3 + host.headers.len());
    headers.extend(req.head.header_lines().filter(|(name, _)| !ours(name)));
    let (addr, _) = pass.endpoint(host, false);
    headers.push(("Host", addr.authority().as_bytes()));
    headers.push(("X-Request-Id", ctx.request_id().as_bytes()));
    // The edge's X-Forwarded-For: the client, after a trusted proxy's chain.
    // Only a trusted proxy's own header is looked up at all.
    // Every line of it: repeated lines are one list (RFC 9110 §5.3).
    let sent = req
        .conn
        .trusted_proxy
        .then(|| Downstream::header_list(req, "x-forwarded-for"))
        .flatten();
    let xff = forwarded_for(
        req.conn.trusted_proxy,
        req.conn.client_ip_text(),
        sent.as_deref(),
    );
    if !xff.is_empty() {
        headers.push(("X-Forwarded-For", xff.as_bytes()));
    }
    for (name, value) in &host.headers {
        headers.push((name, value.expose().as_bytes()));
    }
    h1::encode(&H1Request {
        method: req.head.method(),
        path: &pass.upstream_path_on(host, false),
        headers: &headers,
        body,
    })
}

/// The client's answer head from the node's: the node's headers less hop-by-hop and
/// framing ones, those the edge sets (`Ctx::edge_headers`) and console cookies, then
/// the edge's framing and headers.
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
    // The client's head in one buffer: the header lines first, the status line moved in
    // front of them once the parse has read it (a rotation, not a second buffer).
    let mut lines: Vec<u8> = Vec::with_capacity(node.len() + 256);
    let mut dated = false;
    let mut options: Vec<&[u8]> = Vec::new();
    let info = parse_head_visit(node, head_request, |name, value| {
        dated |= name.eq_ignore_ascii_case("date");
        if name.eq_ignore_ascii_case("connection") {
            options.push(value);
        }
        let skip = listed(name) == Listed::HopByHop
            || ctx.replaces(name)
            || (name.eq_ignore_ascii_case("set-cookie") && sets_console_cookie(value));
        if !skip {
            header(&mut lines, name, value);
        }
    })
    .map_err(|e| e.to_string())?
    .ok_or("incomplete answer head")?;
    if info.status < 200 {
        return Err(format!("unexpected {} answer", info.status));
    }
    if options
        .iter()
        .any(|v| !lists_token(v, "close") && !lists_token(v, "keep-alive"))
    {
        // Headers the node's `Connection` names stay on the node's hop.
        let named = connection_options(&options);
        let mut kept = Vec::with_capacity(lines.capacity());
        for line in lines.split_inclusive(|&b| b == b'\n') {
            let name = line.split(|&b| b == b':').next().unwrap_or_default();
            if !named
                .iter()
                .any(|n| n.as_bytes().eq_ignore_ascii_case(name))
            {
                kept.extend_from_slice(line);
            }
        }
        lines = kept;
    }
    let mut bytes = lines;
    let lines_end = bytes.len();
    status_line(&mut bytes, info.status, info.reason);
    let status_len = bytes.len() - lines_end;
    bytes.rotate_right(status_len);
    if !dated {
        date_header(&mut bytes);
    }
    ctx.edge_headers(|k, v| {
        header(&mut bytes, k, v.as_bytes());
    });
    match info.framing {
        Framing::Length(n) => content_length(&mut bytes, n),
        Framing::Chunked | Framing::UntilClose => {
            header(&mut bytes, "Transfer-Encoding", b"chunked")
        }
        // HEAD: what a GET would have said; 204 / 304: nothing.
        Framing::None if head_request => {
            if let Some(n) = info.declared_length {
                content_length(&mut bytes, n);
            } else if info.chunked {
                header(&mut bytes, "Transfer-Encoding", b"chunked");
            }
        }
        Framing::None => {}
    }
    if closing {
        header(&mut bytes, "Connection", b"close");
    }
    bytes.extend_from_slice(b"\r\n");
    Ok(AnswerHead {
        bytes,
        status: info.status,
        node_head_len: info.len,
        framing: info.framing,
        node_closes: info.close,
        close_client: closing,
    })
}

/// What the first read of the answer gave: the client's bytes so far (head and the
/// body's start), and whether bytes followed the body.
struct First {
    out: Vec<u8>,
    trailing: bool,
}

/// The node connection an answer is coming on.
struct Node {
    addr: SocketAddr,
    up: TcpStream,
    /// Times the reads of the answer; goes back to the pool with the connection.
    timer: Deadline,
    /// The node closes it after this answer.
    closes: bool,
    read_timeout: Option<Duration>,
}

/// The largest rest of a known-length answer waited for, so it is written with its head.
const ONE_WRITE_BYTES: usize = 64 * 1024;

/// Write the answer's head and relay its body as it arrives; the node connection goes
/// back to the pool when the answer ended cleanly.
async fn relay(
    front: &LeanFront,
    req: &mut LeanRequest<'_>,
    node: Node,
    first: First,
    status: u16,
    close_client: bool,
    mut body: Reframe,
) -> Served {
    let Node {
        addr,
        mut up,
        mut timer,
        closes: node_closes,
        read_timeout,
    } = node;
    let mut trailing = first.trailing;
    let until_close = body.until_close();
    // A small answer of known length goes out in one write: killed between two writes,
    // the edge would leave its client half an answer; killed before the one, nothing,
    // which a balancer sends to another instance (conf/haproxy-cluster.cfg).
    let whole = matches!(body, Reframe::Length(left) if left <= ONE_WRITE_BYTES);
    let mut out = first.out;
    if !whole {
        if let Err(e) = req.conn.write(&out).await {
            return (status, false, Some(format!("write to client: {e}")));
        }
    }
    let mut chunk = Vec::new();
    while !body.done() {
        chunk.clear();
        if !whole {
            out.clear();
        }
        match h1::read_some(
            &mut up,
            &mut chunk,
            &mut timer,
            h1::end_of(read_timeout, None),
        )
        .await
        {
            Ok(0) if until_close => {
                body.finish(&mut out);
                if let Err(e) = req.conn.write(&out).await {
                    return (status, false, Some(format!("write to client: {e}")));
                }
                break;
            }
            // The client's answer is cut short: it must not take it for a whole one.
            Ok(0) => return (status, false, Some("node closed mid-answer".into())),
            Ok(_) => {}
            Err(e) => return (status, false, Some(format!("node answer: {e}"))),
        }
        let n = match body.take(&chunk, &mut out) {
            Ok(n) => n,
            Err(e) => return (status, false, Some(format!("node answer: {e}"))),
        };
        trailing |= n < chunk.len();
        if !whole {
            if let Err(e) = req.conn.write(&out).await {
                return (status, false, Some(format!("write to client: {e}")));
            }
        }
    }
    if whole {
        if let Err(e) = req.conn.write(&out).await {
            return (status, false, Some(format!("write to client: {e}")));
        }
    }
    let reusable = !node_closes && !trailing && !until_close;
    if reusable {
        // Back to the pool now, not held by this client until it leaves: a burst of
        // clients then shares the node connections of the answers in flight.
        front.edge.node_connections().check_in(addr, up, timer);
    }
    (status, !close_client, None)
}

/// A node's body as the client gets it, and how much of it is still to come.
enum Reframe {
    /// Bytes left of a length the edge announced (the node's, parsed).
    Length(usize),
    /// Decoded from the node's chunks, sent on in the edge's (`done` once the last).
    Chunked(ChunkedScanner, bool),
    /// Until the node closes, sent on in chunks so the client connection survives it.
    UntilClose,
}

impl Reframe {
    fn new(framing: Framing) -> Self {
        match framing {
            Framing::Length(n) => Reframe::Length(n),
            Framing::None => Reframe::Length(0),
            Framing::Chunked => Reframe::Chunked(ChunkedScanner::default(), false),
            Framing::UntilClose => Reframe::UntilClose,
        }
    }

    /// Append the client's bytes for the node's `bytes` to `out`: how many of `bytes`
    /// belong to the body.
    fn take(&mut self, bytes: &[u8], out: &mut Vec<u8>) -> Result<usize, &'static str> {
        match self {
            Reframe::Length(left) => {
                let n = bytes.len().min(*left);
                *left -= n;
                out.extend_from_slice(&bytes[..n]);
                Ok(n)
            }
            Reframe::Chunked(scanner, done) => {
                match scanner.feed(bytes, |data| encode_chunk(out, data))? {
                    Scan::More => Ok(bytes.len()),
                    Scan::Done(n) => {
                        *done = true;
                        out.extend_from_slice(b"0\r\n\r\n");
                        Ok(n)
                    }
                }
            }
            Reframe::UntilClose => {
                encode_chunk(out, bytes);
                Ok(bytes.len())
            }
        }
    }

    /// The node closed an until-close body: the last chunk.
    fn finish(&self, out: &mut Vec<u8>) {
        out.extend_from_slice(b"0\r\n\r\n");
    }

    fn until_close(&self) -> bool {
        matches!(self, Reframe::UntilClose)
    }

    fn done(&self) -> bool {
        match self {
            Reframe::Length(left) => *left == 0,
            Reframe::Chunked(_, done) => *done,
            Reframe::UntilClose => false,
        }
    }
}

fn content_length(out: &mut Vec<u8>, n: usize) {
    use std::io::Write;
    let _ = write!(out, "Content-Length: {n}\r\n");
}

/// One chunk of the edge's chunked coding (nothing for empty data, which would end it).
fn encode_chunk(out: &mut Vec<u8>, data: &[u8]) {
    if data.is_empty() {
        return;
    }
    use std::io::Write;
    let _ = write!(out, "{:x}\r\n", data.len());
    out.extend_from_slice(data);
    out.extend_from_slice(b"\r\n");
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn header_names_are_listed_whatever_their_case_and_no_others() {
        let hop = [
            "connection",
            "keep-alive",
            "proxy-connection",
            "te",
            "trailer",
            "upgrade",
            "transfer-encoding",
            "content-length",
            "expect",
        ];
        let lists = [
            (&hop[..], Listed::HopByHop),
            (crate::edge::CALLER_ONLY_HEADERS, Listed::CallerOnly),
            (&["host", "x-request-id"][..], Listed::EdgeWritten),
        ];
        for (names, list) in lists {
            for name in names {
                for spelled in [name.to_string(), name.to_ascii_uppercase(), {
                    let mut mixed = name.to_string();
                    mixed[..1].make_ascii_uppercase();
                    mixed
                }] {
                    assert_eq!(listed(&spelled), list, "{spelled}");
                }
            }
        }
        let others = [
            "",
            "content-type",
            "x-tokens",
            "hos",
            "te ",
            "x-forwarded-for-x",
            "a-name-longer-than-any-listed-one",
            "proxy-authorization-and-more",
            "accept-encoding",
        ];
        for name in others {
            assert_eq!(listed(name), Listed::None, "{name}");
        }
    }

    fn reframe(framing: Framing, parts: &[&[u8]]) -> Result<(Vec<u8>, bool), &'static str> {
        let mut r = Reframe::new(framing);
        let mut out = Vec::new();
        for p in parts {
            r.take(p, &mut out)?;
        }
        Ok((out, r.done()))
    }

    #[test]
    fn chunked_answers_are_decoded_and_sent_in_our_chunks() {
        let (out, done) = reframe(
            Framing::Chunked,
            &[b"5;ext=\"x\"\r\nhel", b"lo\r\n0\r\nX-Trailer: t\r\n\r\n"],
        )
        .unwrap();
        assert!(done);
        assert_eq!(out, b"3\r\nhel\r\n2\r\nlo\r\n0\r\n\r\n");
        // A response smuggled behind the last chunk never reaches the client.
        assert!(reframe(
            Framing::Chunked,
            &[b"0\r\n\nHTTP/1.1 200 OK\r\nX-Injected: by-node\r\nContent-Length: 8\r\n\r\n"],
        )
        .is_err());
        let (out, done) = reframe(Framing::Length(3), &[b"abcdef"]).unwrap();
        assert_eq!((out.as_slice(), done), (&b"abc"[..], true));
        let (out, done) = reframe(Framing::UntilClose, &[b"ab", b"", b"c"]).unwrap();
        assert_eq!(
            (out.as_slice(), done),
            (&b"2\r\nab\r\n1\r\nc\r\n"[..], false)
        );
    }
}

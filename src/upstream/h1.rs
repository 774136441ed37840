//! A lean HTTP/1.1 client for buffered calls to plain-HTTP nodes (the JSON-RPC hot path,
//! health checks, the metrics mirror). The request head and body go out in one write,
//! the answer is parsed with httparse, and the connection goes back to a per-address
//! LIFO pool. Pingora's connector still carries TLS peers and streamed calls.
//!
//! Why not Pingora's client here: per request its pool spawns an idle-watch task, probes
//! the socket with a read and checks the peer address (`getpeername`) on reuse, and its
//! HTTP/1 client flushes the head before the body, which costs a second send and a second
//! wake-up of the node. Together that was about a fifth of `/rpc/eth`'s CPU (bench/).

use super::{UpstreamError, UpstreamResponse};
use bytes::Bytes;
use std::collections::HashMap;
use std::net::SocketAddr;
use std::sync::Mutex;
use std::time::{Duration, Instant};
use tokio::io::{AsyncReadExt, AsyncWriteExt};
use tokio::net::TcpStream;

/// Idle connections kept per node address; more are closed.
const MAX_IDLE_PER_ADDR: usize = 256;
/// An idle connection older than this is closed instead of reused (nodes close idle
/// keep-alive connections after their own timeout; geth's is 120 s).
const MAX_IDLE_AGE: Duration = Duration::from_secs(30);
/// Largest response head accepted.
const MAX_HEAD: usize = 64 * 1024;
const MAX_HEADERS: usize = 64;

#[derive(Default)]
pub struct H1Pool {
    idle: Mutex<HashMap<SocketAddr, Vec<(TcpStream, Instant)>>>,
}

/// One buffered request.
pub struct H1Request<'a> {
    pub method: &'a str,
    pub path: &'a str,
    /// Header lines, each `name: value` pairs, Host included.
    pub headers: &'a [(&'a str, &'a str)],
    pub body: Option<&'a [u8]>,
}

impl H1Pool {
    /// Send `req` to `addr` and read the whole answer (at most `max_body` bytes of body).
    /// A pooled connection that the node closed meanwhile is replaced by a fresh one once,
    /// but only when nothing of an answer arrived on it.
    pub async fn exchange(
        &self,
        addr: SocketAddr,
        req: &H1Request<'_>,
        max_body: usize,
    ) -> Result<UpstreamResponse, UpstreamError> {
        let wire = encode(req);
        if let Some(stream) = self.take(addr) {
            match exchange_on(stream, &wire, max_body).await {
                Ok((resp, keep)) => {
                    self.put(addr, keep);
                    return Ok(resp);
                }
                Err(Failure::Stale) => {}
                Err(Failure::Fatal(e)) => return Err(e),
            }
        }
        let stream = TcpStream::connect(addr)
            .await
            .map_err(|e| UpstreamError::Connect(e.to_string()))?;
        let _ = stream.set_nodelay(true);
        match exchange_on(stream, &wire, max_body).await {
            Ok((resp, keep)) => {
                self.put(addr, keep);
                Ok(resp)
            }
            Err(Failure::Stale) => Err(UpstreamError::Io(
                "connection closed before any answer".into(),
            )),
            Err(Failure::Fatal(e)) => Err(e),
        }
    }

    /// An idle connection to `addr` that is still quiet, if any.
    pub fn take(&self, addr: SocketAddr) -> Option<TcpStream> {
        let mut idle = self.idle.lock().ok()?;
        let list = idle.get_mut(&addr)?;
        while let Some((stream, since)) = list.pop() {
            // Nothing may be waiting on an idle connection: data there (a node's 408, or
            // leftovers) would be taken for the next answer, and EOF means it is closed.
            let quiet = matches!(
                stream.try_read(&mut [0u8; 1]),
                Err(e) if e.kind() == std::io::ErrorKind::WouldBlock
            );
            if quiet && since.elapsed() < MAX_IDLE_AGE {
                return Some(stream);
            }
        }
        None
    }

    /// Keep `stream` for the next request to `addr` (`None`: nothing to keep).
    pub fn put(&self, addr: SocketAddr, stream: Option<TcpStream>) {
        let Some(stream) = stream else { return };
        if let Ok(mut idle) = self.idle.lock() {
            let list = idle.entry(addr).or_default();
            if list.len() < MAX_IDLE_PER_ADDR {
                list.push((stream, Instant::now()));
            }
        }
    }
}

enum Failure {
    /// The connection was gone before any byte of an answer: safe to send again.
    Stale,
    Fatal(UpstreamError),
}

fn encode(req: &H1Request<'_>) -> Vec<u8> {
    let body = req.body.unwrap_or_default();
    let mut w = Vec::with_capacity(256 + body.len());
    for part in [req.method, " ", req.path, " HTTP/1.1\r\n"] {
        w.extend_from_slice(part.as_bytes());
    }
    for (name, value) in req.headers {
        for part in [*name, ": ", *value, "\r\n"] {
            w.extend_from_slice(part.as_bytes());
        }
    }
    if req.body.is_some() || req.method == "POST" {
        w.extend_from_slice(format!("Content-Length: {}\r\n", body.len()).as_bytes());
    }
    w.extend_from_slice(b"\r\n");
    w.extend_from_slice(body);
    w
}

/// Write the request and read one answer; the stream comes back when it may be reused.
async fn exchange_on(
    mut stream: TcpStream,
    wire: &[u8],
    max_body: usize,
) -> Result<(UpstreamResponse, Option<TcpStream>), Failure> {
    if stream.write_all(wire).await.is_err() {
        return Err(Failure::Stale);
    }
    let mut buf: Vec<u8> = Vec::with_capacity(4096);
    let mut answered = false;
    let (status, head_len, framing, close) = loop {
        if let Some(head) = parse_head(&buf).map_err(Failure::Fatal)? {
            // 1xx informational answers come before the real one.
            if (100..200).contains(&head.0) && head.0 != 101 {
                buf.drain(..head.1);
                continue;
            }
            break head;
        }
        if buf.len() > MAX_HEAD {
            return Err(io("response head too large"));
        }
        match read_more(&mut stream, &mut buf).await {
            Ok(0) | Err(_) if !answered => return Err(Failure::Stale),
            Ok(0) => return Err(io("connection closed in the response head")),
            Err(e) => return Err(io(&e.to_string())),
            Ok(_) => answered = true,
        }
    };
    let mut rest = buf.split_off(head_len);
    let mut trailing = false;
    let body = match framing {
        Framing::Length(n) => {
            if n > max_body {
                return Err(Failure::Fatal(UpstreamError::TooLarge(max_body)));
            }
            while rest.len() < n {
                if read_more(&mut stream, &mut rest)
                    .await
                    .map_err(|e| io(&e.to_string()))?
                    == 0
                {
                    return Err(io("connection closed in the response body"));
                }
            }
            // Bytes beyond the answer: keep the answer, never reuse the connection.
            trailing = rest.len() > n;
            rest.truncate(n);
            rest
        }
        Framing::Chunked => {
            let (body, extra) = read_chunked(&mut stream, rest, max_body).await?;
            trailing = extra;
            body
        }
        Framing::None => {
            trailing = !rest.is_empty();
            Vec::new()
        }
        Framing::UntilClose => {
            loop {
                if rest.len() > max_body {
                    return Err(Failure::Fatal(UpstreamError::TooLarge(max_body)));
                }
                if read_more(&mut stream, &mut rest)
                    .await
                    .map_err(|e| io(&e.to_string()))?
                    == 0
                {
                    break;
                }
            }
            rest
        }
    };
    let reusable = !close && !trailing && !matches!(framing, Framing::UntilClose);
    Ok((
        UpstreamResponse {
            status,
            body: Bytes::from(body),
        },
        reusable.then_some(stream),
    ))
}

fn io(msg: &str) -> Failure {
    Failure::Fatal(UpstreamError::Io(msg.to_string()))
}

async fn read_more(stream: &mut TcpStream, buf: &mut Vec<u8>) -> std::io::Result<usize> {
    buf.reserve(8192);
    stream.read_buf(buf).await
}

#[derive(Debug, PartialEq)]
pub enum Framing {
    Length(usize),
    Chunked,
    /// 204 / 304: no body.
    None,
    /// Neither length nor chunked: the body ends when the node closes.
    UntilClose,
}

/// `Some((status, head length, framing, connection: close))` once the head is complete.
#[allow(clippy::type_complexity)]
pub fn parse_head(buf: &[u8]) -> Result<Option<(u16, usize, Framing, bool)>, UpstreamError> {
    Ok(parse_head_visit(buf, false, |_, _| {})?.map(|h| (h.status, h.len, h.framing, h.close)))
}

/// A complete response head.
pub struct HeadInfo<'b> {
    pub status: u16,
    pub reason: &'b str,
    /// Bytes of the head, blank line included.
    pub len: usize,
    pub framing: Framing,
    /// The node closes the connection after this answer.
    pub close: bool,
}

/// Parse a response head, showing each header to `visit`; `None` while it is incomplete.
/// An answer to HEAD has no body whatever its headers say.
pub fn parse_head_visit<'b>(
    buf: &'b [u8],
    head_request: bool,
    mut visit: impl FnMut(&'b str, &'b [u8]),
) -> Result<Option<HeadInfo<'b>>, UpstreamError> {
    let mut headers = [httparse::EMPTY_HEADER; MAX_HEADERS];
    let mut resp = httparse::Response::new(&mut headers);
    let head_len = match resp.parse(buf) {
        Ok(httparse::Status::Complete(n)) => n,
        Ok(httparse::Status::Partial) => return Ok(None),
        Err(e) => return Err(UpstreamError::Io(format!("bad response head: {e}"))),
    };
    let status = resp.code.unwrap_or(0);
    if status < 100 {
        return Err(UpstreamError::Io(format!("bad response status {status}")));
    }
    let mut length = None;
    let mut chunked = false;
    let mut close = resp.version == Some(0);
    for h in resp.headers.iter() {
        visit(h.name, h.value);
        let value = std::str::from_utf8(h.value).unwrap_or("").trim();
        if h.name.eq_ignore_ascii_case("content-length") {
            let n: usize = value
                .parse()
                .map_err(|_| UpstreamError::Io("bad content-length".into()))?;
            if length.is_some_and(|m| m != n) {
                return Err(UpstreamError::Io("conflicting content-length".into()));
            }
            length = Some(n);
        } else if h.name.eq_ignore_ascii_case("transfer-encoding") {
            chunked = value.to_ascii_lowercase().ends_with("chunked");
        } else if h.name.eq_ignore_ascii_case("connection") {
            let v = value.to_ascii_lowercase();
            if v.contains("close") {
                close = true;
            } else if v.contains("keep-alive") {
                close = false;
            }
        }
    }
    let framing = if status == 204 || status == 304 || head_request || status < 200 {
        Framing::None
    } else if chunked {
        Framing::Chunked
    } else if let Some(n) = length {
        Framing::Length(n)
    } else {
        Framing::UntilClose
    };
    Ok(Some(HeadInfo {
        status,
        reason: resp.reason.unwrap_or(""),
        len: head_len,
        framing,
        close,
    }))
}

/// Decode a chunked body whose first bytes are in `raw`; at most `max_body` bytes. Also
/// says whether bytes followed the body (the connection must not be reused then).
async fn read_chunked(
    stream: &mut TcpStream,
    mut raw: Vec<u8>,
    max_body: usize,
) -> Result<(Vec<u8>, bool), Failure> {
    let mut body = Vec::new();
    let mut at = 0;
    loop {
        let line_end = loop {
            if let Some(i) = find_crlf(&raw[at..]) {
                break at + i;
            }
            if raw.len() - at > 1024 {
                return Err(io("bad chunk size line"));
            }
            fill(stream, &mut raw).await?;
        };
        let size_text = std::str::from_utf8(&raw[at..line_end]).unwrap_or("");
        let size_text = size_text.split(';').next().unwrap_or("").trim();
        let size = usize::from_str_radix(size_text, 16).map_err(|_| io("bad chunk size"))?;
        at = line_end + 2;
        if size == 0 {
            // Trailers, up to the empty line.
            loop {
                let end = loop {
                    if let Some(i) = find_crlf(&raw[at..]) {
                        break at + i;
                    }
                    if raw.len() - at > MAX_HEAD {
                        return Err(io("trailers too large"));
                    }
                    fill(stream, &mut raw).await?;
                };
                let empty = end == at;
                at = end + 2;
                if empty {
                    break;
                }
            }
            return Ok((body, at != raw.len()));
        }
        if body.len() + size > max_body {
            return Err(Failure::Fatal(UpstreamError::TooLarge(max_body)));
        }
        while raw.len() < at + size + 2 {
            fill(stream, &mut raw).await?;
        }
        if &raw[at + size..at + size + 2] != b"\r\n" {
            return Err(io("chunk not followed by CRLF"));
        }
        body.extend_from_slice(&raw[at..at + size]);
        at += size + 2;
    }
}

async fn fill(stream: &mut TcpStream, raw: &mut Vec<u8>) -> Result<(), Failure> {
    match read_more(stream, raw).await {
        Ok(0) => Err(io("connection closed in a chunked body")),
        Ok(_) => Ok(()),
        Err(e) => Err(io(&e.to_string())),
    }
}

fn find_crlf(b: &[u8]) -> Option<usize> {
    b.windows(2).position(|w| w == b"\r\n")
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::sync::atomic::{AtomicUsize, Ordering};
    use std::sync::Arc;
    use tokio::net::TcpListener;

    /// A node that answers each request on a connection with the next canned answer, and
    /// closes after `per_conn` answers. Returns its address and a count of connections.
    async fn node(answers: Vec<&'static str>, per_conn: usize) -> (SocketAddr, Arc<AtomicUsize>) {
        node_with(answers, per_conn, "", 0).await
    }

    /// `node`, writing `after` on the connection `delay_ms` after each answer, unasked.
    async fn node_with(
        answers: Vec<&'static str>,
        per_conn: usize,
        after: &'static str,
        delay_ms: u64,
    ) -> (SocketAddr, Arc<AtomicUsize>) {
        let l = TcpListener::bind("127.0.0.1:0").await.unwrap();
        let addr = l.local_addr().unwrap();
        let conns = Arc::new(AtomicUsize::new(0));
        let seen = conns.clone();
        tokio::spawn(async move {
            let mut next = 0;
            while let Ok((mut s, _)) = l.accept().await {
                seen.fetch_add(1, Ordering::SeqCst);
                for _ in 0..per_conn {
                    let mut buf = vec![0u8; 4096];
                    let mut got = Vec::new();
                    // Read one request: head, then Content-Length bytes.
                    loop {
                        let n = s.read(&mut buf).await.unwrap_or(0);
                        if n == 0 {
                            break;
                        }
                        got.extend_from_slice(&buf[..n]);
                        let text = String::from_utf8_lossy(&got).to_string();
                        if let Some(h) = text.find("\r\n\r\n") {
                            let len = text
                                .lines()
                                .find_map(|l| l.strip_prefix("Content-Length: "))
                                .and_then(|v| v.trim().parse::<usize>().ok())
                                .unwrap_or(0);
                            if got.len() >= h + 4 + len {
                                break;
                            }
                        }
                    }
                    if got.is_empty() {
                        break;
                    }
                    let a = answers[next % answers.len()];
                    next += 1;
                    s.write_all(a.as_bytes()).await.unwrap();
                    if !after.is_empty() {
                        tokio::time::sleep(Duration::from_millis(delay_ms)).await;
                        s.write_all(after.as_bytes()).await.unwrap();
                    }
                }
            }
        });
        (addr, conns)
    }

    fn post<'a>(headers: &'a [(&'a str, &'a str)]) -> H1Request<'a> {
        H1Request {
            method: "POST",
            path: "/",
            headers,
            body: Some(br#"{"jsonrpc":"2.0","id":1,"method":"eth_chainId"}"#),
        }
    }

    const H: &[(&str, &str)] = &[("Host", "node")];

    #[tokio::test]
    async fn length_and_chunked_bodies_and_reuse() {
        let (addr, conns) = node(
            vec![
                "HTTP/1.1 200 OK\r\nContent-Length: 5\r\n\r\nhello",
                "HTTP/1.1 200 OK\r\nTransfer-Encoding: chunked\r\n\r\n3;x=y\r\nabc\r\n2\r\nde\r\n0\r\nX-T: 1\r\n\r\n",
                "HTTP/1.1 100 Continue\r\n\r\nHTTP/1.1 503 Busy\r\nContent-Length: 0\r\n\r\n",
            ],
            10,
        )
        .await;
        let pool = H1Pool::default();
        let r = pool.exchange(addr, &post(H), 100).await.unwrap();
        assert_eq!((r.status, &r.body[..]), (200, &b"hello"[..]));
        let r = pool.exchange(addr, &post(H), 100).await.unwrap();
        assert_eq!((r.status, &r.body[..]), (200, &b"abcde"[..]));
        let r = pool.exchange(addr, &post(H), 100).await.unwrap();
        assert_eq!((r.status, r.body.len()), (503, 0));
        assert_eq!(conns.load(Ordering::SeqCst), 1, "one connection, reused");
    }

    #[tokio::test]
    async fn a_connection_the_node_closed_is_replaced() {
        // One answer per connection, then the node closes: each pooled connection is
        // stale by the next call, which must go out again on a fresh one.
        let (addr, conns) = node(vec!["HTTP/1.1 200 OK\r\nContent-Length: 2\r\n\r\nok"], 1).await;
        let pool = H1Pool::default();
        for _ in 0..3 {
            let r = pool.exchange(addr, &post(H), 100).await.unwrap();
            assert_eq!(&r.body[..], b"ok");
        }
        assert_eq!(conns.load(Ordering::SeqCst), 3);
    }

    #[tokio::test]
    async fn unsolicited_bytes_on_an_idle_connection_are_never_an_answer() {
        // Right behind the answer (read with it), or later while the connection idles in
        // the pool: either way the answer stands and the connection is not used again.
        for delay_ms in [0, 5] {
            let (addr, conns) = node_with(
                vec!["HTTP/1.1 200 OK\r\nContent-Length: 2\r\n\r\nok"],
                10,
                "HTTP/1.1 408 Request Timeout\r\nContent-Length: 0\r\n\r\n",
                delay_ms,
            )
            .await;
            let pool = H1Pool::default();
            for _ in 0..3 {
                let r = pool.exchange(addr, &post(H), 100).await.unwrap();
                assert_eq!((r.status, &r.body[..]), (200, &b"ok"[..]));
                tokio::time::sleep(Duration::from_millis(30)).await;
            }
            assert_eq!(conns.load(Ordering::SeqCst), 3, "delay {delay_ms} ms");
        }
    }

    #[tokio::test]
    async fn limits_and_malformed_answers() {
        let (addr, _) = node(vec!["HTTP/1.1 200 OK\r\nContent-Length: 500\r\n\r\n"], 10).await;
        let pool = H1Pool::default();
        let e = pool.exchange(addr, &post(H), 100).await.unwrap_err();
        assert!(matches!(e, UpstreamError::TooLarge(100)), "{e}");

        let (addr, _) = node(
            vec!["HTTP/1.1 200 OK\r\nTransfer-Encoding: chunked\r\n\r\n80\r\n"],
            10,
        )
        .await;
        let e = pool.exchange(addr, &post(H), 100).await.unwrap_err();
        assert!(matches!(e, UpstreamError::TooLarge(100)), "{e}");

        let (addr, _) = node(vec!["NOT HTTP AT ALL\r\n\r\n"], 10).await;
        let e = pool.exchange(addr, &post(H), 100).await.unwrap_err();
        assert!(e.to_string().contains("bad response head"), "{e}");

        let (addr, _) = node(
            vec!["HTTP/1.1 200 OK\r\nContent-Length: 2\r\nContent-Length: 3\r\n\r\nok"],
            10,
        )
        .await;
        let e = pool.exchange(addr, &post(H), 100).await.unwrap_err();
        assert!(e.to_string().contains("conflicting"), "{e}");
    }

    #[test]
    fn request_is_one_buffer_with_its_length() {
        let w = encode(&post(&[("Host", "n:1"), ("X-Request-Id", "r1")]));
        let text = String::from_utf8(w).unwrap();
        assert!(text.starts_with("POST / HTTP/1.1\r\nHost: n:1\r\nX-Request-Id: r1\r\n"));
        assert!(
            text.contains("Content-Length: 47\r\n\r\n{\"jsonrpc\""),
            "{text}"
        );
    }
}

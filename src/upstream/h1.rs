//! A lean HTTP/1.1 client for plain-HTTP nodes: buffered calls (`exchange`: the JSON-RPC
//! hot path, health checks, the metrics mirror) and the lean front's streamed
//! passthroughs (`open`, then the caller relays the body). The request head and body go
//! out in one write, the answer is parsed with httparse, and the connection goes back to
//! a per-address LIFO pool. Pingora's connector still carries TLS peers and event streams.
//!
//! The pool has a shard per thread (up to `SHARDS`): a connection goes back to, and is
//! taken again from, the shard of the thread that used it. Without work stealing each
//! worker thread has its own reactor, and a socket stays registered with the one it was
//! opened on; used from another thread, every answer would wake the opening thread just
//! to hand the event across (two wake-ups per answer instead of one).
//!
//! Why not Pingora's client here: per request its pool spawns an idle-watch task, probes
//! the socket with a read and checks the peer address (`getpeername`) on reuse, and its
//! HTTP/1 client flushes the head before the body, which costs a second send and a second
//! wake-up of the node. Together that was about a fifth of `/rpc/eth`'s CPU (bench/).

use super::chunked::{ChunkedScanner, Scan};
use super::{UpstreamError, UpstreamResponse};
use crate::deadline::Deadline;
use bytes::Bytes;
use foldhash::HashMap;
use std::net::SocketAddr;
use std::sync::Mutex;
use std::time::{Duration, Instant};
use tokio::io::{AsyncReadExt, AsyncWriteExt};
use tokio::net::TcpStream;
use tokio::time::Instant as TokioInstant;

/// Idle connections kept per node address in each shard; more are closed.
const MAX_IDLE_PER_ADDR: usize = 256;
/// Pool shards; threads beyond this many share them.
const SHARDS: usize = 8;
/// An idle connection older than this is closed instead of reused (nodes close idle
/// keep-alive connections after their own timeout; geth's is 120 s).
const MAX_IDLE_AGE: Duration = Duration::from_secs(30);
/// Largest response head accepted.
const MAX_HEAD: usize = 64 * 1024;
/// The end of an answer's head, searched for after every read of one.
static HEAD_END: std::sync::LazyLock<memchr::memmem::Finder<'static>> =
    std::sync::LazyLock::new(|| memchr::memmem::Finder::new(b"\r\n\r\n"));
/// Read size toward nodes.
const READ_CHUNK: usize = 16 * 1024;

#[derive(Default)]
pub struct H1Pool {
    shards: [Mutex<HashMap<SocketAddr, Vec<IdleConn>>>; SHARDS],
}

/// This thread's pool shard (threads are numbered as they first use a pool).
fn shard_index() -> usize {
    use std::sync::atomic::{AtomicUsize, Ordering};
    static THREADS: AtomicUsize = AtomicUsize::new(0);
    thread_local! {
        static SHARD: usize = THREADS.fetch_add(1, Ordering::Relaxed) % SHARDS;
    }
    SHARD.with(|s| *s)
}

/// One buffered request.
pub struct H1Request<'a> {
    pub method: &'a str,
    pub path: &'a str,
    /// Header lines (name, value), Host included; `Content-Length` is added here.
    pub headers: &'a [(&'a str, &'a [u8])],
    pub body: Option<&'a [u8]>,
}

/// How `H1Pool::open` sends one request.
#[derive(Default)]
pub struct Open {
    pub connect_timeout: Option<Duration>,
    /// Longest wait for each read of the answer (`None`: the caller bounds the call).
    pub read_timeout: Option<Duration>,
    /// When the whole call must be done by (connect, send, the answer's head).
    pub until: Option<TokioInstant>,
    /// A pooled connection to `addr` to send on (`H1Pool::checkout`); a new one when it
    /// is `None` or turns out closed.
    pub kept: Option<TcpStream>,
    /// The node may receive the request twice (a read, or a signed write deduplicated
    /// by its hash): sent again when a pooled connection ended without an answer.
    pub safe_to_resend: bool,
}

/// Why `H1Pool::open` failed.
#[derive(Debug)]
pub enum OpenError {
    /// No connection: nothing was sent.
    Connect(String),
    /// Sent, but no complete answer head came back.
    Transport(String),
}

impl From<OpenError> for UpstreamError {
    fn from(e: OpenError) -> Self {
        match e {
            OpenError::Connect(e) => UpstreamError::Connect(e),
            OpenError::Transport(e) => UpstreamError::Io(e),
        }
    }
}

impl H1Pool {
    /// Send `req` to `addr` and read the whole answer (at most `max_body` bytes of body),
    /// all of it within `limit` (`None`: the caller bounds it): `UpstreamError::Timeout`
    /// past it.
    ///
    /// The limit is kept by the connection's own timer, which goes back to the pool with
    /// it: a later call's limit ends later, so the timer is left alone (moved only when it
    /// fires before the call in progress is due). A timer per call would be added to the
    /// runtime's wheel and taken out again on every call.
    pub async fn exchange(
        &self,
        addr: SocketAddr,
        req: &H1Request<'_>,
        max_body: usize,
        limit: Option<Duration>,
    ) -> Result<UpstreamResponse, UpstreamError> {
        let until = limit.map(|limit| TokioInstant::now() + limit);
        let (kept, mut timer) = self.checkout(addr);
        let timed_out = |e: UpstreamError| match until {
            Some(until) if TokioInstant::now() >= until => UpstreamError::Timeout,
            _ => e,
        };
        let how = Open {
            until,
            kept,
            // JSON-RPC over POST, health checks, scrapes: safe to send again (a write
            // sent twice is the same signed transaction, one hash).
            safe_to_resend: true,
            ..Open::default()
        };
        let (mut stream, mut buf) = self
            .open(addr, &encode(req), &mut timer, how)
            .await
            .map_err(|e| timed_out(e.into()))?;
        let head = parse_head_visit(&buf, req.method == "HEAD", |_, _| {})?
            .ok_or_else(|| UpstreamError::Io("incomplete response head".into()))?;
        let (status, framing, close) = (head.status, head.framing, head.close);
        let rest = buf.split_off(head.len);
        let (body, trailing) = read_body(&mut stream, rest, framing, max_body, &mut timer, until)
            .await
            .map_err(timed_out)?;
        if !close && !trailing && framing != Framing::UntilClose {
            self.check_in(addr, stream, timer);
        }
        Ok(UpstreamResponse {
            status,
            body: Bytes::from(body),
        })
    }

    /// Send `wire` (a whole request) to `addr` on `how.kept` (a pooled connection, from
    /// `checkout`) or a new connection and read
    /// until the answer's head is complete (1xx answers other than 101 are skipped):
    /// the connection and the bytes read, the head and the body's first bytes. A pooled
    /// connection the node closed meanwhile is replaced once: when the request could not
    /// be written at all (the node never saw it), or, for a request that is `safe_to_resend`,
    /// when nothing of an answer came back.
    pub async fn open(
        &self,
        addr: SocketAddr,
        wire: &[u8],
        deadline: &mut Deadline,
        how: Open,
    ) -> Result<(TcpStream, Vec<u8>), OpenError> {
        let Open {
            connect_timeout,
            read_timeout,
            until,
            kept,
            safe_to_resend,
        } = how;
        if let Some(stream) = kept {
            match send_and_read_head(stream, wire, deadline, read_timeout, until).await {
                Ok(done) => return Ok(done),
                Err((Stale::Unsent, _)) => {}
                Err((Stale::NoAnswer, _)) if safe_to_resend => {}
                Err((_, e)) => return Err(OpenError::Transport(e)),
            }
        }
        let stream = deadline
            .run_until(end_of(connect_timeout, until), TcpStream::connect(addr))
            .await
            .map_err(|e| OpenError::Connect(e.to_string()))?;
        let _ = stream.set_nodelay(true);
        send_and_read_head(stream, wire, deadline, read_timeout, until)
            .await
            .map_err(|(_, e)| OpenError::Transport(e))
    }

    /// An idle connection to `addr` that is still quiet, if any (what the tests look at).
    #[cfg(test)]
    pub fn take(&self, addr: SocketAddr) -> Option<TcpStream> {
        self.take_idle(addr).map(|idle| idle.stream)
    }

    /// For one call to `addr`: an idle connection if one is still quiet, and the timer
    /// that goes with it (armed by its earlier calls), or a timer of the call's own.
    /// Every call takes its connection here and gives it back (`check_in`) as soon as
    /// its answer ended, so the node connections in use follow the calls in flight,
    /// not the clients connected.
    pub fn checkout(&self, addr: SocketAddr) -> (Option<TcpStream>, Deadline) {
        match self.take_idle(addr) {
            Some(idle) => (Some(idle.stream), idle.timer),
            None => (None, Deadline::default()),
        }
    }

    /// A connection whose answer ended cleanly, back to the pool with its timer.
    pub fn check_in(&self, addr: SocketAddr, stream: TcpStream, timer: Deadline) {
        if let Ok(mut idle) = self.shards[shard_index()].lock() {
            let list = idle.entry(addr).or_default();
            if list.len() < MAX_IDLE_PER_ADDR {
                list.push(IdleConn {
                    stream,
                    since: Instant::now(),
                    timer,
                });
            }
        }
    }

    /// `take`, with the connection's timer.
    fn take_idle(&self, addr: SocketAddr) -> Option<IdleConn> {
        let mut idle = self.shards[shard_index()].lock().ok()?;
        let list = idle.get_mut(&addr)?;
        while let Some(conn) = list.pop() {
            if conn.usable() {
                return Some(conn);
            }
        }
        None
    }
}

/// A node connection between requests (in the pool of its address).
struct IdleConn {
    stream: TcpStream,
    since: Instant,
    /// The timer of the calls made on it, kept armed between them.
    timer: Deadline,
}

impl IdleConn {
    /// Still quiet and young enough. Nothing may be waiting on an idle connection: data
    /// there (a node's 408, or leftovers) would be taken for the next answer, and EOF
    /// means it is closed.
    fn usable(&self) -> bool {
        let quiet = matches!(
            self.stream.try_read(&mut [0u8; 1]),
            Err(e) if e.kind() == std::io::ErrorKind::WouldBlock
        );
        quiet && self.since.elapsed() < MAX_IDLE_AGE
    }
}

/// The request on the wire: head and body in one buffer. A body, or a method that
/// carries one, gets its `Content-Length`.
pub fn encode(req: &H1Request<'_>) -> Vec<u8> {
    let body = req.body.unwrap_or_default();
    // Sized once: the request line, each header line, a `Content-Length` line.
    let headers: usize = req.headers.iter().map(|(n, v)| n.len() + v.len() + 4).sum();
    let head = req.method.len() + req.path.len() + 12 + headers + 40;
    let mut w = Vec::with_capacity(head + body.len());
    for part in [req.method, " ", req.path, " HTTP/1.1\r\n"] {
        w.extend_from_slice(part.as_bytes());
    }
    for (name, value) in req.headers {
        w.extend_from_slice(name.as_bytes());
        w.extend_from_slice(b": ");
        w.extend_from_slice(value);
        w.extend_from_slice(b"\r\n");
    }
    if req.body.is_some() || matches!(req.method, "POST" | "PUT" | "PATCH") {
        w.extend_from_slice(b"Content-Length: ");
        w.extend_from_slice(itoa::Buffer::new().format(body.len()).as_bytes());
        w.extend_from_slice(b"\r\n");
    }
    w.extend_from_slice(b"\r\n");
    w.extend_from_slice(body);
    w
}

/// How a pooled connection failed, for deciding whether to send the request again.
enum Stale {
    /// The first write failed: the node never got the request.
    Unsent,
    /// Written, then the connection ended before any answer byte: the node may or may
    /// not have acted on it.
    NoAnswer,
    /// Anything else (part of an answer, a timeout, a bad answer).
    No,
}

/// Send `wire` and read to the end of the answer's head.
async fn send_and_read_head(
    mut stream: TcpStream,
    wire: &[u8],
    deadline: &mut Deadline,
    read_timeout: Option<Duration>,
    until: Option<TokioInstant>,
) -> Result<(TcpStream, Vec<u8>), (Stale, String)> {
    let mut sent = 0;
    while sent < wire.len() {
        match deadline.run_until(until, stream.write(&wire[sent..])).await {
            Ok(0) => return Err((Stale::No, "node connection closed".into())),
            Ok(n) => sent += n,
            Err(e) if sent == 0 => return Err((Stale::Unsent, e.to_string())),
            Err(e) => return Err((Stale::No, e.to_string())),
        }
    }
    let mut buf = Vec::with_capacity(4096);
    loop {
        // Only the head's end is found here (the caller parses and checks it); an
        // informational answer is parsed to be skipped.
        let end = HEAD_END.find(&buf);
        // A line ended by a bare LF: the head would never end as HTTP/1.1 says (the
        // caller would wait out its deadline), and a lenient reader would see other
        // lines than a strict one. Refused at once.
        if has_bare_lf(&buf[..end.map_or(buf.len(), |e| e + 4)]) {
            return Err((
                Stale::No,
                "bad response head: a line ends in a bare LF".into(),
            ));
        }
        match end {
            Some(_) if buf.get(9) == Some(&b'1') => {
                match parse_head_visit(&buf, false, |_, _| {}) {
                    Ok(Some(h)) if h.status == 101 => {
                        // The lean client never asks to switch protocols.
                        return Err((Stale::No, "unasked 101 Switching Protocols".into()));
                    }
                    Ok(Some(h)) if h.status < 200 => {
                        buf.drain(..h.len);
                        continue;
                    }
                    Ok(Some(_)) => return Ok((stream, buf)),
                    Ok(None) => {}
                    Err(e) => return Err((Stale::No, e.to_string())),
                }
            }
            Some(_) => return Ok((stream, buf)),
            None if buf.len() > MAX_HEAD => {
                return Err((Stale::No, "answer head too large".into()))
            }
            None => {}
        }
        match read_some(&mut stream, &mut buf, deadline, end_of(read_timeout, until)).await {
            Ok(0) if buf.is_empty() => {
                return Err((Stale::NoAnswer, "connection closed before an answer".into()))
            }
            Ok(0) => return Err((Stale::No, "connection closed mid-answer".into())),
            Ok(_) => {}
            Err(e) => {
                let stale = if buf.is_empty() && e.kind() != std::io::ErrorKind::TimedOut {
                    Stale::NoAnswer
                } else {
                    Stale::No
                };
                return Err((stale, e.to_string()));
            }
        }
    }
}

/// Read what has arrived into `buf` (0 at end of stream), waiting at most until `end`.
pub async fn read_some(
    stream: &mut TcpStream,
    buf: &mut Vec<u8>,
    deadline: &mut Deadline,
    end: Option<TokioInstant>,
) -> std::io::Result<usize> {
    if buf.capacity() - buf.len() < 1024 {
        buf.reserve(READ_CHUNK);
    }
    deadline.run_until(end, stream.read_buf(buf)).await
}

/// When one step (a connect, a read) must end: `limit` from now (the step's own limit),
/// or the call's end `until`, whichever comes first; `None` when neither is set.
pub fn end_of(limit: Option<Duration>, until: Option<TokioInstant>) -> Option<TokioInstant> {
    let own = limit.map(|t| TokioInstant::now() + t);
    match (own, until) {
        (Some(own), Some(until)) => Some(own.min(until)),
        (own, until) => own.or(until),
    }
}

/// The whole body after the head (its first bytes in `rest`), at most `max_body` bytes,
/// and whether bytes followed it (the connection must not be reused then).
async fn read_body(
    stream: &mut TcpStream,
    mut rest: Vec<u8>,
    framing: Framing,
    max_body: usize,
    deadline: &mut Deadline,
    until: Option<TokioInstant>,
) -> Result<(Vec<u8>, bool), UpstreamError> {
    let io = |e: std::io::Error| UpstreamError::Io(e.to_string());
    let closed = |what: &str| UpstreamError::Io(format!("connection closed in {what}"));
    match framing {
        Framing::None => Ok((Vec::new(), !rest.is_empty())),
        Framing::Length(n) => {
            if n > max_body {
                return Err(UpstreamError::TooLarge(max_body));
            }
            while rest.len() < n {
                if read_some(stream, &mut rest, deadline, until)
                    .await
                    .map_err(io)?
                    == 0
                {
                    return Err(closed("the response body"));
                }
            }
            // Bytes beyond the answer: keep the answer, never reuse the connection.
            let trailing = rest.len() > n;
            rest.truncate(n);
            Ok((rest, trailing))
        }
        Framing::Chunked => {
            let mut scanner = ChunkedScanner::default();
            let mut body = Vec::new();
            let mut input = rest;
            loop {
                let mut over = false;
                let scan = scanner
                    .feed(&input, |data| {
                        over |= body.len() + data.len() > max_body;
                        if !over {
                            body.extend_from_slice(data);
                        }
                    })
                    .map_err(|e| UpstreamError::Io(e.to_string()))?;
                if over || body.len() as u64 + scanner.announced() > max_body as u64 {
                    return Err(UpstreamError::TooLarge(max_body));
                }
                if let Scan::Done(n) = scan {
                    return Ok((body, n < input.len()));
                }
                input.clear();
                if read_some(stream, &mut input, deadline, until)
                    .await
                    .map_err(io)?
                    == 0
                {
                    return Err(closed("a chunked body"));
                }
            }
        }
        Framing::UntilClose => loop {
            if rest.len() > max_body {
                return Err(UpstreamError::TooLarge(max_body));
            }
            if read_some(stream, &mut rest, deadline, until)
                .await
                .map_err(io)?
                == 0
            {
                return Ok((rest, false));
            }
        },
    }
}

mod head;
use head::has_bare_lf;
pub use head::{content_length_value, lists_token, parse_head, parse_head_visit, Framing};

#[cfg(test)]
mod tests;

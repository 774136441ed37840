//! The lean HTTP/1.1 front of plain-HTTP listeners.
//!
//! Pingora's HTTP/1 server and proxy phases cost about twice nginx's CPU per proxied
//! request on this hardware (bench/RESULTS.md: bare Pingora at 0.5x nginx). This front
//! reads the request head into one buffer and parses it in place (httparse), runs the same
//! pipeline as the Pingora path (`Edge::pipeline`: classify, CORS, auth, limits, dispatch),
//! writes local answers in one write, and proxies passthroughs over the lean node pool
//! (`proxy`), streaming the node's body as it arrives.
//!
//! It serves HTTP/1.1 on plain and TLS listeners alike (on TLS, on Pingora's TLS stream).
//! Every head is read, bounded and checked here (`request`: framing refusals answered
//! here, the same on every path). What it does not serve itself it hands to Pingora's
//! HTTP server on the same connection, head bytes put back unread and the body held to
//! the front's deadline (`hand_over`): HTTP/1.0, `Expect`, bodies over the lean limit,
//! WebSocket routes other than JSON-RPC, event streams (SSE), passthroughs to TLS nodes.
//! Connections that chose HTTP/2 by ALPN go to Pingora whole (h2 frames them).

mod admission;
mod answer;
mod client_io;
mod conn;
mod hand_over;
mod prefixed;
mod proxy;
pub mod proxy_protocol;
pub mod request;
mod stream;

use crate::edge::{Ctx, Edge, Outcome, PreMatch, WsUpgrade};
use crate::errors::ApiError;
use crate::observe::metrics;
use crate::reply::Reply;
use crate::routes::matcher::NormalizedPath;
use crate::routes::spec::HandlerKind;
use admission::{Admission, Slot};
use answer::{local_answer, switching_protocols};
use async_trait::async_trait;
use bytes::BytesMut;
use client_io::ClientIo;
pub use conn::{ChunkedBodyError, Conn};
use hand_over::BodyFraming;
use pingora_core::apps::{HttpServerApp, ServerApp};
use pingora_core::protocols::http::ServerSession;
use pingora_core::protocols::Stream;
use pingora_core::server::ShutdownWatch;
use pingora_proxy::HttpProxy;
use request::{Head, LeanRequest, Parsed, Refusal};
use std::collections::HashSet;
use std::sync::Arc;
use std::time::Duration;
use stream::StreamJob;

/// Read buffer step (and initial size) per client connection.
const READ_STEP: usize = 1024;
/// Largest request head accepted (bigger ones are refused with 431).
pub const MAX_HEAD: usize = 64 * 1024;
/// An idle keep-alive connection is closed after this (Pingora's default too).
const KEEPALIVE_IDLE: Duration = Duration::from_secs(60);
/// A request head must be complete within this of its first byte.
const HEAD_TIMEOUT: Duration = Duration::from_secs(30);
/// Largest step a body buffer grows by. It grows by at most what has already arrived
/// (doubling), so it follows the bytes a client sent, never what `Content-Length`
/// announces.
const BODY_STEP: usize = 64 * 1024;
/// A client must take each write within this.
const WRITE_TIMEOUT: Duration = Duration::from_secs(60);
/// At shutdown an idle connection still takes a request arriving this soon, so a client
/// that sent one as the old process stopped gets its answer (with `Connection: close`).
const SHUTDOWN_GRACE: Duration = Duration::from_secs(1);
/// Request bodies up to this size (or the JSON-RPC limit, if larger) are read whole here;
/// bigger ones stream through Pingora.
const MIN_LEAN_BODY: usize = 1 << 20;

pub struct LeanFront {
    edge: Edge,
    admission: Arc<Admission>,
    proxy: Arc<HttpProxy<Edge>>,
    /// Pools whose hosts are all plain-HTTP addresses: passthroughs to them stay here.
    plain_pools: HashSet<String>,
    max_body: usize,
    /// Plain listeners whose connections start with a PROXY protocol header.
    proxied: HashSet<std::net::SocketAddr>,
}

impl LeanFront {
    pub fn new(edge: Edge, proxy: HttpProxy<Edge>) -> Self {
        let plain_pools = edge
            .pools()
            .all()
            .filter(|p| p.hosts.iter().all(|h| h.all_plain()))
            .map(|p| p.name.clone())
            .collect();
        let max_body = edge.max_rpc_body().max(MIN_LEAN_BODY);
        let (per_listener, per_client) = edge.connection_caps();
        let admission = Admission::new(per_listener, per_client);
        let proxied = edge.proxied_listeners();
        LeanFront {
            edge,
            admission,
            proxy: Arc::new(proxy),
            plain_pools,
            max_body,
            proxied,
        }
    }
}

/// Who serves a request whose head is complete.
enum Lean {
    Yes(Option<PreMatch>),
    No,
}

/// What serving one lean request left the connection for.
enum Served {
    Keep,
    Close,
    /// A 101 went out: the connection belongs to a WebSocket session now.
    WebSocket(Box<WsUpgrade>),
    /// An event stream: written on the connection until it ends, then the connection
    /// closes.
    Stream(Box<StreamJob>),
}

/// A future on the heap, for as long as it runs.
type BoxFuture<'a, T> = std::pin::Pin<Box<dyn std::future::Future<Output = T> + Send + 'a>>;

/// What waiting for the next request head ended with.
enum Next {
    /// A lean request, with its route when it matched one.
    Head(Head, Option<PreMatch>),
    /// Pingora takes this request (its head, of this many bytes, is still in the
    /// buffer, followed by a body framed so).
    HandOver(usize, BodyFraming),
    /// The head breaks the framing rules: answered here, then the connection closes.
    Refuse(Refusal),
    Close,
}

#[async_trait]
impl ServerApp for LeanFront {
    async fn process_new(self: &Arc<Self>, io: Stream, shutdown: &ShutdownWatch) -> Option<Stream> {
        let (listener, peer) = io
            .get_socket_digest()
            .map(|d| {
                let inet = |a: Option<&pingora_core::protocols::l4::socket::SocketAddr>| {
                    a.and_then(|a| a.as_inet()).copied()
                };
                (inet(d.local_addr()), inet(d.peer_addr()))
            })
            .unwrap_or_default();
        let tls = io.get_ssl_digest().is_some();
        // Behind an L4 proxy the socket's peer is the proxy: the client is admitted once
        // its header names it (TLS listeners read it before the handshake).
        let proxied = !tls && listener.is_some_and(|l| self.proxied.contains(&l));
        // Held until the connection ends; over a cap the connection closes unread.
        let slot = (self.admission)
            .admit(listener, peer.filter(|_| !proxied).map(|a| a.ip()))
            .ok()?;
        let (mut io, mut client) = if tls {
            // HTTP/2 is framed by Pingora's h2; HTTP/1.1 over TLS is read here like
            // plain HTTP/1.1, on the TLS stream.
            if io.selected_alpn_proto() == Some(pingora_core::protocols::ALPN::H2) {
                return ServerApp::process_new(&self.proxy, io, shutdown).await;
            }
            (ClientIo::Pingora(io), peer)
        } else {
            match ClientIo::take(io) {
                Ok(taken) => taken,
                // Not TCP (a Unix socket listener): Pingora serves it.
                Err(io) => return ServerApp::process_new(&self.proxy, io, shutdown).await,
            }
        };
        let mut unread = Vec::new();
        let mut client_slot = None;
        if proxied {
            match proxy_protocol::read_header(&mut io).await {
                Ok((named, rest)) => {
                    let named = named.unwrap_or(proxy_protocol::UNKNOWN_CLIENT);
                    let admitted = self.admission.admit(None, Some(named.ip())).ok()?;
                    client_slot = Some(Box::new(admitted));
                    (client, unread) = (Some(named), rest);
                }
                Err(_) => {
                    metrics::connection_refused("proxy_protocol");
                    return None;
                }
            }
        }
        let thread_shutdown = crate::shutdown::for_this_thread(shutdown);
        crate::heap_tidy::on_this_thread(&thread_shutdown);
        let mut conn = Box::new(Conn::new(io, client, thread_shutdown));
        conn.buf.extend_from_slice(&unread);
        conn.tls = tls;
        conn.local = listener;
        conn.trusted_proxy = self.edge.trusts(client.map(|a| a.ip()));
        // A task of its own, sized for this loop alone: Pingora's connection task (2.5
        // KiB, its TLS handshake state included) ends here, and each request's state is
        // boxed for the request's length, so an idle keep-alive connection holds its
        // socket and little more (bench/RESULTS.md: idle connections).
        let front = self.clone();
        tokio::spawn(front.serve_connection(conn, Box::new((slot, client_slot))));
        None
    }

    async fn cleanup(&self) {
        self.proxy.http_cleanup().await;
    }
}

impl LeanFront {
    /// Serve one client connection's requests until it closes or a session (WebSocket,
    /// event stream) takes it over; `slots` are its places under the connection caps
    /// (the listener's, and the client's once a PROXY header named it), held to the end.
    ///
    /// Between requests the task holds only this loop and `idle_wait`: reading the next
    /// head and serving it are boxed (`answer`) from the first byte to the answer's end.
    /// The future is 152 bytes, so the task (tokio's header and trailer, 128-byte
    /// aligned) is 256: the slots are boxed, and this is a plain function returning its
    /// future (an `async fn` keeps room for its arguments twice, rust-lang/rust#62958).
    /// bench/idle.sh measures what an idle connection costs.
    #[allow(clippy::manual_async_fn)]
    fn serve_connection(
        self: Arc<Self>,
        mut conn: Box<Conn>,
        slots: Box<(Slot, Option<Box<Slot>>)>,
    ) -> impl std::future::Future<Output = ()> + Send {
        async move {
            let _slots = &slots;
            loop {
                if conn.buf.is_empty() && !idle_wait(&mut conn).await {
                    return;
                }
                match self.answer(conn).await {
                    Some(open) => {
                        conn = open;
                        conn.drop_empty_buffer();
                    }
                    None => return,
                }
            }
        }
    }

    /// Read the next request and serve it: the connection back when it stays open.
    /// Boxed (a plain function returning the future): a request's state (its head,
    /// pipeline, gateway, proxy, hand-over, a session) is allocated for the request
    /// alone.
    fn answer(&self, mut conn: Box<Conn>) -> BoxFuture<'_, Option<Box<Conn>>> {
        Box::pin(async move {
            let close = match self.next_request(&mut conn).await {
                Next::Close => true,
                Next::Refuse(refusal) => {
                    self.refuse(&mut conn, refusal).await;
                    true
                }
                Next::HandOver(head_len, body) => {
                    return self.hand_over(*conn, head_len, body).await.map(Box::new);
                }
                Next::Head(head, pre) => match self.serve(&mut conn, head, pre).await {
                    Served::Keep => false,
                    Served::Close => true,
                    Served::WebSocket(up) => {
                        // The session owns the socket from here; bytes the client sent
                        // after the handshake are read first.
                        let io = (*conn).into_prefixed_io();
                        self.edge.now().serve_websocket(up, io).await;
                        return None;
                    }
                    Served::Stream(job) => {
                        let edge = self.edge.now();
                        job.run(&edge, *conn).await;
                        return None;
                    }
                },
            };
            (!close).then_some(conn)
        })
    }

    /// Wait for a complete request head and decide who serves it.
    async fn next_request(&self, conn: &mut Conn) -> Next {
        let mut grace = false;
        // The head's deadline is set at its first byte: a head trickled in never holds
        // the connection past HEAD_TIMEOUT.
        let mut head_deadline = None;
        loop {
            if !conn.buf.is_empty() {
                match Head::parse(&conn.buf) {
                    Parsed::Complete(mut head) => {
                        // One read may bring more than MAX_HEAD at once.
                        if head.len > MAX_HEAD {
                            return Next::Refuse(Refusal::HeadTooLarge);
                        }
                        if let Some(refusal) = head.refusal {
                            return Next::Refuse(refusal);
                        }
                        if head.needs_pingora {
                            return Next::HandOver(head.len, head.body_framing());
                        }
                        head.take_from(&mut conn.buf);
                        if let Lean::Yes(pre) = self.lean(&head) {
                            return Next::Head(head, pre);
                        }
                        // Put the head back in front of whatever followed it.
                        let mut back = BytesMut::with_capacity(head.len + conn.buf.len());
                        back.extend_from_slice(head.raw());
                        back.extend_from_slice(&conn.buf);
                        conn.buf = back;
                        return Next::HandOver(head.len, head.body_framing());
                    }
                    Parsed::Invalid(refusal) => return Next::Refuse(refusal),
                    Parsed::Partial if conn.buf.len() > MAX_HEAD => {
                        return Next::Refuse(Refusal::HeadTooLarge)
                    }
                    Parsed::Partial => {}
                }
            }
            let idle = conn.buf.is_empty();
            let wait = if grace {
                SHUTDOWN_GRACE
            } else if idle {
                KEEPALIVE_IDLE
            } else {
                let deadline =
                    *head_deadline.get_or_insert_with(|| std::time::Instant::now() + HEAD_TIMEOUT);
                deadline.saturating_duration_since(std::time::Instant::now())
            };
            // Shutdown matters to a connection with nothing read yet (a TLS one waits
            // here between requests): it then takes a request arriving within the grace.
            let signal = crate::shutdown::this_thread_signal();
            let raised = signal.notified();
            let watch_shutdown = idle && !grace;
            if watch_shutdown && signal.is_set() {
                grace = true;
                continue;
            }
            let read = tokio::select! {
                biased;
                r = conn.read_more_within(wait) => r,
                _ = raised, if watch_shutdown => {
                    grace = true;
                    continue;
                }
            };
            match read {
                Ok(n) if n > 0 => {}
                // EOF, error, idle timeout, or the shutdown grace ran out.
                _ => return Next::Close,
            }
        }
    }

    /// Whether the lean path serves this request: everything but streams, upgrades and
    /// passthroughs to pools with TLS nodes.
    fn lean(&self, head: &Head) -> Lean {
        if head.content_length > self.max_body {
            return Lean::No;
        }
        let path = NormalizedPath::parse(head.path());
        let method = head.method();
        // An upgrade is Pingora's only on a route that declares WebSocket; elsewhere the
        // request is served as the plain request it also is (`Upgrade` and `Connection`
        // stay on this hop, and a node's 101 is refused).
        // WebSocket JSON-RPC is terminated here (the session runs on the bare socket);
        // other WebSocket routes (portals) are Pingora's.
        if head.upgrade {
            if let Some(pre) = self.edge.pre_match(method, &path, true) {
                if pre.route.websocket {
                    if pre.route.handler == HandlerKind::JsonRpc && head.content_length == 0 {
                        return Lean::Yes(Some(pre));
                    }
                    return Lean::No;
                }
            }
        }
        let Some(route) = self.edge.pre_match(method, &path, false) else {
            // Refusals (404, 405) are the pipeline's to word.
            return Lean::Yes(None);
        };
        // The Base portal's WebSocket channels stay on Pingora; passthroughs only to pools
        // of plain-HTTP nodes. Event streams are written here (`stream`).
        let lean = !route.route.proxies_websocket()
            && route
                .route
                .passthrough_pool()
                .is_none_or(|p| self.plain_pools.contains(p));
        if lean {
            Lean::Yes(Some(route))
        } else {
            Lean::No
        }
    }

    /// Serve one lean request: keep the connection, close it, or (after a 101) give it to
    /// a WebSocket session.
    async fn serve(&self, conn: &mut Conn, head: Head, pre: Option<PreMatch>) -> Served {
        // This request's view of the configuration, fixed to its end (a reload swaps it).
        let edge = self.edge.now();
        let mut ctx = edge.begin(head.header("x-request-id").map(str::as_bytes));
        let closing = head.close || conn.shutting_down();
        let mut req = LeanRequest {
            head,
            conn,
            body: None,
            pre,
        };
        let (status, keep, error) = match edge.pipeline(&mut req, &mut ctx).await {
            Ok(Outcome::Proxy(pass)) => proxy::pass(self, &mut req, &mut ctx, pass, closing).await,
            Ok(Outcome::Reply(reply)) => self.reply(&mut req, &ctx, reply, closing).await,
            Ok(Outcome::WebSocket(up)) => {
                let out = switching_protocols(&ctx, &up);
                let written = req.conn.write(&out).await;
                edge.request_done(
                    &ctx,
                    req.head.method(),
                    req.head.path(),
                    &req.conn.client_text,
                    101,
                    written.as_ref().err().map(|e| e.to_string()).as_deref(),
                );
                return match written {
                    Ok(()) => Served::WebSocket(up),
                    Err(_) => Served::Close,
                };
            }
            Ok(Outcome::Stream(stream)) => {
                return Served::Stream(Box::new(StreamJob {
                    method: req.head.method().to_string(),
                    path: req.head.path().to_string(),
                    ctx,
                    stream,
                }));
            }
            Err(e) => self.error(&mut req, &mut ctx, e, closing).await,
        };
        let keep = keep && req.discard_body().await;
        edge.request_done(
            &ctx,
            req.head.method(),
            req.head.path(),
            &req.conn.client_text,
            status,
            error.as_deref(),
        );
        if keep {
            Served::Keep
        } else {
            Served::Close
        }
    }

    async fn error(
        &self,
        req: &mut LeanRequest<'_>,
        ctx: &mut Ctx,
        e: ApiError,
        closing: bool,
    ) -> (u16, bool, Option<String>) {
        let reply = ctx.refusal(&e);
        self.reply(req, ctx, reply, closing).await
    }

    /// Write a local answer in one write: (status, keep the connection, error).
    async fn reply(
        &self,
        req: &mut LeanRequest<'_>,
        ctx: &Ctx,
        reply: Reply,
        closing: bool,
    ) -> (u16, bool, Option<String>) {
        let head_only = req.head.method() == "HEAD";
        // A refusal before a large body was read (413, 401 ...) ends the connection.
        let closing = closing || req.body_blocks_reuse();
        let out = local_answer(ctx, &reply, closing, head_only);
        match req.conn.write(&out).await {
            Ok(()) => (reply.status, !closing, None),
            Err(e) => (reply.status, false, Some(format!("write to client: {e}"))),
        }
    }

    /// Answer a head that breaks the framing rules (the connection closes after it: what
    /// follows the head cannot be told apart from a body).
    async fn refuse(&self, conn: &mut Conn, refusal: Refusal) {
        let mut ctx = self.edge.begin(None);
        let reply = ctx.refusal(&refusal.error());
        let out = local_answer(&ctx, &reply, true, false);
        let written = conn
            .write(&out)
            .await
            .err()
            .map(|e| format!("write to client: {e}"));
        metrics::malformed_request(reply.status);
        self.edge.request_done(
            &ctx,
            "-",
            "-",
            &conn.client_text,
            reply.status,
            written.as_deref(),
        );
    }

    /// Give the connection, with its unread bytes put back (a head of `head_len` bytes
    /// first), to Pingora for one request; it comes back when Pingora keeps it alive.
    async fn hand_over(&self, mut conn: Conn, head_len: usize, body: BodyFraming) -> Option<Conn> {
        let unread = std::mem::replace(&mut conn.buf, BytesMut::with_capacity(READ_STEP));
        let keepalive = if conn.shutting_down() { None } else { Some(60) };
        let mut session =
            ServerSession::new_http1(conn.io.into_pingora(conn.client, unread, head_len, body));
        session.set_keepalive(keepalive);
        let reused = self.proxy.process_new_http(session, &conn.shutdown).await?;
        conn.io = ClientIo::from_pingora(reused.consume().0);
        Some(conn)
    }
}

/// Wait, with nothing of a request read, until the client sends something (true) or the
/// connection is to close (false): idle past `KEEPALIVE_IDLE`, or a shutdown began and
/// nothing arrived within `SHUTDOWN_GRACE` (a client that sent a request as the old
/// process stopped still gets its answer). This is the whole state of an idle
/// connection's task, so it holds the socket's readiness and the thread's shutdown
/// signal only: no buffer, no head, no channel receiver.
async fn idle_wait(conn: &mut Conn) -> bool {
    let raised = crate::shutdown::this_thread_signal().notified();
    if !crate::shutdown::this_thread_signal().is_set() {
        tokio::select! {
            r = conn.readable_within(KEEPALIVE_IDLE) => return r.is_ok(),
            _ = raised => {}
        }
    }
    conn.readable_within(SHUTDOWN_GRACE).await.is_ok()
}

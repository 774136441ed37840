//! Pingora's `ProxyHttp` phases around the pipeline: the TLS listener and whatever the
//! lean front hands over. Passthroughs run in Pingora's proxy phases here; everything
//! else is answered by `request_filter`.

use super::hop::{
    connection_options, forwarded_for, has_underscore, sets_console_cookie, CALLER_ONLY_HEADERS,
};
use super::ws_upgrade::WsUpgrade;
use super::{respond, retry, Ctx, Downstream, Edge, Outcome, PASS_READ_TIMEOUT};
use crate::errors::ApiError;
use crate::observe::metrics;
use crate::reply::Reply;
use async_trait::async_trait;
use bytes::Bytes;
use pingora_core::upstreams::peer::HttpPeer;
use pingora_core::{Error, ErrorType, Result};
use pingora_http::ResponseHeader;
use pingora_proxy::{ProxyHttp, Session};
use tokio::io::{AsyncReadExt, AsyncWriteExt};

#[async_trait]
impl ProxyHttp for Edge {
    type CTX = Ctx;

    fn new_ctx(&self) -> Ctx {
        Ctx::new()
    }

    async fn request_filter(&self, session: &mut Session, ctx: &mut Ctx) -> Result<bool> {
        // This request's view of the configuration (a reload swaps the live one).
        let edge = self.now();
        *ctx = edge.begin(session.get_header("x-request-id").map(|v| v.as_bytes()));
        let reply = match edge.pipeline(session, ctx).await {
            Ok(Outcome::Reply(reply)) => reply,
            Ok(Outcome::Stream(stream)) => {
                // A failed write means the client left; the stream ends either way.
                let _ = respond::write_stream(session, ctx, stream).await;
                return Ok(true);
            }
            Ok(Outcome::WebSocket(up)) => {
                edge.run_websocket(session, ctx, up).await;
                return Ok(true);
            }
            Ok(Outcome::Proxy(pass)) => {
                if pass.stream {
                    // SSE and WebSocket stay open as long as both ends want.
                    session.set_read_timeout(None);
                }
                ctx.pass = Some(pass);
                return Ok(false);
            }
            Err(e) => {
                read_rest_of_small_h2_body(session).await;
                ctx.refusal(&e)
            }
        };
        respond::write(session, ctx, reply).await?;
        Ok(true)
    }

    /// Passthroughs only: the next host in the pass's order (called again on each retry).
    async fn upstream_peer(&self, session: &mut Session, ctx: &mut Ctx) -> Result<Box<HttpPeer>> {
        let Some(pass) = ctx.pass.as_mut() else {
            return Error::e_explain(ErrorType::InternalError, "no passthrough route selected");
        };
        let Some(host) = pass.hosts.get(pass.next).cloned() else {
            ctx.error_code = Some("upstream_unavailable");
            return Error::e_explain(ErrorType::ConnectNoRoute, "every host of the pool failed");
        };
        pass.next += 1;
        let mut peer = pass.endpoint(&host, session.is_upgrade_req()).1.clone();
        peer.options.read_timeout = if pass.stream {
            None
        } else {
            Some(PASS_READ_TIMEOUT)
        };
        metrics::upstream_attempt(&host.pool, &host.id);
        ctx.upstream = Some(host.id.clone());
        pass.current = Some(host);
        Ok(Box::new(peer))
    }

    /// Nothing reached the node yet: try the next host, if any.
    fn fail_to_connect(
        &self,
        _session: &mut Session,
        _peer: &HttpPeer,
        ctx: &mut Ctx,
        mut e: Box<Error>,
    ) -> Box<Error> {
        if let Some(pass) = ctx.pass.as_ref() {
            let next = pass
                .current
                .as_ref()
                .is_none_or(|h| retry::after_failure(h, retry::Failure::Connect, &e, true, false));
            e.set_retry(next && pass.next < pass.hosts.len());
        }
        e
    }

    /// The node failed mid-exchange: the next host only by the retry rule (`retry.rs`).
    fn error_while_proxy(
        &self,
        peer: &HttpPeer,
        session: &mut Session,
        e: Box<Error>,
        ctx: &mut Ctx,
        _client_reused: bool,
    ) -> Box<Error> {
        let mut e = e.more_context(format!("peer {peer}"));
        let safe = retry::safe_to_resend(session.req_header().method.as_str());
        let started = session.response_written().is_some();
        if let Some(pass) = ctx.pass.as_ref() {
            let next = pass.current.as_ref().is_none_or(|h| {
                retry::after_failure(h, retry::Failure::Transport, &e, safe, started)
            });
            e.set_retry(next && pass.next < pass.hosts.len());
        }
        e
    }

    /// Toward the node: its own path and Host, its secret headers, and never the
    /// caller's credentials.
    async fn upstream_request_filter(
        &self,
        session: &mut Session,
        req: &mut pingora_http::RequestHeader,
        ctx: &mut Ctx,
    ) -> Result<()> {
        let Some(pass) = ctx.pass.as_ref() else {
            return Ok(());
        };
        let Some(host) = pass.current.as_ref() else {
            return Ok(());
        };
        let addr = pass.endpoint(host, session.is_upgrade_req()).0;
        let path = pass.upstream_path_on(host, session.is_upgrade_req());
        let uri = path
            .parse::<http::Uri>()
            .map_err(|e| Error::explain(ErrorType::InternalError, format!("upstream path: {e}")))?;
        req.set_uri(uri);
        let sent_xff = Downstream::header_list(session, "x-forwarded-for");
        let options = connection_options(
            &req.headers
                .get_all("connection")
                .iter()
                .map(|v| v.as_bytes())
                .collect::<Vec<_>>(),
        );
        let upgrade = session.is_upgrade_req() && ctx.route.as_ref().is_some_and(|r| r.websocket);
        for name in &options {
            // An upgrade on a WebSocket route keeps `Upgrade` (Pingora relays it).
            if !(upgrade && name == "upgrade") {
                req.remove_header(name.as_str());
            }
        }
        if !upgrade {
            req.remove_header("upgrade");
            req.remove_header("connection");
        }
        for h in CALLER_ONLY_HEADERS {
            req.remove_header(*h);
        }
        let underscored: Vec<String> = req
            .headers
            .keys()
            .map(|n| n.as_str())
            .filter(|n| has_underscore(n))
            .map(str::to_string)
            .collect();
        for h in underscored {
            req.remove_header(&h);
        }
        if let Some(peer) = Downstream::client_ip(session) {
            let trusted = self.state.console().trusts(Some(peer));
            let peer = peer.to_string();
            let xff = forwarded_for(trusted, &peer, sent_xff.as_deref());
            req.insert_header("X-Forwarded-For", xff.into_owned())?;
        }
        if pass.stream {
            req.remove_header("accept-encoding");
        }
        req.insert_header("Host", addr.authority())?;
        req.insert_header("X-Request-Id", ctx.request_id.as_str())?;
        for (name, value) in &host.headers {
            req.insert_header(name.clone(), value.expose())?;
        }
        Ok(())
    }

    /// A passthrough that could not be completed: our envelope, not Pingora's bare page.
    async fn fail_to_proxy(
        &self,
        session: &mut Session,
        e: &Error,
        ctx: &mut Ctx,
    ) -> pingora_proxy::FailToProxy {
        let code = match e.etype() {
            ErrorType::HTTPStatus(c) => *c,
            _ => match e.esource() {
                pingora_core::ErrorSource::Upstream => 502,
                pingora_core::ErrorSource::Downstream => match e.etype() {
                    ErrorType::WriteError | ErrorType::ReadError | ErrorType::ConnectionClosed => 0,
                    _ => 400,
                },
                _ => 502,
            },
        };
        if code > 0 && session.response_written().is_none() {
            let err = match code {
                502..=504 => {
                    ctx.error_code = Some("upstream_unavailable");
                    ApiError::no_node_answered()
                }
                400 => ApiError::new(400, "bad_request", "malformed request"),
                c => ApiError::new(c, "upstream_error", "the node refused the request"),
            };
            let reply = Reply::error(&err, ctx.envelope, &ctx.request_id);
            let _ = respond::write(session, ctx, reply).await;
        }
        pingora_proxy::FailToProxy {
            error_code: code,
            can_reuse_downstream: false,
        }
    }

    async fn response_filter(
        &self,
        session: &mut Session,
        resp: &mut ResponseHeader,
        ctx: &mut Ctx,
    ) -> Result<()> {
        // A switch of protocols only where the client asked for one on a WebSocket route.
        if resp.status == http::StatusCode::SWITCHING_PROTOCOLS
            && !(session.is_upgrade_req() && ctx.route.as_ref().is_some_and(|r| r.websocket))
        {
            return Error::e_explain(
                ErrorType::InvalidHTTPHeader,
                "node answered 101 to a request that did not ask to upgrade",
            );
        }
        let node_cookies: Vec<http::HeaderValue> =
            resp.headers.get_all("set-cookie").iter().cloned().collect();
        if node_cookies
            .iter()
            .any(|c| sets_console_cookie(c.as_bytes()))
        {
            resp.remove_header("set-cookie");
            for c in node_cookies
                .into_iter()
                .filter(|c| !sets_console_cookie(c.as_bytes()))
            {
                resp.append_header("set-cookie", c)?;
            }
        }
        ctx.try_edge_headers(|k, v| {
            // Ours replace a node's own; cookies add up.
            if k == "Set-Cookie" {
                resp.append_header(k, v).map(|_| ())
            } else {
                resp.insert_header(k, v)
            }
        })
    }

    async fn logging(&self, session: &mut Session, e: Option<&Error>, ctx: &mut Ctx) {
        let status = session
            .response_written()
            .map(|h| h.status.as_u16())
            .unwrap_or(0);
        let client = session
            .client_addr()
            .map(|a| a.to_string())
            .unwrap_or_default();
        let err_text = e.map(|e| e.to_string());
        let req = session.req_header();
        self.now().request_done(
            ctx,
            req.method.as_str(),
            req.uri.path(),
            &client,
            status,
            err_text.as_deref(),
        );
    }
}

impl Edge {
    /// Answer the upgrade with 101, then run the session on the client's bytes: Pingora
    /// passes an upgraded connection's bytes through its body calls, which a pump ties
    /// to the session's end of an in-memory pipe.
    async fn run_websocket(&self, session: &mut Session, ctx: &mut Ctx, up: Box<WsUpgrade>) {
        let Ok(mut h) = ResponseHeader::build(101, Some(8)) else {
            return;
        };
        ctx.edge_headers(|k, v| {
            let _ = h.append_header(k.to_string(), v);
        });
        for (k, v) in super::ws_upgrade::handshake_headers(&up) {
            let _ = h.insert_header(k, v);
        }
        session.set_read_timeout(None);
        if session
            .write_response_header(Box::new(h), false)
            .await
            .is_err()
        {
            return;
        }
        let (mut near, far) = tokio::io::duplex(64 * 1024);
        let task = tokio::spawn(super::servers::serve_upgraded(self.state.clone(), up, far));
        let mut buf = vec![0u8; 4 * 1024];
        loop {
            tokio::select! {
                from_client = session.read_request_body() => match from_client {
                    Ok(Some(bytes)) => {
                        if near.write_all(&bytes).await.is_err() {
                            break;
                        }
                    }
                    _ => break,
                },
                to_client = near.read(&mut buf) => match to_client {
                    Ok(n) if n > 0 => {
                        let chunk = Bytes::copy_from_slice(&buf[..n]);
                        if session.write_response_body(Some(chunk), false).await.is_err() {
                            break;
                        }
                    }
                    _ => break,
                },
            }
        }
        // The client side is gone or the session ended: close both ends.
        drop(near);
        let abort = task.abort_handle();
        if tokio::time::timeout(std::time::Duration::from_secs(6), task)
            .await
            .is_err()
        {
            abort.abort();
        }
        let _ = session.write_response_body(None, true).await;
    }
}

/// The most of an unread HTTP/2 request body a refusal waits for.
const EARLY_REFUSAL_BODY: usize = 64 * 1024;

/// A refusal made before the body was read (a key restriction, a limit) ends an HTTP/2
/// stream the client is still sending on; h2 then resets it with NO_ERROR, as RFC 9113
/// §8.1 allows, but clients that take that reset as an error (curl 7.x) lose the answer.
/// A small body is read first, briefly, so the answer ends the exchange on its own.
async fn read_rest_of_small_h2_body(session: &mut Session) {
    if !session.is_http2() || session.is_body_done() {
        return;
    }
    let small = session
        .get_header("content-length")
        .and_then(|v| v.to_str().ok()?.parse::<usize>().ok())
        .is_some_and(|n| n <= EARLY_REFUSAL_BODY);
    if small {
        let _ = tokio::time::timeout(
            std::time::Duration::from_secs(1),
            session.drain_request_body(),
        )
        .await;
    }
}

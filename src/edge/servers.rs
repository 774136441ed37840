//! What the two servers (the lean front of `src/front/`, and Pingora's phases in
//! `proxy_http.rs`) use of the edge besides the pipeline itself (`Edge::pipeline`) and the
//! finish step (`Edge::request_done`, `finish.rs`): start a request, turn a refusal into a reply, and
//! the few facts about routes, nodes and clients the front needs to decide what it serves
//! itself.

use super::context::{request_id, Ctx};
use super::downstream::PreMatch;
use super::ws_upgrade::WsUpgrade;
use super::{Edge, State};
use crate::errors::ApiError;
use crate::pools::Pools;
use crate::reply::Reply;
use crate::routes::matcher::{Match, NormalizedPath};
use crate::upstream::h1::H1Pool;
use std::net::IpAddr;
use std::sync::Arc;

impl Edge {
    /// A request's state, with the caller's `X-Request-Id` kept when well formed.
    pub(crate) fn begin(&self, given_request_id: Option<&[u8]>) -> Ctx {
        let mut ctx = Ctx::new();
        ctx.request_id = request_id(given_request_id);
        ctx
    }

    /// The route a request head matches, when it matches one (404 and 405 are the
    /// pipeline's to word). `upgrade`: the head asks for a WebSocket.
    pub(crate) fn pre_match(
        &self,
        method: &str,
        path: &NormalizedPath,
        upgrade: bool,
    ) -> Option<PreMatch> {
        self.with_now(|state| match state.matcher.find(method, path, upgrade) {
            Match::Found { route, params } => Some(PreMatch {
                route: route.clone(),
                params,
                suspicious: path.suspicious,
            }),
            _ => None,
        })
    }

    /// The keep-alive connections to plain-HTTP nodes, shared by every passthrough.
    pub(crate) fn node_connections(&self) -> &H1Pool {
        self.state.gateway.client.plain()
    }

    pub(crate) fn pools(&self) -> &Pools {
        &self.state.pools
    }

    /// The largest JSON-RPC body any route takes (`rpc.max_body_bytes`).
    pub(crate) fn max_rpc_body(&self) -> usize {
        self.state.config.app.rpc.max_body_bytes
    }

    /// Open connections allowed per listener and per client address.
    pub(crate) fn connection_caps(&self) -> (usize, usize) {
        let listen = &self.state.config.app.listen;
        (listen.max_connections, listen.max_connections_per_client)
    }

    /// The listeners behind an L4 proxy that writes the PROXY protocol header.
    pub(crate) fn proxied_listeners(&self) -> std::collections::HashSet<std::net::SocketAddr> {
        self.state.config.app.listen.proxied()
    }

    /// Whether a peer is a trusted proxy (its `X-Forwarded-*` are believed).
    pub(crate) fn trusts(&self, peer: Option<IpAddr>) -> bool {
        self.state.console().trusts(peer)
    }

    /// Run an accepted WebSocket session on the socket until it ends: a server-to-client
    /// channel (firehose, watchlist) or JSON-RPC.
    pub(crate) async fn serve_websocket<S>(&self, up: Box<WsUpgrade>, io: S)
    where
        S: tokio::io::AsyncRead + tokio::io::AsyncWrite + Unpin + Send + 'static,
    {
        serve_upgraded(self.state.clone(), up, io).await
    }
}

/// Run an accepted WebSocket session on `io` (either server's socket after the 101).
pub(super) async fn serve_upgraded<S>(state: Arc<State>, up: Box<WsUpgrade>, io: S)
where
    S: tokio::io::AsyncRead + tokio::io::AsyncWrite + Unpin + Send + 'static,
{
    super::websocket::serve(state, up, io).await
}

impl Ctx {
    /// A refusal as this request's reply, in its surface's envelope (and remembered for
    /// the access log).
    pub(crate) fn refusal(&mut self, e: &ApiError) -> Reply {
        self.error_code = Some(e.code);
        Reply::error(e, self.envelope, &self.request_id)
    }

    pub(crate) fn request_id(&self) -> &str {
        &self.request_id
    }

    /// The node that answers this request, for the access log.
    pub(crate) fn served_by(&mut self, host_id: &str) {
        self.upstream = Some(host_id.to_string());
    }
}

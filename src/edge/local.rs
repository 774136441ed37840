//! Which local handler answers a route that is neither a passthrough nor a stream.

use super::{Ctx, Downstream, Edge};
use crate::auth::Principal;
use crate::errors::ApiError;
use crate::handlers::{self, metrics_mirror};
use crate::reply::Reply;
use crate::routes::spec::HandlerKind;
use crate::routes::Route;
use bytes::Bytes;
use std::sync::Arc;

impl Edge {
    pub(super) async fn dispatch_local<D: Downstream + ?Sized>(
        &self,
        session: &mut D,
        ctx: &mut Ctx,
        route: &Arc<Route>,
    ) -> Result<Reply, ApiError> {
        let st = &*self.state;
        match route.handler {
            HandlerKind::JsonRpc => {
                let pool = self.pool(route.pool.as_deref().unwrap_or("eth_el"))?;
                self.json_rpc(session, ctx, route, pool).await
            }
            // `edge_only`: an origin gateway has no such route (405 `Allow: POST` instead).
            HandlerKind::BasePage => {
                let mut r = Reply::json(200, BASE_PAGE.as_bytes().to_vec());
                r.content_type = Some("text/html; charset=utf-8");
                Ok(r.with_headers(vec![("Cache-Control", "public, max-age=3600".into())]))
            }
            HandlerKind::ConsolePage => {
                crate::console::page::serve(ctx.params.last().map(String::as_str).unwrap_or(""))
            }
            kind if kind.is_console_api() => {
                let body = if session.method() == "GET" {
                    Bytes::new()
                } else {
                    session.read_body(CONSOLE_MAX_BODY).await?
                };
                let user = match &ctx.principal {
                    Some(Principal::User(s)) => Some(s.clone()),
                    _ => None,
                };
                let cookies = session.cookies();
                let req = crate::console::api::Req {
                    kind,
                    session: user.as_deref(),
                    params: &ctx.params,
                    body,
                    secure: self.secure(session),
                    query: session.query(),
                    cookies: cookies.as_deref(),
                    request_id: &ctx.request_id,
                };
                crate::console::api::handle(&st.console, &st.keys, req).await
            }
            // An operator (or enterprise key) asking one node: the gateway on a pool
            // pinned to that host.
            HandlerKind::HostRpc => {
                let host_id = ctx.params.first().cloned().unwrap_or_default();
                let pool = self.pool(route.pool.as_deref().unwrap_or("eth_el"))?;
                let host = pool.host(&host_id).cloned().ok_or_else(|| {
                    ApiError::new(
                        404,
                        "unknown_host",
                        format!("no host {host_id} in {}", pool.name),
                    )
                })?;
                self.json_rpc(session, ctx, route, &pool.pinned_to(&host))
                    .await
            }
            HandlerKind::EthSenderRaw => {
                let body = session.read_body(st.config.app.rpc.max_body_bytes).await?;
                let (raw, preferred) = handlers::sender::parse_raw(&body)?;
                let call = serde_json::json!({"jsonrpc": "2.0", "id": 1, "method": "eth_sendRawTransaction", "params": [raw]});
                let private = st.pools.get("eth_private_rpc").cloned();
                let (answer, path) = match (preferred, private) {
                    ("private", None) => {
                        return Err(ApiError::new(
                            503,
                            "pool_not_configured",
                            "no eth_private_rpc pool is configured",
                        ))
                    }
                    ("private", Some(p)) => {
                        let r = st
                            .gateway
                            .forward(
                                p.candidates(None),
                                call.to_string().as_bytes(),
                                crate::rpc::PRIVATE_TX_METHODS,
                                &ctx.request_id,
                            )
                            .await?;
                        ctx.upstream = r.upstream;
                        (
                            serde_json::from_slice(&r.body).unwrap_or_default(),
                            "private",
                        )
                    }
                    _ => {
                        let pool = self.pool("eth_el")?;
                        let (v, host) = st.gateway.write(pool, &call, &ctx.request_id).await?;
                        ctx.upstream = host;
                        (v, "public")
                    }
                };
                match answer.get("result").and_then(|r| r.as_str()) {
                    Some(hash) => Ok(Reply::json(
                        200,
                        serde_json::to_vec(
                            &serde_json::json!({"tx_hash": hash, "path_used": path}),
                        )
                        .unwrap_or_default(),
                    )),
                    None => Err(ApiError::new(
                        400,
                        "tx_rejected",
                        answer
                            .pointer("/error/message")
                            .and_then(|m| m.as_str())
                            .unwrap_or("the node refused the transaction")
                            .to_string(),
                    )),
                }
            }
            HandlerKind::EthSenderBundle => {
                let body = session.read_body(st.config.app.rpc.max_body_bytes).await?;
                let call = handlers::sender::bundle_call(&body)?;
                let pool = self.pool("eth_mev_builder")?;
                let r = st
                    .gateway
                    .forward(
                        pool.candidates(None),
                        call.to_string().as_bytes(),
                        crate::rpc::BUILDER_METHODS,
                        &ctx.request_id,
                    )
                    .await?;
                ctx.upstream = r.upstream;
                let v: serde_json::Value = serde_json::from_slice(&r.body).unwrap_or_default();
                match v.pointer("/result/bundleHash").and_then(|h| h.as_str()) {
                    Some(h) => Ok(Reply::json(
                        200,
                        serde_json::to_vec(&serde_json::json!({"bundle_hash": h}))
                            .unwrap_or_default(),
                    )),
                    None => Err(ApiError::new(
                        400,
                        "bundle_rejected",
                        v.pointer("/error/message")
                            .and_then(|m| m.as_str())
                            .unwrap_or("the builder refused the bundle")
                            .to_string(),
                    )),
                }
            }
            HandlerKind::BuilderRpc | HandlerKind::PrivateRpc => {
                let (pool_name, allow) = if route.handler == HandlerKind::BuilderRpc {
                    ("eth_mev_builder", crate::rpc::BUILDER_METHODS)
                } else {
                    ("eth_private_rpc", crate::rpc::PRIVATE_TX_METHODS)
                };
                let pool = self.pool(pool_name)?;
                let body = session.read_body(st.config.app.rpc.max_body_bytes).await?;
                let reply = st
                    .gateway
                    .forward(pool.candidates(None), &body, allow, &ctx.request_id)
                    .await?;
                ctx.upstream = reply.upstream;
                Ok(Reply::json(200, reply.body))
            }
            HandlerKind::MeshHealth => Ok(mesh_reply(
                handlers::mesh::health(&st.pools, &handlers::mesh::ETH),
                handlers::mesh::ETH.source,
            )),
            HandlerKind::PolygonMeshHealth => Ok(mesh_reply(
                handlers::mesh::health(&st.pools, &handlers::mesh::POLYGON),
                handlers::mesh::POLYGON.source,
            )),
            HandlerKind::MeshHosts => Ok(mesh_reply(
                handlers::mesh::hosts(&st.pools),
                handlers::mesh::ETH.source,
            )),
            HandlerKind::MetricsMirror | HandlerKind::PolygonMetricsMirror => {
                let chain = if route.handler == HandlerKind::MetricsMirror {
                    metrics_mirror::Chain::Eth
                } else {
                    metrics_mirror::Chain::Polygon
                };
                let key = match &ctx.principal {
                    Some(Principal::Key(k)) => Some(&**k),
                    _ => None,
                };
                let tail = ctx.params.last().map(String::as_str).unwrap_or("");
                let host = metrics_mirror::resolve(
                    chain,
                    &st.pools,
                    session.path(),
                    ctx.path_suspicious,
                    tail,
                    key,
                )?;
                ctx.upstream = Some(host.id.clone());
                let (body, cache) = st.metrics_cache.get(host, &ctx.request_id).await?;
                Ok(Reply {
                    status: 200,
                    content_type: Some("text/plain; version=0.0.4; charset=utf-8"),
                    headers: vec![("X-Cache-Status", cache.to_string())],
                    body,
                })
            }
            _ => Err(ApiError::not_implemented(&route.name)),
        }
    }
}

/// What a person opening `/rpc/base` in a browser sees at the edge.
const BASE_PAGE: &str = "<!doctype html><html lang=\"en\"><head><meta charset=\"utf-8\">\
<title>Base JSON-RPC endpoint - chainedge</title>\
<meta name=\"description\" content=\"Base mainnet (chain id 8453) JSON-RPC and WebSocket endpoint by chainedge.\">\
</head><body><h1>Base mainnet JSON-RPC</h1>\
<p>This is a JSON-RPC endpoint for Base mainnet (chain id 8453, <code>0x2105</code>). \
Send <code>POST</code> requests with an API key in <code>Authorization: Bearer</code> or <code>x-token</code>; \
WebSocket clients connect to the same URL or <code>/ws/base</code>.</p></body></html>\n";

/// Console request bodies are small JSON objects.
const CONSOLE_MAX_BODY: usize = 16 * 1024;

/// Admin JSON from the live fleet state: never cached by intermediaries.
fn mesh_reply(body: serde_json::Value, source: &'static str) -> Reply {
    Reply::json(200, serde_json::to_vec(&body).unwrap_or_default()).with_headers(vec![
        ("X-Mesh-Source", source.to_string()),
        ("Cache-Control", "no-store".to_string()),
    ])
}

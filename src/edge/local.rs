//! Which local handler answers a route: the body is read here, within the route's bound,
//! and the handler gets a plain `handlers::Request` (see the contract in `handlers`).

use super::{Ctx, Downstream, Edge};
use crate::errors::ApiError;
use crate::handlers::{self, Request, Services};
use crate::reply::Reply;
use crate::routes::spec::HandlerKind;
use crate::routes::Route;
use bytes::Bytes;
use std::sync::Arc;

/// A form handler's body (`Handler::form`: the console's) is a small JSON object.
const FORM_MAX_BODY: usize = 16 * 1024;

impl Edge {
    pub(super) async fn dispatch_local<D: Downstream + ?Sized>(
        &self,
        session: &mut D,
        ctx: &mut Ctx,
        route: &Arc<Route>,
    ) -> Result<Reply, ApiError> {
        // JSON-RPC stays with the edge: each call of a batch counts against the limit.
        match route.handler {
            HandlerKind::JsonRpc => {
                let pool = self.pool(route.pool.as_deref().unwrap_or("eth_el"))?;
                return self.json_rpc(session, ctx, route, pool).await;
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
                return self
                    .json_rpc(session, ctx, route, &pool.pinned_to(&host))
                    .await;
            }
            _ => {}
        }
        // Boxed: product handlers' futures are large (several node calls, joins), and
        // inline they would size every connection's task, streams and idle keep-alives
        // included (`tests::the_pipeline_future_stays_small`); one allocation per
        // product request is nothing beside its node calls.
        Box::pin(self.product_handler(session, ctx, route)).await
    }

    /// What a handler or channel may use; its pool is the route's, else `default_pool`.
    pub(super) fn services<'s>(
        &'s self,
        route: &'s Route,
        default_pool: Option<&'static str>,
    ) -> Services<'s> {
        let st = &*self.state;
        Services {
            shared: &st.shared,
            config: &st.config,
            openapi: &st.openapi,
            routes: st.matcher.routes(),
            pools: &st.pools,
            gateway: &st.gateway,
            pool_name: route.pool.as_deref().or(default_pool),
        }
    }

    /// A local handler of the registry: the body read within the handler's bound, then
    /// the handler called with the state's services.
    async fn product_handler<D: Downstream + ?Sized>(
        &self,
        session: &mut D,
        ctx: &mut Ctx,
        route: &Arc<Route>,
    ) -> Result<Reply, ApiError> {
        let st = &*self.state;
        let HandlerKind::Local(index) = route.handler else {
            return Err(ApiError::not_implemented(&route.name));
        };
        let handler =
            handlers::registry::get(index).ok_or_else(|| ApiError::not_implemented(&route.name))?;
        let body = match session.method() {
            "GET" | "HEAD" => Bytes::new(),
            _ if handler.form => session.read_body(FORM_MAX_BODY).await?,
            _ => session.read_body(st.config.app.rpc.max_body_bytes).await?,
        };
        let principal = ctx
            .principal
            .clone()
            .unwrap_or(crate::auth::Principal::Anonymous);
        let cookies = session.cookies();
        let req = Request {
            route: &route.name,
            method: session.method(),
            path: session.path(),
            path_suspicious: ctx.path_suspicious,
            params: &ctx.params,
            query: session.query(),
            body,
            caller: &principal,
            cookies: cookies.as_deref(),
            secure: self.secure(session),
            request_id: &ctx.request_id,
            client: ctx.client(session.client_ip()),
        };
        let services = self.services(route, handler.pool);
        let reply = (handler.serve)(&services, &req).await;
        reply.map(|mut r| {
            ctx.upstream = r.upstream.take();
            r
        })
    }
}

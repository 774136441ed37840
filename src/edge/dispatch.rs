//! Dispatch: JSON-RPC goes through the gateway; a channel (`handlers::channels`) opens
//! and its outcome is run here: a passthrough becomes a `Pass` for the proxy phases
//! (lean front or Pingora), an event stream is written, a push feed gets its held
//! socket; local handlers answer here.

use super::{Ctx, Downstream, Edge, Outcome, Pass};
use crate::auth::Principal;
use crate::errors::{ApiError, Envelope};
use crate::handlers::channels::{self, ChannelRequest, Holder, Opener, ProxyTo, PushChannel};
use crate::jsonrpc::Response;
use crate::pools::Pool;
use crate::reply::Reply;
use crate::routes::spec::HandlerKind;
use crate::routes::Route;
use crate::rpc::{id_of, Entered, Incoming, RpcReply};
use crate::verify::Verified;
use std::sync::Arc;

/// The caller of a request the guard let through without a principal.
static ANONYMOUS: Principal = Principal::Anonymous;

/// A request's headers as a channel reads them.
pub(super) struct HeaderView<'a, D: ?Sized>(pub(super) &'a D);

impl<D: Downstream + ?Sized> channels::Headers for HeaderView<'_, D> {
    fn header(&self, name: &str) -> Option<&str> {
        self.0.header(name)
    }
}

impl Edge {
    /// Passthroughs become a `Pass` for Pingora's proxy phases; the rest answer here.
    pub(super) async fn dispatch<D: Downstream + ?Sized>(
        &self,
        session: &mut D,
        ctx: &mut Ctx,
        route: &Arc<Route>,
    ) -> Result<Outcome, ApiError> {
        match route.handler {
            // JSON-RPC over WebSocket: terminated here, every message under the HTTP
            // path's policy (`websocket.rs`).
            // Stream openers are boxed (as are product handlers, `local.rs`): they run
            // once per stream, and inline they would size every connection's task.
            HandlerKind::JsonRpc if session.is_upgrade() && route.websocket => {
                Box::pin(self.websocket(session, ctx, route))
                    .await
                    .map(|up| Outcome::WebSocket(Box::new(up)))
            }
            HandlerKind::Channel(index) => self.open_channel(session, ctx, route, index).await,
            // The route's tail, raw as the client sent it, to the route's pool.
            HandlerKind::Passthrough => {
                let services = self.services(route, None);
                let headers = HeaderView(&*session);
                let req = channel_request(&*session, &headers, ctx, route);
                let to = channels::passthrough(&services, &req)?;
                Ok(Outcome::Proxy(pass_of(to)))
            }
            _ => self
                .dispatch_local(session, ctx, route)
                .await
                .map(Outcome::Reply),
        }
    }

    /// A channel of the registry opened, and its outcome made one the servers run.
    async fn open_channel<D: Downstream + ?Sized>(
        &self,
        session: &D,
        ctx: &mut Ctx,
        route: &Arc<Route>,
        index: u16,
    ) -> Result<Outcome, ApiError> {
        let channel = channels::get(index).ok_or_else(|| ApiError::not_implemented(&route.name))?;
        let services = self.services(route, None);
        let headers = HeaderView(session);
        let req = channel_request(session, &headers, ctx, route);
        match channel.open {
            Opener::Proxy(open) => open(&services, &req).map(|to| Outcome::Proxy(pass_of(to))),
            Opener::Stream(open) => {
                let stream = open(&services, &req).await?;
                ctx.upstream = stream.upstream.clone();
                Ok(Outcome::Stream(stream))
            }
            Opener::Push(_) if !session.is_upgrade() => {
                Err(
                    ApiError::new(426, "upgrade_required", "this route is a WebSocket channel")
                        .with_header("Upgrade", "websocket"),
                )
            }
            Opener::Push(open) => {
                let push = open(&services, &req).await?;
                let client_ip = req.client;
                Ok(Outcome::WebSocket(Box::new(
                    self.push_upgrade(ctx, push, client_ip),
                )))
            }
        }
    }

    /// A push channel as the upgrade the held socket runs.
    fn push_upgrade(
        &self,
        ctx: &Ctx,
        push: PushChannel,
        client_ip: Option<std::net::IpAddr>,
    ) -> super::WsUpgrade {
        let (principal, grant) = match push.holder {
            Holder::Caller => (ctx.principal.clone().unwrap_or(Principal::Anonymous), None),
            Holder::Grant { key_id, expires } => (Principal::Anonymous, Some((key_id, expires))),
        };
        super::WsUpgrade {
            accept: push.accept,
            protocol: push.protocol,
            push: Some(push.source),
            pool: String::new(),
            principal,
            client_ip,
            category: None,
            request_id: ctx.request_id.to_string(),
            route: ctx.route.clone(),
            grant,
            required: Verified::None,
            _slot: push.slot,
        }
    }

    /// A pool by name, borrowed (no reference count touched on the request path).
    pub(super) fn pool(&self, name: &str) -> Result<&Pool, ApiError> {
        self.state.pools.get(name).map(|p| &**p).ok_or_else(|| {
            ApiError::new(
                503,
                "pool_not_configured",
                format!("no {name} pool is configured"),
            )
        })
    }

    /// A JSON-RPC body through the gateway's one entry: bounded read, the caller's
    /// minimum block, then priced, capped and limited per call (`rpc::Gateway::enter`).
    pub(super) async fn json_rpc<D: Downstream + ?Sized>(
        &self,
        session: &mut D,
        ctx: &mut Ctx,
        route: &Route,
        pool: &Pool,
    ) -> Result<Reply, ApiError> {
        let st = &*self.state;
        let body = session.read_body(st.config.app.rpc.max_body_bytes).await?;
        let incoming = Incoming::parse(&body);
        // Borrowed, not cloned: a key's reference count is written by every worker thread.
        let principal = ctx.principal.as_ref().unwrap_or(&Principal::Anonymous);
        let keyed = matches!(principal, Principal::Key(_));
        if keyed && st.requests().enabled() {
            ctx.rpc_method = Some(incoming.label(Some(&pool.methods)));
        }
        let mut caller = self.rpc_caller(principal);
        let asked = min_block(session.header(MIN_BLOCK_HEADER))
            .and_then(|floor| Ok((floor, required_level(session.header(REQUIRE_HEADER))?)));
        let entered = match asked {
            Ok((floor, required)) => {
                ctx.required = self.required_of(principal, required);
                caller.min_block = floor;
                let client = ctx.client(session.client_ip());
                // Written into the context when admitted, not carried through the
                // read's future.
                let rate_headers = &mut ctx.rate_headers;
                let limit = |cost| {
                    if let Some(category) = route.rate.as_deref() {
                        *rate_headers = self.limit(client, principal, category, cost)?;
                    }
                    Ok(())
                };
                let prices = &st.compute_units;
                st.gateway
                    .enter(pool, incoming, &caller, &ctx.request_id, prices, limit)
                    .await
            }
            Err(e) => Entered {
                cost: incoming.cost(&st.compute_units),
                reply: Err(e),
            },
        };
        ctx.usage = Some(entered.cost);
        let reply = entered.reply.and_then(|r| unverified(r, ctx.required));
        match reply {
            Ok(reply) => Ok(self.rpc_answer(ctx, keyed, reply)),
            // On `/rpc/eth` a refusal is the JSON-RPC error answer to the call, with its
            // id (a batch refused whole gets one answer with a null id).
            Err(e) if route.envelope == Envelope::JsonRpc => {
                ctx.error_code = Some(e.code);
                let answer = Response::error(id_of(&body), e.error_object(&ctx.request_id));
                let mut reply = Reply::json(e.status, answer.to_bytes());
                (reply.headers).extend(e.headers.into_iter().map(|(k, v)| (k, v.into())));
                Ok(reply)
            }
            Err(e) => Err(e),
        }
    }

    /// The gateway's answer over HTTP: which block it is from, how the cache took part.
    fn rpc_answer(&self, ctx: &mut Ctx, keyed: bool, reply: RpcReply) -> Reply {
        ctx.upstream = reply.upstream;
        if keyed {
            ctx.error_answers = crate::rpc::compute_units::error_answers(&reply.body);
        }
        let mut answer = Reply::json(200, reply.body);
        // The headers below (at most five), in one allocation.
        answer.headers.reserve(5);
        if let Some(block) = reply.block {
            answer
                .headers
                .push((BLOCK_HEADER, block.to_string().into()));
        }
        let verified = reply.verified.as_str();
        ctx.verified = Some(verified);
        let headers = &mut answer.headers;
        headers.push(("X-Chainedge-Verified", verified.into()));
        if let Some(anchor) = reply.verified.anchor() {
            headers.push(("X-Chainedge-Anchor", anchor.to_string().into()));
        }
        if let Some(note) = reply.cache {
            headers.push(("X-Cache-Status", note.status.as_str().into()));
            headers.push(("X-Cache-Reason", note.reason.into()));
        }
        answer
    }
}

impl Edge {
    /// The level a caller's answers must reach: what the request asked, its key's
    /// `require_verified` and its plan's `rpc.verify.require`, whichever is strongest.
    pub(super) fn required_of(&self, principal: &Principal, asked: Verified) -> Verified {
        let Principal::Key(k) = principal else {
            return asked;
        };
        let key = (k.restrictions.as_deref())
            .and_then(|r| r.require_verified)
            .and_then(Verified::named)
            .unwrap_or(Verified::None);
        let plan = self.state.gateway.conf.required_for_plan(&k.plan);
        asked.strongest(key).strongest(plan)
    }

    /// Who calls the gateway, for per-family method plans.
    pub(super) fn rpc_caller<'p>(&self, principal: &'p Principal) -> crate::rpc::Caller<'p> {
        match principal {
            Principal::Key(k) => crate::rpc::Caller {
                rank: self.plan_rank(&k.plan).unwrap_or(0),
                plan: k.plan.as_str(),
                scopes: Some(k.scopes.as_slice()),
                min_block: 0,
                owner: k.key_id.as_str(),
                submitter: Some(crate::tracking::Submitter {
                    tenant: &k.tenant_id,
                    key_id: &k.key_id,
                }),
                restrictions: k.restrictions.as_deref(),
            },
            // Admins (per-host RPC) are not bound by plans.
            Principal::Admin => crate::rpc::Caller {
                rank: usize::MAX,
                plan: "admin",
                scopes: None,
                min_block: 0,
                owner: "admin",
                submitter: None,
                restrictions: None,
            },
            Principal::User(_) | Principal::Anonymous => crate::rpc::Caller {
                rank: 0,
                plan: crate::config::limits::ANONYMOUS,
                scopes: None,
                min_block: 0,
                owner: crate::config::limits::ANONYMOUS,
                submitter: None,
                restrictions: None,
            },
        }
    }
}

/// Read-your-writes: a request may ask for answers from hosts at or past a block, and
/// each answer says which block the host that served it had reached.
const MIN_BLOCK_HEADER: &str = "x-chainedge-min-block";
const BLOCK_HEADER: &str = "X-Chainedge-Block";

/// A request may ask for answers checked at least so (`self`): a weaker one is withheld.
pub(super) const REQUIRE_HEADER: &str = "x-chainedge-require-verified";

/// `X-Chainedge-Require-Verified`: `self`, `quorum`, `proof`, `root` or `none`; absent is
/// `none`.
pub(super) fn required_level(header: Option<&str>) -> Result<Verified, ApiError> {
    let Some(v) = header else {
        return Ok(Verified::None);
    };
    Verified::named(v).ok_or_else(|| {
        ApiError::invalid_params(format!(
            "X-Chainedge-Require-Verified: '{}' is not a level (self, quorum, proof, root or none)",
            v.trim()
        ))
        .with_field("jsonrpc_code", -32602)
    })
}

/// The answer, unless it was checked less than the caller required: then 502
/// `unverified`, naming how it was checked (the node was asked; nothing unchecked is
/// served).
pub(super) fn unverified(reply: RpcReply, required: Verified) -> Result<RpcReply, ApiError> {
    if reply.verified.meets(required) {
        return Ok(reply);
    }
    Err(ApiError::bad_gateway(
        "unverified",
        format!(
            "the answer was checked to level '{}', and '{}' was required \
             (docs/verification.md lists the methods that reach it)",
            reply.verified.as_str(),
            required.as_str()
        ),
    )
    .with_field("verified", reply.verified.as_str()))
}

/// `X-Chainedge-Min-Block`: a block number, decimal or 0x-hex; absent is 0 (any).
fn min_block(header: Option<&str>) -> Result<u64, ApiError> {
    let Some(v) = header.map(str::trim) else {
        return Ok(0);
    };
    let parsed = match v.strip_prefix("0x") {
        Some(hex) => u64::from_str_radix(hex, 16).ok(),
        None => v.parse().ok(),
    };
    parsed.ok_or_else(|| {
        ApiError::invalid_params(format!(
            "X-Chainedge-Min-Block: '{v}' is not a block number (decimal or 0x-hex)"
        ))
        .with_field("jsonrpc_code", -32602)
    })
}

/// What a channel's opener is given of the request.
fn channel_request<'a, D: Downstream + ?Sized>(
    session: &'a D,
    headers: &'a HeaderView<'a, D>,
    ctx: &'a Ctx,
    route: &'a Route,
) -> ChannelRequest<'a> {
    ChannelRequest {
        route,
        path: session.path(),
        path_suspicious: ctx.path_suspicious,
        params: &ctx.params,
        query: session.query(),
        method: session.method(),
        headers,
        path_rule: ctx.path_rule,
        caller: ctx.principal.as_ref().unwrap_or(&ANONYMOUS),
        request_id: &ctx.request_id,
        client: ctx.client(session.client_ip()),
    }
}

/// A passthrough's hosts and path as the proxy phases take them.
fn pass_of(to: ProxyTo) -> Pass {
    Pass {
        hosts: to.hosts,
        next: 0,
        rest: to.rest,
        stream: to.stream,
        service: to.service,
        current: None,
    }
}

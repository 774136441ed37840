//! Dispatch: passthroughs become a `Pass` for the proxy phases (lean front or Pingora);
//! JSON-RPC goes through the gateway; the MEV-Share stream and local handlers answer here.

use super::{Ctx, Downstream, Edge, Outcome, Pass};
use crate::auth::Principal;
use crate::errors::{ApiError, Envelope};
use crate::handlers;
use crate::jsonrpc::Response;
use crate::pools::{Host, Pool, Service};
use crate::reply::{EventStream, Reply};
use crate::routes::spec::HandlerKind;
use crate::routes::Route;
use crate::rpc::{id_of, Entered, Incoming, RpcReply};
use crate::streams::events::{topics_of, EventsRequest};
use crate::verify::Verified;
use std::sync::Arc;

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
            // Polygon firehose channels, opened by a signed token (`firehose.rs`).
            HandlerKind::FirehoseWs if session.is_upgrade() => {
                Box::pin(self.firehose_upgrade(session, ctx, route))
                    .await
                    .map(|up| Outcome::WebSocket(Box::new(up)))
            }
            // The watchlist channel of a tenant's client id (`sol_watch_ws.rs`).
            HandlerKind::SolWatchlistWs if session.is_upgrade() => {
                Box::pin(self.sol_watch_upgrade(session, ctx, route))
                    .await
                    .map(|up| Outcome::WebSocket(Box::new(up)))
            }
            // A tenant's transaction status changes (`tx_ws.rs`).
            HandlerKind::TxStatusWs if session.is_upgrade() => {
                Box::pin(self.tx_channel_upgrade(session, ctx, route))
                    .await
                    .map(|up| Outcome::WebSocket(Box::new(up)))
            }
            // One node stream per topic set, shared by every client (`streams::events`).
            HandlerKind::BeaconEvents => Box::pin(self.beacon_events(session, ctx, route))
                .await
                .map(Outcome::Stream),
            HandlerKind::BeaconProxy => {
                let (rest, pol) = ctx.beacon.clone().ok_or_else(ApiError::route_not_found)?;
                let pool = self.passthrough_pool(route)?;
                let hosts = beacon_hosts(pool, &pol);
                let rest = match session.query() {
                    Some(q) => format!("{rest}?{q}"),
                    None => rest,
                };
                Ok(Outcome::Proxy(self.pass(pool, hosts, rest, pol.stream)?))
            }
            // Base portal channels: WebSocket frames go to the portal pool untouched.
            HandlerKind::BasePortalWs => {
                let pool = self.passthrough_pool(route)?;
                let rest = session.path().trim_start_matches('/').to_string();
                let hosts = pool.candidates(None);
                Ok(Outcome::Proxy(self.pass(pool, hosts, rest, true)?))
            }
            // The route's tail, raw as the client sent it, to the route's pool.
            HandlerKind::Passthrough | HandlerKind::HeimdallProxy => {
                if ctx.path_suspicious {
                    return Err(ApiError::new(
                        400,
                        "invalid_path",
                        "path segments may not be '.', '..' or contain encoded slashes",
                    ));
                }
                let pool = self.passthrough_pool(route)?;
                let tail = raw_tail(session.path(), route.segments_before_tail());
                let rest = match session.query() {
                    Some(q) => format!("{tail}?{q}"),
                    None => tail.to_string(),
                };
                let hosts = pool.candidates(None);
                let mut pass = self.pass(pool, hosts, rest, false)?;
                if route.handler == HandlerKind::HeimdallProxy {
                    pass.service = handlers::heimdall::service_of(session.method(), tail);
                }
                Ok(Outcome::Proxy(pass))
            }
            HandlerKind::RelayData => {
                let tail = ctx.params.last().cloned().unwrap_or_default();
                let rest = handlers::relay::check(&tail, session.query())?;
                let pool = self.passthrough_pool(route)?;
                let hosts = pool.candidates(None);
                Ok(Outcome::Proxy(self.pass(pool, hosts, rest, false)?))
            }
            HandlerKind::MevShareSse => Box::pin(self.mev_share(ctx)).await.map(Outcome::Stream),
            _ => self
                .dispatch_local(session, ctx, route)
                .await
                .map(Outcome::Reply),
        }
    }

    /// The caller's MEV-Share event stream (one per user), opened before any byte goes out.
    async fn mev_share(&self, ctx: &mut Ctx) -> Result<EventStream, ApiError> {
        let user = match &ctx.principal {
            Some(Principal::Key(k)) => k.user_id.clone().unwrap_or_else(|| k.tenant_id.clone()),
            _ => return Err(ApiError::new(401, "unauthorized", "a key is required")),
        };
        let st = &*self.state;
        let stream = handlers::mev_share::open(
            st.stream_slots(),
            &user,
            st.pools.get("eth_mev_share").map(|p| &**p),
            &st.gateway.client,
            &st.config.app.streams,
            &ctx.request_id,
        )
        .await?;
        ctx.upstream = stream.upstream.clone();
        Ok(stream)
    }

    /// The beacon event stream: the shared node stream for the client's topic set.
    async fn beacon_events<D: Downstream + ?Sized>(
        &self,
        session: &D,
        ctx: &mut Ctx,
        route: &Route,
    ) -> Result<EventStream, ApiError> {
        let (_, pol) = ctx.beacon.clone().ok_or_else(ApiError::route_not_found)?;
        let pool = self.passthrough_pool(route)?;
        let hosts = beacon_hosts(pool, &pol);
        let topics = topics_of(session.query())?;
        let st = &*self.state;
        let request = EventsRequest {
            pool: pool.name.clone(),
            hosts,
            // The node gets the canonical query, never the client's raw one.
            rest: format!("eth/v1/events?topics={}", topics.join(",")),
            topics,
            last_event_id: session.header("last-event-id").map(str::to_string),
            ping_every: std::time::Duration::from_secs(st.config.app.streams.ping_interval_secs),
        };
        let stream = st
            .events()
            .subscribe(&st.gateway.client, request, &ctx.request_id)
            .await?;
        ctx.upstream = stream.upstream.clone();
        Ok(stream)
    }

    pub(super) fn passthrough_pool(&self, route: &Route) -> Result<&Pool, ApiError> {
        self.pool(route.passthrough_pool().unwrap_or_default())
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

    pub(super) fn pass(
        &self,
        pool: &Pool,
        hosts: Vec<Arc<Host>>,
        rest: String,
        stream: bool,
    ) -> Result<Pass, ApiError> {
        if hosts.is_empty() {
            return Err(ApiError::new(
                503,
                "no_upstream",
                format!("no healthy host in pool {} can serve this route", pool.name),
            ));
        }
        Ok(Pass {
            hosts,
            next: 0,
            rest,
            stream,
            service: Service::Main,
            current: None,
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
        let principal = ctx.principal.clone().unwrap_or(Principal::Anonymous);
        if matches!(principal, Principal::Key(_)) && st.requests().enabled() {
            ctx.rpc_method = Some(incoming.label(Some(&pool.methods)).into());
        }
        let mut caller = self.rpc_caller(&principal);
        let asked = min_block(session.header(MIN_BLOCK_HEADER))
            .and_then(|floor| Ok((floor, required_level(session.header(REQUIRE_HEADER))?)));
        let entered = match asked {
            Ok((floor, required)) => {
                ctx.required = self.required_of(&principal, required);
                caller.min_block = floor;
                let client = ctx.client(session.client_ip());
                let limit = |cost| match route.rate.as_deref() {
                    Some(category) => self.limit(client, &principal, category, cost),
                    None => Ok(Vec::new()),
                };
                let prices = &st.compute_units;
                st.gateway
                    .enter(pool, incoming, &caller, &ctx.request_id, prices, limit)
                    .await
            }
            Err(e) => Entered {
                cost: incoming.cost(&st.compute_units),
                admitted: None,
                reply: Err(e),
            },
        };
        ctx.usage = Some(entered.cost);
        ctx.rate_headers = entered.admitted.unwrap_or_default();
        let reply = entered.reply.and_then(|r| unverified(r, ctx.required));
        match reply {
            Ok(reply) => Ok(self.rpc_answer(ctx, &principal, reply)),
            // On `/rpc/eth` a refusal is the JSON-RPC error answer to the call, with its
            // id (a batch refused whole gets one answer with a null id).
            Err(e) if route.envelope == Envelope::JsonRpc => {
                ctx.error_code = Some(e.code);
                let answer = Response::error(id_of(&body), e.error_object(&ctx.request_id));
                let mut reply = Reply::json(e.status, answer.to_bytes());
                reply.headers.extend(e.headers);
                Ok(reply)
            }
            Err(e) => Err(e),
        }
    }

    /// The gateway's answer over HTTP: which block it is from, how the cache took part.
    fn rpc_answer(&self, ctx: &mut Ctx, principal: &Principal, reply: RpcReply) -> Reply {
        ctx.upstream = reply.upstream;
        if matches!(principal, Principal::Key(_)) {
            ctx.error_answers = crate::rpc::compute_units::error_answers(&reply.body);
        }
        let mut answer = Reply::json(200, reply.body);
        if let Some(block) = reply.block {
            answer.headers.push((BLOCK_HEADER, block.to_string()));
        }
        let verified = reply.verified.as_str();
        ctx.verified = Some(verified);
        answer
            .headers
            .push(("X-Chainedge-Verified", verified.to_string()));
        if let Some(anchor) = reply.verified.anchor() {
            answer
                .headers
                .push(("X-Chainedge-Anchor", anchor.to_string()));
        }
        if let Some(note) = reply.cache {
            answer
                .headers
                .push(("X-Cache-Status", note.status.as_str().to_string()));
            answer
                .headers
                .push(("X-Cache-Reason", note.reason.to_string()));
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

/// `raw` (a request path) without its first `prefix` segments, still percent-encoded.
pub(crate) fn raw_tail(raw: &str, prefix: usize) -> &str {
    let mut rest = raw.trim_start_matches('/');
    for _ in 0..prefix {
        rest = match rest.find('/') {
            Some(i) => rest[i..].trim_start_matches('/'),
            None => "",
        };
    }
    rest
}

/// The pool's hosts, in order, of the client families a beacon path group needs.
fn beacon_hosts(pool: &Pool, pol: &handlers::beacon::BeaconPolicy) -> Vec<Arc<Host>> {
    pool.candidates(None)
        .into_iter()
        .filter(|h| pol.families.is_none_or(|f| f.contains(&h.family.as_str())))
        .collect()
}

#[cfg(test)]
mod tests {
    use super::raw_tail;

    #[test]
    fn raw_tail_skips_the_route_prefix_and_keeps_encoding() {
        assert_eq!(raw_tail("/v1/polygon/heimdall/a%20b/c", 3), "a%20b/c");
        assert_eq!(raw_tail("//v1//polygon/heimdall//x", 3), "x");
        assert_eq!(raw_tail("/v1/polygon/heimdall", 3), "");
        assert_eq!(raw_tail("/bench/plain/", 2), "");
    }
}

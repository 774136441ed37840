//! The channels that talk to nodes for the caller: the rewriting passthroughs (the
//! beacon API, the relay data API, heimdall, the Base portal's WebSocket channels) and
//! the event streams (beacon events, shared by every client of a topic set; MEV-Share,
//! one per user). What each checks of the path is in its product file
//! (`handlers::beacon`, `handlers::relay`, `handlers::heimdall`, `handlers::mev_share`).

use super::{
    proxy_to, route_pool, route_tail, Channel, ChannelRequest, ChannelTraits, ChannelTransport,
    Opener, PathRule, ProxyTo,
};
use crate::auth::Principal;
use crate::errors::ApiError;
use crate::handlers::{beacon, heimdall, mev_share, relay, Services};
use crate::pools::{Host, Pool};
use crate::reply::EventStream;
use crate::streams::events::{topics_of, EventsRequest};
use std::sync::Arc;

/// Where the beacon API is mounted.
const BEACON_PREFIX: &str = "/rpc/eth-beacon";

pub const CHANNELS: &[Channel] = &[
    Channel {
        traits: ChannelTraits {
            path_rule: Some(beacon_rule),
            path_rates: beacon::RATE_CATEGORIES,
            ..ChannelTraits::new("beacon_proxy", "the beacon API", ChannelTransport::Proxy)
                .pool("eth_cl")
        },
        open: Opener::Proxy(beacon_proxy),
    },
    Channel {
        traits: ChannelTraits {
            path_rule: Some(beacon_rule),
            path_rates: beacon::RATE_CATEGORIES,
            ..ChannelTraits::new(
                "beacon_events",
                "the beacon event stream",
                ChannelTransport::EventStream,
            )
            .pool("eth_cl")
        },
        open: Opener::Stream(|s, req| Box::pin(beacon_events(s, req))),
    },
    Channel {
        traits: ChannelTraits::new("relay_data", "the relay data API", ChannelTransport::Proxy)
            .pool("eth_mev_relay"),
        open: Opener::Proxy(relay_data),
    },
    Channel {
        traits: ChannelTraits {
            needs_pool: true,
            ..ChannelTraits::new("heimdall_proxy", "heimdall's API", ChannelTransport::Proxy)
        },
        open: Opener::Proxy(heimdall_proxy),
    },
    Channel {
        traits: ChannelTraits::new(
            "base_portal_ws",
            "the Base portal's channels",
            ChannelTransport::ProxyWebSocket,
        )
        .pool("base_portal"),
        open: Opener::Proxy(base_portal),
    },
    Channel {
        traits: ChannelTraits {
            one_plan: true,
            ..ChannelTraits::new(
                "mev_share_sse",
                "the MEV-Share stream",
                ChannelTransport::EventStream,
            )
        },
        open: Opener::Stream(|s, req| Box::pin(mev_share_stream(s, req))),
    },
];

/// The beacon path's group, checked before the guard (traversal refused; the group's
/// plan and rate category).
fn beacon_rule(path: &str) -> Result<PathRule, ApiError> {
    let (_, p) = beacon::policy(path, BEACON_PREFIX)?;
    Ok(PathRule {
        min_plan: p.min_plan,
        rate: p.rate,
        families: p.families,
        stream: p.stream,
    })
}

/// The path's rule as the pipeline found it (checked again when it did not).
fn rule_of(req: &ChannelRequest<'_>) -> Result<PathRule, ApiError> {
    match req.path_rule {
        Some(rule) => Ok(rule),
        None => beacon_rule(req.path),
    }
}

/// The pool's hosts, in order, of the node families a path needs.
fn hosts_for(pool: &Pool, rule: &PathRule) -> Vec<Arc<Host>> {
    pool.candidates(None)
        .into_iter()
        .filter(|h| rule.families.is_none_or(|f| f.contains(&h.family.as_str())))
        .collect()
}

/// `/rpc/eth-beacon/{*beacon_path}`: the checked path, with the query, to the hosts
/// whose client serves its group.
fn beacon_proxy(s: &Services<'_>, req: &ChannelRequest<'_>) -> Result<ProxyTo, ApiError> {
    let rule = rule_of(req)?;
    let pool = route_pool(s, req)?;
    let path = req.path.strip_prefix(BEACON_PREFIX).unwrap_or_default();
    let path = path.strip_prefix('/').unwrap_or(path);
    let rest = match req.query {
        Some(q) => format!("{path}?{q}"),
        None => path.to_string(),
    };
    proxy_to(pool, hosts_for(pool, &rule), rest, rule.stream)
}

/// The beacon event stream: the shared node stream for the client's topic set.
async fn beacon_events(
    s: &Services<'_>,
    req: &ChannelRequest<'_>,
) -> Result<EventStream, ApiError> {
    let rule = rule_of(req)?;
    let pool = route_pool(s, req)?;
    let topics = topics_of(req.query)?;
    let request = EventsRequest {
        pool: pool.name.clone(),
        hosts: hosts_for(pool, &rule),
        // The node gets the canonical query, never the client's raw one.
        rest: format!("eth/v1/events?topics={}", topics.join(",")),
        topics,
        last_event_id: req.headers.header("last-event-id").map(str::to_string),
        ping_every: std::time::Duration::from_secs(s.config.app.streams.ping_interval_secs),
    };
    s.events()
        .subscribe(&s.gateway.client, request, req.request_id)
        .await
}

/// `/v1/eth/mev/relay/{*relay_path}`: only the data API's paths and parameters.
fn relay_data(s: &Services<'_>, req: &ChannelRequest<'_>) -> Result<ProxyTo, ApiError> {
    let tail = req.params.last().map(String::as_str).unwrap_or_default();
    let rest = relay::check(tail, req.query)?;
    let pool = route_pool(s, req)?;
    proxy_to(pool, pool.candidates(None), rest, false)
}

/// `/v1/polygon/heimdall/{*heimdall_path}`: the tail to the service of each host that
/// serves it (Tendermint RPC, LCD, metrics).
fn heimdall_proxy(s: &Services<'_>, req: &ChannelRequest<'_>) -> Result<ProxyTo, ApiError> {
    let pool = route_pool(s, req)?;
    let (tail, rest) = route_tail(req)?;
    let mut to = proxy_to(pool, pool.candidates(None), rest, false)?;
    to.service = heimdall::service_of(req.method, tail);
    Ok(to)
}

/// The Base portal's channels: WebSocket frames go to the portal pool untouched.
fn base_portal(s: &Services<'_>, req: &ChannelRequest<'_>) -> Result<ProxyTo, ApiError> {
    let pool = route_pool(s, req)?;
    let rest = req.path.trim_start_matches('/').to_string();
    proxy_to(pool, pool.candidates(None), rest, true)
}

/// The caller's MEV-Share event stream (one per user), opened before any byte goes out.
async fn mev_share_stream(
    s: &Services<'_>,
    req: &ChannelRequest<'_>,
) -> Result<EventStream, ApiError> {
    let Principal::Key(k) = req.caller else {
        return Err(ApiError::new(401, "unauthorized", "a key is required"));
    };
    let user = k.user_id.as_deref().unwrap_or(&k.tenant_id);
    mev_share::open(
        s.stream_slots(),
        user,
        s.pools.get("eth_mev_share").map(|p| &**p),
        &s.gateway.client,
        &s.config.app.streams,
        req.request_id,
    )
    .await
}

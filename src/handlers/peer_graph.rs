//! The execution layer's peer graph (`GET /v1/eth/intel/peer-graph?depth=1..3`) and one
//! host's neighbours (`GET /v1/eth/intel/peer-graph/host/{host}`), from `admin_nodeInfo`
//! and `admin_peers` on the `eth_el` hosts with the `admin` capability.
//!
//! **The walk.** The seed set is the pool's admin hosts whose role is `primary`. Depth 1
//! is their peer lists. Each further hop expands the peers reached at the hop before
//! that the edge can ask: admin hosts of the pool (matched by node id) not expanded yet,
//! such as fallback nodes reached only through peering. Other peers are leaves: no
//! node answers `admin_peers` for a stranger. So more depth gives more edges exactly as
//! far as the fleet reaches.
//!
//! **Edges.** One per connection, `from_host` the side that reported it, `direction`
//! relative to it (`inbound`/`outbound`); when both ends report one connection, it is one
//! edge; two connections the opposite ways between the same pair make one
//! `bidirectional` edge. Hosts are named by their configured id when they are the
//! fleet's, else by node id. `client` is the peer's own identification string.
//! `latency_ms` is the node's measure of the peer's round trip where the client reports
//! one (`network.rtt` / `latency`), else null: the standard `admin_peers` carries none.
//!
//! **Snapshots.** A graph is built at most once per `FRESH` per depth (concurrent asks
//! share one walk) and answered with its capture time (`observed_at`).

use super::Request;
use crate::errors::ApiError;
use crate::pools::{Host, Pool};
use crate::reply::Reply;
use crate::rpc::Gateway;
use crate::state::peer_graphs::PeerGraphs;
use serde_json::{json, Map, Value};
use std::collections::{BTreeMap, HashMap, HashSet};
use std::sync::Arc;
use std::time::Duration;

/// How long a snapshot is answered before the graph is walked again.
pub const FRESH: Duration = Duration::from_secs(60);
/// Most peers read from one host (a node keeps 50 by default; some allow hundreds).
const MAX_PEERS_PER_HOST: usize = 1000;

/// One connection of the graph, as its first reporter (`from`) saw it.
struct Edge {
    from: String,
    to: String,
    direction: &'static str,
    /// The identification string of `to`.
    client: String,
    latency_ms: Option<f64>,
}

/// One peer as a host reported it.
#[derive(Debug, Clone)]
struct Peer {
    id: String,
    enode: Option<String>,
    client: String,
    inbound: bool,
    latency_ms: Option<f64>,
}

fn peers_of(answer: &Value) -> Vec<Peer> {
    answer
        .as_array()
        .into_iter()
        .flatten()
        .take(MAX_PEERS_PER_HOST)
        .filter_map(|p| {
            let id = p.get("id")?.as_str()?.to_ascii_lowercase();
            let network = p.get("network");
            let latency = ["rtt", "latency"]
                .iter()
                .find_map(|k| network.and_then(|n| n.get(*k)).and_then(Value::as_f64));
            Some(Peer {
                id,
                enode: p.get("enode").and_then(Value::as_str).map(str::to_string),
                client: p
                    .get("name")
                    .and_then(Value::as_str)
                    .unwrap_or_default()
                    .to_string(),
                inbound: network
                    .and_then(|n| n.get("inbound"))
                    .and_then(Value::as_bool)
                    .unwrap_or(false),
                latency_ms: latency,
            })
        })
        .collect()
}

fn admin_hosts(pool: &Pool) -> Vec<Arc<Host>> {
    pool.hosts
        .iter()
        .filter(|h| h.has("admin"))
        .cloned()
        .collect()
}

async fn ask(
    gateway: &Gateway,
    pool: &Pool,
    host: &Arc<Host>,
    method: &str,
    rid: &str,
) -> Result<Value, ApiError> {
    let pinned = pool.pinned_to(host);
    gateway
        .read_call(&pinned, method, json!([]), rid)
        .await
        .map(|(v, _)| v)
}

/// The capture time, RFC 3339 (SPEC's date-time).
fn observed_at() -> String {
    crate::clock::rfc3339(crate::clock::now())
}

/// `depth`: 1 to 3, default 1.
fn depth_param(req: &Request<'_>) -> Result<u8, ApiError> {
    match req.query_param("depth").as_deref() {
        None => Ok(1),
        Some(d @ ("1" | "2" | "3")) => Ok(d.as_bytes()[0] - b'0'),
        Some(_) => Err(ApiError::invalid_params("depth is 1, 2 or 3")),
    }
}

pub async fn graph(
    graphs: &PeerGraphs,
    gateway: &Gateway,
    pool: &Pool,
    req: &Request<'_>,
) -> Result<Reply, ApiError> {
    let depth = depth_param(req)?;
    let body = graphs
        .get_or_walk(depth, FRESH, || async {
            Ok(walk(gateway, pool, depth, req.request_id)
                .await?
                .to_string())
        })
        .await?;
    Ok(Reply::json(200, body.as_bytes().to_vec()))
}

async fn walk(gateway: &Gateway, pool: &Pool, depth: u8, rid: &str) -> Result<Value, ApiError> {
    let admins = admin_hosts(pool);
    if admins.is_empty() {
        return Err(ApiError::new(
            503,
            "no_upstream",
            format!("no host of pool {} has the admin capability", pool.name),
        ));
    }
    // Which node id is which fleet host.
    let mut fleet: HashMap<String, Arc<Host>> = HashMap::new();
    for h in &admins {
        if let Ok(info) = ask(gateway, pool, h, "admin_nodeInfo", rid).await {
            if let Some(id) = info.get("id").and_then(Value::as_str) {
                fleet.insert(id.to_ascii_lowercase(), h.clone());
            }
        }
    }
    let name_of = |id: &str| {
        fleet
            .get(id)
            .map_or_else(|| id.to_string(), |h| h.id.clone())
    };
    let mut frontier: Vec<Arc<Host>> = admins
        .iter()
        .filter(|h| h.role == "primary")
        .cloned()
        .collect();
    if frontier.is_empty() {
        frontier = admins.clone();
    }
    let mut expanded: HashSet<String> = HashSet::new();
    // Keyed by the pair, smaller name first.
    let mut edges: BTreeMap<(String, String), Edge> = BTreeMap::new();
    let mut answered = 0;
    for _ in 0..depth {
        let mut next = Vec::new();
        for host in frontier.drain(..) {
            if !expanded.insert(host.id.clone()) {
                continue;
            }
            let Ok(list) = ask(gateway, pool, &host, "admin_peers", rid).await else {
                continue;
            };
            answered += 1;
            for peer in peers_of(&list) {
                let (from, to) = (host.id.clone(), name_of(&peer.id));
                record_edge(&mut edges, from, to, &peer);
                if let Some(h) = fleet.get(&peer.id) {
                    next.push(h.clone());
                }
            }
        }
        frontier = next;
    }
    if answered == 0 {
        return Err(ApiError::bad_gateway(
            "upstream_unavailable",
            "no admin host answered admin_peers",
        ));
    }
    let edges: Vec<Value> = edges
        .into_values()
        .map(|e| {
            json!({"from_host": e.from, "to_host": e.to, "client": e.client,
                   "latency_ms": e.latency_ms, "direction": e.direction})
        })
        .collect();
    Ok(json!({"observed_at": observed_at(), "depth": depth, "edges": edges}))
}

/// One end's report of a connection, into the edges keyed by the pair (smaller name
/// first): a new edge, or the same connection seen from its other end, or a second
/// connection the other way (then the edge is bidirectional).
fn record_edge(
    edges: &mut BTreeMap<(String, String), Edge>,
    from: String,
    to: String,
    peer: &Peer,
) {
    let direction = if peer.inbound { "inbound" } else { "outbound" };
    let key = if from < to {
        (from.clone(), to.clone())
    } else {
        (to.clone(), from.clone())
    };
    match edges.get_mut(&key) {
        Some(e) => {
            // Seen from the other end, one connection has the other direction.
            let same_connection = if e.from == to {
                e.direction != direction
            } else {
                e.direction == direction
            };
            if !same_connection {
                e.direction = "bidirectional";
            }
        }
        None => {
            let edge = Edge {
                from,
                to,
                direction,
                client: peer.client.clone(),
                latency_ms: peer.latency_ms,
            };
            edges.insert(key, edge);
        }
    }
}

/// `GET /v1/eth/intel/peer-graph/host/{host}`: one admin host's neighbours, read now.
pub async fn host(gateway: &Gateway, pool: &Pool, req: &Request<'_>) -> Result<Reply, ApiError> {
    let id = req.params.first().map(String::as_str).unwrap_or("");
    let host = pool
        .host(id)
        .filter(|h| h.has("admin"))
        .cloned()
        .ok_or_else(|| {
            ApiError::new(
                404,
                "unknown_host",
                format!(
                    "no host {} with the admin capability in {}",
                    id.chars().take(64).collect::<String>(),
                    pool.name
                ),
            )
        })?;
    let info = ask(gateway, pool, &host, "admin_nodeInfo", req.request_id).await?;
    let list = ask(gateway, pool, &host, "admin_peers", req.request_id).await?;
    let peers: Vec<Value> = peers_of(&list)
        .into_iter()
        .map(|p| {
            let mut m = Map::new();
            m.insert("id".into(), json!(p.id));
            m.insert("enode".into(), json!(p.enode));
            m.insert("client".into(), json!(p.client));
            m.insert("latency_ms".into(), json!(p.latency_ms));
            m.insert(
                "direction".into(),
                json!(if p.inbound { "inbound" } else { "outbound" }),
            );
            Value::Object(m)
        })
        .collect();
    let body = json!({
        "host": host.id,
        "enode": info.get("enode"),
        "client": info.get("name"),
        "observed_at": observed_at(),
        "peers": peers,
    });
    Ok(Reply::json(200, body.to_string()).served_by(Some(host.id.clone())))
}

pub const HANDLERS: &[super::Handler] = &[
    super::Handler::new("eth_peer_graph", |s, r| {
        Box::pin(async move { graph(s.peer_graphs(), s.gateway, s.pool()?, r).await })
    })
    .pool("eth_el"),
    super::Handler::new("eth_peer_graph_host", |s, r| {
        Box::pin(async move { host(s.gateway, s.pool()?, r).await })
    })
    .pool("eth_el"),
];

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn peers_are_read_from_admin_peers() {
        let list = json!([
            {"id": "AA", "enode": "enode://aa@10.0.0.1:30303", "name": "Geth/v1.14.0",
             "network": {"inbound": true, "remoteAddress": "10.0.0.1:30303"}},
            {"id": "bb", "name": "Nethermind/v1.28", "network": {"inbound": false, "rtt": 12.5}},
            {"name": "no id"}
        ]);
        let peers = peers_of(&list);
        assert_eq!(peers.len(), 2);
        assert_eq!((peers[0].id.as_str(), peers[0].inbound), ("aa", true));
        assert_eq!(peers[1].latency_ms, Some(12.5));
        assert!(peers_of(&json!({"not": "a list"})).is_empty());
    }
}

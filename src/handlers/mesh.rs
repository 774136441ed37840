//! Operator views of the fleet: mesh health per layer and the hosts list.

use crate::pools::health::HealthState;
use crate::pools::{Host, Pools};
use crate::reply::Reply;
use serde_json::{json, Map, Value};
use std::time::{Duration, SystemTime, UNIX_EPOCH};

/// Which mesh: the layers it reports, each fed by one or more pools.
pub struct Mesh {
    pub source: &'static str,
    pub layers: &'static [(&'static str, &'static [&'static str])],
}

/// The mesh routes (`mesh_health`, `polygon_mesh_health`, `mesh_hosts` in
/// `plugins/admin.yaml`): JSON
/// from the live fleet state, never cached by intermediaries.
pub const HANDLERS: &[super::Handler] = &[
    super::Handler::new("mesh_health", |s, _| {
        Box::pin(async move { Ok(answer(health(s.pools, &ETH), ETH.source)) })
    }),
    super::Handler::new("polygon_mesh_health", |s, _| {
        Box::pin(async move { Ok(answer(health(s.pools, &POLYGON), POLYGON.source)) })
    }),
    super::Handler::new("mesh_hosts", |s, _| {
        Box::pin(async move { Ok(answer(hosts(s.pools), ETH.source)) })
    }),
];

fn answer(body: Value, source: &str) -> Reply {
    Reply::json(200, serde_json::to_vec(&body).unwrap_or_default()).with_headers(vec![
        ("X-Mesh-Source", source.to_string().into()),
        ("Cache-Control", "no-store".into()),
    ])
}

pub const ETH: Mesh = Mesh {
    source: "eth-mesh-admin",
    layers: &[
        ("el", &["eth_el"]),
        ("cl", &["eth_cl"]),
        (
            "mev",
            &[
                "eth_mev_relay",
                "eth_mev_builder",
                "eth_mev_share",
                "eth_private_rpc",
            ],
        ),
    ],
};

pub const POLYGON: Mesh = Mesh {
    source: "polygon-mesh-admin",
    layers: &[
        ("bor", &["polygon_bor"]),
        ("heimdall", &["polygon_heimdall"]),
    ],
};

/// The mesh health snapshot: one block per configured layer, counts that add up (each
/// host is in exactly one state), hosts sorted by id.
pub fn health(pools: &Pools, mesh: &Mesh) -> Value {
    let mut blocks = Map::new();
    for (layer, pool_names) in mesh.layers {
        let configured: Vec<_> = pool_names.iter().filter_map(|p| pools.get(p)).collect();
        if configured.is_empty() {
            continue;
        }
        let mut hosts: Vec<&Host> = configured
            .iter()
            .flat_map(|p| p.hosts.iter().map(|h| &**h))
            .collect();
        hosts.sort_by(|a, b| a.id.cmp(&b.id).then(a.pool.cmp(&b.pool)));
        let count = |s: HealthState| hosts.iter().filter(|h| h.health.state() == s).count();
        let head = configured
            .iter()
            .map(|p| p.head.load(std::sync::atomic::Ordering::Relaxed))
            .max()
            .unwrap_or(0);
        let highest = configured.iter().map(|p| p.tip.highest()).max();
        blocks.insert(
            layer.to_string(),
            json!({
                "block": layer,
                "host_count": hosts.len(),
                "available_count": count(HealthState::Available),
                "quarantined_count": count(HealthState::Quarantined),
                "degraded_count": count(HealthState::Degraded),
                "head": head,
                "highest_head": highest.unwrap_or(0).max(head),
                "majority_stalled": configured.iter().any(|p| p.tip.stalled()),
                "hosts": hosts.iter().map(|h| host_entry(h)).collect::<Vec<_>>(),
            }),
        );
    }
    json!({"generated_at": rfc3339(SystemTime::now()), "blocks": blocks})
}

/// Every host of the Ethereum pools, by pool then id.
pub fn hosts(pools: &Pools) -> Value {
    let mut all: Vec<&Host> = pools
        .all()
        .filter(|p| p.name.starts_with("eth_"))
        .flat_map(|p| p.hosts.iter().map(|h| &**h))
        .collect();
    all.sort_by(|a, b| a.pool.cmp(&b.pool).then(a.id.cmp(&b.id)));
    json!({
        "generated_at": rfc3339(SystemTime::now()),
        "hosts": all.iter().map(|h| host_entry(h)).collect::<Vec<_>>(),
    })
}

/// A host as operators see it. No URL: addresses stay in the config.
fn host_entry(h: &Host) -> Value {
    let checked = h.health.checked_at_ms();
    json!({
        "id": h.id,
        "pool": h.pool,
        "family": h.family,
        "role": h.role,
        "capabilities": h.capabilities,
        "state": h.health.state().as_str(),
        "head": h.health.head(),
        "lag": h.health.lag(),
        "latency_ms": (h.health.latency_ms() * 1000.0).round() / 1000.0,
        "consecutive_failures": h.health.consecutive_failures(),
        "cordoned": h.conduct.cordoned(),
        "last_checked_at": (checked > 0)
            .then(|| rfc3339(UNIX_EPOCH + Duration::from_millis(checked))),
        "last_error": h.last_error(),
    })
}

fn rfc3339(t: SystemTime) -> String {
    humantime::format_rfc3339_seconds(t).to_string()
}

//! `GET /v1/eth/metrics/{host_id}/{layer}` (and Polygon's): a node's Prometheus metrics,
//! scrubbed of operator details, cached (fresh, then stale while the node is down) and
//! scraped once for concurrent misses.
//!
//! Refusals follow SPEC's metrics-mirror table in its order: pprof → path shape →
//! layer → feature → pool → host → family → capability → upstream.

use super::Request;
use crate::errors::ApiError;
use crate::pools::{Host, Pools};
use crate::reply::Reply;
use crate::routes::matcher::percent_decode;
use crate::state::metrics_cache::MetricsCache;
use crate::store::KeyRecord;
use std::sync::Arc;

/// The ten Ethereum client layers: the first ten client families.
pub const ETH_LAYERS: &[&str] = crate::config::FAMILIES.split_at(10).0;
/// Polygon's two node kinds.
pub const POLYGON_LAYERS: &[&str] = &["bor", "heimdall"];

#[derive(Clone, Copy, PartialEq)]
pub enum Chain {
    Eth,
    Polygon,
}

impl Chain {
    /// (pool, required feature) for a layer of this chain.
    fn pool_and_feature(self, layer: &str) -> (&'static str, Option<&'static str>) {
        match (self, layer.starts_with("el-"), layer) {
            (Chain::Eth, true, _) => ("eth_el", Some("eth.chain_metrics_el")),
            (Chain::Eth, false, _) => ("eth_cl", Some("eth.chain_metrics_cl")),
            (Chain::Polygon, _, "heimdall") => ("polygon_heimdall", None),
            (Chain::Polygon, _, _) => ("polygon_bor", None),
        }
    }

    fn layers(self) -> &'static [&'static str] {
        match self {
            Chain::Eth => ETH_LAYERS,
            Chain::Polygon => POLYGON_LAYERS,
        }
    }
}

/// True when the raw path reaches `/debug/pprof` in any spelling: percent-encoded (even
/// twice), with doubled or back slashes, in any case.
pub fn is_pprof(raw_path: &str) -> bool {
    let mut p = raw_path.to_string();
    for _ in 0..3 {
        let d = percent_decode(&p).into_owned();
        if d == p {
            break;
        }
        p = d;
    }
    let mut norm = String::with_capacity(p.len());
    for c in p.chars().map(|c| {
        if c == '\\' {
            '/'
        } else {
            c.to_ascii_lowercase()
        }
    }) {
        if c == '/' && norm.ends_with('/') {
            continue;
        }
        norm.push(c);
    }
    norm.split('/')
        .collect::<Vec<_>>()
        .windows(2)
        .any(|w| w[0] == "debug" && w[1] == "pprof")
}

/// The mirror route of either chain: resolve the host (SPEC's refusals in order), then
/// the cached or freshly scraped, scrubbed metrics.
pub const HANDLERS: &[super::Handler] = &[
    super::Handler::new("metrics_mirror", |s, r| {
        Box::pin(serve(s.metrics_cache(), s.pools, Chain::Eth, r))
    }),
    super::Handler::new("polygon_metrics_mirror", |s, r| {
        Box::pin(serve(s.metrics_cache(), s.pools, Chain::Polygon, r))
    }),
];

async fn serve(
    cache: &MetricsCache,
    pools: &Pools,
    chain: Chain,
    req: &Request<'_>,
) -> Result<Reply, ApiError> {
    let host = resolve(
        chain,
        pools,
        req.path,
        req.path_suspicious,
        req.tail(),
        req.key(),
    )?;
    let (body, cached) = cache.get(host, req.request_id).await?;
    let mut reply = Reply::json(200, body).served_by(Some(host.id.clone()));
    reply.content_type = Some("text/plain; version=0.0.4; charset=utf-8");
    Ok(reply.with_headers(vec![("X-Cache-Status", cached.to_string().into())]))
}

/// Stream-envelope error of the mirror.
fn err(status: u16, code: &'static str, message: impl Into<String>) -> ApiError {
    ApiError::new(status, code, message)
}

/// The checks before any scrape, in SPEC's order; returns the host and its layer.
pub fn resolve<'p>(
    chain: Chain,
    pools: &'p Pools,
    raw_path: &str,
    suspicious: bool,
    tail: &str,
    key: Option<&KeyRecord>,
) -> Result<&'p Arc<Host>, ApiError> {
    if is_pprof(raw_path) {
        return Err(err(
            404,
            "pprof_not_allowed",
            "profiling endpoints are never mirrored",
        ));
    }
    let segs: Vec<&str> = tail.split('/').filter(|s| !s.is_empty()).collect();
    if suspicious || segs.len() != 2 {
        return Err(err(
            404,
            "invalid_path",
            "expected exactly two segments: {host_id}/{layer}",
        ));
    }
    let (host_id, layer) = (segs[0], segs[1].to_ascii_lowercase());
    if !chain.layers().contains(&layer.as_str()) {
        return Err(err(404, "unknown_layer", format!("unknown layer {layer}")));
    }
    let (pool_name, feature) = chain.pool_and_feature(&layer);
    if let Some(f) = feature {
        if !key.is_some_and(|k| k.features.iter().any(|x| x == f)) {
            return Err(err(
                403,
                "tier_locked",
                format!("plan lacks the feature {f}"),
            ));
        }
    }
    let pool = pools
        .get(pool_name)
        .ok_or_else(|| err(503, "pool_not_configured", format!("no {pool_name} pool")))?;
    let host = pool.host(host_id).ok_or_else(|| {
        err(
            404,
            "unknown_host",
            format!("no host {host_id} in {pool_name}"),
        )
    })?;
    if host.family != layer {
        return Err(err(
            400,
            "family_mismatch",
            format!("host {host_id} runs {}, not {layer}", host.family),
        ));
    }
    if !host.has("metrics") || host.metrics.is_none() {
        return Err(err(
            403,
            "capability_missing",
            format!("host {host_id} does not publish metrics"),
        ));
    }
    Ok(host)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn eth_layers_are_the_ten_el_and_cl_families() {
        assert_eq!(ETH_LAYERS.len(), 10);
        assert!(ETH_LAYERS
            .iter()
            .all(|l| l.starts_with("el-") || l.starts_with("cl-")));
        assert!(!ETH_LAYERS.contains(&"el-anvil"));
    }

    #[test]
    fn pprof_in_any_spelling() {
        for p in [
            "/v1/eth/metrics/h/el-geth/debug/pprof/",
            "/v1/eth/metrics/h/el-geth/debug/pprof",
            "/v1/eth/metrics/h//debug//pprof/heap",
            "/v1/eth/metrics/h/%64ebug/%70prof/",
            "/v1/eth/metrics/h%2Fdebug%2Fpprof",
            "/v1/eth/metrics/h%252Fdebug%252Fpprof",
            "/v1/eth/metrics/h/DEBUG/PProf/",
            "/v1/eth/metrics/h\\debug\\pprof",
        ] {
            assert!(is_pprof(p), "{p}");
        }
        for p in [
            "/v1/eth/metrics/h/el-geth",
            "/v1/eth/metrics/debug/el-geth",
            "/v1/eth/metrics/pprof/debug",
        ] {
            assert!(!is_pprof(p), "{p}");
        }
    }
}

//! The `pools:` section checked: known pool names, unique host ids, parseable URLs,
//! known client families, valid header names, and each host's headers resolved from
//! their secret references (what `Loaded::host_headers` holds).

use super::secrets::Secret;
use super::{AppConfig, FAMILIES, POOL_NAMES};
use std::collections::BTreeMap;

/// Per pool, per host: the resolved extra headers. Problems go to `bad(key, reason)`.
pub(super) fn check_pools(
    app: &AppConfig,
    bad: &mut impl FnMut(&str, String),
) -> BTreeMap<String, Vec<Vec<(String, Secret)>>> {
    let mut host_headers = BTreeMap::new();
    for (name, pool) in &app.pools {
        if !POOL_NAMES.contains(&name.as_str()) {
            bad(
                &format!("pools.{name}"),
                format!("unknown pool; pools are {POOL_NAMES:?}"),
            );
        }
        for m in pool.methods.allow.iter().chain(&pool.methods.deny) {
            if let Err(why) = crate::rpc::methods::check_listed_method(m) {
                bad(&format!("pools.{name}.methods"), format!("'{m}': {why}"));
            }
        }
        if let Some(m) = pool.methods.allow.intersection(&pool.methods.deny).next() {
            bad(
                &format!("pools.{name}.methods"),
                format!("'{m}' is both allowed and denied"),
            );
        }
        let mut ids = Vec::new();
        let mut pool_headers = Vec::new();
        for (i, h) in pool.hosts.iter().enumerate() {
            let key = |k: &str| format!("pools.{name}.hosts[{i}].{k}");
            if ids.contains(&&h.id) {
                bad(
                    &key("id"),
                    format!("host id '{}' is used twice in this pool", h.id),
                );
            }
            ids.push(&h.id);
            if let Err(e) = crate::address::HostAddr::parse(&h.url) {
                bad(&key("url"), e);
            }
            if let Some(w) = &h.ws_url {
                if let Err(e) = crate::address::HostAddr::parse_ws(w) {
                    bad(&key("ws_url"), e);
                }
            }
            if let Some(m) = &h.metrics_url {
                if let Err(e) = crate::address::HostAddr::parse(m) {
                    bad(&key("metrics_url"), e);
                }
            }
            if let Some(r) = &h.rpc_url {
                if h.family != "heimdall" {
                    bad(
                        &key("rpc_url"),
                        "only a heimdall host has a Tendermint RPC of its own".into(),
                    );
                } else if let Err(e) = crate::address::HostAddr::parse(r) {
                    bad(&key("rpc_url"), e);
                }
            }
            if h.capabilities.iter().any(|c| c == "metrics") && h.metrics_url.is_none() {
                bad(
                    &key("metrics_url"),
                    "a host with the metrics capability needs a metrics_url".into(),
                );
            }
            if !FAMILIES.contains(&h.family.as_str()) {
                bad(
                    &key("family"),
                    format!(
                        "unknown client family '{}'; families are {FAMILIES:?}",
                        h.family
                    ),
                );
            }
            let mut resolved = Vec::new();
            for (hn, r) in &h.headers {
                if http::HeaderName::from_bytes(hn.as_bytes()).is_err() {
                    bad(
                        &key(&format!("headers.{hn}")),
                        "not a valid header name".into(),
                    );
                }
                match r.resolve() {
                    Ok(s) => resolved.push((hn.clone(), s)),
                    Err(e) => bad(&key(&format!("headers.{hn}")), e),
                }
            }
            pool_headers.push(resolved);
        }
        host_headers.insert(name.clone(), pool_headers);
    }
    host_headers
}

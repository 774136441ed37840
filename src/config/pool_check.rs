//! The `pools:` section checked: known pool names, unique host ids, parseable URLs,
//! known client families, valid header names, and each host's headers and URL path key
//! resolved from their secret references (what `Loaded::host_secrets` holds).

use super::secrets::Secret;
use super::{AppConfig, FAMILIES, POOL_NAMES};
pub use crate::address::URL_KEY_PLACE;
use std::collections::BTreeMap;

/// One host's secrets, resolved.
#[derive(Debug, Clone, Default)]
pub struct HostSecrets {
    /// Extra headers sent to the host (name, value).
    pub headers: Vec<(String, Secret)>,
    /// The provider key that takes the place of `{key}` in the host's URLs.
    pub url_key: Option<Secret>,
}

/// Hosts in one pool (each is a selection token numbered in 16 bits, `pools::Rotation`).
const MAX_HOSTS: usize = 1024;

/// Per pool, per host: the resolved secrets. Problems go to `bad(key, reason)`.
/// For `Purpose::Operate` the secrets are not read (the CLI sends nothing to nodes).
pub(super) fn check_pools(
    app: &AppConfig,
    purpose: super::Purpose,
    bad: &mut impl FnMut(&str, String),
) -> BTreeMap<String, Vec<HostSecrets>> {
    let serving = purpose == super::Purpose::Serve;
    let mut host_headers = BTreeMap::new();
    for (name, pool) in &app.pools {
        if !POOL_NAMES.contains(&name.as_str()) {
            bad(
                &format!("pools.{name}"),
                format!("unknown pool; pools are {POOL_NAMES:?}"),
            );
        }
        for m in pool.methods.allow.iter().chain(&pool.methods.deny) {
            if let Err(why) = crate::jsonrpc::methods::check_listed_method(m) {
                bad(&format!("pools.{name}.methods"), format!("'{m}': {why}"));
            }
        }
        if pool.hosts.len() > MAX_HOSTS {
            bad(
                &format!("pools.{name}.hosts"),
                format!("a pool has at most {MAX_HOSTS} hosts"),
            );
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
            if !is_host_id(&h.id) {
                bad(
                    &key("id"),
                    format!(
                        "'{}': a host id is 1 to 64 of A-Z a-z 0-9 . _ : - and does not start with '.' (it is a path segment of the API)",
                        h.id
                    ),
                );
            }
            check_host(h, &key, bad);
            let mut resolved = Vec::new();
            for (hn, r) in &h.headers {
                if http::HeaderName::from_bytes(hn.as_bytes()).is_err() {
                    bad(
                        &key(&format!("headers.{hn}")),
                        "not a valid header name".into(),
                    );
                }
                if !serving {
                    continue;
                }
                match r.resolve() {
                    Ok(s) => resolved.push((hn.clone(), s)),
                    Err(e) => bad(&key(&format!("headers.{hn}")), e),
                }
            }
            let url_key = check_url_key(h, serving, &key, bad);
            pool_headers.push(HostSecrets {
                headers: resolved,
                url_key,
            });
        }
        host_headers.insert(name.clone(), pool_headers);
    }
    host_headers
}

/// One host's addresses, weight, capabilities and family.
fn check_host(
    h: &super::HostConf,
    key: &impl Fn(&str) -> String,
    bad: &mut impl FnMut(&str, String),
) {
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
    if !(1..=100).contains(&h.weight) {
        bad(&key("weight"), "a weight is 1 to 100".into());
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
}

/// `url_key` and the `{key}` place in the host's URLs go together; the key resolves and
/// is one plain path segment (it cannot add a segment, a query or a fragment).
fn check_url_key(
    h: &super::HostConf,
    serving: bool,
    key: &impl Fn(&str) -> String,
    bad: &mut impl FnMut(&str, String),
) -> Option<Secret> {
    let urls = [
        Some(&h.url),
        h.ws_url.as_ref(),
        h.rpc_url.as_ref(),
        h.metrics_url.as_ref(),
    ];
    let placed = urls.iter().flatten().any(|u| u.contains(URL_KEY_PLACE));
    match (&h.url_key, placed) {
        (None, false) => None,
        (None, true) => {
            bad(
                &key("url_key"),
                format!(
                    "a URL has {URL_KEY_PLACE} but the host has no url_key (a secret reference)"
                ),
            );
            None
        }
        (Some(_), false) => {
            bad(
                &key("url_key"),
                format!("set, but no URL of this host has {URL_KEY_PLACE} to put it in"),
            );
            None
        }
        (Some(_), true) if !serving => None,
        (Some(r), true) => match r.resolve() {
            Ok(s) if is_path_segment(s.expose()) => Some(s),
            Ok(_) => {
                bad(
                    &key("url_key"),
                    "the key must be one path segment: letters, digits, '-', '_', '.', '~'".into(),
                );
                None
            }
            Err(e) => {
                bad(&key("url_key"), e);
                None
            }
        },
    }
}

fn is_path_segment(v: &str) -> bool {
    !v.is_empty()
        && v.len() <= 256
        && v.bytes()
            .all(|b| b.is_ascii_alphanumeric() || matches!(b, b'-' | b'_' | b'.' | b'~'))
        && v != "."
        && v != ".."
}

/// What a host id may be: it is a path segment of `/v1/*/metrics/{host_id}/…`,
/// `/v1/eth/mesh/rpc/{host_id}` and the MEV-cache routes, so nothing a path refuses.
pub fn is_host_id(id: &str) -> bool {
    (1..=64).contains(&id.len())
        && !id.starts_with('.')
        && id
            .bytes()
            .all(|b| b.is_ascii_alphanumeric() || matches!(b, b'.' | b'_' | b':' | b'-'))
}

#[cfg(test)]
mod tests {
    use super::super::{load, Purpose};
    use super::is_host_id;

    #[test]
    fn host_ids_are_plain_path_segments() {
        for ok in ["el-geth-1", "a", "cl_teku:2", "x.y"] {
            assert!(is_host_id(ok), "{ok}");
        }
        for bad in [
            "",
            ".",
            "..",
            ".hidden",
            "a/b",
            "a\\b",
            "a b",
            "é",
            &"x".repeat(65),
        ] {
            assert!(!is_host_id(bad), "{bad}");
        }
    }

    /// The problems `-t` reports for a configuration with these pools.
    fn problems(pools: &str) -> String {
        let dir = std::env::temp_dir().join(format!("chainedge-pool-check-{}", std::process::id()));
        std::fs::create_dir_all(&dir).unwrap();
        let path = dir.join("app.yaml");
        std::fs::write(
            &path,
            format!(
                "plugins: {}/plugins\nlisten:\n  http: [\"127.0.0.1:1\"]\nmetrics:\n  listen: \"127.0.0.1:1\"\nstore:\n  path: /nonexistent/store.db\nplans: [free]\npools:\n{pools}",
                env!("CARGO_MANIFEST_DIR")
            ),
        )
        .unwrap();
        let out = match load(&path, Purpose::Operate) {
            Ok(_) => String::new(),
            Err(errors) => errors
                .iter()
                .map(|e| e.to_string())
                .collect::<Vec<_>>()
                .join("\n"),
        };
        let _ = std::fs::remove_dir_all(&dir);
        out
    }

    #[test]
    fn a_host_weight_is_one_to_a_hundred() {
        let host = |w: &str| {
            format!("  eth_el:\n    hosts:\n      - {{id: a, url: \"http://127.0.0.1:8545\", family: el-anvil{w}}}\n")
        };
        assert!(
            !problems(&host("")).contains("weight"),
            "{}",
            problems(&host(""))
        );
        assert!(!problems(&host(", weight: 100")).contains("weight"));
        for bad in [", weight: 0", ", weight: 101"] {
            let out = problems(&host(bad));
            assert!(
                out.contains("pools.eth_el.hosts[0].weight: a weight is 1 to 100"),
                "{out}"
            );
        }
    }
}

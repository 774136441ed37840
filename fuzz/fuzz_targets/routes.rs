//! The route classifier over the real `plugins/` manifests: path normalisation, the
//! segment trie for every method, and the beacon and relay path checks. None may panic;
//! a match binds every parameter of its route; the beacon and relay checks never pass
//! traversal or header-splitting characters upstream.
#![no_main]

use chainedge::config;
use chainedge::parsers::{beacon_policy, channel_traits, handler_names, load_routes, relay_check, Match, Matcher, NormalizedPath, RouteContext};
use libfuzzer_sys::fuzz_target;
use std::sync::OnceLock;

fn matcher() -> &'static Matcher {
    static M: OnceLock<Matcher> = OnceLock::new();
    M.get_or_init(|| {
        let plans: Vec<String> = ["free", "basic", "pro", "business", "enterprise", "scale"]
            .map(String::from)
            .to_vec();
        let pools = config::POOL_NAMES.to_vec();
        let handlers = handler_names();
        let channels = channel_traits();
        let ctx = RouteContext {
            plans: &plans,
            handlers: &handlers,
            channels: &channels,
            pools: &pools,
            switches: config::SWITCHES,
            base_edge: true,
        };
        let dir = std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("../plugins");
        load_routes(&dir, &ctx).unwrap_or_else(|_| panic!("plugins/ did not load"))
    })
}

const METHODS: &[&str] = &["GET", "POST", "PUT", "DELETE", "PATCH", "HEAD", "OPTIONS", "BREW"];

fuzz_target!(|data: &[u8]| {
    let Some((&selector, rest)) = data.split_first() else {
        return;
    };
    let raw = String::from_utf8_lossy(rest);
    let method = METHODS[selector as usize % METHODS.len()];
    let upgrade = selector & 0x80 != 0;
    let path = NormalizedPath::parse(&raw);
    if let Match::Found { route, params } = matcher().find(method, &path, upgrade) {
        assert_eq!(params.len(), route.param_names.len(), "{raw:?} on {}", route.path);
        let _ = route.has_tail();
    }
    // The edge hands the beacon check the path without its query, as Pingora parsed it.
    let path_only = raw.split(['?', '#']).next().unwrap_or("");
    if let Ok((upstream_path, _)) = beacon_policy(path_only, "/rpc/eth-beacon") {
        let traversal = upstream_path.split('/').any(|s| s == "." || s == "..");
        assert!(!traversal, "{raw:?} -> {upstream_path:?}");
        assert!(!upstream_path.contains("//"), "{raw:?} -> {upstream_path:?}");
    }
    let (p, q) = match raw.split_once('?') {
        Some((p, q)) => (p, Some(q)),
        None => (&*raw, None),
    };
    let p = p.strip_prefix("/v1/eth/mev/relay/").unwrap_or(p);
    if let Ok(forwarded) = relay_check(p, q) {
        assert!(!forwarded.contains(['\r', '\n', ' ', '#']), "{forwarded:?}");
    }
});

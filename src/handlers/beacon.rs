//! The beacon REST proxy's per-path policy: which plan, which client families and which
//! rate category each group of the standard beacon API needs, and path checks that run
//! before a route is chosen.

use crate::errors::ApiError;

/// What one group of beacon paths requires.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct BeaconPolicy {
    pub group: &'static str,
    pub min_plan: &'static str,
    /// Client families that serve this group; `None` = every CL client.
    pub families: Option<&'static [&'static str]>,
    pub rate: &'static str,
    /// A long-lived stream (events): no read timeout, no compression.
    pub stream: bool,
}

const ANY: Option<&[&str]> = None;
/// Clients that implement the light-client endpoints.
const LIGHT_CLIENT_SERVERS: &[&str] = &["cl-lighthouse", "cl-nimbus", "cl-lodestar", "cl-teku"];

/// First match wins; more specific prefixes come first.
const POLICIES: &[(&str, BeaconPolicy)] = &[
    (
        "eth/v1/events",
        BeaconPolicy {
            group: "events",
            min_plan: "basic",
            families: ANY,
            rate: "eth_beacon",
            stream: true,
        },
    ),
    (
        "eth/v1/beacon/blob_sidecars/",
        BeaconPolicy {
            group: "blob_sidecars",
            min_plan: "pro",
            families: ANY,
            rate: "eth_beacon_blobs",
            stream: false,
        },
    ),
    (
        "eth/v1/beacon/blobs/",
        BeaconPolicy {
            group: "blob_sidecars",
            min_plan: "pro",
            families: ANY,
            rate: "eth_beacon_blobs",
            stream: false,
        },
    ),
    (
        "eth/v1/beacon/light_client/",
        BeaconPolicy {
            group: "light_client",
            min_plan: "basic",
            families: Some(LIGHT_CLIENT_SERVERS),
            rate: "eth_beacon",
            stream: false,
        },
    ),
    (
        "eth/v1/beacon/rewards/",
        BeaconPolicy {
            group: "rewards",
            min_plan: "business",
            families: ANY,
            rate: "eth_beacon_heavy",
            stream: false,
        },
    ),
    (
        "eth/v1/beacon/",
        BeaconPolicy {
            group: "beacon",
            min_plan: "basic",
            families: ANY,
            rate: "eth_beacon",
            stream: false,
        },
    ),
    (
        "eth/v2/beacon/",
        BeaconPolicy {
            group: "beacon",
            min_plan: "basic",
            families: ANY,
            rate: "eth_beacon",
            stream: false,
        },
    ),
    (
        "eth/v3/beacon/",
        BeaconPolicy {
            group: "beacon",
            min_plan: "basic",
            families: ANY,
            rate: "eth_beacon",
            stream: false,
        },
    ),
    (
        "eth/v1/config/",
        BeaconPolicy {
            group: "config",
            min_plan: "basic",
            families: ANY,
            rate: "eth_beacon",
            stream: false,
        },
    ),
    (
        "eth/v1/node/",
        BeaconPolicy {
            group: "node",
            min_plan: "basic",
            families: ANY,
            rate: "eth_beacon",
            stream: false,
        },
    ),
    (
        "eth/v1/validator/",
        BeaconPolicy {
            group: "validator",
            min_plan: "pro",
            families: ANY,
            rate: "eth_beacon",
            stream: false,
        },
    ),
    (
        "eth/v2/validator/",
        BeaconPolicy {
            group: "validator",
            min_plan: "pro",
            families: ANY,
            rate: "eth_beacon",
            stream: false,
        },
    ),
    (
        "eth/v3/validator/",
        BeaconPolicy {
            group: "validator",
            min_plan: "pro",
            families: ANY,
            rate: "eth_beacon",
            stream: false,
        },
    ),
    (
        "eth/v1/debug/",
        BeaconPolicy {
            group: "debug",
            min_plan: "enterprise",
            families: ANY,
            rate: "eth_beacon_heavy",
            stream: false,
        },
    ),
    (
        "eth/v2/debug/",
        BeaconPolicy {
            group: "debug",
            min_plan: "enterprise",
            families: ANY,
            rate: "eth_beacon_heavy",
            stream: false,
        },
    ),
];

/// Rate categories the beacon proxy may charge (for config validation).
pub const RATE_CATEGORIES: &[&str] = &["eth_beacon", "eth_beacon_blobs", "eth_beacon_heavy"];

/// Check the raw request path and find the policy of the beacon path under `prefix`.
/// Refuses traversal, encoded slashes or backslashes, NUL and doubled slashes before
/// any route is chosen.
pub fn policy(raw_path: &str, prefix: &str) -> Result<(String, BeaconPolicy), ApiError> {
    let invalid = || {
        ApiError::new(
            400,
            "invalid_path",
            "beacon paths may not contain '..', '.', '//' or encoded separators",
        )
    };
    let rest = raw_path
        .strip_prefix(prefix)
        .ok_or_else(ApiError::route_not_found)?;
    let rest = rest.strip_prefix('/').unwrap_or(rest);
    let lower = rest.to_ascii_lowercase();
    if rest.contains("//")
        || rest.contains('\\')
        || ["%2f", "%5c", "%00", "%2e"]
            .iter()
            .any(|e| lower.contains(e))
        || rest.split('/').any(|s| s == "." || s == "..")
    {
        return Err(invalid());
    }
    if rest.is_empty() || !rest.bytes().all(|b| b.is_ascii_graphic()) {
        return Err(invalid());
    }
    let with_slash = format!("{rest}/");
    POLICIES
        .iter()
        .find(|(p, _)| with_slash.starts_with(p) || rest == p.trim_end_matches('/'))
        .map(|(_, pol)| (rest.to_string(), *pol))
        .ok_or_else(|| {
            ApiError::new(
                404,
                "route_not_found",
                "not a standard beacon API path served here",
            )
        })
}

#[cfg(test)]
mod tests {
    use super::*;

    const P: &str = "/rpc/eth-beacon";

    #[test]
    fn groups_and_refusals() {
        let (rest, p) = policy("/rpc/eth-beacon/eth/v1/beacon/blob_sidecars/head", P).unwrap();
        assert_eq!(
            (rest.as_str(), p.group, p.min_plan),
            ("eth/v1/beacon/blob_sidecars/head", "blob_sidecars", "pro")
        );
        assert_eq!(
            policy("/rpc/eth-beacon/eth/v1/events", P).unwrap().1.group,
            "events"
        );
        assert!(policy("/rpc/eth-beacon/eth/v1/events", P).unwrap().1.stream);
        assert_eq!(
            policy("/rpc/eth-beacon/eth/v1/node/syncing", P)
                .unwrap()
                .1
                .group,
            "node"
        );
        assert_eq!(
            policy("/rpc/eth-beacon/eth/v2/debug/beacon/states/head", P)
                .unwrap()
                .1
                .min_plan,
            "enterprise"
        );
        assert_eq!(
            policy(
                "/rpc/eth-beacon/eth/v1/beacon/light_client/bootstrap/0x00",
                P
            )
            .unwrap()
            .1
            .families,
            Some(LIGHT_CLIENT_SERVERS)
        );
        for bad in [
            "/rpc/eth-beacon/eth/v1/../v1/node/syncing",
            "/rpc/eth-beacon/eth/v1//node/syncing",
            "/rpc/eth-beacon/eth/v1/node%2Fsyncing",
            "/rpc/eth-beacon/eth/v1/node/%2e%2e/x",
            "/rpc/eth-beacon/eth/v1/./node/syncing",
            "/rpc/eth-beacon/eth/v1/node\\syncing",
        ] {
            assert_eq!(policy(bad, P).unwrap_err().code, "invalid_path", "{bad}");
        }
        assert_eq!(
            policy("/rpc/eth-beacon/admin/peers", P).unwrap_err().code,
            "route_not_found"
        );
    }

    /// From fuzzing (fuzz/run.sh routes): dots inside a segment are a name, not a
    /// traversal, and pass through unchanged; only a whole `.`/`..` segment is refused.
    #[test]
    fn dots_inside_a_segment_are_not_traversal() {
        let (rest, _) = policy("/rpc/eth-beacon/eth/v2/beacon/blocks/TT..TT", P).unwrap();
        assert_eq!(rest, "eth/v2/beacon/blocks/TT..TT");
        let bad = "/rpc/eth-beacon/eth/v2/beacon/blocks/TT/../x";
        assert_eq!(policy(bad, P).unwrap_err().code, "invalid_path");
    }
}

//! MEV relay data API passthrough (`GET /v1/eth/mev/relay/{relay path}`): only the three
//! public data endpoints, with the relay API's own parameter rules checked at the edge so
//! a bad query never costs a relay call.

use crate::errors::ApiError;

const PAYLOADS: &str = "relay/v1/data/bidtraces/proposer_payload_delivered";
const BLOCKS: &str = "relay/v1/data/bidtraces/builder_blocks_received";
const REGISTRATION: &str = "relay/v1/data/validator_registration";

fn invalid(msg: String) -> ApiError {
    ApiError::invalid_params(msg)
}

fn is_uint(v: &str) -> bool {
    !v.is_empty() && v.len() <= 20 && v.bytes().all(|b| b.is_ascii_digit())
}

fn is_hex(v: &str, bytes: usize) -> bool {
    v.strip_prefix("0x")
        .is_some_and(|h| h.len() == bytes * 2 && h.bytes().all(|b| b.is_ascii_hexdigit()))
}

/// Validate the path and query; returns the path (with query) to send to a relay.
pub fn check(relay_path: &str, query: Option<&str>) -> Result<String, ApiError> {
    let path = relay_path.trim_matches('/');
    let allowed: &[&str] = match path {
        PAYLOADS => &["slot", "cursor", "block_hash", "block_number", "proposer_pubkey", "builder_pubkey", "limit", "order_by"],
        BLOCKS => &["slot", "block_hash", "block_number", "builder_pubkey", "limit"],
        REGISTRATION => &["pubkey"],
        _ => {
            return Err(ApiError::new(
                404,
                "route_not_found",
                "relay data paths: proposer_payload_delivered, builder_blocks_received, validator_registration",
            ))
        }
    };
    let mut seen: Vec<(&str, &str)> = Vec::new();
    for pair in query.unwrap_or("").split('&').filter(|p| !p.is_empty()) {
        let (k, v) = pair.split_once('=').unwrap_or((pair, ""));
        if !allowed.contains(&k) {
            return Err(invalid(format!("unknown parameter {k} for this endpoint")));
        }
        if seen.iter().any(|(s, _)| *s == k) {
            return Err(invalid(format!("parameter {k} given twice")));
        }
        let ok = match k {
            "slot" | "cursor" | "block_number" | "limit" => is_uint(v),
            "block_hash" => is_hex(v, 32),
            "proposer_pubkey" | "builder_pubkey" | "pubkey" => is_hex(v, 48),
            "order_by" => v == "value" || v == "-value",
            _ => false,
        };
        if !ok {
            return Err(invalid(format!("bad value for {k}")));
        }
        seen.push((k, v));
    }
    let has = |k: &str| seen.iter().any(|(s, _)| *s == k);
    let limit = seen
        .iter()
        .find(|(k, _)| *k == "limit")
        .and_then(|(_, v)| v.parse::<u64>().ok());
    match path {
        PAYLOADS => {
            if has("slot") && has("cursor") {
                return Err(invalid("slot and cursor cannot be combined".into()));
            }
            if limit.is_some_and(|l| l > 200) {
                return Err(invalid("limit is at most 200".into()));
            }
        }
        BLOCKS => {
            if limit.is_some_and(|l| l > 500) {
                return Err(invalid("limit is at most 500".into()));
            }
            if !["slot", "block_hash", "block_number", "builder_pubkey"]
                .iter()
                .any(|k| has(k))
            {
                return Err(invalid(
                    "one of slot, block_hash, block_number or builder_pubkey is required".into(),
                ));
            }
        }
        _ => {
            if !has("pubkey") {
                return Err(invalid("pubkey is required".into()));
            }
        }
    }
    Ok(match query.filter(|q| !q.is_empty()) {
        Some(q) => format!("{path}?{q}"),
        None => path.to_string(),
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn relay_parameter_rules() {
        assert_eq!(
            check(PAYLOADS, Some("limit=10&order_by=-value")).unwrap(),
            format!("{PAYLOADS}?limit=10&order_by=-value")
        );
        assert!(check(PAYLOADS, Some("slot=1&cursor=2")).is_err());
        assert!(check(PAYLOADS, Some("limit=201")).is_err());
        assert!(check(PAYLOADS, Some("order_by=gas")).is_err());
        assert!(check(BLOCKS, None).is_err());
        assert!(check(BLOCKS, Some("slot=5&limit=500")).is_ok());
        assert!(check(BLOCKS, Some("cursor=5")).is_err());
        assert!(check(BLOCKS, Some("block_hash=0x12")).is_err());
        assert!(check(REGISTRATION, None).is_err());
        let pk = format!("0x{}", "ab".repeat(48));
        assert!(check(REGISTRATION, Some(&format!("pubkey={pk}"))).is_ok());
        assert_eq!(
            check("relay/v1/builder/blocks", None).unwrap_err().status,
            404
        );
        assert!(check(PAYLOADS, Some("slot=1&slot=2")).is_err());
    }
}

//! Heimdall queries, normalised into product resources: `GET /v1/polygon/checkpoints/{id}`,
//! `GET /v1/polygon/spans/{id}`, `GET /v1/polygon/validators/current`.
//!
//! Read from the `polygon_heimdall` pool's REST API (Cosmos LCD), in either generation:
//! heimdall v1 answers `{"height", "result": {...}}` with numbers as JSON numbers and
//! camel-case validator fields (`/checkpoints/{id}`, `/bor/span/{id}`,
//! `/staking/validator-set`); heimdall-v2 answers `{"checkpoint"|"span"|"validator_set":
//! {...}}` with 64-bit numbers as strings and bytes as base64 (`/checkpoints/{id}`,
//! `/bor/spans/{id}`, `/stake/validators-set`). Both become the same resource.
//!
//! Ids are checked before any node is called (decimal, 1 to 2^63−1: 400 `invalid_params`);
//! a node's 404 is the id's (404 `not_found`); any other failure moves on to the next
//! healthy host, and when none answers, 502 `upstream_unavailable`.

use super::rest_read::first_answer;
use super::Request;
use crate::errors::ApiError;
use crate::pools::{Host, Pool, Service};
use crate::reply::Reply;
use crate::upstream::UpstreamClient;
use base64::Engine;
use serde_json::{json, Map, Value};
use std::time::Duration;

const TIMEOUT: Duration = Duration::from_secs(5);
/// Largest answer read (a validator set of a few hundred entries is well below it).
const MAX_ANSWER: usize = 4 << 20;

pub const HANDLERS: &[super::Handler] = &[
    super::Handler::new("polygon_checkpoint", |s, r| {
        Box::pin(serve(s, Resource::Checkpoint, r))
    })
    .pool("polygon_heimdall"),
    super::Handler::new("polygon_span", |s, r| Box::pin(serve(s, Resource::Span, r)))
        .pool("polygon_heimdall"),
    super::Handler::new("polygon_validators", |s, r| {
        Box::pin(serve(s, Resource::Validators, r))
    })
    .pool("polygon_heimdall"),
];

/// What a heimdall route asks for.
#[derive(Clone, Copy)]
enum Resource {
    Checkpoint,
    Span,
    Validators,
}

/// The parameters checked first (400 whether or not heimdall is configured), then the
/// resource asked of the pool's hosts and put in SPEC's shape.
async fn serve(
    services: &super::Services<'_>,
    resource: Resource,
    req: &Request<'_>,
) -> Result<Reply, ApiError> {
    let (paths, what): (Vec<String>, &str) = match resource {
        Resource::Checkpoint => {
            let id = id_param(req, 1)?;
            (vec![format!("checkpoints/{id}")], "checkpoint")
        }
        Resource::Span => {
            // Span 0 is bor's first (blocks 0-255); checkpoints count from 1.
            let id = id_param(req, 0)?;
            (
                vec![format!("bor/spans/{id}"), format!("bor/span/{id}")],
                "span",
            )
        }
        Resource::Validators => (
            vec![
                "stake/validators-set".into(),
                "staking/validator-set".into(),
            ],
            "validator set",
        ),
    };
    let (client, pool) = (&services.gateway.client, services.pool()?);
    let (answer, host) = fetch(client, pool, &paths, what, req.request_id).await?;
    let resource = match resource {
        Resource::Checkpoint => checkpoint(&answer),
        Resource::Span => span(&answer),
        Resource::Validators => validator_set(&answer),
    }
    .ok_or_else(|| {
        ApiError::new(
            502,
            "upstream_unavailable",
            format!("heimdall's {what} is not in a known shape"),
        )
    })?;
    Ok(Reply::json(200, resource.to_string()).served_by(Some(host)))
}

/// Tendermint RPC's endpoints (CometBFT 0.34–0.38), by the path's first segment.
const TENDERMINT_RPC: &[&str] = &[
    "abci_info",
    "abci_query",
    "block",
    "block_by_hash",
    "block_results",
    "block_search",
    "blockchain",
    "broadcast_evidence",
    "broadcast_tx_async",
    "broadcast_tx_commit",
    "broadcast_tx_sync",
    "check_tx",
    "commit",
    "consensus_params",
    "consensus_state",
    "dump_consensus_state",
    "genesis",
    "genesis_chunked",
    "header",
    "header_by_hash",
    "health",
    "net_info",
    "num_unconfirmed_txs",
    "status",
    "tx",
    "tx_search",
    "unconfirmed_txs",
    "validators",
    "websocket",
];

/// Which of a heimdall's services a consensus-proxy request is for: Tendermint RPC
/// (its endpoints, and JSON-RPC POSTed to its root), Prometheus (`metrics`), or else the
/// Cosmos LCD at the host's `url`.
pub fn service_of(method: &str, tail: &str) -> Service {
    let first = tail.split(['/', '?']).next().unwrap_or("");
    if first.is_empty() && method == "POST" {
        Service::Rpc
    } else if first == "metrics" {
        Service::Metrics
    } else if TENDERMINT_RPC.contains(&first) {
        Service::Rpc
    } else {
        Service::Main
    }
}

fn id_param(req: &Request<'_>, lowest: u64) -> Result<u64, ApiError> {
    let raw = req.params.first().map(String::as_str).unwrap_or("");
    raw.parse::<u64>()
        .ok()
        .filter(|n| {
            (lowest..=i64::MAX as u64).contains(n) && raw.bytes().all(|b| b.is_ascii_digit())
        })
        .ok_or_else(|| {
            ApiError::invalid_params(format!("id must be a decimal integer from {lowest}"))
        })
}

/// The first healthy host that answers; on each, the paths in order (v2, then v1) until
/// one is not a 404 for the path itself.
async fn fetch(
    client: &UpstreamClient,
    pool: &Pool,
    paths: &[String],
    what: &str,
    rid: &str,
) -> Result<(Value, String), ApiError> {
    let missing = ApiError::new(404, "not_found", format!("heimdall has no such {what}"));
    first_answer(pool, "heimdall", missing, |host| async move {
        fetch_from(client, &host, paths, rid).await
    })
    .await
}

/// `Ok(None)`: the host says there is no such object.
async fn fetch_from(
    client: &UpstreamClient,
    host: &Host,
    paths: &[String],
    rid: &str,
) -> Result<Option<Value>, String> {
    let mut not_found = false;
    for rel in paths {
        let path = format!("{}/{rel}", host.addr.path.trim_end_matches('/'));
        let r = client
            .send(
                host.call_on(Service::Main, "GET", &path, rid),
                TIMEOUT,
                MAX_ANSWER,
            )
            .await
            .map_err(|e| e.to_string())?;
        match r.status {
            200 => {
                let v: Value = serde_json::from_slice(&r.body)
                    .map_err(|_| "answer is not JSON".to_string())?;
                // v1 reports a missing object as a 200 with an empty result or an error.
                if v.get("result").is_some_and(Value::is_null) || v.get("error").is_some() {
                    not_found = true;
                    continue;
                }
                return Ok(Some(v));
            }
            // Either this generation has no such path, or no such object: try the other.
            404 | 400 => not_found = true,
            500 if v1_says_missing(&r.body) => not_found = true,
            s => return Err(format!("HTTP {s}")),
        }
    }
    if not_found {
        Ok(None)
    } else {
        Err("no answer".into())
    }
}

/// Heimdall v1's span querier reports a span it does not have as an internal error:
/// HTTP 500 with `{"error": "...span N does not exist..."}` (bor/querier.go). Any other
/// 500 is the host failing.
fn v1_says_missing(body: &[u8]) -> bool {
    serde_json::from_slice::<Value>(body)
        .ok()
        .and_then(|v| {
            v.get("error")?
                .as_str()
                .map(|e| e.contains("does not exist"))
        })
        .unwrap_or(false)
}

/// The object under v1's `result` or v2's named field.
fn inner<'a>(answer: &'a Value, v2: &str) -> Option<&'a Map<String, Value>> {
    answer
        .get(v2)
        .or_else(|| answer.get("result"))
        .and_then(Value::as_object)
}

/// A 64-bit number given as a JSON number or (v2) a string.
fn num(o: &Map<String, Value>, keys: &[&str]) -> Option<i64> {
    keys.iter().find_map(|k| match o.get(*k)? {
        Value::Number(n) => n.as_i64(),
        Value::String(s) => s.parse().ok(),
        _ => None,
    })
}

fn text(o: &Map<String, Value>, keys: &[&str]) -> Option<String> {
    keys.iter()
        .find_map(|k| o.get(*k).and_then(Value::as_str).map(str::to_string))
}

/// Bytes as 0x-hex: v1 gives hex already, v2 base64.
fn hex_bytes(o: &Map<String, Value>, key: &str) -> Option<String> {
    let raw = o.get(key)?.as_str()?;
    if raw.starts_with("0x") {
        return Some(raw.to_ascii_lowercase());
    }
    let bytes = base64::engine::general_purpose::STANDARD.decode(raw).ok()?;
    Some(format!("0x{}", hex::encode(bytes)))
}

fn checkpoint(answer: &Value) -> Option<Value> {
    let c = inner(answer, "checkpoint")?;
    Some(json!({
        "id": num(c, &["id"]),
        "proposer": text(c, &["proposer"])?.to_ascii_lowercase(),
        "start_block": num(c, &["start_block"])?,
        "end_block": num(c, &["end_block"])?,
        "root_hash": hex_bytes(c, "root_hash")?,
        "bor_chain_id": text(c, &["bor_chain_id"]),
        "timestamp": num(c, &["timestamp"]),
    }))
}

fn validator(v: &Value) -> Option<Value> {
    let v = v.as_object()?;
    Some(json!({
        "id": num(v, &["val_id", "ID", "id"])?,
        "signer": text(v, &["signer"])?.to_ascii_lowercase(),
        "voting_power": num(v, &["voting_power", "power"])?,
        "proposer_priority": num(v, &["proposer_priority", "accum"]),
        "start_epoch": num(v, &["start_epoch", "startEpoch"]),
        "end_epoch": num(v, &["end_epoch", "endEpoch"]),
        "jailed": v.get("jailed").and_then(Value::as_bool).unwrap_or(false),
    }))
}

fn validators(list: Option<&Value>) -> Option<Vec<Value>> {
    list?.as_array()?.iter().map(validator).collect()
}

fn span(answer: &Value) -> Option<Value> {
    let s = inner(answer, "span")?;
    let set = s.get("validator_set")?;
    Some(json!({
        "id": num(s, &["id", "span_id"])?,
        "start_block": num(s, &["start_block"])?,
        "end_block": num(s, &["end_block"])?,
        "bor_chain_id": text(s, &["bor_chain_id"]),
        "validators": validators(set.get("validators"))?,
        "selected_producers": validators(s.get("selected_producers"))?,
    }))
}

fn validator_set(answer: &Value) -> Option<Value> {
    let set = inner(answer, "validator_set")?;
    let list = validators(set.get("validators"))?;
    let total: i64 = list.iter().filter_map(|v| v["voting_power"].as_i64()).sum();
    let proposer = set.get("proposer").and_then(validator);
    Some(json!({
        "validators": list,
        "proposer": proposer,
        "total_voting_power": total,
    }))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn v1_and_v2_checkpoints_become_one_resource() {
        let v1 = json!({"height": "100", "result": {"id": 7, "proposer": "0xAB", "start_block": 100,
            "end_block": 355, "root_hash": "0xDEAD", "bor_chain_id": "137", "timestamp": 1700000000}});
        let v2 = json!({"checkpoint": {"id": "7", "proposer": "0xab", "start_block": "100",
            "end_block": "355", "root_hash": "3q0=", "bor_chain_id": "137", "timestamp": "1700000000"}});
        assert_eq!(checkpoint(&v1), checkpoint(&v2));
        assert_eq!(checkpoint(&v1).unwrap()["root_hash"], "0xdead");
        assert!(checkpoint(&json!({"result": {"id": 1}})).is_none());
    }

    #[test]
    fn consensus_proxy_requests_go_to_the_service_that_serves_them() {
        for (method, tail, service) in [
            ("GET", "status", Service::Rpc),
            ("GET", "block?height=5", Service::Rpc),
            ("GET", "validators", Service::Rpc),
            ("POST", "", Service::Rpc),
            ("GET", "metrics", Service::Metrics),
            ("GET", "checkpoints/latest", Service::Main),
            (
                "GET",
                "cosmos/base/tendermint/v1beta1/blocks/latest",
                Service::Main,
            ),
            ("GET", "bor/spans/3", Service::Main),
            ("GET", "", Service::Main),
            ("GET", "statusx", Service::Main),
        ] {
            assert_eq!(service_of(method, tail), service, "{method} {tail}");
        }
    }
}

//! Ethereum network intel: `GET /v1/eth/intel/validator/{validator_index}`, one
//! validator's state from the consensus-layer pool (`eth_cl`), read with the standard
//! beacon API (`/eth/v1/beacon/states/head/validators/{index}`) and mapped to SPEC's
//! validator state.
//!
//! `GET /v1/eth/intel/validator/series`: the capacity series the edge samples itself
//! (`src/capture/capacity.rs` defines the measure), read from the store in bounded ranges.
//!
//! The index is checked first (decimal, 0 to 2^63−1; anything else is SPEC's 404
//! `invalid_params` and reaches no node). A beacon node's 404 means no such validator
//! (the same 404); any other failure moves on to the next healthy host.

use super::rest_read::first_answer;
use super::Request;
use crate::config::FAMILIES;
use crate::errors::ApiError;
use crate::pools::Host;
use crate::reply::Reply;
use crate::store::Store;
use crate::upstream::UpstreamClient;
use serde_json::{json, Value};
use std::time::Duration;

const TIMEOUT: Duration = Duration::from_secs(5);
/// One validator's answer is a few hundred bytes.
const MAX_ANSWER: usize = 64 << 10;
/// The beacon spec's "never": an epoch not scheduled yet.
const FAR_FUTURE_EPOCH: u64 = u64::MAX;

/// SPEC's validator statuses (the beacon API's fine-grained ones).
pub const STATUSES: &[&str] = &[
    "pending_initialized",
    "pending_queued",
    "active_ongoing",
    "active_exiting",
    "active_slashed",
    "exited_unslashed",
    "exited_slashed",
    "withdrawal_possible",
    "withdrawal_done",
];

/// The validator index checked first (400 whether or not a beacon pool is configured),
/// then the validator's state from the pool's beacon nodes.
pub async fn validator(
    services: &super::Services<'_>,
    req: &Request<'_>,
) -> Result<Reply, ApiError> {
    let index = index_param(req.params.first().map(String::as_str).unwrap_or(""))?;
    let (client, pool) = (&services.gateway.client, services.pool()?);
    let missing = ApiError::new(
        404,
        "invalid_params",
        format!("no validator {index} in the head state"),
    );
    let (answer, host) = first_answer(pool, "beacon", missing, |host| async move {
        fetch(client, &host, index, req.request_id).await
    })
    .await?;
    let state = validator_state(&answer).ok_or_else(|| {
        ApiError::new(
            502,
            "upstream_unavailable",
            "the beacon node's validator is not in the standard shape",
        )
    })?;
    Ok(Reply::json(200, state.to_string()).served_by(Some(host)))
}

/// Longest range one request reads: a day of minutes.
pub const MAX_RANGE_SECS: i64 = 24 * 3600;
/// Range when `from` is not given: the last hour.
pub const DEFAULT_RANGE_SECS: i64 = 3600;

/// `GET /v1/eth/intel/validator/series?client=&from=&to=`: per minute in `[from, to)`
/// (Unix seconds, aligned down to the minute; default the last hour, at most a day: a
/// longer span is cut to the day before `to`, and `from >= to` is an empty span), the
/// sum of the hosts' RPS ceilings, all hosts or one client implementation's.
pub async fn series(store: &Store, req: &Request<'_>) -> Result<Reply, ApiError> {
    let client = req.query_param("client");
    if let Some(c) = &client {
        if !(c.starts_with("cl-") && FAMILIES.contains(&c.as_str())) {
            let known: Vec<&str> = FAMILIES
                .iter()
                .copied()
                .filter(|f| f.starts_with("cl-"))
                .collect();
            return Err(ApiError::invalid_params(format!(
                "client is a consensus-layer client: {}",
                known.join(", ")
            )));
        }
    }
    let unix = |name: &str| -> Result<Option<i64>, ApiError> {
        match req.query_param(name) {
            None => Ok(None),
            Some(v) => v
                .parse::<i64>()
                .ok()
                .filter(|n| (0..=i64::MAX / 2).contains(n) && v.bytes().all(|b| b.is_ascii_digit()))
                .map(Some)
                .ok_or_else(|| {
                    ApiError::invalid_params(format!("{name} is a time in Unix seconds"))
                }),
        }
    };
    let now = crate::clock::now();
    let to = unix("to")?.unwrap_or(now + 60) / 60 * 60;
    // As the MEV-cache series: the answer's `from` says what was read.
    let from = (unix("from")?.unwrap_or(to - DEFAULT_RANGE_SECS) / 60 * 60)
        .max(to - MAX_RANGE_SECS)
        .max(0);
    let points = if from < to {
        store
            .capacity_series(from, to, client.as_deref())
            .await
            .map_err(|e| {
                log::warn!("capacity series: {e}");
                ApiError::new(
                    503,
                    "store_unavailable",
                    "the capacity series cannot be read now",
                )
            })?
    } else {
        Vec::new()
    };
    let points: Vec<Value> = points
        .iter()
        .map(|p| {
            json!({"t": p.minute, "rps_ceiling": p.rps_ceiling, "hosts": p.hosts,
                   "requests": p.requests, "failures": p.failures})
        })
        .collect();
    let body = json!({
        "measure": "cl_rps_ceiling",
        "step_secs": 60,
        "client": client,
        "from": from,
        "to": to,
        "points": points,
    });
    Ok(Reply::json(200, body.to_string()))
}

/// `validator_index`: a decimal int64 ≥ 0 (SPEC answers a malformed one with 404).
fn index_param(raw: &str) -> Result<u64, ApiError> {
    let ok = !raw.is_empty() && raw.len() <= 19 && raw.bytes().all(|b| b.is_ascii_digit());
    ok.then(|| raw.parse::<u64>().ok())
        .flatten()
        .filter(|n| *n <= i64::MAX as u64)
        .ok_or_else(|| {
            ApiError::new(
                404,
                "invalid_params",
                "validator_index must be a decimal integer from 0 to 9223372036854775807",
            )
        })
}

/// `Ok(None)`: the node has no such validator.
async fn fetch(
    client: &UpstreamClient,
    host: &Host,
    index: u64,
    rid: &str,
) -> Result<Option<Value>, String> {
    let path = format!(
        "{}/eth/v1/beacon/states/head/validators/{index}",
        host.addr.path.trim_end_matches('/')
    );
    let r = client
        .send(host.call("GET", &path, rid), TIMEOUT, MAX_ANSWER)
        .await
        .map_err(|e| e.to_string())?;
    match r.status {
        200 => serde_json::from_slice(&r.body)
            .map(Some)
            .map_err(|_| "answer is not JSON".to_string()),
        404 => Ok(None),
        s => Err(format!("HTTP {s}")),
    }
}

/// The beacon API's `{"data": {"index", "balance", "status", "validator": {...}}}` as
/// SPEC's validator state. Numbers come as decimal strings; an epoch of 2^64−1 means not
/// scheduled: `exit_epoch` null, `activation_epoch` −1 (SPEC gives it no null).
fn validator_state(answer: &Value) -> Option<Value> {
    let data = answer.get("data")?;
    let v = data.get("validator")?;
    let uint = |x: Option<&Value>| -> Option<u64> {
        match x? {
            Value::String(s) => s.parse().ok(),
            Value::Number(n) => n.as_u64(),
            _ => None,
        }
    };
    let int64 = |n: u64| i64::try_from(n).ok();
    let status = data.get("status")?.as_str()?;
    if !STATUSES.contains(&status) {
        return None;
    }
    let pubkey = v.get("pubkey")?.as_str()?;
    if !(pubkey.len() == 98 && pubkey.starts_with("0x")) {
        return None;
    }
    let activation = uint(v.get("activation_epoch"))?;
    let exit = uint(v.get("exit_epoch"))?;
    Some(json!({
        "validator_index": int64(uint(data.get("index"))?)?,
        "pubkey": pubkey,
        "balance_gwei": int64(uint(data.get("balance"))?)?,
        "effective_balance_gwei": int64(uint(v.get("effective_balance"))?)?,
        "status": status,
        "activation_epoch": if activation == FAR_FUTURE_EPOCH { -1 } else { int64(activation)? },
        "exit_epoch": if exit == FAR_FUTURE_EPOCH { Value::Null } else { json!(int64(exit)?) },
    }))
}

pub const HANDLERS: &[super::Handler] = &[
    super::Handler::new("eth_validator_series", |s, r| {
        Box::pin(series(s.store(), r))
    }),
    super::Handler::new("eth_validator_intel", |s, r| Box::pin(validator(s, r))).pool("eth_cl"),
];

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn indexes_are_decimal_int64() {
        assert_eq!(index_param("0").unwrap(), 0);
        assert_eq!(index_param("9223372036854775807").unwrap(), i64::MAX as u64);
        for bad in [
            "",
            "-1",
            "+1",
            "0x1",
            "1.0",
            "9223372036854775808",
            "abc",
            "1 ",
        ] {
            assert_eq!(index_param(bad).unwrap_err().status, 404, "{bad}");
        }
    }

    #[test]
    fn beacon_validators_become_the_validator_state() {
        let pubkey = format!("0x{}", "a1".repeat(48));
        let far = u64::MAX.to_string();
        let pending = json!({"execution_optimistic": false, "finalized": false, "data": {
            "index": "7", "balance": "32000000000", "status": "pending_queued",
            "validator": {"pubkey": pubkey, "withdrawal_credentials": format!("0x{}", "00".repeat(32)),
                "effective_balance": "32000000000", "slashed": false,
                "activation_eligibility_epoch": "10", "activation_epoch": far,
                "exit_epoch": far, "withdrawable_epoch": far}}});
        let s = validator_state(&pending).unwrap();
        assert_eq!(s["validator_index"], 7);
        assert_eq!(s["activation_epoch"], -1);
        assert!(s["exit_epoch"].is_null());
        let mut exiting = pending.clone();
        exiting["data"]["status"] = json!("active_exiting");
        exiting["data"]["validator"]["activation_epoch"] = json!("5");
        exiting["data"]["validator"]["exit_epoch"] = json!("900");
        let s = validator_state(&exiting).unwrap();
        assert_eq!(
            (s["activation_epoch"].as_i64(), s["exit_epoch"].as_i64()),
            (Some(5), Some(900))
        );
        let mut coarse = pending.clone();
        coarse["data"]["status"] = json!("active");
        assert!(validator_state(&coarse).is_none());
        let mut huge = pending;
        huge["data"]["balance"] = json!(u64::MAX.to_string());
        assert!(validator_state(&huge).is_none());
    }
}

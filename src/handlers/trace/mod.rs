//! Tracing (`POST /v1/polygon/trace/replay-tx`: a mined transaction;
//! `POST /v1/polygon/trace/call`: a call never sent), answered as SPEC's trace envelope
//! `{trace, vmTrace, stateDiff, output}` plus `source`, `block` and `unavailable`.
//!
//! Two sources. Hosts with the `trace` capability are asked `trace_replayTransaction` /
//! `trace_call`, whose answer holds the envelope's parts (only `stateDiff` is rewritten
//! into the envelope's from/to form). Where the pool has none, or they say the method
//! does not exist, the envelope is built from `debug_traceTransaction` /
//! `debug_traceCall` on hosts with the `debug` capability: `callTracer` flattened into
//! trace frames (and the top-level `output`), `prestateTracer` in diff mode into
//! `stateDiff`. A `vmTrace` cannot be built from those tracers; it is then null and
//! `unavailable.vmTrace` says why. Every parameter is checked before any node is called.

mod shapes;

use super::wallet::{address, resolve_block, BlockParam};
use super::Request;
use crate::errors::ApiError;
use crate::handlers::object_body;
use crate::jsonrpc::quantity::quantity;
use crate::jsonrpc::ErrorObject;
use crate::pools::Pool;
use crate::reply::Reply;
use crate::rpc::Gateway;
use serde::Deserialize;
use serde_json::{json, Map, Value};
use shapes::{flatten, state_diff_from_parity, state_diff_from_prestate};

/// The tracers a request may ask for.
pub const TRACERS: [&str; 3] = ["trace", "vmTrace", "stateDiff"];

/// Which parts of the envelope were asked for.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Tracers {
    pub trace: bool,
    pub vm_trace: bool,
    pub state_diff: bool,
}

impl Tracers {
    /// `tracers` as sent (default `[trace]`): a non-empty subset of [`TRACERS`].
    pub fn parse(list: Option<&[String]>) -> Result<Tracers, ApiError> {
        let Some(list) = list else {
            return Ok(Tracers {
                trace: true,
                vm_trace: false,
                state_diff: false,
            });
        };
        if list.is_empty() {
            return Err(ApiError::invalid_params(
                "tracers names at least one of trace, vmTrace, stateDiff",
            ));
        }
        let mut t = Tracers {
            trace: false,
            vm_trace: false,
            state_diff: false,
        };
        for name in list {
            match name.as_str() {
                "trace" => t.trace = true,
                "vmTrace" => t.vm_trace = true,
                "stateDiff" => t.state_diff = true,
                other => {
                    return Err(ApiError::invalid_params(format!(
                        "unknown tracer '{}': tracers are {}",
                        other.chars().take(40).collect::<String>(),
                        TRACERS.join(", ")
                    )))
                }
            }
        }
        Ok(t)
    }

    /// The `trace_*` methods' tracer list.
    fn names(self) -> Vec<&'static str> {
        [
            (self.trace, "trace"),
            (self.vm_trace, "vmTrace"),
            (self.state_diff, "stateDiff"),
        ]
        .into_iter()
        .filter_map(|(on, n)| on.then_some(n))
        .collect()
    }
}

#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
struct ReplayBody {
    tx_hash: String,
    #[serde(default, deserialize_with = "crate::handlers::not_null")]
    tracers: Option<Vec<String>>,
}

/// `POST …/trace/call`: the transaction payload, the block it runs on (a tag or a
/// number, default `latest`) and the tracers.
#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
struct CallBody {
    #[serde(deserialize_with = "crate::handlers::object_member")]
    tx: CallObject,
    #[serde(default, deserialize_with = "crate::handlers::not_null")]
    block: Option<String>,
    #[serde(default, deserialize_with = "crate::handlers::not_null")]
    tracers: Option<Vec<String>>,
}

/// The call as `eth_call` takes it; every member is checked and passed on as given.
#[derive(Deserialize)]
#[serde(deny_unknown_fields, rename_all = "camelCase")]
struct CallObject {
    from: Option<String>,
    to: Option<String>,
    gas: Option<String>,
    gas_price: Option<String>,
    max_fee_per_gas: Option<String>,
    max_priority_fee_per_gas: Option<String>,
    value: Option<String>,
    data: Option<String>,
    input: Option<String>,
}

impl CallObject {
    fn checked(self) -> Result<Value, ApiError> {
        let mut out = Map::new();
        for (name, v) in [("from", self.from), ("to", self.to)] {
            if let Some(v) = v {
                address(&v).map_err(|_| {
                    ApiError::invalid_params(format!("tx.{name} must match ^0x[0-9a-fA-F]{{40}}$"))
                })?;
                out.insert(name.into(), json!(v));
            }
        }
        for (name, v) in [
            ("gas", self.gas),
            ("gasPrice", self.gas_price),
            ("maxFeePerGas", self.max_fee_per_gas),
            ("maxPriorityFeePerGas", self.max_priority_fee_per_gas),
            ("value", self.value),
        ] {
            if let Some(v) = v {
                let digits = v.strip_prefix("0x").unwrap_or("");
                let ok = !digits.is_empty()
                    && digits.len() <= 64
                    && digits.bytes().all(|b| b.is_ascii_hexdigit())
                    && (digits == "0" || !digits.starts_with('0'));
                if !ok {
                    return Err(ApiError::invalid_params(format!(
                        "tx.{name} must be a 0x-hex quantity (no leading zeros, at most 256 bits)"
                    )));
                }
                out.insert(name.into(), json!(v));
            }
        }
        // Two names for one field: which would win is the node's guess; take one only.
        if self.data.is_some() && self.input.is_some() {
            return Err(ApiError::invalid_params(
                "tx.data and tx.input are one field: send one of them",
            ));
        }
        if let Some(data) = self.input.or(self.data) {
            let digits = data.strip_prefix("0x").unwrap_or("x");
            if digits.len() % 2 != 0 || !digits.bytes().all(|b| b.is_ascii_hexdigit()) {
                return Err(ApiError::invalid_params("tx.data must be 0x-prefixed hex"));
            }
            out.insert("data".into(), json!(data));
        }
        if !out.contains_key("to") && !out.contains_key("data") {
            return Err(ApiError::invalid_params(
                "tx needs a `to`, or `data` to create a contract",
            ));
        }
        Ok(Value::Object(out))
    }
}

fn tx_hash(raw: &str) -> Result<&str, ApiError> {
    let ok =
        raw.len() == 66 && raw.starts_with("0x") && raw[2..].bytes().all(|b| b.is_ascii_hexdigit());
    ok.then_some(raw)
        .ok_or_else(|| ApiError::invalid_params("tx_hash must match ^0x[0-9a-fA-F]{64}$"))
}

/// `POST /v1/polygon/trace/replay-tx`.
pub async fn replay_tx(
    gateway: &Gateway,
    pool: &Pool,
    req: &Request<'_>,
) -> Result<Reply, ApiError> {
    let b: ReplayBody = object_body(&req.body)?;
    let hash = tx_hash(&b.tx_hash)?;
    let tracers = Tracers::parse(b.tracers.as_deref())?;
    let rid = req.request_id;
    // Only a mined transaction can be replayed; say which of the two it is not.
    let (tx, _) = gateway
        .read_call(pool, "eth_getTransactionByHash", json!([hash]), rid)
        .await?;
    if tx.is_null() {
        return Err(ApiError::invalid_params(format!(
            "no transaction {hash} is known to the chain"
        )));
    }
    let Some(block) = tx
        .get("blockNumber")
        .and_then(Value::as_str)
        .and_then(quantity)
    else {
        return Err(ApiError::invalid_params(format!(
            "transaction {hash} is not mined yet; trace it with trace/call"
        )));
    };
    let source = Source {
        trace_method: "trace_replayTransaction",
        trace_params: json!([hash, tracers.names()]),
        debug_method: "debug_traceTransaction",
        debug_target: vec![json!(hash)],
    };
    let envelope = trace(gateway, pool, &source, tracers, rid).await?;
    Ok(answer(envelope, block))
}

/// `POST /v1/polygon/trace/call`.
pub async fn call(gateway: &Gateway, pool: &Pool, req: &Request<'_>) -> Result<Reply, ApiError> {
    let b: CallBody = object_body(&req.body)?;
    let call = b.tx.checked()?;
    let tracers = Tracers::parse(b.tracers.as_deref())?;
    let block = BlockParam::parse(b.block.as_deref())?;
    let rid = req.request_id;
    // The tag is pinned to a number first, so every part of the envelope (and a
    // second debug call) sees the same state.
    let (number, at) = resolve_block(gateway, pool, block, rid).await?;
    let source = Source {
        trace_method: "trace_call",
        trace_params: json!([call, tracers.names(), at]),
        debug_method: "debug_traceCall",
        debug_target: vec![call, json!(at)],
    };
    let envelope = trace(gateway, pool, &source, tracers, rid).await?;
    Ok(answer(envelope, number))
}

fn answer(mut envelope: Map<String, Value>, block: u64) -> Reply {
    envelope.insert("block".into(), json!(block));
    Reply::json(200, Value::Object(envelope).to_string())
}

/// The two ways to the same envelope for one request.
struct Source {
    trace_method: &'static str,
    trace_params: Value,
    debug_method: &'static str,
    /// The debug method's parameters before its tracer options.
    debug_target: Vec<Value>,
}

async fn trace(
    gateway: &Gateway,
    pool: &Pool,
    source: &Source,
    tracers: Tracers,
    rid: &str,
) -> Result<Map<String, Value>, ApiError> {
    if !pool.candidates(Some("trace")).is_empty() {
        let (answer, _) = gateway
            .node_call(
                pool,
                Some("trace"),
                source.trace_method,
                source.trace_params.clone(),
                rid,
            )
            .await?;
        match answer {
            Ok(result) => return Ok(from_trace_api(source.trace_method, &result, tracers)),
            Err(e) if !method_missing(&e) => return Err(node_refused(source.trace_method, e)),
            // A host labelled `trace` without this method (anvil serves only some
            // `trace_*`): build the envelope from `debug_*`.
            Err(_) => {}
        }
    }
    if pool.candidates(Some("debug")).is_empty() {
        return Err(ApiError::new(
            503,
            "no_upstream",
            format!(
                "no host in pool {} can trace (needs the trace or debug capability)",
                pool.name
            ),
        ));
    }
    from_debug_api(gateway, pool, source, tracers, rid).await
}

async fn from_debug_api(
    gateway: &Gateway,
    pool: &Pool,
    source: &Source,
    tracers: Tracers,
    rid: &str,
) -> Result<Map<String, Value>, ApiError> {
    let with = |options: Value| {
        let mut params = source.debug_target.clone();
        params.push(options);
        Value::Array(params)
    };
    let calls = gateway.node_call(
        pool,
        Some("debug"),
        source.debug_method,
        with(json!({"tracer": "callTracer"})),
        rid,
    );
    let diff = async {
        if tracers.state_diff {
            let options = json!({"tracer": "prestateTracer", "tracerConfig": {"diffMode": true}});
            Some(
                gateway
                    .node_call(pool, Some("debug"), source.debug_method, with(options), rid)
                    .await,
            )
        } else {
            None
        }
    };
    let (calls, diff) = tokio::join!(calls, diff);
    let top = calls?.0.map_err(|e| node_refused(source.debug_method, e))?;
    let mut envelope = Map::new();
    envelope.insert(
        "output".into(),
        top.get("output").cloned().unwrap_or_else(|| json!("0x")),
    );
    let trace = if tracers.trace {
        let mut frames = Vec::new();
        flatten(&top, &mut Vec::new(), &mut frames);
        Value::Array(frames)
    } else {
        Value::Null
    };
    envelope.insert("trace".into(), trace);
    envelope.insert("vmTrace".into(), Value::Null);
    let state_diff = match diff {
        Some(answer) => {
            let result = answer?
                .0
                .map_err(|e| node_refused(source.debug_method, e))?;
            state_diff_from_prestate(&result)
        }
        None => Value::Null,
    };
    envelope.insert("stateDiff".into(), state_diff);
    envelope.insert("source".into(), json!(source.debug_method));
    let mut unavailable = Map::new();
    if tracers.vm_trace {
        unavailable.insert(
            "vmTrace".into(),
            json!("this pool's hosts serve debug_* but not trace_*; a vmTrace needs trace_replayTransaction or trace_call"),
        );
    }
    envelope.insert("unavailable".into(), Value::Object(unavailable));
    Ok(envelope)
}

/// The envelope from a `trace_*` answer: its parts as the node gave them, `stateDiff`
/// rewritten into from/to.
fn from_trace_api(method: &str, result: &Value, tracers: Tracers) -> Map<String, Value> {
    let part = |on: bool, name: &str| {
        if on {
            result.get(name).cloned().unwrap_or(Value::Null)
        } else {
            Value::Null
        }
    };
    let mut envelope = Map::new();
    envelope.insert("trace".into(), part(tracers.trace, "trace"));
    envelope.insert("vmTrace".into(), part(tracers.vm_trace, "vmTrace"));
    let diff = part(tracers.state_diff, "stateDiff");
    envelope.insert(
        "stateDiff".into(),
        if diff.is_null() {
            diff
        } else {
            state_diff_from_parity(&diff)
        },
    );
    envelope.insert(
        "output".into(),
        result.get("output").cloned().unwrap_or_else(|| json!("0x")),
    );
    envelope.insert("source".into(), json!(method));
    envelope.insert("unavailable".into(), json!({}));
    envelope
}

/// Whether a node's error says it lacks the method (rather than refusing the call).
fn method_missing(e: &ErrorObject) -> bool {
    let m = e.message.to_ascii_lowercase();
    e.code == -32601
        || m.contains("method not found")
        || m.contains("does not exist")
        || m.contains("not supported")
        || m.contains("not available")
}

/// A node's refusal of a trace: the call itself failed (bad state for it, a node
/// limit); the client learns the node's reason.
fn node_refused(method: &str, e: ErrorObject) -> ApiError {
    ApiError::new(
        502,
        "upstream_unavailable",
        format!("{method}: the node answered: {}", e.message),
    )
}

pub const HANDLERS: &[super::Handler] = &[
    super::Handler::new("polygon_trace_replay", |s, r| {
        Box::pin(async move { replay_tx(s.gateway, s.pool()?, r).await })
    })
    .pool("polygon_bor"),
    super::Handler::new("polygon_trace_call", |s, r| {
        Box::pin(async move { call(s.gateway, s.pool()?, r).await })
    })
    .pool("polygon_bor"),
];

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn tracers_default_to_trace_and_refuse_the_unknown() {
        assert_eq!(Tracers::parse(None).unwrap().names(), vec!["trace"]);
        let all: Vec<String> = TRACERS.iter().map(|s| s.to_string()).collect();
        assert_eq!(
            Tracers::parse(Some(&all)).unwrap().names(),
            TRACERS.to_vec()
        );
        assert!(Tracers::parse(Some(&[])).is_err());
        assert!(Tracers::parse(Some(&["memory".to_string()])).is_err());
    }

    #[test]
    fn call_objects_are_checked_member_by_member() {
        let ok: CallObject = serde_json::from_value(json!({
            "from": "0xf39Fd6e51aad88F6F4ce6aB8827279cffFb92266",
            "to": "0x70997970C51812dc3A010C7d01b50e0d17dc79C8", "value": "0x10", "input": "0x"}))
        .unwrap();
        let v = ok.checked().unwrap();
        assert_eq!(v["data"], "0x");
        for bad in [
            json!({"to": "0x12"}),
            json!({"to": "0x70997970C51812dc3A010C7d01b50e0d17dc79C8", "value": "16"}),
            json!({"to": "0x70997970C51812dc3A010C7d01b50e0d17dc79C8", "value": "0x010"}),
            json!({"to": "0x70997970C51812dc3A010C7d01b50e0d17dc79C8", "data": "0x1"}),
            json!({"to": "0x70997970C51812dc3A010C7d01b50e0d17dc79C8", "data": "0x", "input": "0x00"}),
            json!({"to": "0x70997970C51812dc3A010C7d01b50e0d17dc79C8", "data": "0x", "input": "0x"}),
            json!({"value": "0x1"}),
        ] {
            let c: CallObject = serde_json::from_value(bad.clone()).unwrap();
            assert!(c.checked().is_err(), "{bad}");
        }
        assert!(serde_json::from_value::<CallObject>(json!({"to": "0x", "nonce": "0x1"})).is_err());
    }
}

//! Solana senders: `POST /v1/sol/sender/tx` (one signed transaction → its signature) and
//! `POST /v1/sol/sender/bundle` (1 to 5 signed transactions, all or none, in order, to
//! the block engine → the bundle id). Every transaction is decoded and all its
//! signatures verified first (`sol_tx`), so what is not a signed transaction is a 400
//! before any node sees it; resends of a transaction are answered once (`sent`).

use super::Request;
use crate::errors::ApiError;
use crate::handlers::object_body;
use crate::jsonrpc::ErrorObject;
use crate::pools::Pool;
use crate::reply::Reply;
use crate::rpc::Gateway;
use crate::sol_tx::{self, Encoding, SolTx};
use crate::state::sent::{Accepted, SentTransactions};
use crate::state::sol_mempool::SolMempool;
use crate::tracking;
use base64::Engine;
use serde::Deserialize;
use serde_json::{json, Value};

/// A bundle holds 1 to this many transactions (SPEC limits; Jito's bound).
pub const MAX_BUNDLE: usize = 5;

#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
struct TxRequest {
    transaction: String,
    #[serde(default, deserialize_with = "crate::handlers::not_null")]
    encoding: Option<String>,
    /// Skip the node's simulation before it forwards (default false).
    #[serde(default)]
    skip_preflight: bool,
}

#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
struct BundleRequest {
    transactions: Vec<String>,
    #[serde(default, deserialize_with = "crate::handlers::not_null")]
    encoding: Option<String>,
}

fn check(text: &str, encoding: Encoding, which: &str) -> Result<SolTx, ApiError> {
    sol_tx::decode(text, encoding).map_err(|e| ApiError::invalid_params(format!("{which}: {e}")))
}

fn wire_base64(tx: &SolTx) -> String {
    base64::engine::general_purpose::STANDARD.encode(&tx.wire)
}

/// `POST /v1/sol/sender/tx`: `sendTransaction` on the pool's healthy hosts in order. A
/// node's refusal (failed simulation, bad signature, blockhash not found) is a 400
/// `tx_rejected` with the node's reason; a node saying it already processed this very
/// transaction counts as accepted.
pub async fn tx(
    gateway: &Gateway,
    pool: &Pool,
    sent: &SentTransactions,
    mempool: &SolMempool,
    req: &Request<'_>,
) -> Result<Reply, ApiError> {
    let r: TxRequest = object_body(&req.body)?;
    let encoding = Encoding::parse(r.encoding.as_deref()).map_err(ApiError::invalid_params)?;
    let tx = check(&r.transaction, encoding, "transaction")?;
    let params = json!([wire_base64(&tx), {
        "encoding": "base64",
        "skipPreflight": r.skip_preflight,
        "preflightCommitment": "confirmed",
    }]);
    let accepted = sent
        .send_once(&tx.signature, || async {
            let (answer, host) = gateway
                .node_call(pool, None, "sendTransaction", params, req.request_id)
                .await?;
            match answer {
                Ok(Value::String(sig)) if sig == tx.signature => Ok(Accepted {
                    path_used: "sol_rpc",
                    upstream: host,
                }),
                Ok(_) => Err(ApiError::new(
                    502,
                    "upstream_unavailable",
                    "sendTransaction: the node answered another signature",
                )),
                Err(e) if already_processed(&e) => Ok(Accepted {
                    path_used: "sol_rpc",
                    upstream: host,
                }),
                Err(e) => Err(rejected("tx_rejected", e)),
            }
        })
        .await?;
    mempool.record(tenant_of(req), &tx.signature, &tx.fee_payer, "sender");
    follow(gateway, tracking::PUBLIC, &tx, req);
    Ok(Reply::json(
        200,
        json!({"signature": tx.signature, "fee_payer": tx.fee_payer}).to_string(),
    )
    .served_by(accepted.upstream))
}

/// The node saw this transaction already (a resend): it is in, not refused.
fn already_processed(e: &ErrorObject) -> bool {
    let m = e.message.to_ascii_lowercase();
    m.contains("already been processed") || m.contains("alreadyprocessed")
}

/// A node's refusal as a 400 with its reason, and its structured error and logs when it
/// gave them (a failed simulation says which instruction failed and why).
fn rejected(code: &'static str, e: ErrorObject) -> ApiError {
    let mut err = ApiError::new(400, code, e.message.clone()).with_field("node_code", e.code);
    if let Some(data) = e.data.as_ref() {
        if let Some(v) = data.get("err").filter(|v| !v.is_null()) {
            err = err.with_field("node_error", v.clone());
        }
        if let Some(logs) = data.get("logs").and_then(Value::as_array) {
            let tail: Vec<Value> = logs.iter().rev().take(20).rev().cloned().collect();
            err = err.with_field("logs", tail);
        }
    }
    err
}

/// `POST /v1/sol/sender/bundle`: `sendBundle` to the block-engine pool. The engine lands
/// the transactions in order, all or none; it answers the bundle id at once (landing is
/// asynchronous).
pub async fn bundle(
    gateway: &Gateway,
    pool: &Pool,
    mempool: &SolMempool,
    req: &Request<'_>,
) -> Result<Reply, ApiError> {
    let r: BundleRequest = object_body(&req.body)?;
    if r.transactions.is_empty() || r.transactions.len() > MAX_BUNDLE {
        return Err(ApiError::invalid_params(format!(
            "a bundle holds 1 to {MAX_BUNDLE} signed transactions (got {})",
            r.transactions.len()
        )));
    }
    let encoding = Encoding::parse(r.encoding.as_deref()).map_err(ApiError::invalid_params)?;
    let txs = r
        .transactions
        .iter()
        .enumerate()
        .map(|(i, t)| check(t, encoding, &format!("transactions[{i}]")))
        .collect::<Result<Vec<_>, _>>()?;
    for (i, tx) in txs.iter().enumerate() {
        if txs[..i].iter().any(|t| t.signature == tx.signature) {
            return Err(ApiError::invalid_params(format!(
                "transactions[{i}] repeats an earlier transaction of the bundle"
            )));
        }
    }
    let wires: Vec<String> = txs.iter().map(wire_base64).collect();
    let (answer, host) = gateway
        .node_call(
            pool,
            None,
            "sendBundle",
            json!([wires, {"encoding": "base64"}]),
            req.request_id,
        )
        .await?;
    let id = match answer {
        Ok(Value::String(id)) => id,
        Ok(_) => {
            return Err(ApiError::new(
                502,
                "upstream_unavailable",
                "sendBundle: the block engine's answer is not a bundle id",
            ))
        }
        Err(e) => return Err(rejected("bundle_rejected", e)),
    };
    for t in &txs {
        mempool.record(tenant_of(req), &t.signature, &t.fee_payer, "bundle");
        follow(gateway, tracking::BUNDLE, t, req);
    }
    let signatures: Vec<&str> = txs.iter().map(|t| t.signature.as_str()).collect();
    Ok(Reply::json(
        200,
        json!({"bundle_id": id, "signatures": signatures}).to_string(),
    )
    .served_by(host))
}

/// An accepted transaction is followed until it lands or its blockhash expires
/// (`capture::txs`), for the key that sent it. A bundle's are never sent again one by
/// one: they would lose the all-or-none the block engine gives them.
fn follow(gateway: &Gateway, route: &'static str, tx: &SolTx, req: &Request<'_>) {
    if let Some(by) = req.submitter() {
        let raw = wire_base64(tx);
        gateway
            .txlog
            .accepted_on("sol", route, &tx.signature, &raw, by);
    }
}

/// The tenant a sent transaction is shown to (the senders need a key).
fn tenant_of<'a>(req: &'a Request<'_>) -> &'a str {
    req.key().map_or("", |k| k.tenant_id.as_str())
}

pub const HANDLERS: &[super::super::Handler] = &[
    super::super::Handler::new("sol_sender_tx", |s, r| {
        Box::pin(async move { tx(s.gateway, s.pool()?, s.sent(), s.sol_mempool(), r).await })
    })
    .pool("sol_rpc"),
    super::super::Handler::new("sol_sender_bundle", |s, r| {
        Box::pin(async move { bundle(s.gateway, s.pool()?, s.sol_mempool(), r).await })
    })
    .pool("sol_block_engine"),
];

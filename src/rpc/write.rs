//! Writes (`eth_sendRawTransaction` and kin): dispatched by the pool's write policy,
//! "already known" counted as accepted, and a transaction's hash.

use super::need::Need;
use super::Gateway;
use crate::config::WritePolicy;
use crate::errors::ApiError;
use crate::jsonrpc::methods::MethodClass;
use crate::jsonrpc::{Id, Payload, Request, Response};
use crate::observe::metrics;
use crate::pools::{Host, Pool};
use crate::signed_tx::tx_hash;
use crate::tracking::Submitter;
use bytes::Bytes;
use serde_json::{json, Value};
use std::sync::Arc;

/// An upstream's way of saying "I already have this transaction".
pub(super) const ALREADY_KNOWN_PATTERNS: &[&str] =
    &["already known", "already imported", "known transaction"];

impl Gateway {
    /// Dispatch `eth_sendRawTransaction`. Each host receives the write at most once.
    /// An accepted transaction of a key (`by`) is queued to be followed.
    pub async fn write(
        &self,
        pool: &Pool,
        call: &Request,
        rid: &str,
        by: Option<Submitter<'_>>,
    ) -> Result<(Response, Option<String>), ApiError> {
        let answer = self.dispatch_write(pool, call, rid).await?;
        if let (Some(by), Payload::Result(Value::String(hash))) = (by, &answer.0.payload) {
            let raw = call.param(0).and_then(Value::as_str).unwrap_or_default();
            self.txlog.accepted(&pool.name, hash, raw, by);
        }
        Ok(answer)
    }

    async fn dispatch_write(
        &self,
        pool: &Pool,
        call: &Request,
        rid: &str,
    ) -> Result<(Response, Option<String>), ApiError> {
        let id = call.answer_id();
        let raw = call.param(0).and_then(Value::as_str).ok_or_else(|| {
            ApiError::invalid_params("eth_sendRawTransaction takes one 0x-hex string")
        })?;
        let tx_hash = tx_hash(raw)
            .ok_or_else(|| ApiError::invalid_params("raw transaction is not 0x-prefixed hex"))?;
        // What the sender reads next (its balance, its nonce at `latest`) must not come
        // from before its own transaction.
        self.cache.wrote(&pool.name);
        let hosts = pool.candidates(None);
        if hosts.is_empty() {
            return Err(ApiError::new(
                503,
                "no_upstream",
                format!("pool {} has no hosts", pool.name),
            ));
        }
        let body = call.to_bytes();
        let answers = match self.conf.write_policy {
            WritePolicy::Broadcast => self.broadcast(&hosts, body, rid).await,
            WritePolicy::FirstAccepting => self.first_accepting(&hosts, body, rid).await,
        };
        // Prefer an acceptance; an "already known" counts as one (the resend is idempotent).
        let mut first_rejection: Option<(Response, String)> = None;
        for (host, answer) in &answers {
            if let Ok(b) = answer {
                match write_outcome(b) {
                    WriteOutcome::Accepted | WriteOutcome::AlreadyKnown => {
                        return Ok((
                            Response::result(id, Value::String(tx_hash)),
                            Some(host.clone()),
                        ));
                    }
                    WriteOutcome::Rejected => {
                        if first_rejection.is_none() {
                            if let Ok(answer) = serde_json::from_slice::<Response>(b) {
                                first_rejection = Some((answer, host.clone()));
                            }
                        }
                    }
                }
            }
        }
        // A resend after the transaction was mined meets "nonce too low": if the chain
        // already has this very transaction, the resend succeeded.
        let nonce_too_low = first_rejection.as_ref().is_some_and(|(answer, _)| {
            answer
                .error_object()
                .is_some_and(|e| e.message.to_ascii_lowercase().contains("nonce too low"))
        });
        if nonce_too_low && self.known_on_chain(pool, &tx_hash, rid).await {
            return Ok((Response::result(id, Value::String(tx_hash)), None));
        }
        match first_rejection {
            Some((mut answer, host)) => {
                answer.id = id;
                Ok((answer, Some(host)))
            }
            None => Err(ApiError::bad_gateway(
                "upstream_unavailable",
                "no host answered the transaction",
            )),
        }
    }

    /// The write to every host at once; each host's answer (or why it gave none).
    async fn broadcast(
        &self,
        hosts: &[Arc<Host>],
        body: Bytes,
        rid: &str,
    ) -> Vec<(String, Result<Bytes, String>)> {
        let mut tasks = Vec::new();
        for host in hosts.iter().cloned() {
            let (client, body, rid, conf) = (
                self.client.clone(),
                body.clone(),
                rid.to_string(),
                self.conf.clone(),
            );
            tasks.push(tokio::spawn(async move {
                metrics::upstream_attempt(&host.pool, &host.id);
                let r = client
                    .send(
                        host.post_json(&body, &rid),
                        conf.timeout,
                        conf.max_response_bytes,
                    )
                    .await;
                let r = match r {
                    Ok(r) if r.status < 500 => Ok(r.body),
                    Ok(r) => Err(format!("HTTP {}", r.status)),
                    Err(e) => Err(e.to_string()),
                };
                if let Err(e) = &r {
                    host.record_failure(e);
                    metrics::upstream_failure(&host.pool, &host.id, "transport");
                }
                (host.id.clone(), r)
            }));
        }
        let mut out = Vec::new();
        for t in tasks {
            if let Ok(a) = t.await {
                out.push(a);
            }
        }
        out
    }

    /// The write to host after host until one accepts it.
    async fn first_accepting(
        &self,
        hosts: &[Arc<Host>],
        body: Bytes,
        rid: &str,
    ) -> Vec<(String, Result<Bytes, String>)> {
        let mut out = Vec::new();
        for host in hosts.iter().take(self.conf.max_attempts) {
            let r = self.attempt(host, &body, rid, self.conf.timeout).await;
            let accepted = r
                .as_ref()
                .is_ok_and(|b| write_outcome(b) != WriteOutcome::Rejected);
            out.push((host.id.clone(), r));
            if accepted {
                break;
            }
        }
        out
    }

    /// Whether some node of the pool knows a transaction with this hash.
    pub(super) async fn known_on_chain(&self, pool: &Pool, tx_hash: &str, rid: &str) -> bool {
        let call = Request::new(Id::index(1), "eth_getTransactionByHash", json!([tx_hash]));
        match self
            .read(
                pool,
                MethodClass::Read,
                Need::default(),
                &call.to_bytes(),
                rid,
            )
            .await
        {
            Ok(r) => serde_json::from_slice::<Response>(&r.body)
                .ok()
                .and_then(|answer| answer.into_result().ok())
                .is_some_and(|t| t.get("hash").and_then(Value::as_str) == Some(tx_hash)),
            Err(_) => false,
        }
    }
}

#[derive(PartialEq, Eq, Debug)]
pub enum WriteOutcome {
    Accepted,
    AlreadyKnown,
    Rejected,
}

pub fn write_outcome(body: &[u8]) -> WriteOutcome {
    let Ok(answer) = serde_json::from_slice::<Response>(body) else {
        return WriteOutcome::Rejected;
    };
    let msg = match answer.payload {
        Payload::Result(Value::String(_)) => return WriteOutcome::Accepted,
        Payload::Result(_) => return WriteOutcome::Rejected,
        Payload::Error(e) => e.message.to_ascii_lowercase(),
    };
    if ALREADY_KNOWN_PATTERNS.iter().any(|p| msg.contains(p)) {
        WriteOutcome::AlreadyKnown
    } else {
        WriteOutcome::Rejected
    }
}

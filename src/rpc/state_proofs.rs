//! Account reads answered from proofs (`rpc.verify.root`): `eth_getBalance`,
//! `eth_getTransactionCount`, `eth_getCode` and `eth_getStorageAt` at an anchored block
//! are asked as `eth_getProof` at that block's hash, the proof walked to the block's
//! state root at the edge, and the answer written from what the proof proved. A host
//! whose proof does not hold is recorded and the next one asked; every host lying the
//! same way is an error naming the failed proof, never the lie.

use super::attempts::NodeState;
use super::misbehaviour::Misbehaviour;
use super::need::Need;
use super::{Gateway, RpcReply};
use crate::config::VerifyMode;
use crate::errors::ApiError;
use crate::jsonrpc::methods::MethodClass;
use crate::jsonrpc::{Id, Request, Response};
use crate::observe::metrics;
use crate::pools::{Host, Pool};
use crate::verify::root::Anchor;
use crate::verify::state::{self, At, StateCall, StateField};
use crate::verify::{Verdict, Verified};
use alloy_primitives::B256;
use alloy_trie::KECCAK_EMPTY;
use bytes::Bytes;
use serde_json::{json, Value};
use std::sync::Arc;
use std::time::Duration;

impl Gateway {
    /// `method(params)` answered from a proof, when it is a state read within the
    /// window of a pool whose reads are proven; `None` reads it as any other read.
    #[allow(clippy::too_many_arguments)]
    pub(super) async fn read_proven(
        &self,
        pool: &Pool,
        class: MethodClass,
        method: &str,
        params: Option<&Value>,
        body: &[u8],
        id: Id,
        rid: &str,
    ) -> Option<Result<RpcReply, ApiError>> {
        let root = self.conf.root.as_ref()?;
        if self.conf.verify == VerifyMode::Off {
            return None;
        }
        let call = StateCall::of(method, params)?;
        let head = pool.head.load(std::sync::atomic::Ordering::Relaxed);
        let in_window = |n: u64| head == 0 || n.saturating_add(root.window) >= head;
        if let At::Number(n) = call.at {
            if !in_window(n) {
                return None;
            }
        }
        let anchor = match self.anchor(pool, call.at, root.ask, rid).await {
            Ok(anchor) => anchor,
            Err(e) => return Some(Err(e)),
        };
        if !in_window(anchor.header.number) {
            return None;
        }
        if let Some(reply) = self.already_proven(&call, &anchor, &id) {
            return Some(Ok(reply));
        }
        let need = Need {
            min_head: anchor.header.number,
            ..Need::default()
        };
        let hosts = match self.hosts_reaching(pool, class.capability(), need).await {
            Ok(hosts) => hosts,
            Err(e) => return Some(Err(e)),
        };
        let policy = self.policy(self.conf.budget(class), NodeState::NextHostElseAnswer);
        let proven = ProvenRead {
            call,
            anchor,
            method,
            body,
            id,
            rid,
        };
        let proven = &proven;
        Some(
            policy
                .run(&hosts, |host, share| {
                    Box::pin(self.proven_attempt(host, proven, share))
                })
                .await,
        )
    }

    /// The read answered from what an earlier proof at the same block proved.
    fn already_proven(&self, call: &StateCall, anchor: &Anchor, id: &Id) -> Option<RpcReply> {
        let kept = &self.checked.proven_state;
        let account = kept.account(anchor.header.hash, call.address, &call.slots())?;
        let value = match call.field {
            StateField::Code if account.code_hash == KECCAK_EMPTY => json!("0x"),
            StateField::Code => json!(kept.code(&account.code_hash)?.to_string()),
            _ => call.result(&account)?,
        };
        Some(RpcReply {
            body: Response::result(id.clone(), value).to_bytes(),
            upstream: None,
            block: Some(anchor.header.number),
            cache: None,
            verified: Verified::Proof(anchor.note()),
        })
    }

    /// One host's proof of the read, checked; the answer written from it.
    async fn proven_attempt(
        &self,
        host: &Arc<Host>,
        read: &ProvenRead<'_>,
        share: Duration,
    ) -> Result<(Bytes, Verified), String> {
        let began = tokio::time::Instant::now();
        let call = &read.call;
        let block = read.anchor.header.hash.to_string();
        let slots = call.slots();
        let ask = Request::new(
            Id::index(1),
            "eth_getProof",
            json!([call.address.to_string(), slots, block]),
        );
        let answer = self.attempt(host, &ask.to_bytes(), read.rid, share).await?;
        let result = node_result(&answer, "eth_getProof")?;
        let checked =
            state::check_account(&result, call.address, &slots, read.anchor.header.state_root);
        let value = match checked {
            Verdict::Proven(account) => {
                let hash = read.anchor.header.hash;
                self.checked.proven_state.keep(hash, call.address, &account);
                match call.field {
                    StateField::Code if account.code_hash != KECCAK_EMPTY => {
                        let left = share.saturating_sub(began.elapsed());
                        (self.proven_code(host, read, account.code_hash, left)).await
                    }
                    StateField::Code => Ok(json!("0x")),
                    _ => call
                        .result(&account)
                        .ok_or_else(|| "no value proven".to_string()),
                }
            }
            Verdict::Unchecked(why) | Verdict::Disproved(why) => Err(why),
        };
        let value = match value {
            Ok(value) => value,
            Err(why) => return self.disproved(host, read, &why, &answer, share).await,
        };
        metrics::checked_answer(&host.pool, "proof", "proven");
        let body = Response::result(read.id.clone(), value).to_bytes();
        Ok((body, Verified::Proof(read.anchor.note())))
    }

    /// The account's code from `host`, held to the proven code hash.
    async fn proven_code(
        &self,
        host: &Arc<Host>,
        read: &ProvenRead<'_>,
        code_hash: B256,
        left: Duration,
    ) -> Result<Value, String> {
        let block = read.anchor.header.hash.to_string();
        let ask = Request::new(
            Id::index(1),
            "eth_getCode",
            json!([read.call.address.to_string(), block]),
        );
        let answer = self.attempt(host, &ask.to_bytes(), read.rid, left).await?;
        let code = node_result(&answer, "eth_getCode")?;
        match state::check_code(&code, code_hash) {
            Verdict::Proven(()) => {
                if let Some(bytes) = code.as_str().and_then(|c| c.parse().ok()) {
                    self.checked.proven_state.keep_code(code_hash, bytes);
                }
                Ok(code)
            }
            Verdict::Unchecked(why) | Verdict::Disproved(why) => Err(why),
        }
    }

    /// A proof that did not hold: recorded against the host; in `observe` mode the
    /// caller's call is then read unproven from the same host.
    async fn disproved(
        &self,
        host: &Arc<Host>,
        read: &ProvenRead<'_>,
        why: &str,
        answer: &[u8],
        share: Duration,
    ) -> Result<(Bytes, Verified), String> {
        metrics::checked_answer(&host.pool, "proof", "disproved");
        let seen = Misbehaviour {
            method: read.method,
            check: "proof",
            why,
            rid: read.rid,
            request: read.body,
            answer,
            winning: None,
        };
        seen.record(host);
        if self.conf.verify == VerifyMode::Observe {
            let answer = self.attempt(host, read.body, read.rid, share).await?;
            return Ok((answer, Verified::None));
        }
        Err(format!(
            "its proof against block {} did not hold: {why}",
            read.anchor.header.number
        ))
    }
}

/// A state read being proven: the call, the block, and the caller's request.
struct ProvenRead<'a> {
    call: StateCall,
    anchor: Anchor,
    method: &'a str,
    body: &'a [u8],
    id: Id,
    rid: &'a str,
}

/// A node answer's result; its error (or no result) as the attempt's failure.
fn node_result(answer: &[u8], method: &str) -> Result<Value, String> {
    let mut response: Value =
        serde_json::from_slice(answer).map_err(|_| format!("{method}: not JSON-RPC"))?;
    if let Some(e) = response.get("error") {
        let message = e.get("message").and_then(Value::as_str).unwrap_or("");
        return Err(format!("{method}: {message}"));
    }
    match response.get_mut("result").map(Value::take) {
        Some(Value::Null) | None => Err(format!("{method}: no result")),
        Some(result) => Ok(result),
    }
}

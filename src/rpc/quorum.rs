//! Reads put to a vote (`rpc.verify.quorum`): asked of several hosts at once and
//! answered only when enough of them give the same answer in canonical form (the
//! result as a JSON value, so key order does not count; an error by its code). A
//! dispute, or too few hosts to vote, is an error naming why, never a guess. A host
//! whose answer is outvoted is logged with the winning answer and counted, like a
//! disproved one.

use super::checked::Judged;
use super::misbehaviour::Misbehaviour;
use super::need::{need_for, Need};
use super::{Gateway, RpcReply};
use crate::config::QuorumConf;
use crate::errors::ApiError;
use crate::jsonrpc::methods::{block_need, classify_on, MethodClass};
use crate::jsonrpc::{Id, Request, Response};
use crate::observe::metrics;
use crate::pools::{Host, Pool};
use crate::verify::Verified;
use bytes::Bytes;
use futures_util::stream::{FuturesUnordered, StreamExt};
use serde_json::{json, Value};
use std::sync::Arc;

/// The vote's settings.
#[derive(Debug, Clone)]
pub struct Quorum {
    methods: Vec<String>,
    ask: usize,
    agree: usize,
}

impl Quorum {
    pub fn new(c: &QuorumConf) -> Self {
        Quorum {
            methods: c.all_methods(),
            ask: c.ask,
            agree: c.agreeing(),
        }
    }

    pub fn covers(&self, method: &str) -> bool {
        self.methods.iter().any(|m| m == method)
    }

    /// The level every answer of this vote reached at least.
    pub fn least(&self) -> Verified {
        Verified::Quorum {
            agree: self.agree as u8,
            asked: self.ask as u8,
        }
    }
}

/// One distinct answer (canonical form) and the hosts that gave it, with their bytes.
type Side = (Value, Vec<(Arc<Host>, Bytes)>);

/// An answer's canonical form: what two hosts must both say to agree. A Solana answer
/// (`{"context": {"slot": …}, "value": …}`) votes on its value: each node answers at
/// its own slot, and the same value at two slots is the same answer.
fn canonical(body: &[u8]) -> Option<Value> {
    let v: Value = serde_json::from_slice(body).ok()?;
    match (v.get("result"), v.get("error")) {
        (Some(Value::Object(r)), None) if r.len() == 2 && r.contains_key("context") => {
            r.get("value").cloned()
        }
        (Some(r), None) => Some(r.clone()),
        (None, Some(e)) => Some(json!({"error_code": e.get("code")})),
        _ => None,
    }
}

impl Gateway {
    /// A product handler's read of `method(params)` on `pool`: put to a vote when
    /// `rpc.verify.quorum` names the method (Solana's reads among them), else read as
    /// `read_call` does. The result, the answering host, and how it was checked.
    pub async fn read_call_voted(
        &self,
        pool: &Pool,
        method: &str,
        params: Value,
        rid: &str,
    ) -> Result<(Value, Option<String>, Verified), ApiError> {
        let Some(q) = self.quorum_for(method) else {
            let (result, host) = self.read_call(pool, method, params, rid).await?;
            return Ok((result, host, Verified::None));
        };
        let class = classify_on(&pool.methods, method);
        let need = need_for(pool, block_need(method, Some(&params)));
        let call = Request::new(Id::index(1), method, params);
        let reply =
            (self.read_by_quorum(pool, class, need, &call.to_bytes(), rid, method, q, None))
                .await?;
        let answer: Response = serde_json::from_slice(&reply.body).map_err(|_| {
            ApiError::bad_gateway("upstream_unavailable", "the node answered non-JSON-RPC")
        })?;
        match answer.into_result() {
            Ok(result) => Ok((result, reply.upstream, reply.verified)),
            Err(e) => Err(ApiError::bad_gateway(
                "upstream_unavailable",
                format!("{method}: the nodes agreed on an error: {}", e.message),
            )),
        }
    }

    /// The quorum for `method`, when it is put to a vote.
    pub(super) fn quorum_for(&self, method: &str) -> Option<&Quorum> {
        self.conf.quorum.as_ref().filter(|q| q.covers(method))
    }

    /// `body` (a call of `method`) to `q.ask` hosts at once (each answer judged by `judged` when there is
    /// one): the first answer `q.agree` of them give.
    #[allow(clippy::too_many_arguments)]
    pub(super) async fn read_by_quorum(
        &self,
        pool: &Pool,
        class: MethodClass,
        need: Need,
        body: &[u8],
        rid: &str,
        method: &str,
        q: &Quorum,
        judged: Option<Judged<'_>>,
    ) -> Result<RpcReply, ApiError> {
        let hosts = self.hosts_reaching(pool, class.capability(), need).await?;
        let voters: Vec<Arc<Host>> = hosts.into_iter().take(q.ask).cloned().collect();
        if voters.len() < q.agree {
            metrics::quorum_read(&pool.name, "unavailable");
            return Err(ApiError::new(
                503,
                "quorum_unavailable",
                format!(
                    "{} of pool {}'s hosts can answer and {} must agree",
                    voters.len(),
                    pool.name,
                    q.agree
                ),
            ));
        }
        let budget = self.conf.budget(class);
        let asked = voters.len();
        let mut votes: FuturesUnordered<_> = voters
            .into_iter()
            .map(|host| async move {
                let answer = match judged {
                    Some(j) => {
                        self.judged_attempt(pool, &host, body, rid, budget.attempt, j)
                            .await
                    }
                    None => self
                        .attempt(&host, body, rid, budget.attempt)
                        .await
                        .map(|b| (b, Verified::None)),
                };
                (host, answer)
            })
            .collect();
        // Each distinct answer with the hosts that gave it, in the order they came.
        let mut tally: Vec<Side> = Vec::new();
        let deadline = tokio::time::Instant::now() + budget.total;
        while let Ok(Some((host, answer))) = tokio::time::timeout_at(deadline, votes.next()).await {
            // A failed attempt, or an answer that is not JSON-RPC, casts no vote.
            let Some((given, vote)) = answer
                .ok()
                .and_then(|(b, _)| canonical(&b).map(|vote| (b, vote)))
            else {
                continue;
            };
            let at = match tally.iter().position(|(v, _)| *v == vote) {
                Some(at) => at,
                None => {
                    tally.push((vote, Vec::new()));
                    tally.len() - 1
                }
            };
            tally[at].1.push((host, given));
            if tally[at].1.len() >= q.agree {
                let (_, hosts) = tally.swap_remove(at);
                outvoted(&tally, body_of(&hosts), method, body, rid);
                metrics::quorum_read(&pool.name, "agreed");
                let (first, body) = &hosts[0];
                let mut reply = RpcReply::from_host(body.clone(), first);
                reply.verified = Verified::Quorum {
                    agree: hosts.len() as u8,
                    asked: asked as u8,
                };
                return Ok(reply);
            }
        }
        metrics::quorum_read(&pool.name, "dispute");
        Err(dispute(&tally, q.agree, asked))
    }
}

/// No answer reached `agree` of the `asked` hosts: which hosts gave which answer.
fn dispute(tally: &[Side], agree: usize, asked: usize) -> ApiError {
    let said: Vec<String> = tally
        .iter()
        .map(|(_, hs)| {
            hs.iter()
                .map(|(h, _)| h.id.as_str())
                .collect::<Vec<_>>()
                .join("+")
        })
        .collect();
    ApiError::bad_gateway(
        "quorum_dispute",
        format!(
            "{agree} of {asked} hosts must agree; they answered {} ways ({})",
            tally.len(),
            said.join(" / ")
        ),
    )
    .with_field("answers", tally.len())
}

fn body_of(hosts: &[(Arc<Host>, Bytes)]) -> &[u8] {
    hosts.first().map_or(&[], |(_, b)| b)
}

/// Hosts whose answer lost the vote, each recorded with the winning answer.
fn outvoted(losers: &[Side], won: &[u8], method: &str, request: &[u8], rid: &str) {
    for (host, answer) in losers.iter().flat_map(|(_, hosts)| hosts) {
        let seen = Misbehaviour {
            method,
            check: "quorum",
            why: "outvoted",
            rid,
            request,
            answer,
            winning: Some(won),
        };
        seen.record(host);
    }
}

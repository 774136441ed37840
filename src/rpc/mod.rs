//! The JSON-RPC gateway behind `/rpc/eth` (and `/rpc/base`): parse, classify, route with
//! fallback, dispatch writes by policy.

mod anchor;
mod attempts;
#[cfg(test)]
mod attempts_tests;
mod batch;
mod beacon_finality;
mod cache;
mod call;
mod checked;
mod checked_blocks;
mod coalesce;
mod complete_logs;
pub mod compute_units;
mod entry;
mod filters;
mod forward;
mod gateway;
mod light_client;
mod logs;
mod misbehaviour;
mod need;
mod proven;
mod proven_state;
mod quorum;
mod state_proofs;
pub mod token_metadata;
mod write;

pub use crate::signed_tx::tx_hash;
pub use cache::{CacheNote, ResponseCache, Tracker as CacheTracker};
pub use call::{error_from, id_of, method_of, refusal_of, CallView};
pub use coalesce::InFlight;
pub use entry::{Entered, Incoming, MethodLabel};
pub use filters::FilterHosts;
pub use forward::{BUILDER_METHODS, PRIVATE_TX_METHODS};
pub use light_client::Follower as LightClientFollower;
pub use need::{need_at, Need};
pub use write::{write_outcome, WriteOutcome};

use crate::config::{RpcConf, WritePolicy};
use crate::jsonrpc::methods::MethodClass;
use crate::upstream::UpstreamClient;
use crate::verify::Verified;
use bytes::Bytes;
use serde_json::Value;
use std::sync::Arc;
use std::time::Duration;

pub struct Gateway {
    pub client: Arc<UpstreamClient>,
    pub conf: RpcSettings,
    /// Which host created each filter: filter state lives on that node only.
    pub filters: Arc<FilterHosts>,
    /// Reads in flight, so identical ones at the same moment share one upstream call.
    pub in_flight: Arc<InFlight>,
    /// Answers kept for as long as what they depend on cannot change.
    pub cache: Arc<ResponseCache>,
    /// Accepted transactions, queued for the follower (`capture::txs`).
    pub txlog: Arc<crate::tracking::TxLog>,
    /// Checked blocks' facts and receipts by hash, for the answers that name them.
    pub checked: Arc<checked_blocks::CheckedBlocks>,
}

#[derive(Clone)]
pub struct RpcSettings {
    pub max_batch: usize,
    pub max_response_bytes: usize,
    /// A read's whole budget (writes and filters use it too).
    pub timeout: Duration,
    /// Budgets by method class: read, trace, debug, txpool.
    budgets: [Budget; 4],
    pub max_attempts: usize,
    /// Identical single reads in flight at once share one upstream call.
    pub coalesce: bool,
    /// The `eth_getLogs` guard.
    pub logs: logs::LogsSettings,
    /// How long a call waits for a host to reach the caller's minimum block.
    pub min_block_wait: Duration,
    pub write_policy: WritePolicy,
    /// (family, rank, plan name) for `trace`, `debug`, `txpool`.
    pub method_plans: Vec<(&'static str, usize, String)>,
    pub upgrade_url: String,
    /// What a disproved answer costs (`rpc.verify.mode`).
    pub verify: crate::config::VerifyMode,
    /// Methods put to a vote of several hosts (`rpc.verify.quorum`).
    pub quorum: Option<quorum::Quorum>,
    /// The level each plan's answers must reach (`rpc.verify.require`).
    pub required_by_plan: Vec<(String, crate::verify::Verified)>,
    /// More hosts a checked read asks after a `null` (`rpc.verify.ask_past_empty`).
    pub ask_past_empty: usize,
    /// Account reads proven against anchored blocks (`rpc.verify.root`).
    pub root: Option<crate::config::RootConf>,
}

impl RpcSettings {
    pub fn new(c: &RpcConf, plans: &[String], upgrade_url: &str) -> Self {
        let method_plans = ["trace", "debug", "txpool"]
            .into_iter()
            .filter_map(|f| {
                let plan = c.method_plans.get(f)?;
                let rank = plans.iter().position(|p| p == plan)?;
                Some((f, rank, plan.clone()))
            })
            .collect();
        let hedge = HedgeDelay {
            quantile: c.hedge.quantile,
            min: Duration::from_millis(c.hedge.min_delay_ms),
            max: Duration::from_millis(c.hedge.max_delay_ms),
        };
        let budgets = BUDGETED.map(|(_, name)| {
            let own = c.class_timeouts.get(name);
            let ms = |own: Option<u64>, default: u64| Duration::from_millis(own.unwrap_or(default));
            Budget {
                total: ms(own.and_then(|t| t.timeout_ms), c.timeout_ms),
                attempt: ms(own.and_then(|t| t.attempt_timeout_ms), c.attempt_timeout_ms),
                hedge: (c.hedge.enabled && c.hedge.classes.iter().any(|h| h == name))
                    .then_some(hedge),
            }
        });
        RpcSettings {
            max_batch: c.max_batch,
            max_response_bytes: c.max_response_bytes,
            timeout: Duration::from_millis(c.timeout_ms),
            budgets,
            max_attempts: c.max_attempts,
            coalesce: c.coalesce,
            logs: logs::LogsSettings::new(&c.get_logs, plans),
            min_block_wait: Duration::from_millis(c.min_block_wait_ms),
            write_policy: c.write_policy,
            method_plans,
            upgrade_url: upgrade_url.to_string(),
            verify: c.verify.mode,
            quorum: c.verify.quorum.as_ref().map(quorum::Quorum::new),
            ask_past_empty: c.verify.ask_past_empty,
            root: c.verify.root.clone(),
            required_by_plan: (c.verify.require)
                .iter()
                .filter_map(|(plan, level)| {
                    Some((plan.clone(), crate::verify::Verified::named(level)?))
                })
                .collect(),
        }
    }

    /// The level a plan's answers must reach (`none` unless configured).
    pub fn required_for_plan(&self, plan: &str) -> crate::verify::Verified {
        (self.required_by_plan.iter())
            .find(|(p, _)| p == plan)
            .map_or(crate::verify::Verified::None, |(_, v)| *v)
    }

    /// The time a call of `class` may take, and whether it is hedged. Writes, filters
    /// and the rest get a read's budget and are never hedged.
    pub fn budget(&self, class: MethodClass) -> Budget {
        match BUDGETED.iter().position(|(c, _)| *c == class) {
            Some(i) => self.budgets[i],
            None => Budget {
                hedge: None,
                ..self.budgets[0]
            },
        }
    }

    /// The plan a method class needs, when the caller's rank is below it.
    pub fn plan_refusal(&self, class: MethodClass, caller: &Caller) -> Option<&str> {
        let family = class.capability()?;
        self.method_plans
            .iter()
            .find(|(f, rank, _)| *f == family && caller.rank < *rank)
            .map(|(_, _, plan)| plan.as_str())
    }
}

/// The method classes with budgets of their own, by their config name.
const BUDGETED: [(MethodClass, &str); 4] = [
    (MethodClass::Read, "read"),
    (MethodClass::Trace, "trace"),
    (MethodClass::Debug, "debug"),
    (MethodClass::TxPool, "txpool"),
];

/// How long a call may take: in all, and on one host before the next is tried; and when
/// (if ever) a second host gets it while the first is still silent.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct Budget {
    pub total: Duration,
    pub attempt: Duration,
    pub hedge: Option<HedgeDelay>,
}

/// The wait before a hedge: a quantile of the host's recent answer times, within bounds.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct HedgeDelay {
    pub quantile: f64,
    pub min: Duration,
    pub max: Duration,
}

impl HedgeDelay {
    pub fn for_host(&self, host: &crate::pools::Host) -> Duration {
        host.latency
            .quantile(self.quantile)
            .map_or(self.max, |d| d.clamp(self.min, self.max))
    }
}

/// A batch larger than `rpc.max_batch` can never be served: a permanent refusal, checked
/// before the rate limit counts anything.
pub fn check_batch_size(calls: usize, max_batch: usize) -> Result<(), crate::errors::ApiError> {
    if calls <= max_batch {
        return Ok(());
    }
    Err(crate::errors::ApiError::invalid_params(format!(
        "batch of {calls} calls exceeds the limit of {max_batch}"
    ))
    .with_field("max_batch", max_batch)
    .with_field("jsonrpc_code", -32600))
}

/// Who is calling, for per-method plans, and what they have already seen.
pub struct Caller<'a> {
    pub rank: usize,
    pub plan: &'a str,
    /// The key's scopes; `None` for callers scopes do not bind (admin).
    pub scopes: Option<&'a [String]>,
    /// The lowest block an answer may come from (`X-Chainedge-Min-Block`): hosts not
    /// known to have reached it are not asked. 0: any.
    pub min_block: u64,
    /// Whose filters the caller may poll: the key's own (its id), or one name for admins
    /// and one for anonymous callers.
    pub owner: &'a str,
    /// The key and tenant its transactions are followed for (keys only).
    pub submitter: Option<crate::tracking::Submitter<'a>>,
    /// The key's restrictions on methods and contracts (keys only).
    pub restrictions: Option<&'a crate::key_restrictions::Restrictions>,
}

/// The gateway's answer: a JSON body, and which host served it (for the access log).
#[derive(Debug, Clone)]
pub struct RpcReply {
    pub body: Bytes,
    pub upstream: Option<String>,
    /// The block the serving host had reached when it answered (its head at the last
    /// health round: a lower bound); the lowest of them when several hosts served.
    pub block: Option<u64>,
    /// How the response cache took part (single reads only).
    pub cache: Option<CacheNote>,
    /// How the answer was checked (`x-chainedge-verified`).
    pub verified: Verified,
}

impl RpcReply {
    /// A node's answer, from `host`.
    pub(crate) fn from_host(body: Bytes, host: &crate::pools::Host) -> Self {
        let head = host.health.head();
        RpcReply {
            body,
            upstream: Some(host.id.clone()),
            block: (head > 0).then_some(head),
            cache: None,
            verified: Verified::None,
        }
    }
}

/// The lower of two answers' blocks (an answer made of several is as old as its oldest).
pub(crate) fn older(a: Option<u64>, b: Option<u64>) -> Option<u64> {
    match (a, b) {
        (Some(a), Some(b)) => Some(a.min(b)),
        (a, b) => a.or(b),
    }
}

/// The scope a JSON-RPC call of `class` needs: `rpc:write` to send a transaction,
/// `rpc:read` for everything else the gateway serves.
pub fn required_scope(class: MethodClass) -> &'static str {
    match class {
        MethodClass::Write => "rpc:write",
        _ => "rpc:read",
    }
}

impl Caller<'_> {
    /// Whether the caller may make this call at all, before the method table and plans
    /// are asked: the key's scope for a call of `class` (the same refusal the guard gives
    /// a route's scope), then what its owner restricted it to (methods, contracts).
    pub fn refusal(
        &self,
        class: MethodClass,
        method: &str,
        params: Option<&Value>,
    ) -> Option<crate::errors::ApiError> {
        if let Some(scopes) = self.scopes {
            let needed = required_scope(class);
            if class != MethodClass::Unknown && !scopes.iter().any(|s| s == needed) {
                return Some(crate::auth::plans::lacks_scope(
                    self.plan,
                    needed,
                    format!(
                        "{method} needs the scope {needed}; create a key with it in the console"
                    ),
                ));
            }
        }
        self.restrictions?.call(method, params).err()
    }
}

#[cfg(test)]
mod tests {
    use super::attempts::node_state_error;
    use super::need::need_from;
    use super::*;
    use crate::jsonrpc::methods::{block_need, classify};
    use serde_json::json;

    #[test]
    fn the_borrowed_view_takes_only_plain_single_calls() {
        let view = CallView::of(
            br#" {"jsonrpc":"2.0","id":7,"method":"eth_getBalance","params":["0xab","0x10"]}"#,
        )
        .expect("a plain call");
        assert_eq!(view.method, "eth_getBalance");
        assert_eq!(view.params, Some(json!(["0xab", "0x10"])));
        // `"params": null` reads as none, which needs the same blocks.
        let null = CallView::of(br#"{"method":"eth_call","params":null}"#).unwrap();
        assert_eq!(null.params, None);
        assert_eq!(
            need_at(
                100,
                [&json!({"method": "eth_getBalance", "params": ["0xab", "0x10"]})]
            ),
            need_from(
                100,
                block_need(view.method, view.params.as_ref()),
                Need::default()
            )
        );
        // Everything else goes the general way (and gets its errors there).
        for body in [
            &br#"[{"jsonrpc":"2.0","id":1,"method":"eth_chainId"}]"#[..],
            br#"{"id":1,"method":"eth_chain\u0049d"}"#,
            br#"{"id":1,"method":"eth_chainId","method":"eth_call"}"#,
            br#"{"id":1,"method":7}"#,
            br#"{"id":1,"method":"eth_chainId"} x"#,
            br#"{"id":1}"#,
            b"not json",
            // Found by fuzz/jsonrpc: a number out of range in a member a skip would not check.
            br#"{"json[rpc":"2.0","id":"a","method":"eth_chainId","par`ms":4444444444e44444}"#,
            br#"{"jsonrpc":"2.0","id":1e400,"method":"eth_chainId"}"#,
            // Found by fuzz/jsonrpc: bad UTF-8 in a field the view skips.
            b"{\"js+onrpc\":\"2.0\xff\xff\",\"id\":1,\"method\":\"eth_getBalance\",\"params\":[\"0x0\"]}",
        ] {
            assert!(
                CallView::of(body).is_none(),
                "{}",
                String::from_utf8_lossy(body)
            );
        }
        assert!(!classify("eth_sendRawTransaction").is_plain_read());
        assert!(!classify("eth_newFilter").is_plain_read());
        assert!(classify("eth_call").is_plain_read());
    }

    #[test]
    fn outcome_of_writes() {
        assert_eq!(
            write_outcome(br#"{"jsonrpc":"2.0","id":1,"result":"0xab"}"#),
            WriteOutcome::Accepted
        );
        assert_eq!(
            write_outcome(br#"{"jsonrpc":"2.0","id":1,"error":{"code":-32003,"message":"transaction already imported"}}"#),
            WriteOutcome::AlreadyKnown
        );
        assert_eq!(
            write_outcome(
                br#"{"jsonrpc":"2.0","id":1,"error":{"code":-32003,"message":"nonce too low"}}"#
            ),
            WriteOutcome::Rejected
        );
    }

    #[test]
    fn node_state_vs_deterministic_errors() {
        assert!(
            node_state_error(br#"{"error":{"code":-32000,"message":"header not found"}}"#)
                .is_some()
        );
        assert!(node_state_error(
            br#"{"error":{"code":-32601,"message":"the method trace_block does not exist"}}"#
        )
        .is_some());
        assert!(
            node_state_error(br#"{"error":{"code":3,"message":"execution reverted"}}"#).is_none()
        );
        assert!(node_state_error(br#"{"result":"0x1"}"#).is_none());
    }

    #[test]
    fn hash_of_raw_tx() {
        // keccak256 of the single byte 0x00.
        assert_eq!(
            tx_hash("0x00").unwrap(),
            "0xbc36789e7a1e281436464229828f817d6612f7b477d66591ff96a9e064bcc98a"
        );
        assert!(tx_hash("0x").is_none());
        assert!(tx_hash("zz").is_none());
    }
}

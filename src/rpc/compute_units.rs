//! Compute units: what each JSON-RPC method (and each REST route) costs, for plans that
//! limit by compute units per second and for per-key usage.
//!
//! The built-in table is modelled on the published compute-unit tables of the large
//! providers (Alchemy's per-method costs): cheap metadata calls are free or nearly, a
//! state read costs 15 to 26, a log query 75, a send 250, a trace hundreds. The
//! `compute_units:` config section overrides any entry and adds methods and routes.

use crate::config::usage::ComputeUnitsConf;
use foldhash::HashMap;
use serde::Deserialize;

/// Built-in cost per method; a method not listed costs `compute_units.default`.
const TABLE: &[(&str, u32)] = &[
    ("web3_clientVersion", 0),
    ("web3_sha3", 10),
    ("net_version", 0),
    ("net_listening", 0),
    ("net_peerCount", 0),
    ("eth_chainId", 0),
    ("eth_protocolVersion", 0),
    ("eth_syncing", 0),
    ("eth_accounts", 10),
    ("eth_blockNumber", 10),
    ("eth_feeHistory", 10),
    ("eth_maxPriorityFeePerGas", 10),
    ("eth_blobBaseFee", 10),
    ("eth_gasPrice", 19),
    ("eth_getBalance", 19),
    ("eth_getStorageAt", 17),
    ("eth_getTransactionCount", 26),
    ("eth_getCode", 26),
    ("eth_call", 26),
    ("eth_createAccessList", 10),
    ("eth_estimateGas", 87),
    ("eth_getProof", 21),
    ("eth_getBlockByNumber", 16),
    ("eth_getBlockByHash", 21),
    ("eth_getBlockReceipts", 500),
    ("eth_getBlockTransactionCountByHash", 20),
    ("eth_getBlockTransactionCountByNumber", 20),
    ("eth_getUncleCountByBlockHash", 15),
    ("eth_getUncleCountByBlockNumber", 15),
    ("eth_getUncleByBlockHashAndIndex", 15),
    ("eth_getUncleByBlockNumberAndIndex", 15),
    ("eth_getTransactionByHash", 17),
    ("eth_getTransactionByBlockHashAndIndex", 15),
    ("eth_getTransactionByBlockNumberAndIndex", 15),
    ("eth_getTransactionReceipt", 15),
    ("eth_getLogs", 75),
    ("eth_newFilter", 20),
    ("eth_newBlockFilter", 20),
    ("eth_newPendingTransactionFilter", 20),
    ("eth_getFilterChanges", 20),
    ("eth_getFilterLogs", 75),
    ("eth_uninstallFilter", 10),
    ("eth_subscribe", 10),
    ("eth_unsubscribe", 10),
    ("eth_sendRawTransaction", 250),
    ("eth_sendPrivateTransaction", 250),
    ("eth_sendBundle", 250),
    ("eth_callBundle", 250),
    ("debug_traceTransaction", 309),
    ("debug_traceCall", 309),
    ("debug_traceBlockByNumber", 497),
    ("debug_traceBlockByHash", 497),
    ("trace_block", 24),
    ("trace_call", 75),
    ("trace_get", 17),
    ("trace_transaction", 26),
    ("trace_filter", 75),
    ("trace_replayTransaction", 2983),
    ("trace_replayBlockTransactions", 2983),
    ("txpool_status", 20),
    ("txpool_inspect", 200),
    ("txpool_content", 1000),
];

/// What calls and routes cost, built once from the config.
pub struct ComputeUnits {
    methods: HashMap<String, u32>,
    default: u32,
    routes: HashMap<String, u32>,
    rest: u32,
}

/// A JSON-RPC body's calls and their summed cost.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Cost {
    pub calls: u32,
    pub compute_units: u64,
}

impl Cost {
    /// One request (not JSON-RPC) costing `units`.
    pub fn request(units: u32) -> Cost {
        Cost {
            calls: 1,
            compute_units: units as u64,
        }
    }
}

impl ComputeUnits {
    pub fn new(conf: &ComputeUnitsConf) -> ComputeUnits {
        let mut methods: HashMap<String, u32> =
            TABLE.iter().map(|(m, c)| (m.to_string(), *c)).collect();
        methods.extend(conf.methods.iter().map(|(m, c)| (m.clone(), *c)));
        ComputeUnits {
            methods,
            default: conf.default,
            routes: conf.routes.clone().into_iter().collect(),
            rest: conf.rest,
        }
    }

    /// One call of `method`.
    pub fn method(&self, method: &str) -> u32 {
        self.methods.get(method).copied().unwrap_or(self.default)
    }

    /// One request to a route other than JSON-RPC.
    pub fn route(&self, route: &str) -> u32 {
        self.routes.get(route).copied().unwrap_or(self.rest)
    }

    /// What a call costs whose method cannot be read (the gateway refuses it; the
    /// limiter still counts the attempt).
    pub fn default_cost(&self) -> u32 {
        self.default
    }
}

/// How many answers of a JSON-RPC response body are errors (one answer or a batch's).
/// Most answers hold no `"error"` at all and cost one scan.
pub fn error_answers(body: &[u8]) -> u32 {
    #[derive(Deserialize)]
    struct ErrorOnly {
        #[serde(default)]
        error: Option<serde::de::IgnoredAny>,
    }
    if !crate::jsonrpc::mentions_error(body) {
        return 0;
    }
    if body.iter().find(|b| !b.is_ascii_whitespace()) == Some(&b'[') {
        serde_json::from_slice::<Vec<ErrorOnly>>(body)
            .map(|v| v.iter().filter(|a| a.error.is_some()).count() as u32)
            .unwrap_or(0)
    } else {
        serde_json::from_slice::<ErrorOnly>(body)
            .map(|a| a.error.is_some() as u32)
            .unwrap_or(0)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn units() -> ComputeUnits {
        let mut conf = ComputeUnitsConf::default();
        conf.methods.insert("eth_call".into(), 30);
        conf.routes.insert("eth.wallet.balance".into(), 40);
        ComputeUnits::new(&conf)
    }

    #[test]
    fn methods_and_routes_are_priced() {
        let cu = units();
        assert_eq!(cu.method("eth_call"), 30);
        assert_eq!(cu.method("eth_getLogs"), 75);
        assert_eq!(cu.method("x_unknown"), cu.default_cost());
        assert_eq!(cu.route("eth.wallet.balance"), 40);
        assert_eq!(cu.route("eth.mempool.stats"), 20);
    }

    #[test]
    fn error_answers_are_counted_not_guessed() {
        assert_eq!(
            error_answers(br#"{"jsonrpc":"2.0","id":1,"result":"0x1"}"#),
            0
        );
        assert_eq!(
            error_answers(br#"{"jsonrpc":"2.0","id":1,"result":{"error":"a field"}}"#),
            0
        );
        assert_eq!(
            error_answers(br#"{"jsonrpc":"2.0","id":1,"error":{"code":-32000}}"#),
            1
        );
        assert_eq!(
            error_answers(br#"[{"id":1,"result":"0x"},{"id":2,"error":{}},{"id":3,"error":{}}]"#),
            2
        );
    }
}

//! The documented method table: which class each JSON-RPC method belongs to. It follows
//! the execution-apis method list (`ethereum/execution-apis` `src/eth`, `src/debug`),
//! less what acts with a node's own keys or powers (`eth_sign*`, `eth_sendTransaction`,
//! `eth_coinbase`, `engine_*`, `testing_*`), plus Bor's reads; each pool's operator may
//! allow or deny methods on top (`pools.<name>.methods`).

use serde::Deserialize;

/// `pools.<name>.methods`: `allow` adds methods the table does not list (answered as
/// plain reads, by any host of the pool); `deny` refuses listed ones (`method_unknown`).
#[derive(Debug, Default, Clone, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct MethodsConf {
    #[serde(default)]
    pub allow: std::collections::BTreeSet<String>,
    #[serde(default)]
    pub deny: std::collections::BTreeSet<String>,
}

/// How a method is routed.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum MethodClass {
    /// Stateless reads any synced node can answer.
    Read,
    /// `trace_*`: needs a host with the `trace` capability.
    Trace,
    /// `debug_*`: needs a host with the `debug` capability.
    Debug,
    /// `txpool_*`: needs a host with the `txpool` capability.
    TxPool,
    /// Filter lifecycle: state lives on the node that created the filter.
    Filter,
    /// `eth_sendRawTransaction`: dispatched by the write policy, safe to resend.
    Write,
    /// `eth_subscribe`/`eth_unsubscribe`: WebSocket only.
    Subscription,
    /// Not part of the product (`admin_*`, `personal_*`, `miner_*`, anything unlisted).
    Unknown,
}

impl MethodClass {
    /// Answered by one host with the body as it came: everything but writes, filters,
    /// subscriptions and unknown methods.
    pub fn is_plain_read(self) -> bool {
        !matches!(
            self,
            Self::Write | Self::Filter | Self::Subscription | Self::Unknown
        )
    }

    pub fn capability(self) -> Option<&'static str> {
        match self {
            Self::Trace => Some("trace"),
            Self::Debug => Some("debug"),
            Self::TxPool => Some("txpool"),
            _ => None,
        }
    }
}

const READS: &[&str] = &[
    "eth_accounts",
    "eth_baseFee",
    "eth_blobBaseFee",
    "eth_blockNumber",
    "eth_call",
    "eth_capabilities",
    "eth_chainId",
    "eth_config",
    "eth_createAccessList",
    "eth_estimateGas",
    "eth_feeHistory",
    "eth_fillTransaction",
    "eth_gasPrice",
    "eth_getBalance",
    "eth_getBlockAccessList",
    "eth_getBlockByHash",
    "eth_getBlockByNumber",
    "eth_getBlockReceipts",
    "eth_getBlockTransactionCountByHash",
    "eth_getBlockTransactionCountByNumber",
    "eth_getCode",
    "eth_getLogs",
    "eth_getProof",
    "eth_getStorageAt",
    "eth_getStorageValues",
    "eth_getTransactionByBlockHashAndIndex",
    "eth_getTransactionByBlockNumberAndIndex",
    "eth_getTransactionByHash",
    "eth_getTransactionCount",
    "eth_getTransactionReceipt",
    "eth_getUncleByBlockHashAndIndex",
    "eth_getUncleByBlockNumberAndIndex",
    "eth_getUncleCountByBlockHash",
    "eth_getUncleCountByBlockNumber",
    "eth_maxPriorityFeePerGas",
    "eth_protocolVersion",
    "eth_simulateV1",
    "eth_syncing",
    "net_listening",
    "net_peerCount",
    "net_version",
    "web3_clientVersion",
    "web3_sha3",
    "bor_getAuthor",
    "bor_getCurrentProposer",
    "bor_getCurrentValidators",
    "bor_getRootHash",
    "bor_getSignersAtHash",
];

/// The trace module's reads (OpenEthereum's, kept by Erigon, Nethermind and Reth).
const TRACES: &[&str] = &[
    "trace_block",
    "trace_call",
    "trace_callMany",
    "trace_filter",
    "trace_get",
    "trace_rawTransaction",
    "trace_replayBlockTransactions",
    "trace_replayTransaction",
    "trace_transaction",
];

/// The debug namespace's reads: the tracers, raw block / header / receipt / transaction
/// reads, and state-diff reads. Everything else there administers the node itself
/// (`debug_setHead` rewinds its chain, `debug_writeMemProfile` and `debug_startCPUProfile`
/// write files at a path the caller names, `debug_chaindbCompact`, `debug_setGCPercent`,
/// `debug_verbosity`, `debug_dbGet`, ...) and is refused whatever the plan or route.
const DEBUG_READS: &[&str] = &[
    "debug_getBadBlocks",
    "debug_getModifiedAccountsByHash",
    "debug_getModifiedAccountsByNumber",
    "debug_getRawBlock",
    "debug_getRawHeader",
    "debug_getRawReceipts",
    "debug_getRawTransaction",
    "debug_intermediateRoots",
    "debug_storageRangeAt",
    "debug_traceBadBlock",
    "debug_traceBlock",
    "debug_traceBlockByHash",
    "debug_traceBlockByNumber",
    "debug_traceCall",
    "debug_traceCallMany",
    "debug_traceTransaction",
];

/// The txpool namespace: all four are reads.
const TXPOOL_READS: &[&str] = &[
    "txpool_content",
    "txpool_contentFrom",
    "txpool_inspect",
    "txpool_status",
];

const FILTERS: &[&str] = &[
    "eth_newFilter",
    "eth_newBlockFilter",
    "eth_newPendingTransactionFilter",
    "eth_getFilterChanges",
    "eth_getFilterLogs",
    "eth_uninstallFilter",
];

pub fn classify(method: &str) -> MethodClass {
    known(method).map_or(MethodClass::Unknown, |(_, class)| class)
}

/// The table's own spelling of `method` (a name that outlives the call) and its class,
/// when the table lists it.
pub fn known(method: &str) -> Option<(&'static str, MethodClass)> {
    TABLE
        .get_key_value(method)
        .map(|(name, class)| (*name, *class))
}

/// Every listed method by name: one hash per call where searching the lists compared
/// the name with up to 80 others, more than once per call.
static TABLE: std::sync::LazyLock<foldhash::HashMap<&'static str, MethodClass>> =
    std::sync::LazyLock::new(|| {
        let lists: [(&[&'static str], MethodClass); 7] = [
            (READS, MethodClass::Read),
            (FILTERS, MethodClass::Filter),
            (&["eth_sendRawTransaction"], MethodClass::Write),
            (
                &["eth_subscribe", "eth_unsubscribe"],
                MethodClass::Subscription,
            ),
            (TRACES, MethodClass::Trace),
            (DEBUG_READS, MethodClass::Debug),
            (TXPOOL_READS, MethodClass::TxPool),
        ];
        let mut table = foldhash::HashMap::default();
        for (names, class) in lists {
            for name in names {
                // The first list naming a method decides, as the lists' order did.
                table.entry(*name).or_insert(class);
            }
        }
        table
    });

/// The class a method of a capability namespace has by its prefix: what an operator's
/// `methods.allow` entry outside the table is routed as (a `debug_` method to a debug
/// host, under the debug family's plan).
fn namespace_class(method: &str) -> MethodClass {
    if method.starts_with("trace_") {
        MethodClass::Trace
    } else if method.starts_with("debug_") {
        MethodClass::Debug
    } else if method.starts_with("txpool_") {
        MethodClass::TxPool
    } else {
        MethodClass::Read
    }
}

/// A method's class on `pool`'s table: a denied method is unknown; an allowed one the
/// table does not list is a read of its namespace's class.
pub fn classify_on(methods: &MethodsConf, method: &str) -> MethodClass {
    if methods.deny.contains(method) {
        return MethodClass::Unknown;
    }
    match classify(method) {
        MethodClass::Unknown if methods.allow.contains(method) => namespace_class(method),
        class => class,
    }
}

/// Every method the edge admits on a pool with `methods`, by class name, sorted: what
/// `chainedge -t` prints per pool.
pub fn effective_table(methods: &MethodsConf) -> Vec<(&'static str, Vec<String>)> {
    let mut all: Vec<String> = [READS, TRACES, DEBUG_READS, TXPOOL_READS, FILTERS]
        .concat()
        .into_iter()
        .chain(["eth_sendRawTransaction", "eth_subscribe", "eth_unsubscribe"])
        .map(str::to_string)
        .collect();
    all.extend(methods.allow.iter().cloned());
    all.sort();
    all.dedup();
    let mut by_class: Vec<(&'static str, Vec<String>)> = Vec::new();
    for m in all {
        let name = match classify_on(methods, &m) {
            MethodClass::Unknown => continue,
            class => class_name(class),
        };
        match by_class.iter_mut().find(|(c, _)| *c == name) {
            Some((_, list)) => list.push(m),
            None => by_class.push((name, vec![m])),
        }
    }
    by_class
}

/// What `chainedge -t` prints: the table every pool starts from, then each pool's own
/// additions and removals.
pub fn table_report<'a>(pools: impl Iterator<Item = (&'a String, &'a MethodsConf)>) -> String {
    let mut out = String::from(
        "JSON-RPC methods admitted (node-administrative methods never are; pools.<name>.methods adds or removes):\n",
    );
    for (class, list) in effective_table(&MethodsConf::default()) {
        out += &format!("  {class} ({}): {}\n", list.len(), list.join(", "));
    }
    for (name, methods) in pools {
        let mut changes: Vec<String> = methods
            .allow
            .iter()
            .filter(|m| classify(m) == MethodClass::Unknown && !methods.deny.contains(*m))
            .map(|m| format!("+{m} ({})", class_name(classify_on(methods, m))))
            .collect();
        changes.extend(methods.deny.iter().map(|m| format!("-{m}")));
        if !changes.is_empty() {
            out += &format!("  pool {name}: {}\n", changes.join(", "));
        }
    }
    out
}

fn class_name(class: MethodClass) -> &'static str {
    match class {
        MethodClass::Unknown => "refused",
        MethodClass::Read => "read",
        MethodClass::Trace => "trace",
        MethodClass::Debug => "debug",
        MethodClass::TxPool => "txpool",
        MethodClass::Filter => "filter",
        MethodClass::Write => "write",
        MethodClass::Subscription => "subscription",
    }
}

/// Whether `name` may stand in a pool's `methods.allow` / `deny`: a method name, and not
/// one whose routing is the edge's own (writes, filters, subscriptions keep their paths).
pub fn check_listed_method(name: &str) -> Result<(), String> {
    let plain = !name.is_empty()
        && name.len() <= 128
        && name.bytes().all(|b| b.is_ascii_alphanumeric() || b == b'_');
    if !plain {
        return Err("a method name is letters, digits and '_'".into());
    }
    match classify(name) {
        MethodClass::Write | MethodClass::Filter | MethodClass::Subscription => Err(
            "writes, filters and subscriptions are routed by the edge; they cannot be changed"
                .into(),
        ),
        _ => Ok(()),
    }
}

/// What state a read needs, from its block parameter.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord)]
pub enum BlockNeed {
    /// No block parameter that matters (or `safe` / `finalized`): any synced host.
    Any,
    /// `latest` / `pending` / omitted: the host should be at the pool head.
    Head,
    /// A numbered block: the host's head must be at least this.
    AtLeast(u64),
    /// `earliest`: genesis state, archive hosts first.
    Earliest,
}

/// Where a method's block tag sits in its params, if it has one.
pub fn block_param(method: &str) -> Option<usize> {
    Some(match method {
        "eth_getBalance"
        | "eth_getCode"
        | "eth_getTransactionCount"
        | "eth_call"
        | "eth_estimateGas"
        | "eth_createAccessList" => 1,
        "eth_getStorageAt" | "eth_getProof" => 2,
        "eth_getStorageValues" => 1,
        "eth_getBlockByNumber"
        | "eth_getBlockTransactionCountByNumber"
        | "eth_getUncleCountByBlockNumber"
        | "eth_getBlockReceipts"
        | "eth_getBlockAccessList"
        | "eth_getTransactionByBlockNumberAndIndex"
        | "trace_block"
        | "trace_replayBlockTransactions"
        | "debug_traceBlockByNumber" => 0,
        "eth_feeHistory" => 1,
        _ => return None,
    })
}

fn tag_need(tag: Option<&serde_json::Value>) -> BlockNeed {
    match tag.and_then(|t| t.as_str()) {
        None | Some("latest") | Some("pending") => BlockNeed::Head,
        Some("earliest") => BlockNeed::Earliest,
        Some("safe") | Some("finalized") => BlockNeed::Any,
        Some(hex) => hex
            .strip_prefix("0x")
            .and_then(|h| u64::from_str_radix(h, 16).ok())
            .map(BlockNeed::AtLeast)
            .unwrap_or(BlockNeed::Any),
    }
}

/// The state one call needs. Methods without a block parameter that report the chain
/// tip (`eth_blockNumber`, gas prices, ...) want the head too.
pub fn block_need(method: &str, params: Option<&serde_json::Value>) -> BlockNeed {
    if method == "eth_getLogs" {
        let filter = params.and_then(|p| p.get(0));
        if filter.and_then(|f| f.get("blockHash")).is_some() {
            return BlockNeed::Any;
        }
        // The later end of the range decides.
        let to = tag_need(filter.and_then(|f| f.get("toBlock")));
        let from = tag_need(filter.and_then(|f| f.get("fromBlock")));
        return to.max(from);
    }
    match block_param(method) {
        Some(i) => {
            let tag = params.and_then(|p| p.get(i));
            // eth_call and friends may carry a block hash object: any host that has it.
            if tag.is_some_and(|t| t.is_object()) {
                return BlockNeed::Any;
            }
            tag_need(tag)
        }
        None if matches!(
            method,
            "eth_blockNumber"
                | "eth_gasPrice"
                | "eth_maxPriorityFeePerGas"
                | "eth_blobBaseFee"
                | "eth_baseFee"
        ) =>
        {
            BlockNeed::Head
        }
        None => BlockNeed::Any,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn block_needs() {
        use serde_json::json;
        let p = |v: serde_json::Value| Some(v);
        assert_eq!(
            block_need("eth_getBalance", p(json!(["0xab", "0x10"])).as_ref()),
            BlockNeed::AtLeast(16)
        );
        assert_eq!(
            block_need("eth_getBalance", p(json!(["0xab"])).as_ref()),
            BlockNeed::Head
        );
        assert_eq!(
            block_need("eth_call", p(json!([{}, "earliest"])).as_ref()),
            BlockNeed::Earliest
        );
        assert_eq!(
            block_need(
                "eth_getBlockByNumber",
                p(json!(["finalized", false])).as_ref()
            ),
            BlockNeed::Any
        );
        assert_eq!(block_need("eth_blockNumber", None), BlockNeed::Head);
        assert_eq!(block_need("eth_chainId", None), BlockNeed::Any);
        assert_eq!(
            block_need(
                "eth_getLogs",
                p(json!([{"fromBlock": "0x1", "toBlock": "0x20"}])).as_ref()
            ),
            BlockNeed::AtLeast(32)
        );
        assert_eq!(
            block_need("eth_getLogs", p(json!([{"blockHash": "0x00"}])).as_ref()),
            BlockNeed::Any
        );
    }

    #[test]
    fn classes() {
        assert_eq!(classify("eth_call"), MethodClass::Read);
        assert_eq!(classify("eth_getLogs"), MethodClass::Read);
        assert_eq!(classify("eth_sendRawTransaction"), MethodClass::Write);
        assert_eq!(classify("eth_newFilter"), MethodClass::Filter);
        assert_eq!(classify("eth_subscribe"), MethodClass::Subscription);
        assert_eq!(classify("trace_block"), MethodClass::Trace);
        assert_eq!(classify("debug_traceTransaction"), MethodClass::Debug);
        assert_eq!(classify("txpool_status"), MethodClass::TxPool);
        for m in [
            "admin_peers",
            "personal_sign",
            "miner_start",
            "eth_sign",
            "trace_",
            "",
            "evm_mine",
            "eth_sendTransaction",
            "eth_signTransaction",
            "eth_coinbase",
            "engine_newPayloadV4",
            "testing_buildBlockV1",
            // Node administration under the read namespaces' prefixes.
            "debug_setHead",
            "debug_writeMemProfile",
            "debug_startCPUProfile",
            "debug_chaindbCompact",
            "debug_setGCPercent",
            "debug_verbosity",
            "debug_dbGet",
            "debug_",
            "txpool_",
        ] {
            assert_eq!(classify(m), MethodClass::Unknown, "{m}");
        }
        // An operator's extension keeps its namespace's class (capability, plan).
        let conf = MethodsConf {
            allow: ["debug_dbGet".to_string(), "erigon_x".to_string()].into(),
            deny: Default::default(),
        };
        assert_eq!(classify_on(&conf, "debug_dbGet"), MethodClass::Debug);
        assert_eq!(classify_on(&conf, "erigon_x"), MethodClass::Read);
        let report = table_report([(&"eth_el".to_string(), &conf)].into_iter());
        assert!(report.contains("pool eth_el: +debug_dbGet (debug), +erigon_x (read)"));
        assert!(!report.contains("debug_setHead"));
        for m in [
            "eth_config",
            "eth_getStorageValues",
            "eth_baseFee",
            "eth_capabilities",
        ] {
            assert_eq!(classify(m), MethodClass::Read, "{m}");
        }
    }

    #[test]
    fn operators_allow_and_deny_per_pool() {
        let conf = MethodsConf {
            allow: ["erigon_getHeaderByNumber".to_string()].into(),
            deny: ["eth_getProof".to_string(), "debug_traceCall".to_string()].into(),
        };
        assert_eq!(
            classify_on(&conf, "erigon_getHeaderByNumber"),
            MethodClass::Read
        );
        assert_eq!(classify_on(&conf, "eth_getProof"), MethodClass::Unknown);
        assert_eq!(classify_on(&conf, "debug_traceCall"), MethodClass::Unknown);
        assert_eq!(classify_on(&conf, "eth_call"), MethodClass::Read);
        assert_eq!(classify_on(&conf, "admin_peers"), MethodClass::Unknown);
        assert!(check_listed_method("erigon_getHeaderByNumber").is_ok());
        for bad in [
            "",
            "eth call",
            "eth_sendRawTransaction",
            "eth_newFilter",
            "eth_subscribe",
        ] {
            assert!(check_listed_method(bad).is_err(), "{bad}");
        }
    }
}

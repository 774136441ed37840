//! The documented method table: which class each JSON-RPC method belongs to.

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
    "eth_blobBaseFee",
    "eth_blockNumber",
    "eth_call",
    "eth_chainId",
    "eth_createAccessList",
    "eth_estimateGas",
    "eth_feeHistory",
    "eth_gasPrice",
    "eth_getBalance",
    "eth_getBlockByHash",
    "eth_getBlockByNumber",
    "eth_getBlockReceipts",
    "eth_getBlockTransactionCountByHash",
    "eth_getBlockTransactionCountByNumber",
    "eth_getCode",
    "eth_getLogs",
    "eth_getProof",
    "eth_getStorageAt",
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

const FILTERS: &[&str] = &[
    "eth_newFilter",
    "eth_newBlockFilter",
    "eth_newPendingTransactionFilter",
    "eth_getFilterChanges",
    "eth_getFilterLogs",
    "eth_uninstallFilter",
];

pub fn classify(method: &str) -> MethodClass {
    if READS.contains(&method) {
        MethodClass::Read
    } else if FILTERS.contains(&method) {
        MethodClass::Filter
    } else if method == "eth_sendRawTransaction" {
        MethodClass::Write
    } else if method == "eth_subscribe" || method == "eth_unsubscribe" {
        MethodClass::Subscription
    } else if method.starts_with("trace_") && method.len() > 6 {
        MethodClass::Trace
    } else if method.starts_with("debug_") && method.len() > 6 {
        MethodClass::Debug
    } else if method.starts_with("txpool_") && method.len() > 7 {
        MethodClass::TxPool
    } else {
        MethodClass::Unknown
    }
}

#[cfg(test)]
mod tests {
    use super::*;

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
        ] {
            assert_eq!(classify(m), MethodClass::Unknown, "{m}");
        }
    }
}

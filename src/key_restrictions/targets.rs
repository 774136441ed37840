//! Which contracts a JSON-RPC call reaches, read from its parameters, for a key
//! narrowed to some contracts.

use serde_json::Value;

/// `0x` and 40 hex digits, either case.
pub(super) fn address(text: &str) -> Option<[u8; 20]> {
    let digits = text
        .trim()
        .strip_prefix("0x")
        .or_else(|| text.trim().strip_prefix("0X"))?;
    if digits.len() != 40 {
        return None;
    }
    let mut out = [0u8; 20];
    hex::decode_to_slice(digits, &mut out).ok()?;
    Some(out)
}

/// The contracts a call reaches, as far as a contract restriction needs to know.
pub(super) enum Targets {
    /// The method reaches no contract by its parameters (a balance, a block).
    None,
    Some(Vec<[u8; 20]>),
    /// It may reach any contract and the edge cannot tell which: refused.
    Unchecked(&'static str),
}

/// Methods whose first parameter is a call object with `to`.
const CALL_OBJECT: &[&str] = &[
    "eth_call",
    "eth_estimateGas",
    "eth_createAccessList",
    "eth_fillTransaction",
    "debug_traceCall",
    "trace_call",
];
/// Of those, the ones whose parameters from the third on are state or block overrides
/// (code and storage of any address, put in place for the call).
const OVERRIDES_AFTER_BLOCK: &[&str] = &["eth_call", "eth_estimateGas", "eth_createAccessList"];
/// Methods whose first parameter is the address they read (its code, storage, proof,
/// balance or nonce).
const ADDRESS_FIRST: &[&str] = &[
    "eth_getStorageAt",
    "eth_getCode",
    "eth_getProof",
    "eth_getBalance",
    "eth_getTransactionCount",
];
/// Methods whose first parameter is a logs filter with `address`.
const LOG_FILTER: &[&str] = &["eth_getLogs", "eth_newFilter"];
/// Methods that send a signed transaction as their first parameter.
const SEND_RAW: &[&str] = &[
    "eth_sendRawTransaction",
    "eth_sendRawTransactionConditional",
    "eth_sendRawTransactionSync",
];
/// Methods that carry calls or transactions in shapes of their own (many calls,
/// bundles): under a contract restriction they are refused rather than half-checked.
const MANY_CALLS: &[&str] = &[
    "eth_simulateV1",
    "eth_callMany",
    "eth_callBundle",
    "eth_sendBundle",
    "mev_sendBundle",
    "mev_simBundle",
    "eth_sendPrivateTransaction",
    "eth_sendPrivateRawTransaction",
    "eth_sendTransaction",
    "trace_callMany",
    "debug_traceCallMany",
    "eth_newPendingTransactionFilter",
    "trace_filter",
];

pub(super) fn targets(method: &str, params: Option<&Value>) -> Targets {
    let first = params.and_then(|p| p.get(0));
    if CALL_OBJECT.contains(&method) {
        if overrides(method, params) {
            return Targets::Unchecked("state or block overrides reach any address");
        }
        return match first
            .and_then(|c| c.get("to"))
            .and_then(Value::as_str)
            .and_then(address)
        {
            Some(a) => Targets::Some(vec![a]),
            None => Targets::Unchecked("a call without a 'to' address"),
        };
    }
    if ADDRESS_FIRST.contains(&method) {
        return match first.and_then(Value::as_str).and_then(address) {
            Some(a) => Targets::Some(vec![a]),
            None => Targets::Unchecked("no address to read"),
        };
    }
    if method == "eth_getStorageValues" {
        // `{address: [slots]}`: every address read.
        let list: Option<Vec<[u8; 20]>> = first
            .and_then(Value::as_object)
            .filter(|m| !m.is_empty())
            .and_then(|m| m.keys().map(|k| address(k)).collect());
        return list.map_or(Targets::Unchecked("no address list to read"), Targets::Some);
    }
    if LOG_FILTER.contains(&method) {
        return filter_addresses(first);
    }
    if method == "eth_subscribe" {
        return match first.and_then(Value::as_str) {
            Some("logs") => filter_addresses(params.and_then(|p| p.get(1))),
            Some("newPendingTransactions") => {
                Targets::Unchecked("pending transactions reach every contract")
            }
            _ => Targets::None,
        };
    }
    if SEND_RAW.contains(&method) {
        let Some(raw) = first.and_then(Value::as_str) else {
            return Targets::Unchecked("no signed transaction to read");
        };
        return match crate::signed_tx::decode(raw) {
            Ok(tx) => match tx.to {
                Some(to) => Targets::Some(vec![to]),
                None => Targets::Unchecked("a contract creation"),
            },
            Err(_) => Targets::Unchecked("not a signed transaction"),
        };
    }
    if MANY_CALLS.contains(&method) {
        return Targets::Unchecked("its calls are not checked one by one");
    }
    Targets::None
}

/// Whether a call carries overrides: eth_call's (and its kin's) third parameter on,
/// debug_traceCall's `stateOverrides` / `blockOverrides`. Null counts as none.
fn overrides(method: &str, params: Option<&Value>) -> bool {
    let Some(Value::Array(items)) = params else {
        return false;
    };
    if OVERRIDES_AFTER_BLOCK.contains(&method) {
        return items.iter().skip(2).any(|v| !v.is_null());
    }
    if method == "debug_traceCall" {
        let config = items.get(2);
        return ["stateOverrides", "blockOverrides"]
            .iter()
            .any(|k| config.and_then(|c| c.get(k)).is_some_and(|v| !v.is_null()));
    }
    false
}

fn filter_addresses(filter: Option<&Value>) -> Targets {
    let list: Option<Vec<[u8; 20]>> = match filter.and_then(|f| f.get("address")) {
        Some(Value::String(a)) => address(a).map(|a| vec![a]),
        Some(Value::Array(items)) if !items.is_empty() => {
            items.iter().map(|v| v.as_str().and_then(address)).collect()
        }
        _ => None,
    };
    match list {
        Some(l) => Targets::Some(l),
        None => Targets::Unchecked("a logs filter without an address list"),
    }
}

//! One reading of a call: what the edge checks is what a node reads.
//!
//! The edge parses JSON exactly; Go's `encoding/json` (geth, erigon, bor) matches object
//! keys to struct fields case-insensitively, with Unicode simple folding (`ſ` reads as
//! `s`, the Kelvin sign `K` as `k`), and the last match wins (golang/go#43664). So
//! `{"method":"eth_blockNumber","METHOD":"debug_setHead"}` is a block number to the edge
//! and `debug_setHead` to geth, and `{"to":A,"TO":B}` calls B after the edge checked A.
//! Two rules close the gap, and the gateway then forwards every call re-serialized from
//! its own parse (`Outgoing`), never as the caller's bytes:
//! - no object of a call holds two keys that fold to the same name;
//! - no key folds to a name the edge reads without being that name (a lone `"Params"`,
//!   `"FROMBLOCK"` or `"addreſs"` means something to a Go node and nothing to the edge).
//!
//! Other members of a call (beyond `jsonrpc`, `id`, `method`, `params`) are dropped by
//! the re-serialization, so a node never sees them.

use serde_json::Value;
use std::borrow::Cow;

/// The members of a JSON-RPC 2.0 call.
pub const MEMBERS: [&str; 4] = ["jsonrpc", "id", "method", "params"];

/// Every object member the edge reads inside `params`: key restrictions (`to`,
/// `address`, `from`), the logs guard and block routing (`fromBlock`, `toBlock`,
/// `blockHash`, `blockNumber`, `requireCanonical`), subscriptions (`topics`) and the
/// senders (`hash`, `bundleHash`, `data`, `input`, `stateOverride`s' own keys are
/// addresses, checked by the fold rule alone).
pub const READ_KEYS: &[&str] = &[
    "to",
    "from",
    "address",
    "topics",
    "fromBlock",
    "toBlock",
    "blockHash",
    "blockNumber",
    "requireCanonical",
    "hash",
    "bundleHash",
    "data",
    "input",
];

/// Deepest object nesting walked; serde_json refuses deeper bodies anyway (128).
const MAX_DEPTH: usize = 128;

/// A key as Go compares it: ASCII lowercased; other characters by upper- then
/// lowercasing, which folds each of Unicode's simple-folding orbits Go walks (`ſ`→`s`,
/// `K`→`k`, `ς`→`σ`) to one form. Borrowed when nothing changes.
pub fn fold(key: &str) -> Cow<'_, str> {
    if key.bytes().all(|b| b.is_ascii() && !b.is_ascii_uppercase()) {
        return Cow::Borrowed(key);
    }
    if key.is_ascii() {
        return Cow::Owned(key.to_ascii_lowercase());
    }
    Cow::Owned(
        key.chars()
            .flat_map(char::to_uppercase)
            .flat_map(char::to_lowercase)
            .collect(),
    )
}

/// Why a call's top-level members would read differently on a Go node, if they would.
pub fn check_call(call: &Value) -> Result<(), String> {
    let Value::Object(members) = call else {
        return Ok(());
    };
    // Members beyond the four are dropped when the call is written to a node, so only
    // a spelling of one of the four matters here (`"E"` and `"e"` may both come).
    check_names(members.keys().map(String::as_str), &MEMBERS)?;
    match members.get("params") {
        Some(params) => check_params(params),
        None => Ok(()),
    }
}

/// Why a call's `params` would read differently on a Go node, if they would: every
/// object at any depth. The path to the member is written only for a refusal.
pub fn check_params(params: &Value) -> Result<(), String> {
    walk(params, 0).map_err(|(path, why)| format!("params{path}: {why}"))
}

/// A refusal's path (built outward as the walk unwinds) and reason.
type Refusal = (String, String);

fn walk(v: &Value, depth: usize) -> Result<(), Refusal> {
    if depth > MAX_DEPTH {
        return Err((String::new(), format!("nests deeper than {MAX_DEPTH}")));
    }
    let inside = |segment: String, (path, why): Refusal| (segment + &path, why);
    match v {
        Value::Array(items) => items.iter().enumerate().try_for_each(|(i, item)| {
            walk(item, depth + 1).map_err(|r| inside(format!("[{i}]"), r))
        }),
        Value::Object(members) => {
            check_object(members.keys().map(String::as_str), READ_KEYS)
                .map_err(|why| (String::new(), why))?;
            members.iter().try_for_each(|(k, item)| {
                walk(item, depth + 1).map_err(|r| inside(format!(".{k}"), r))
            })
        }
        _ => Ok(()),
    }
}

/// Objects with more keys than this are checked through a set rather than pairwise.
const PAIRWISE: usize = 16;

/// Whether Go would match `a` and `b` as one name.
fn same_name(a: &str, b: &str) -> bool {
    if a.is_ascii() && b.is_ascii() {
        a.eq_ignore_ascii_case(b)
    } else {
        fold(a) == fold(b)
    }
}

/// No key is a folded spelling of a `known` name without being it.
fn check_names<'a>(mut keys: impl Iterator<Item = &'a str>, known: &[&str]) -> Result<(), String> {
    keys.try_for_each(|key| {
        match known
            .iter()
            .find(|name| **name != key && same_name(name, key))
        {
            Some(name) => Err(format!(
                "member '{key}' is not '{name}' (names are matched exactly; a node would read it as '{name}')"
            )),
            None => Ok(()),
        }
    })
}

/// One object's keys: none is a folded spelling of a `known` name, and no two fold
/// alike. Nothing is allocated for the usual object (few keys, all ASCII).
fn check_object<'a>(
    keys: impl Iterator<Item = &'a str> + Clone,
    known: &[&str],
) -> Result<(), String> {
    check_names(keys.clone(), known)?;
    let repeated = |key: &str| {
        format!(
            "member '{key}' repeats another member's name in another case (a node would read only one)"
        )
    };
    if keys.clone().nth(PAIRWISE).is_none() {
        for (i, key) in keys.clone().enumerate() {
            if keys.clone().take(i).any(|earlier| same_name(earlier, key)) {
                return Err(repeated(key));
            }
        }
        return Ok(());
    }
    let mut seen = std::collections::HashSet::new();
    match keys
        .map(|k| (k, fold(k)))
        .find(|(_, f)| !seen.insert(f.clone()))
    {
        Some((key, _)) => Err(repeated(key)),
        None => Ok(()),
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    fn call(text: &str) -> Result<(), String> {
        check_call(&serde_json::from_str(text).unwrap())
    }

    #[test]
    fn what_a_go_node_reads_differently_is_refused() {
        for refused in [
            r#"{"method":"eth_blockNumber","METHOD":"debug_setHead","params":["0x1"]}"#,
            r#"{"method":"eth_blockNumber","Method":"admin_addPeer"}"#,
            r#"{"Method":"admin_addPeer"}"#,
            r#"{"method":"eth_getBalance","params":["0x1","0x7"],"PARAMS":["0x2","0x7"]}"#,
            r#"{"method":"eth_call","params":[{"to":"0xa","TO":"0xb"}]}"#,
            r#"{"method":"eth_getLogs","params":[{"address":"0xa","ADDRESS":["0xb"]}]}"#,
            r#"{"method":"eth_getLogs","params":[{"FROMBLOCK":"0x0"}]}"#,
            // Go's folding beyond ASCII: the long s and the Kelvin sign.
            "{\"method\":\"eth_getLogs\",\"params\":[{\"addre\u{17f}s\":\"0xb\"}]}",
            "{\"method\":\"eth_getLogs\",\"params\":[{\"fromBloc\u{212a}\":\"0x0\"}]}",
            r#"{"method":"x","params":[{"a":{"stateDiff":{"0x1":"0x2","0X1":"0x3"}}}]}"#,
            r#"{"method":"x","params":[[[{"Kk":1,"kK":2}]]]}"#,
        ] {
            assert!(call(refused).is_err(), "{refused}");
        }
        for passed in [
            r#"{"jsonrpc":"2.0","id":1,"method":"eth_call","params":[{"to":"0xAB","data":"0x"},"latest"]}"#,
            r#"{"method":"eth_getLogs","params":[{"address":["0xa"],"topics":[null,["0x1"]]}]}"#,
            // Unknown members are dropped when forwarded, not refused (even two that
            // fold alike: no node reads either).
            r#"{"method":"eth_chainId","extra":1}"#,
            r#"{"method":"eth_chainId","E":1,"e":2}"#,
            r#"{"method":"x","params":[{"0xAbC":{"balance":"0x1"},"0xdef":{}}]}"#,
        ] {
            assert_eq!(call(passed), Ok(()), "{passed}");
        }
        let why = call(r#"{"method":"eth_chainId","METHOD":"debug_setHead"}"#).unwrap_err();
        assert!(
            why.contains("'METHOD'") && why.contains("'method'"),
            "{why}"
        );
        let why = check_params(&json!([{"to": "0x1"}, {"x": {"TO": 1}}])).unwrap_err();
        assert!(why.starts_with("params[1].x: member 'TO'"), "{why}");
    }

    #[test]
    fn folding_matches_go() {
        assert_eq!(fold("fromBlock"), "fromblock");
        assert_eq!(fold("address"), Cow::Borrowed("address"));
        assert_eq!(fold("addre\u{17f}s"), "address");
        assert_eq!(fold("\u{212a}"), "k");
        assert_eq!(fold("\u{3c2}"), fold("\u{3a3}"));
    }
}

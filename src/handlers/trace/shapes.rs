//! Geth's tracer answers in OpenEthereum's shapes: `callTracer` frames flattened into
//! `trace_*` frames, and a `prestateTracer` diff (or Parity's `stateDiff`) as the
//! envelope's from/to `stateDiff`.

use serde_json::{json, Map, Value};

/// Deepest call nesting flattened (the EVM's own limit is 1024).
const MAX_DEPTH: usize = 1100;

/// `callTracer`'s nested frames as the flat, execution-ordered frames of `trace_*`
/// (`action`, `result`, `error`, `subtraces`, `traceAddress`, `type`).
pub(super) fn flatten(frame: &Value, address: &mut Vec<usize>, out: &mut Vec<Value>) {
    let s = |k: &str| frame.get(k).cloned().unwrap_or(Value::Null);
    let or = |k: &str, d: &str| frame.get(k).cloned().unwrap_or_else(|| json!(d));
    let kind = frame
        .get("type")
        .and_then(Value::as_str)
        .unwrap_or("CALL")
        .to_ascii_lowercase();
    let children = frame.get("calls").and_then(Value::as_array);
    let (ty, action, result) = match kind.as_str() {
        "create" | "create2" => (
            "create",
            json!({"from": s("from"), "gas": or("gas", "0x0"), "init": or("input", "0x"),
                   "value": or("value", "0x0"), "creationMethod": kind}),
            json!({"address": s("to"), "code": or("output", "0x"), "gasUsed": or("gasUsed", "0x0")}),
        ),
        "selfdestruct" => (
            "suicide",
            json!({"address": s("from"), "refundAddress": s("to"), "balance": or("value", "0x0")}),
            Value::Null,
        ),
        _ => (
            "call",
            json!({"callType": kind, "from": s("from"), "to": s("to"), "gas": or("gas", "0x0"),
                   "input": or("input", "0x"), "value": or("value", "0x0")}),
            json!({"gasUsed": or("gasUsed", "0x0"), "output": or("output", "0x")}),
        ),
    };
    let mut flat = Map::new();
    flat.insert("type".into(), json!(ty));
    flat.insert("action".into(), action);
    match frame.get("error") {
        Some(e) => {
            flat.insert("error".into(), e.clone());
            flat.insert("result".into(), Value::Null);
        }
        None => {
            flat.insert("result".into(), result);
        }
    }
    flat.insert("subtraces".into(), json!(children.map_or(0, Vec::len)));
    flat.insert("traceAddress".into(), json!(address));
    out.push(Value::Object(flat));
    if address.len() >= MAX_DEPTH {
        return;
    }
    for (i, child) in children.into_iter().flatten().enumerate() {
        address.push(i);
        flatten(child, address, out);
        address.pop();
    }
}

/// `prestateTracer`'s diff (`pre`: what changed, before; `post`: the changed fields,
/// after) as the envelope's per-account `{balance, nonce, code, storage}` of `{from, to}`.
/// A field the pre state lacks was empty (zero balance or nonce, no code); an account
/// missing from `post` was destroyed; a storage slot missing from `post` was cleared.
pub(super) fn state_diff_from_prestate(diff: &Value) -> Value {
    let empty = Map::new();
    let pre = diff.get("pre").and_then(Value::as_object).unwrap_or(&empty);
    let post = diff
        .get("post")
        .and_then(Value::as_object)
        .unwrap_or(&empty);
    let defaults = [
        ("balance", json!("0x0")),
        ("nonce", json!(0)),
        ("code", json!("0x")),
    ];
    let mut out = Map::new();
    let accounts = pre
        .keys()
        .chain(post.keys().filter(|k| !pre.contains_key(*k)));
    for addr in accounts {
        let before = pre.get(addr).and_then(Value::as_object).unwrap_or(&empty);
        let after = post.get(addr).and_then(Value::as_object);
        let mut account = Map::new();
        for (field, zero) in &defaults {
            let from = before.get(*field).cloned().unwrap_or_else(|| zero.clone());
            let to = match after {
                None => Value::Null,
                Some(a) => match a.get(*field) {
                    Some(v) => v.clone(),
                    None => continue,
                },
            };
            if from != to {
                account.insert((*field).into(), json!({"from": from, "to": to}));
            }
        }
        let no_slots = Map::new();
        let slots_before = before
            .get("storage")
            .and_then(Value::as_object)
            .unwrap_or(&no_slots);
        let slots_after = after
            .and_then(|a| a.get("storage"))
            .and_then(Value::as_object)
            .unwrap_or(&no_slots);
        let zero = json!(format!("0x{}", "0".repeat(64)));
        let mut storage = Map::new();
        for slot in slots_before.keys().chain(
            slots_after
                .keys()
                .filter(|k| !slots_before.contains_key(*k)),
        ) {
            let from = slots_before.get(slot).unwrap_or(&zero);
            let to = slots_after.get(slot).unwrap_or(&zero);
            if from != to {
                storage.insert(slot.clone(), json!({"from": from, "to": to}));
            }
        }
        if !storage.is_empty() {
            account.insert("storage".into(), Value::Object(storage));
        }
        if !account.is_empty() {
            out.insert(addr.clone(), Value::Object(account));
        }
    }
    Value::Object(out)
}

/// A `trace_*` state diff (`"="`, `{"*": {from, to}}`, `{"+": v}`, `{"-": v}` per
/// field) in the envelope's `{from, to}` form; unchanged fields left out.
pub(super) fn state_diff_from_parity(diff: &Value) -> Value {
    let change = |v: &Value| -> Option<Value> {
        if let Some(c) = v.get("*") {
            return Some(json!({"from": c.get("from"), "to": c.get("to")}));
        }
        if let Some(c) = v.get("+") {
            return Some(json!({"from": null, "to": c}));
        }
        v.get("-").map(|c| json!({"from": c, "to": null}))
    };
    let mut out = Map::new();
    for (addr, fields) in diff.as_object().into_iter().flatten() {
        let mut account = Map::new();
        for field in ["balance", "nonce", "code"] {
            if let Some(c) = fields.get(field).and_then(change) {
                account.insert(field.into(), c);
            }
        }
        let storage: Map<String, Value> = fields
            .get("storage")
            .and_then(Value::as_object)
            .into_iter()
            .flatten()
            .filter_map(|(slot, v)| change(v).map(|c| (slot.clone(), c)))
            .collect();
        if !storage.is_empty() {
            account.insert("storage".into(), Value::Object(storage));
        }
        if !account.is_empty() {
            out.insert(addr.clone(), Value::Object(account));
        }
    }
    Value::Object(out)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn call_frames_flatten_in_execution_order() {
        let top = json!({"type": "CALL", "from": "0xa", "to": "0xb", "value": "0x1", "gas": "0x10",
            "gasUsed": "0x8", "input": "0x01", "output": "0x02", "calls": [
                {"type": "STATICCALL", "from": "0xb", "to": "0xc", "gas": "0x4", "gasUsed": "0x1",
                 "input": "0x", "calls": [{"type": "CREATE2", "from": "0xc", "to": "0xd", "gas": "0x2",
                     "gasUsed": "0x1", "input": "0x60", "output": "0x00", "value": "0x0"}]},
                {"type": "DELEGATECALL", "from": "0xb", "to": "0xe", "gas": "0x3", "gasUsed": "0x3",
                 "input": "0x", "error": "execution reverted"},
                {"type": "SELFDESTRUCT", "from": "0xb", "to": "0xf", "value": "0x5"}]});
        let mut frames = Vec::new();
        flatten(&top, &mut Vec::new(), &mut frames);
        let kinds: Vec<(&str, Value)> = frames
            .iter()
            .map(|f| (f["type"].as_str().unwrap(), f["traceAddress"].clone()))
            .collect();
        assert_eq!(
            kinds,
            vec![
                ("call", json!([])),
                ("call", json!([0])),
                ("create", json!([0, 0])),
                ("call", json!([1])),
                ("suicide", json!([2])),
            ]
        );
        assert_eq!(frames[0]["subtraces"], 3);
        assert_eq!(frames[1]["action"]["callType"], "staticcall");
        assert_eq!(frames[2]["action"]["creationMethod"], "create2");
        assert_eq!(frames[2]["result"]["address"], "0xd");
        assert_eq!(frames[3]["error"], "execution reverted");
        assert!(frames[3]["result"].is_null());
        assert_eq!(frames[4]["action"]["refundAddress"], "0xf");
        assert_eq!(frames[0]["result"]["output"], "0x02");
    }

    #[test]
    fn state_diffs_become_from_and_to() {
        let slot = "0x0000000000000000000000000000000000000000000000000000000000000001";
        let v = |n: u8| format!("0x{}{:02x}", "0".repeat(62), n);
        let prestate = json!({
            "pre": {"0xa": {"balance": "0x10", "nonce": 1, "storage": {slot: v(7)}},
                    "0xb": {"balance": "0x5"},
                    "0xdead": {"balance": "0x1", "code": "0x60"}},
            "post": {"0xa": {"balance": "0x8", "nonce": 2},
                     "0xb": {"balance": "0x7"},
                     "0xnew": {"balance": "0x1", "code": "0x6080"}}});
        let d = state_diff_from_prestate(&prestate);
        assert_eq!(d["0xa"]["balance"], json!({"from": "0x10", "to": "0x8"}));
        assert_eq!(d["0xa"]["nonce"], json!({"from": 1, "to": 2}));
        // A slot missing from post was cleared.
        assert_eq!(d["0xa"]["storage"][slot], json!({"from": v(7), "to": v(0)}));
        assert_eq!(d["0xb"].as_object().unwrap().len(), 1);
        assert_eq!(d["0xdead"]["code"], json!({"from": "0x60", "to": null}));
        assert_eq!(d["0xnew"]["code"], json!({"from": "0x", "to": "0x6080"}));
        assert_eq!(
            d["0xnew"]["nonce"],
            Value::Null,
            "unchanged fields are left out"
        );

        let parity = json!({"0xa": {"balance": {"*": {"from": "0x10", "to": "0x8"}}, "nonce": "=",
            "code": "=", "storage": {slot: {"*": {"from": v(7), "to": v(0)}}}},
            "0xnew": {"balance": {"+": "0x1"}, "nonce": {"+": "0x0"}, "code": {"+": "0x60"}, "storage": {}},
            "0xsame": {"balance": "=", "nonce": "=", "code": "=", "storage": {}}});
        let d = state_diff_from_parity(&parity);
        assert_eq!(d["0xa"]["balance"], json!({"from": "0x10", "to": "0x8"}));
        assert_eq!(d["0xa"]["storage"][slot]["to"], v(0));
        assert_eq!(d["0xnew"]["code"], json!({"from": null, "to": "0x60"}));
        assert!(d.get("0xsame").is_none());
    }
}

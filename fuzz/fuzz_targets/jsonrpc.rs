//! The JSON-RPC request path before any upstream: batch counting for the rate limiter
//! and compute units, errors counted in an answer for usage,
//! parsing (the single-call fast path agrees with the general one), method classification, block needs, raw-transaction hashing, and the reading
//! of an upstream's answer to a write. None may panic; the invariants below must hold.
#![no_main]

use chainedge::config::usage::ComputeUnitsConf;
use chainedge::parsers::batch_len;
use chainedge::parsers::{error_answers, ComputeUnits};
use chainedge::parsers::{block_need, classify, MethodClass};
use chainedge::parsers::{method_of, need_at, tx_hash, write_outcome, CallView, Incoming};
use libfuzzer_sys::fuzz_target;
use serde_json::Value;

fuzz_target!(|body: &[u8]| {
    let counted = batch_len(body);
    assert!(counted >= 1);
    // Compute units are charged for exactly the calls the limiter counts.
    static UNITS: std::sync::OnceLock<ComputeUnits> = std::sync::OnceLock::new();
    let units = UNITS.get_or_init(|| ComputeUnits::new(&ComputeUnitsConf::default()));
    let incoming = Incoming::parse(body);
    assert_eq!(incoming.cost(units).calls, counted);
    // The one-reading check (keys a Go node folds together) reads any body.
    let _ = incoming.refusal();
    // An answer's errors are never more than its answers.
    assert!(error_answers(body) <= counted);
    // An upstream's answer is untrusted input too.
    let _ = write_outcome(body);
    let view = CallView::of(body);
    let Ok(parsed) = serde_json::from_slice::<Value>(body) else {
        // The fast path never reads a body the general path refuses.
        assert!(view.is_none());
        return;
    };
    // What the fast path reads is what the general path reads.
    if let Some(v) = &view {
        assert_eq!(method_of(&parsed).ok(), Some(v.method));
        assert_eq!(incoming.method(), Some(v.method));
        // `"params": null` reads as no params.
        let params = parsed.get("params").filter(|p| !p.is_null());
        assert_eq!(v.params.as_ref(), params);
        assert_eq!(
            block_need(v.method, v.params.as_ref()),
            block_need(v.method, parsed.get("params"))
        );
    }
    let calls: Vec<&Value> = match &parsed {
        Value::Array(a) => {
            // The limiter charges what the gateway will run.
            assert_eq!(counted as usize, a.len().max(1));
            a.iter().collect()
        }
        other => vec![other],
    };
    for call in &calls {
        let Ok(method) = method_of(call) else {
            continue;
        };
        let class = classify(method);
        let _ = class.capability();
        let _ = block_need(method, call.get("params"));
        if class == MethodClass::Write {
            if let Some(raw) = call.pointer("/params/0").and_then(Value::as_str) {
                if let Some(h) = tx_hash(raw) {
                    assert_eq!(h.len(), 66);
                }
            }
        }
        // Classification is by exact name: admin/personal/miner never pass.
        if ["admin_", "personal_", "miner_"].iter().any(|p| method.starts_with(p)) {
            assert_eq!(class, MethodClass::Unknown, "{method}");
        }
    }
    for head in [0, 1, u64::MAX] {
        let need = need_at(head, calls.iter().copied());
        assert!(need.min_head >= head.min(need.min_head));
    }
});

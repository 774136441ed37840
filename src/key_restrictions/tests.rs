//! The rules checked one by one, without a server.
use super::targets::address;
use super::*;
use serde_json::json;

fn compiled(v: Value) -> Restrictions {
    let doc: RestrictionsDoc = serde_json::from_value(v).unwrap();
    Restrictions::compile(&doc).unwrap().unwrap()
}

fn restriction(e: ApiError) -> String {
    assert_eq!(e.status, 403, "{}", e.message);
    e.extra["restriction"].as_str().unwrap().to_string()
}

#[test]
fn origins_exact_and_subdomains_with_default_ports() {
    let r = compiled(
        json!({"allowed_origins": ["https://App.example.com:443/", "https://*.dapp.io", "http://localhost:5173"]}),
    );
    assert_eq!(
        r.doc().allowed_origins,
        [
            "https://app.example.com",
            "https://*.dapp.io",
            "http://localhost:5173"
        ]
    );
    for ok in [
        "https://app.example.com",
        "https://APP.example.com",
        "https://a.dapp.io",
        "https://x.y.dapp.io",
        "http://localhost:5173",
    ] {
        assert!(r.request(Some(ok), None, None).is_ok(), "{ok}");
    }
    for no in [
        "https://dapp.io",
        "http://a.dapp.io",
        "https://a.dapp.io:8443",
        "https://evil-dapp.io",
        "https://app.example.com.evil.io",
        "http://app.example.com",
        "null",
        "http://localhost:5174",
    ] {
        assert_eq!(
            restriction(r.request(Some(no), None, None).unwrap_err()),
            "allowed_origins",
            "{no}"
        );
    }
    assert_eq!(
        restriction(r.request(None, None, None).unwrap_err()),
        "allowed_origins"
    );
    for bad in [
        "example.com",
        "https://*",
        "https://*.com",
        "ftp://a.b",
        "https://a.b/path",
        "https://a.*.b",
        "https://u@a.b",
    ] {
        let doc = RestrictionsDoc {
            allowed_origins: vec![bad.into()],
            ..Default::default()
        };
        assert!(Restrictions::compile(&doc).is_err(), "{bad}");
    }
}

#[test]
fn addresses_chains_and_methods() {
    let r = compiled(json!({
        "allowed_ips": ["203.0.113.0/24", "2001:db8::/32"],
        "allowed_chains": ["eth", "base"],
        "allowed_methods": ["eth_getBalance", "net_*"]
    }));
    let ip = |s: &str| Some(s.parse().unwrap());
    assert!(r.request(None, ip("203.0.113.9"), Some("eth")).is_ok());
    assert!(r
        .request(None, ip("::ffff:203.0.113.9"), Some("base"))
        .is_ok());
    assert!(r.request(None, ip("2001:db8::1"), None).is_ok());
    assert_eq!(
        restriction(
            r.request(None, ip("198.51.100.1"), Some("eth"))
                .unwrap_err()
        ),
        "allowed_ips"
    );
    assert_eq!(
        restriction(r.request(None, None, Some("eth")).unwrap_err()),
        "allowed_ips"
    );
    assert_eq!(
        restriction(r.request(None, ip("203.0.113.9"), Some("sol")).unwrap_err()),
        "allowed_chains"
    );
    assert!(r.call("eth_getBalance", None).is_ok());
    assert!(r.call("net_version", None).is_ok());
    assert_eq!(
        restriction(r.call("eth_getBalanceX", None).unwrap_err()),
        "allowed_methods"
    );
    assert_eq!(
        restriction(r.call("eth_call", None).unwrap_err()),
        "allowed_methods"
    );
    for bad in ["*", "eth*", "_*", "eth call", "", "1eth"] {
        let doc = RestrictionsDoc {
            allowed_methods: vec![bad.into()],
            ..Default::default()
        };
        assert!(Restrictions::compile(&doc).is_err(), "{bad}");
    }
    assert_eq!(chain_of_route("eth.wallet.balance"), Some("eth"));
    assert_eq!(chain_of_route("streams.sol.watchlist"), Some("sol"));
    assert_eq!(chain_of_route("streams.mev_share"), Some("eth"));
    assert_eq!(chain_of_route("streams.txs"), None);
}

#[test]
fn contracts_are_checked_where_calls_name_them() {
    let token = "0x00000000000000000000000000000000000000aa";
    let r = compiled(json!({"allowed_contracts": ["0x00000000000000000000000000000000000000AA"]}));
    assert_eq!(r.doc().allowed_contracts, [token]);
    let other = "0x00000000000000000000000000000000000000bb";
    assert!(r
        .call(
            "eth_call",
            Some(&json!([{"to": token, "data": "0x"}, "latest"]))
        )
        .is_ok());
    assert!(r
        .call("eth_getLogs", Some(&json!([{"address": [token]}])))
        .is_ok());
    assert!(r
        .call("eth_subscribe", Some(&json!(["logs", {"address": token}])))
        .is_ok());
    assert!(r.call("eth_subscribe", Some(&json!(["newHeads"]))).is_ok());
    assert!(r.call("eth_blockNumber", None).is_ok());
    for (m, p) in [
        ("eth_getCode", json!([token, "latest"])),
        ("eth_getStorageAt", json!([token, "0x0", "latest"])),
        ("eth_getStorageValues", json!([{token: ["0x0"]}, "latest"])),
        ("eth_call", json!([{"to": token}, "latest", null])),
        (
            "debug_traceCall",
            json!([{"to": token}, "latest", {"tracer": "callTracer"}]),
        ),
    ] {
        assert!(r.call(m, Some(&p)).is_ok(), "{m} {p}");
    }
    for (m, p) in [
        ("eth_call", json!([{"to": other}])),
        ("eth_call", json!([{"data": "0x60"}])),
        ("eth_estimateGas", json!([{"to": other}])),
        ("eth_getLogs", json!([{"address": [token, other]}])),
        ("eth_getLogs", json!([{"fromBlock": "0x1"}])),
        ("eth_getLogs", json!([{"address": []}])),
        ("eth_subscribe", json!(["logs", {}])),
        ("eth_subscribe", json!(["newPendingTransactions"])),
        ("eth_sendRawTransaction", json!(["0x00"])),
        ("eth_simulateV1", json!([{}])),
        // Every method that reads an address, and overrides that put code anywhere.
        ("eth_getStorageAt", json!([other, "0x0", "latest"])),
        ("eth_getCode", json!([other, "latest"])),
        ("eth_getProof", json!([other, [], "latest"])),
        ("eth_getBalance", json!([other, "latest"])),
        ("eth_getTransactionCount", json!([other, "latest"])),
        ("eth_getCode", json!([])),
        ("eth_getStorageValues", json!([{other: ["0x0"]}, "latest"])),
        (
            "eth_getStorageValues",
            json!([{token: ["0x0"], other: ["0x0"]}, "latest"]),
        ),
        ("eth_fillTransaction", json!([{"to": other}])),
        ("trace_filter", json!([{"toAddress": [token]}])),
        (
            "eth_call",
            json!([{"to": token}, "latest", {other: {"code": "0x00"}}]),
        ),
        (
            "eth_estimateGas",
            json!([{"to": token}, "latest", {token: {"balance": "0x1"}}]),
        ),
        (
            "eth_call",
            json!([{"to": token}, "latest", null, {"number": "0x1"}]),
        ),
        (
            "debug_traceCall",
            json!([{"to": token}, "latest", {"stateOverrides": {other: {}}}]),
        ),
    ] {
        assert_eq!(
            restriction(r.call(m, Some(&p)).unwrap_err()),
            "allowed_contracts",
            "{m} {p}"
        );
    }
    assert!(r.transaction(address(token)).is_ok());
    assert!(r.transaction(address(other)).is_err());
    assert!(r.transaction(None).is_err());
}

#[test]
fn bounds_rate_expiry_and_nothing() {
    assert_eq!(
        Restrictions::compile(&RestrictionsDoc::default()).unwrap(),
        None
    );
    let many = RestrictionsDoc {
        allowed_ips: vec!["10.0.0.1".into(); MAX_ENTRIES + 1],
        ..Default::default()
    };
    assert!(Restrictions::compile(&many).is_err());
    for rps in [0.0, 5e-324, -1.0, f64::NAN, 2e6] {
        let doc = RestrictionsDoc {
            max_rps: Some(rps),
            ..Default::default()
        };
        assert!(Restrictions::compile(&doc).is_err(), "{rps}");
    }
    let r = compiled(json!({"expires_at": "2030-01-01T00:00:00Z", "max_rps": 2.5}));
    assert_eq!(r.expires_at, Some(1_893_456_000));
    assert_eq!(r.doc().expires_at.as_deref(), Some("2030-01-01T00:00:00Z"));
    let bad: Result<RestrictionsDoc, _> = serde_json::from_value(json!({"allowed_referrers": []}));
    assert!(bad.is_err());
    // A level every answer must reach: named as the header names it; `none` is nothing.
    let r = compiled(json!({"require_verified": "self"}));
    assert_eq!(r.require_verified, Some("self"));
    assert_eq!(r.doc().require_verified.as_deref(), Some("self"));
    let none: RestrictionsDoc =
        serde_json::from_value(json!({"require_verified": "none"})).unwrap();
    assert_eq!(Restrictions::compile(&none).unwrap(), None);
    let root: RestrictionsDoc =
        serde_json::from_value(json!({"require_verified": "light"})).unwrap();
    let e = Restrictions::compile(&root).err().unwrap();
    assert!(e.starts_with("require_verified: 'light'"), "{e}");
}

#[test]
fn restrictions_are_read_from_an_object_only() {
    // serde's derive would take `[[]]` as a struct of empty lists, field by field.
    for refused in ["[[]]", "[]", "[[\"https://a.example\"]]", "\"x\"", "1"] {
        assert!(
            serde_json::from_str::<RestrictionsDoc>(refused).is_err(),
            "{refused} was read as restrictions"
        );
    }
    let doc: RestrictionsDoc =
        serde_json::from_str(r#"{"allowed_chains": ["eth"], "max_rps": 5}"#).unwrap();
    assert_eq!(doc.allowed_chains, ["eth"]);
    assert!(serde_json::from_str::<RestrictionsDoc>(r#"{"nope": 1}"#).is_err());
    // What is stored reads back the same.
    let again: RestrictionsDoc =
        serde_json::from_str(&serde_json::to_string(&doc).unwrap()).unwrap();
    assert_eq!(again, doc);
}

#[test]
fn a_wrong_entry_is_named_by_its_list_and_index() {
    let cases = [
        (
            json!({"allowed_ips": ["10.0.0.1", "::1", "nope"]}),
            "allowed_ips[2]: 'nope'",
        ),
        (
            json!({"allowed_origins": ["https://a.example", "ftp://b"]}),
            "allowed_origins[1]: 'ftp://b'",
        ),
        (
            json!({"allowed_chains": ["xyz"]}),
            "allowed_chains[0]: 'xyz'",
        ),
        (
            json!({"allowed_methods": ["eth_call", "eth call"]}),
            "allowed_methods[1]: 'eth call'",
        ),
        (
            json!({"allowed_contracts": ["0x12"]}),
            "allowed_contracts[0]: '0x12'",
        ),
    ];
    for (asked, named) in cases {
        let doc: RestrictionsDoc = serde_json::from_value(asked.clone()).unwrap();
        let e = Restrictions::compile(&doc).err().unwrap();
        assert!(e.starts_with(named), "{asked}: {e}");
    }
}

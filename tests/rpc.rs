//! JSON-RPC gateway behaviours through the real binary against two anvil nodes (issue 6).

use common::*;
use serde_json::json;

#[test]
fn filters_stick_to_the_node_that_created_them() {
    let (a, b) = (Anvil::start(1, &[]), Anvil::start(1, &[]));
    let gw = Gateway::start(GatewayOpts {
        pools: format!(
            "  eth_el:\n    hosts:\n      - {{id: el-a, url: \"{}\", family: el-anvil}}\n      - {{id: el-b, url: \"{}\", family: el-anvil}}\n",
            a.url(),
            b.url()
        ),
        extra_yaml: UNLIMITED.into(),
        ..Default::default()
    });
    let key = gw.key("free", &[]);
    let call = |method: &str, params: serde_json::Value| {
        let r = rpc(
            gw.port,
            "/rpc/eth",
            Some(&key),
            &json!({"jsonrpc": "2.0", "id": 1, "method": method, "params": params}),
        );
        assert_eq!(r.status, 200, "{}", r.text());
        r.json()
    };
    // Round-robin spreads creations over both nodes; every poll must find its filter.
    let ids: Vec<String> = (0..6)
        .map(|_| {
            call("eth_newBlockFilter", json!([]))["result"]
                .as_str()
                .unwrap()
                .to_string()
        })
        .collect();
    a.mine(1);
    b.mine(1);
    for id in &ids {
        let v = call("eth_getFilterChanges", json!([id]));
        assert!(v["result"].is_array(), "filter {id} lost: {v}");
    }
    // In a batch too.
    let batch: Vec<_> = ids
        .iter()
        .enumerate()
        .map(|(i, id)| json!({"jsonrpc": "2.0", "id": i, "method": "eth_getFilterChanges", "params": [id]}))
        .collect();
    let r = rpc(gw.port, "/rpc/eth", Some(&key), &json!(batch));
    let answers = r.json();
    assert!(
        answers
            .as_array()
            .unwrap()
            .iter()
            .all(|a| a["result"].is_array()),
        "{answers}"
    );
    for id in &ids {
        assert_eq!(call("eth_uninstallFilter", json!([id]))["result"], true);
    }
    let v = call("eth_getFilterChanges", json!(["0xdeadbeef"]));
    assert_eq!(v["error"]["message"], "filter not found");
}

#[test]
fn trace_and_debug_need_their_plan_and_capability() {
    let a = Anvil::start(1, &[]);
    let gw = Gateway::start(GatewayOpts {
        pools: format!(
            "  eth_el:\n    hosts:\n      - {{id: el-a, url: \"{}\", family: el-anvil, capabilities: [debug]}}\n",
            a.url()
        ),
        extra_yaml: format!("rpc:\n  method_plans: {{debug: pro, trace: business}}\n{UNLIMITED}"),
        ..Default::default()
    });
    let (free, pro) = (gw.key("free", &[]), gw.key("pro", &[]));
    let trace_call = json!({"jsonrpc": "2.0", "id": 7, "method": "debug_traceBlockByNumber", "params": ["0x1", {}]});
    let r = rpc(gw.port, "/rpc/eth", Some(&free), &trace_call);
    // A JSON-RPC answer to call 7, the 403 and its fields kept (in `error.data`).
    assert_eq!(r.status, 403, "{}", r.text());
    let single = r.json();
    assert_eq!(single["id"], 7);
    assert_eq!(single["error"]["code"], -32002);
    let data = &single["error"]["data"];
    assert_eq!(data["error"], "tier_insufficient");
    assert_eq!(data["required_tier"], "pro");
    assert_eq!(data["current_tier"], "free");
    assert_eq!(r.header("X-Required-Tier"), Some("pro"));
    // Inside a batch: the same error object as the call's answer, the others answered.
    let batch =
        json!([trace_call, {"jsonrpc": "2.0", "id": 8, "method": "eth_chainId", "params": []}]);
    let v = rpc(gw.port, "/rpc/eth", Some(&free), &batch).json();
    let mut alone = single["error"].clone();
    let mut batched = v[0]["error"].clone();
    for e in [&mut alone, &mut batched] {
        e["data"].as_object_mut().unwrap().remove("request_id");
    }
    assert_eq!((&v[0]["id"], batched), (&json!(7), alone), "{v}");
    assert_eq!(v[1]["result"], "0x1");
    // The right plan reaches a host with the capability.
    let v = rpc(gw.port, "/rpc/eth", Some(&pro), &trace_call).json();
    assert!(v["result"].is_array(), "{v}");
    // trace_* needs business here; and no host has the trace capability anyway.
    let r = rpc(
        gw.port,
        "/rpc/eth",
        Some(&pro),
        &json!({"jsonrpc": "2.0", "id": 1, "method": "trace_block", "params": ["0x1"]}),
    );
    assert_eq!(r.json()["error"]["data"]["required_tier"], "business");
    let business = gw.key("business", &[]);
    let r = rpc(
        gw.port,
        "/rpc/eth",
        Some(&business),
        &json!({"jsonrpc": "2.0", "id": 1, "method": "trace_block", "params": ["0x1"]}),
    );
    assert_eq!(r.status, 503, "{}", r.text());
}

#[test]
fn per_host_rpc_and_builder_forwarding() {
    let (a, b) = (Anvil::start(1, &[]), Anvil::start(1, &[]));
    b.mine(5);
    let builder = Fixture::start(|req| {
        let v: serde_json::Value = serde_json::from_slice(&req.body).unwrap_or_default();
        if req.method == "POST" {
            FixtureResponse::json(
                json!({"jsonrpc": "2.0", "id": v["id"], "result": {"bundleHash": "0xb0b0"}}),
            )
        } else {
            FixtureResponse::status(404, "no")
        }
    });
    let gw = Gateway::start(GatewayOpts {
        pools: format!(
            "  eth_el:\n    max_lag: 1000\n    hosts:\n      - {{id: el-a, url: \"{}\", family: el-anvil}}\n      - {{id: el-b, url: \"{}\", family: el-anvil}}\n\
             \x20 eth_mev_builder:\n    hosts:\n      - {{id: builder-1, url: \"{}\", family: builder}}\n",
            a.url(),
            b.url(),
            builder.url()
        ),
        extra_yaml: UNLIMITED.into(),
        ..Default::default()
    });
    let block_number =
        json!({"jsonrpc": "2.0", "id": 1, "method": "eth_blockNumber", "params": []});
    // Loopback is admin: each host answers for itself.
    let r = rpc(gw.port, "/v1/eth/mesh/rpc/el-a", None, &block_number);
    assert_eq!(r.json()["result"], "0x1", "{}", r.text());
    let r = rpc(gw.port, "/v1/eth/mesh/rpc/el-b", None, &block_number);
    assert_eq!(r.json()["result"], "0x6", "{}", r.text());
    let r = rpc(gw.port, "/v1/eth/mesh/rpc/el-zz", None, &block_number);
    assert_eq!(
        (r.status, r.json()["error"].as_str()),
        (404, Some("unknown_host"))
    );

    // Builder RPC: business and above, bundle methods only.
    let (pro, business) = (gw.key("pro", &[]), gw.key("business", &[]));
    let bundle = json!({"jsonrpc": "2.0", "id": 3, "method": "eth_sendBundle", "params": [{"txs": ["0x02"], "blockNumber": "0x10"}]});
    let r = rpc(gw.port, "/v1/eth/mev/builder", Some(&pro), &bundle);
    assert_eq!(
        (r.status, r.json()["error"].as_str()),
        (403, Some("tier_insufficient"))
    );
    let hits = builder.hits();
    let r = rpc(
        gw.port,
        "/v1/eth/mev/builder",
        Some(&business),
        &json!({"jsonrpc": "2.0", "id": 1, "method": "eth_getBalance", "params": []}),
    );
    assert_eq!(
        (r.status, r.json()["error"].as_str()),
        (403, Some("method_unknown"))
    );
    assert_eq!(
        builder.hits(),
        hits,
        "refused calls must not reach the builder"
    );
    let r = rpc(gw.port, "/v1/eth/mev/builder", Some(&business), &bundle);
    assert_eq!(r.status, 200, "{}", r.text());
    assert_eq!(r.json()["result"]["bundleHash"], "0xb0b0");
    assert_eq!(builder.hits(), hits + 1);
}

#[test]
fn rest_senders_raw_and_bundle() {
    let a = Anvil::start(1, &[]);
    let builder = Fixture::start(|req| {
        let v: serde_json::Value = serde_json::from_slice(&req.body).unwrap_or_default();
        if req.method == "POST"
            && v["method"] == "eth_sendBundle"
            && v["params"][0]["blockNumber"] == "0x20"
        {
            FixtureResponse::json(
                json!({"jsonrpc": "2.0", "id": v["id"], "result": {"bundleHash": "0xbundle"}}),
            )
        } else {
            FixtureResponse::status(404, "no")
        }
    });
    let gw = Gateway::start(GatewayOpts {
        pools: format!(
            "  eth_el:\n    hosts:\n      - {{id: el-a, url: \"{}\", family: el-anvil}}\n\
             \x20 eth_mev_builder:\n    hosts:\n      - {{id: builder-1, url: \"{}\", family: builder}}\n",
            a.url(),
            builder.url()
        ),
        extra_yaml: UNLIMITED.into(),
        ..Default::default()
    });
    // A real signed transaction from anvil's unlocked dev account.
    let raw = a
        .call(
            "eth_signTransaction",
            json!([{"from": "0xf39Fd6e51aad88F6F4ce6aB8827279cffFb92266", "to": "0x70997970C51812dc3A010C7d01b50e0d17dc79C8",
                    "value": "0x1", "gas": "0x5208", "maxFeePerGas": "0x77359400", "maxPriorityFeePerGas": "0x3b9aca00", "nonce": "0x0"}]),
        )
        .as_str()
        .unwrap()
        .to_string();
    let (free, basic, pro) = (
        gw.key("free", &[]),
        gw.key("basic", &[]),
        gw.key("pro", &[]),
    );
    let send = |key: &str, body: serde_json::Value| {
        let h = [("Content-Type", "application/json"), ("x-token", key)];
        request(
            gw.port,
            "POST",
            "/v1/eth/sender/raw",
            &h,
            body.to_string().as_bytes(),
        )
        .unwrap()
    };
    let r = send(&free, json!({"raw_tx": raw}));
    assert_eq!(
        (r.status, r.json()["required_tier"].as_str()),
        (403, Some("basic"))
    );
    let r = send(&basic, json!({"raw_tx": raw}));
    assert_eq!(r.status, 200, "{}", r.text());
    let hash = r.json()["tx_hash"].as_str().unwrap().to_string();
    assert_eq!(r.json()["path_used"], "public");
    let mut receipt = serde_json::Value::Null;
    for _ in 0..40 {
        receipt = a.call("eth_getTransactionReceipt", json!([hash]));
        if !receipt.is_null() {
            break;
        }
        std::thread::sleep(std::time::Duration::from_millis(50));
    }
    assert_eq!(receipt["status"], "0x1", "mined by anvil: {receipt}");
    // Resending the same signed bytes is safe.
    let r = send(&basic, json!({"raw_tx": raw}));
    assert_eq!(
        (r.status, r.json()["tx_hash"].as_str()),
        (200, Some(hash.as_str())),
        "{}",
        r.text()
    );
    for bad in [
        json!({"raw_tx": "0x12"}),
        json!({"raw_tx": "nothex"}),
        json!({}),
        json!({"raw_tx": raw, "preferred_path": "moon"}),
    ] {
        let r = send(&basic, bad.clone());
        assert_eq!(
            (r.status, r.json()["error"].as_str()),
            (400, Some("invalid_params")),
            "{bad}"
        );
    }
    // The transaction is in the mempool already: a resend pinned to another route is
    // answered with the route that took it, and reaches no node.
    let r = send(&basic, json!({"raw_tx": raw, "preferred_path": "private"}));
    assert_eq!(
        (r.status, r.json()["path_used"].as_str()),
        (200, Some("public"))
    );
    // A new transaction pinned to a route that has no pool here.
    let raw2 = a
        .call(
            "eth_signTransaction",
            json!([{"from": "0xf39Fd6e51aad88F6F4ce6aB8827279cffFb92266", "to": "0x70997970C51812dc3A010C7d01b50e0d17dc79C8",
                    "value": "0x2", "gas": "0x5208", "maxFeePerGas": "0x77359400", "maxPriorityFeePerGas": "0x3b9aca00", "nonce": "0x1"}]),
        )
        .as_str()
        .unwrap()
        .to_string();
    let r = send(&basic, json!({"raw_tx": raw2, "preferred_path": "private"}));
    assert_eq!(r.status, 503, "no private pool here");

    // Bundles go to the builder pool and come back as a bundle hash.
    let post_bundle = |body: serde_json::Value| {
        let h = [
            ("Content-Type", "application/json"),
            ("x-token", pro.as_str()),
        ];
        request(
            gw.port,
            "POST",
            "/v1/eth/sender/bundle",
            &h,
            body.to_string().as_bytes(),
        )
        .unwrap()
    };
    let r = post_bundle(json!({"txs": [raw], "block_number": 32}));
    assert_eq!(r.status, 200, "{}", r.text());
    assert_eq!(r.json()["bundle_hash"], "0xbundle");
    let hits = builder.hits();
    let r = post_bundle(json!({"txs": [], "block_number": 32}));
    assert_eq!(r.status, 400);
    assert_eq!(builder.hits(), hits);
}

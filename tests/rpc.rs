//! JSON-RPC gateway behaviours through the real binary against two anvil nodes (issue 6).

mod common;
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

//! The execution-apis conformance requests (`tests/data/execution-apis-requests.jsonl`,
//! from `ethereum/execution-apis` `tests/*/*.io`), each sent once straight to an anvil
//! node and once through `/rpc/eth` with an enterprise key: the answers must be the same
//! JSON-RPC answer, except the documented refusals (`docs/rpc.md`).

use common::*;
use serde_json::{json, Value};

/// Methods the product refuses on purpose (they act with a node's own keys or powers).
const REFUSED: &[&str] = &["testing_buildBlockV1"];

#[test]
fn execution_apis_requests_answer_as_the_node_does() {
    let node = Anvil::start(1, &[]);
    let gw = Gateway::start(GatewayOpts {
        pools: format!(
            "  eth_el:\n    hosts:\n      - {{id: el-1, url: \"{}\", family: el-anvil, capabilities: [debug, trace, txpool]}}\n",
            node.url()
        ),
        extra_yaml: UNLIMITED.into(),
        ..Default::default()
    });
    let key = gw.key("enterprise", &[]);
    let text = std::fs::read_to_string(root().join("tests/data/execution-apis-requests.jsonl"))
        .expect("the vendored requests");
    let cases: Vec<Value> = text
        .lines()
        .map(|l| serde_json::from_str(l).unwrap())
        .collect();
    assert!(cases.len() >= 200, "{} cases", cases.len());
    let (mut same, mut refused, mut node_errors, mut differ) = (0, 0, 0, Vec::new());
    for case in &cases {
        let name = case["case"].as_str().unwrap();
        let req = &case["request"];
        let method = req["method"].as_str().unwrap_or_default();
        let edge = rpc(gw.port, "/rpc/eth", Some(&key), req);
        if REFUSED.contains(&method) {
            let v = edge.json();
            assert_eq!(edge.status, 403, "{name}: {v}");
            assert_eq!(
                (&v["id"], &v["error"]["code"]),
                (&req["id"], &json!(-32601)),
                "{name}: {v}"
            );
            refused += 1;
            continue;
        }
        let direct = rpc(node.port, "/", None, req);
        let (d, e) = (direct.json(), edge.json());
        if (direct.status, &d) == (edge.status, &e) {
            same += 1;
            node_errors += usize::from(d.get("error").is_some());
        } else {
            differ.push(format!(
                "{name}: node {} {d:.300}\n   edge {} {e:.300}",
                direct.status, edge.status
            ));
        }
    }
    eprintln!(
        "{same} same ({node_errors} of them the node's own error), {refused} refused as documented, {} differ",
        differ.len()
    );
    assert!(differ.is_empty(), "{}", differ.join("\n"));
    // The node's deterministic errors (an unknown block, a bad range, a method anvil
    // lacks) are answers too: HTTP 200 with the node's code and message.
    assert!(
        node_errors >= 10,
        "only {node_errors} node errors exercised"
    );
}

#[test]
fn operators_allow_and_deny_methods_per_pool() {
    let node = Anvil::start(1, &[]);
    let gw = Gateway::start(GatewayOpts {
        pools: format!(
            "  eth_el:\n    methods: {{allow: [anvil_nodeInfo], deny: [eth_getProof]}}\n    hosts:\n      - {{id: el-1, url: \"{}\", family: el-anvil}}\n",
            node.url()
        ),
        extra_yaml: UNLIMITED.into(),
        ..Default::default()
    });
    let key = gw.key("free", &[]);
    let call = |id: u64, method: &str, params: Value| {
        rpc(
            gw.port,
            "/rpc/eth",
            Some(&key),
            &json!({"jsonrpc": "2.0", "id": id, "method": method, "params": params}),
        )
    };
    let allowed = call(1, "anvil_nodeInfo", json!([]));
    assert_eq!(allowed.status, 200, "{}", allowed.text());
    assert!(allowed.json()["result"].is_object(), "{}", allowed.text());
    let denied = call(2, "eth_getProof", json!([ZERO, [], "latest"]));
    let v = denied.json();
    assert_eq!(denied.status, 403, "{v}");
    assert_eq!(
        (&v["id"], &v["error"]["code"]),
        (&json!(2), &json!(-32601)),
        "{v}"
    );
    assert_eq!(v["error"]["data"]["error"], "method_unknown");
    // Everything else keeps the table: another node-admin method is still refused.
    assert_eq!(
        call(3, "anvil_setBalance", json!([ZERO, "0x1"])).status,
        403
    );
}

const ZERO: &str = "0x0000000000000000000000000000000000000000";

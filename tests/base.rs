//! The planned Base route (issue 6 point 6): release switch, origin and edge modes,
//! keys refused before any upstream, the portal for every WebSocket upgrade.

use common::*;
use serde_json::json;

fn base_node() -> Fixture {
    Fixture::start(|req| {
        if req.header("upgrade").is_some() {
            // The portal: record the upgrade, refuse it (a fixture speaks no WebSocket).
            return FixtureResponse::status(400, "portal saw the upgrade");
        }
        let v: serde_json::Value = serde_json::from_slice(&req.body).unwrap_or_default();
        let result = match v["method"].as_str() {
            Some("eth_chainId") => json!("0x2105"),
            Some("eth_blockNumber") => json!("0x10"),
            Some("eth_syncing") => json!(false),
            _ => json!(null),
        };
        if v.is_array() {
            // Health probe batch.
            return FixtureResponse::json(json!([
                {"jsonrpc": "2.0", "id": 1, "result": "0x10"},
                {"jsonrpc": "2.0", "id": 2, "result": false}
            ]));
        }
        FixtureResponse::json(json!({"jsonrpc": "2.0", "id": v["id"], "result": result}))
    })
}

fn base_gateway(node: &Fixture, portal: &Fixture, native: bool, mode: &str) -> Gateway {
    Gateway::start(GatewayOpts {
        pools: format!(
            "  base:\n    hosts:\n      - {{id: base-1, url: \"{}\", family: el-reth}}\n\
             \x20 base_portal:\n    hosts:\n      - {{id: portal-1, url: \"{}\", family: portal}}\n",
            node.url(),
            portal.url()
        ),
        extra_yaml: format!("base_mode: {mode}\n{UNLIMITED}"),
        env: vec![("BASE_NATIVE".into(), native.to_string())],
        ..Default::default()
    })
}

fn chain_id(gw: &Gateway, key: Option<&str>) -> Resp {
    rpc(
        gw.port,
        "/rpc/base",
        key,
        &json!({"jsonrpc": "2.0", "id": 1, "method": "eth_chainId", "params": []}),
    )
}

#[test]
fn base_route_is_off_until_the_switch() {
    let (node, portal) = (base_node(), base_node());
    let gw = base_gateway(&node, &portal, false, "edge");
    let key = gw.key("free", &["rpc:read"]);
    let r = chain_id(&gw, Some(&key));
    assert_eq!(
        (r.status, r.json()["error"]["data"]["error"].as_str()),
        (503, Some("route_disabled"))
    );
    assert_eq!(gw.get("/rpc/base", &[]).status, 503);
    assert_eq!(node.hits(), 0);
}

#[test]
fn base_origin_mode_keys_before_upstream() {
    let (node, portal) = (base_node(), base_node());
    let gw = base_gateway(&node, &portal, true, "origin");
    let good = gw.key("free", &["rpc:read"]);
    // A key without rpc:read (the CLI gives rpc:read,rpc:write when no scope is named).
    let unscoped = gw.key("free", &["sol_watchlist"]);
    // Refusals, none of which reaches the node.
    assert_eq!(chain_id(&gw, None).status, 401);
    assert_eq!(chain_id(&gw, Some("ce_not-a-key")).status, 401);
    let r = chain_id(&gw, Some(&unscoped));
    assert_eq!(r.status, 403, "{}", r.text());
    assert_eq!(r.json()["error"]["data"]["required_scope"], "rpc:read");
    assert_eq!(r.json()["error"]["code"], -32002);
    assert_eq!(node.hits(), 0, "refused keys reached the node");
    // The smoke check.
    let r = chain_id(&gw, Some(&good));
    assert_eq!(r.json()["result"], "0x2105", "{}", r.text());
    assert_eq!(node.hits(), 1, "the node saw:{}", node.client_requests());
    // At the origin, anything but POST to exactly /rpc/base: 405 Allow: POST.
    for method in ["GET", "HEAD", "PUT", "DELETE"] {
        let r = request(gw.port, method, "/rpc/base", &[], b"").unwrap();
        assert_eq!(r.status, 405, "{method}");
        assert_eq!(r.header("Allow"), Some("POST"), "{method}");
    }
}

#[test]
fn base_edge_mode_page_and_portal_upgrades() {
    let (node, portal) = (base_node(), base_node());
    let gw = base_gateway(&node, &portal, true, "edge");
    let key = gw.key("free", &["rpc:read"]);
    let r = gw.get("/rpc/base", &[]);
    assert_eq!(r.status, 200);
    assert!(r.header("Content-Type").unwrap().starts_with("text/html"));
    assert!(r.text().contains("chain id 8453"));
    assert_eq!(
        request(gw.port, "HEAD", "/rpc/base", &[], b"")
            .unwrap()
            .status,
        200
    );
    assert_eq!(chain_id(&gw, Some(&key)).json()["result"], "0x2105");
    // Every upgrade goes to the portal, never to the page.
    for path in ["/rpc/base", "/ws/base", "/ws/base-feed", "/ws/base-auction"] {
        let before = portal.hits();
        let r = request(
            gw.port,
            "GET",
            path,
            &[&WS_UPGRADE[..], &[("x-token", key.as_str())]].concat(),
            b"",
        )
        .unwrap();
        assert!(!r.text().contains("<html"), "{path} served the page");
        assert_eq!(portal.hits(), before + 1, "{path} did not reach the portal");
        let seen = portal.seen.lock().unwrap();
        let last = seen.last().unwrap();
        assert_eq!(last.path, path);
        assert!(
            last.header("x-token").is_none(),
            "the caller's key travelled to the portal"
        );
    }
    // Without a key the upgrade never reaches the portal.
    let before = portal.hits();
    let r = request(gw.port, "GET", "/ws/base", &WS_UPGRADE, b"").unwrap();
    assert_eq!(r.status, 401);
    assert_eq!(portal.hits(), before);
}

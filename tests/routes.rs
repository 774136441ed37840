//! Every route of every manifest is classified and answered in its surface's envelope,
//! through the real binary.

use common::*;
use serde_json::{json, Value};

fn sample(param: &str, route: &str) -> String {
    match param {
        "address" => "0x00000000000000000000000000000000000000aa".into(),
        "validator_index" | "epoch" | "id" => "7".into(),
        "metrics_path" => "h1/el-geth".into(),
        "beacon_path" => "eth/v1/node/health".into(),
        _ if route.is_empty() => "x".into(),
        _ => "x1".into(),
    }
}

fn concrete(path: &str) -> String {
    path.split('/')
        .map(
            |seg| match seg.strip_prefix('{').and_then(|s| s.strip_suffix('}')) {
                Some(p) => sample(p.trim_start_matches('*'), "r"),
                None => seg.to_string(),
            },
        )
        .collect::<Vec<_>>()
        .join("/")
}

/// Assert the body is exactly the envelope of `surface_envelope`.
fn assert_envelope(envelope: &str, r: &Resp, ctx: &str) {
    let v = r.json();
    if envelope == "json_rpc" {
        // A JSON-RPC 2.0 error answer; the edge's code and request id in `data`.
        assert_eq!(v["jsonrpc"], "2.0", "{ctx}: {v}");
        assert!(v.get("id").is_some(), "{ctx}: {v}");
        assert!(v["error"]["code"].is_i64(), "{ctx}: {v}");
        assert!(v["error"]["message"].is_string(), "{ctx}: {v}");
        assert!(v["error"]["data"]["error"].is_string(), "{ctx}: {v}");
        assert_eq!(
            v["error"]["data"]["request_id"].as_str(),
            r.header("x-request-id"),
            "{ctx}: {v}"
        );
        return;
    }
    let obj = v
        .as_object()
        .unwrap_or_else(|| panic!("{ctx}: body is not an object: {v}"));
    assert!(
        obj.get("error").is_some_and(Value::is_string),
        "{ctx}: no error string: {v}"
    );
    match envelope {
        "chain_rest" => {
            assert!(
                obj.get("message").is_some_and(Value::is_string),
                "{ctx}: {v}"
            );
            assert_eq!(
                obj.get("request_id").and_then(Value::as_str),
                r.header("x-request-id"),
                "{ctx}: {v}"
            );
        }
        "console" | "admin" => assert_eq!(
            obj.len(),
            1,
            "{ctx}: {envelope} envelope has only 'error': {v}"
        ),
        "stream" => {
            assert_eq!(obj.len(), 2, "{ctx}: {v}");
            assert_eq!(obj["code"], json!(r.status), "{ctx}: {v}");
        }
        other => panic!("unknown envelope {other}"),
    }
}

#[test]
fn every_manifest_route_is_classified_in_its_envelope() {
    let anvil = Anvil::start(1, &[]);
    let gw = Gateway::start(GatewayOpts {
        pools: format!(
            "  eth_el:\n    hosts:\n      - {{id: el-1, url: \"{}\", family: el-anvil}}\n",
            anvil.url()
        ),
        ..Default::default()
    });
    let key = gw.key(
        "scale",
        &["rpc:read", "rpc:write", "sol_watchlist", "sol_gpa_snapshot"],
    );
    let auth = format!("Bearer {key}");

    // Each route's expected answer, from its contract entry.
    let mut probes = serde_json::Map::new();
    for entry in std::fs::read_dir(root().join("plugins/contract")).unwrap() {
        let text = std::fs::read_to_string(entry.unwrap().path()).unwrap();
        let c: Value = serde_yaml::from_str(&text).unwrap();
        for (name, route) in c["routes"].as_object().into_iter().flatten() {
            if !route["probe"].is_null() {
                probes.insert(name.clone(), route["probe"].clone());
            }
        }
    }

    let mut checked = 0;
    for entry in std::fs::read_dir(root().join("plugins")).unwrap() {
        let file = entry.unwrap().path();
        if file.is_dir() {
            continue; // plugins/contract/: the routes' schemas
        }
        let m: Value = serde_yaml::from_str(&std::fs::read_to_string(&file).unwrap()).unwrap();
        let default_env = m["envelope"].as_str().unwrap().to_string();
        for route in m["routes"].as_array().unwrap() {
            let name = route["name"].as_str().unwrap();
            let envelope = route["envelope"].as_str().unwrap_or(&default_env);
            let path = concrete(route["path"].as_str().unwrap());
            let methods: Vec<&str> = route["methods"]
                .as_array()
                .unwrap()
                .iter()
                .map(|m| m.as_str().unwrap())
                .collect();
            let disabled = route["enabled"] == json!(false) || route["switch"].is_string();
            let ctx = |m: &str| format!("{} {m} {path}", name);
            // Edge-only routes are not in an origin gateway's table (tests/base.rs).
            if route["edge_only"] == json!(true) {
                continue;
            }
            let page_on_same_path = m["routes"].as_array().unwrap().iter().any(|o| {
                o["path"] == route["path"]
                    && o["methods"].as_array().unwrap().iter().any(|x| x == "GET")
            });
            if methods.is_empty() && page_on_same_path {
                // A plain GET belongs to the page on that path (checked as its own route).
                continue;
            }
            if methods.is_empty() {
                // WebSocket-only channel: a plain GET is told to upgrade, unless the
                // channel is switched off (then every request is 503).
                let r = gw.get(&path, &[("Authorization", &auth)]);
                let expected = if route["enabled"] == json!(false) {
                    503
                } else {
                    426
                };
                assert_eq!(r.status, expected, "{}", ctx("GET"));
                assert_envelope(envelope, &r, &ctx("GET"));
                checked += 1;
                continue;
            }
            for method in methods {
                let body: &[u8] = if route["handler"] == "json_rpc" {
                    br#"{"jsonrpc":"2.0","id":1,"method":"eth_chainId","params":[]}"#
                } else {
                    b""
                };
                let r = request(
                    gw.port,
                    method,
                    &path,
                    &[
                        ("Authorization", &auth),
                        ("Content-Type", "application/json"),
                    ],
                    body,
                )
                .unwrap();
                assert!(
                    r.header("x-request-id").is_some_and(|v| !v.is_empty()),
                    "{}: no X-Request-Id",
                    ctx(method)
                );
                assert_eq!(r.header("server"), Some("chainedge"), "{}", ctx(method));
                // Every handler is built: each answers for real, or refuses in its
                // envelope, as the route's contract entry says (`probe:`).
                let (expected, built_code) = if disabled {
                    (503, "route_disabled".to_string())
                } else {
                    let probe = probes.get(name).unwrap_or_else(|| {
                        panic!("{name}: no `probe:` in its plugins/contract/ entry")
                    });
                    let code = probe["error"].as_str().unwrap_or_default().to_string();
                    (probe["status"].as_u64().unwrap() as u16, code)
                };
                assert_eq!(r.status, expected, "{}: {}", ctx(method), r.text());
                if r.status == 200 && method != "HEAD" {
                    let (v, probe) = (r.json(), &probes[name]);
                    for (at, want) in probe["equals"].as_object().into_iter().flatten() {
                        assert_eq!(v.pointer(at), Some(want), "{} {at}: {v}", ctx(method));
                    }
                    for at in probe["has"].as_array().into_iter().flatten() {
                        let at = at.as_str().unwrap();
                        let found = v.pointer(at).is_some_and(|x| !x.is_null());
                        assert!(found, "{} has no {at}: {v}", ctx(method));
                    }
                } else if method != "HEAD" {
                    assert_envelope(envelope, &r, &ctx(method));
                    let body = r.json();
                    let code = match envelope {
                        "json_rpc" => &body["error"]["data"]["error"],
                        _ => &body["error"],
                    };
                    let code = code.as_str().unwrap().to_string();
                    if envelope != "admin" {
                        assert_eq!(code, built_code, "{}", ctx(method));
                    }
                }
                checked += 1;
            }
        }
    }
    assert!(checked >= 80, "only {checked} route/method pairs checked");
}

#[test]
fn unknown_paths_wrong_methods_and_traversal() {
    let gw = Gateway::start(GatewayOpts::default());

    let r = gw.get("/v1/eth/nothing-here", &[]);
    assert_eq!(r.status, 404);
    assert_eq!(r.json()["error"], "route_not_found");
    assert_envelope("chain_rest", &r, "404");
    // An unknown path under a surface answers in that surface's envelope.
    for (path, want) in [
        ("/v1/auth/nothing-here", json!({"error": "route_not_found"})),
        ("/v1/keys/a/b/c", json!({"error": "route_not_found"})),
        (
            "/v1/admin/nothing-here",
            json!({"error": "no route matches this path"}),
        ),
    ] {
        let r = gw.get(path, &[]);
        assert_eq!((r.status, r.json()), (404, want), "{path}");
    }

    // 405 with Allow, in each surface's envelope.
    let r = request(gw.port, "DELETE", "/v1/polygon/mempool/stats", &[], b"").unwrap();
    assert_eq!((r.status, r.header("allow")), (405, Some("GET")));
    assert_envelope("chain_rest", &r, "405 chain");
    let r = request(gw.port, "POST", "/v1/eth/mesh/health", &[], b"").unwrap();
    assert_eq!((r.status, r.header("allow")), (405, Some("GET")));
    assert_eq!(r.json(), json!({"error": "only GET supported"}));
    let r = request(gw.port, "POST", "/sse/eth-mev-share", &[], b"").unwrap();
    assert_eq!(
        r.json(),
        json!({"error": "method_not_allowed", "code": 405})
    );
    let r = request(gw.port, "PUT", "/v1/auth/me", &[], b"").unwrap();
    assert_eq!(r.json(), json!({"error": "method_not_allowed"}));
    // Same path, different methods: the Allow header lists them all.
    let r = request(gw.port, "PUT", "/v1/sol/watchlist/abc", &[], b"").unwrap();
    assert_eq!(r.header("allow"), Some("DELETE, GET"));
    // SPEC: a non-POST to exactly /rpc/base is 405 with Allow: POST.
    for m in ["GET", "HEAD", "PUT"] {
        let r = request(gw.port, m, "/rpc/base", &[], b"").unwrap();
        assert_eq!((r.status, r.header("allow")), (405, Some("POST")), "{m}");
    }

    // Traversal and encoded slashes are refused before any handler.
    for p in [
        "/v1/eth/wallet/..%2f../balance",
        "/v1/eth/wallet/%2e%2e/balance",
        "/v1/sol/watchlist/a%2Fb",
    ] {
        let r = gw.get(p, &[]);
        assert_eq!(r.status, 400, "{p}: {}", r.text());
        assert_eq!(r.json()["error"], "invalid_path", "{p}");
    }
    // Doubled slashes collapse onto the route.
    let r = gw.get("/v1//polygon/mempool//stats", &[]);
    assert_eq!(r.json()["error"], "unauthorized");

    // A caller's well-formed request id is kept; a hostile one is replaced.
    let r = gw.get("/nope", &[("X-Request-Id", "trace-abc.123")]);
    assert_eq!(r.header("x-request-id"), Some("trace-abc.123"));
    let r = gw.get("/nope", &[("X-Request-Id", "bad id\"{")]);
    assert_ne!(r.header("x-request-id"), Some("bad id\"{"));
}

#[test]
fn cors_per_route_policy() {
    let gw = Gateway::start(GatewayOpts::default());
    let pre = |path: &str, origin: &str, method: &str| {
        request(
            gw.port,
            "OPTIONS",
            path,
            &[
                ("Origin", origin),
                ("Access-Control-Request-Method", method),
                ("Access-Control-Request-Headers", "authorization"),
            ],
            b"",
        )
        .unwrap()
    };
    // Dapps on any origin: /rpc/eth and chain REST, no cookies.
    let r = pre("/rpc/eth", "https://dapp.example", "POST");
    assert_eq!(r.status, 204);
    assert_eq!(r.header("access-control-allow-origin"), Some("*"));
    assert!(r
        .header("access-control-allow-headers")
        .unwrap()
        .contains("x-token"));
    assert!(r
        .header("access-control-allow-headers")
        .unwrap()
        .contains("Authorization"));
    assert_eq!(r.header("access-control-allow-credentials"), None);
    let r = pre(
        "/v1/polygon/wallet/balance/0x00000000000000000000000000000000000000aa",
        "https://dapp.example",
        "GET",
    );
    assert_eq!(r.status, 204);
    // Console: only the configured origin, with credentials.
    let r = pre("/v1/keys", "http://console.test", "POST");
    assert_eq!(r.status, 204);
    assert_eq!(
        r.header("access-control-allow-origin"),
        Some("http://console.test")
    );
    assert_eq!(r.header("access-control-allow-credentials"), Some("true"));
    assert!(r
        .header("access-control-allow-headers")
        .unwrap()
        .contains("X-CSRF-Token"));
    let r = pre("/v1/keys", "https://evil.example", "POST");
    assert_eq!(r.status, 403);
    assert_eq!(r.json(), json!({"error": "origin_not_allowed"}));
    // A cross-site console call is refused even without a preflight.
    let r = request(
        gw.port,
        "POST",
        "/v1/auth/logout",
        &[("Origin", "https://evil.example")],
        b"",
    )
    .unwrap();
    assert_eq!(r.status, 403);
    // Admin routes: no cross-origin access.
    let r = pre("/v1/eth/mesh/health", "https://dapp.example", "GET");
    assert_eq!(r.status, 403);
    // Actual public responses carry the CORS headers too.
    let r = request(
        gw.port,
        "GET",
        "/v1/eth/mempool/stats",
        &[("Origin", "https://dapp.example")],
        b"",
    )
    .unwrap();
    assert_eq!(r.header("access-control-allow-origin"), Some("*"));
}

/// SPEC's order: the call is checked before the endpoint's pool, so a method the builder
/// or private endpoint never serves is a 403 `method_unknown` even where neither pool is
/// configured (and a served one is then the pool's 503).
#[test]
fn builder_and_private_endpoints_check_the_call_before_their_pool() {
    let gw = Gateway::start(GatewayOpts {
        extra_yaml: UNLIMITED.into(),
        ..GatewayOpts::default()
    });
    let key = gw.key("business", &["rpc:write"]);
    for (path, served) in [
        ("/v1/eth/mev/builder", "eth_sendBundle"),
        ("/v1/eth/mev/private-rpc", "eth_sendPrivateTransaction"),
    ] {
        for (method, want) in [
            ("eth_getBalance", (403, "method_unknown")),
            (served, (503, "pool_not_configured")),
        ] {
            let call =
                serde_json::json!({"jsonrpc": "2.0", "id": 1, "method": method, "params": []});
            let r = request(
                gw.port,
                "POST",
                path,
                &[("Content-Type", "application/json"), ("x-token", &key)],
                call.to_string().as_bytes(),
            )
            .unwrap();
            let got = (
                r.status,
                r.json()["error"].as_str().unwrap_or("").to_string(),
            );
            assert_eq!(
                (got.0, got.1.as_str()),
                want,
                "{path} {method}: {}",
                r.text()
            );
        }
    }
}

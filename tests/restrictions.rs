//! Key restrictions (issue 39), attacked the way an outsider would: a key narrowed to
//! origins, client addresses, chains, methods and contracts, capped below its plan and
//! expiring, is refused in its surface's envelope over HTTP/1.1, HTTP/2 (TLS),
//! WebSocket messages, batches and the REST senders; a forged `X-Forwarded-For` or
//! `Origin` does not get past; a change applies at once, open sessions included; and
//! another user can neither see nor change the restrictions.

use common::*;
use serde_json::{json, Value};
use std::time::{Duration, Instant};
use tungstenite::Message;

const DEV: &str = "0xf39Fd6e51aad88F6F4ce6aB8827279cffFb92266";
/// The contract a restricted key may reach (any address serves: anvil answers a call to
/// an account without code with `0x`).
const ALLOWED: &str = "0x000000000000000000000000000000000000dEaD";
const OTHER: &str = "0x000000000000000000000000000000000000bEEF";

struct Setup {
    _node: Anvil,
    gw: Gateway,
    owner: Browser,
    outbox: std::path::PathBuf,
}

fn setup() -> Setup {
    let node = Anvil::start(1, &[]);
    let dir = tempdir("restrictions");
    let outbox = dir.join("outbox.jsonl");
    let gw = Gateway::start(GatewayOpts {
        pools: format!(
            "  eth_el:\n    hosts:\n      - {{id: el-1, url: \"{}\", family: el-anvil}}\n",
            node.url()
        ),
        console_yaml: format!("  email:\n    outbox: {}\n", outbox.display()),
        extra_yaml: format!(
            "{UNLIMITED}usage:\n  flush_interval_ms: 200\nauth:\n  key_cache_ttl_ms: 500\n"
        ),
        tls: true,
        ..Default::default()
    });
    let mut owner = Browser::new(gw.port);
    assert_eq!(sign_in(&mut owner, &outbox, "ada@example.com").status, 200);
    // Ada's plan allows the senders: what refuses her keys is what she restricted.
    let tenants = gw.cli(&["tenants", "list"]);
    let tenant: Value = serde_json::from_str(tenants.lines().next().unwrap()).unwrap();
    let id = tenant["id"].as_str().unwrap();
    gw.cli(&["tenants", "set-plan", "--tenant", id, "--plan", "business"]);
    Setup {
        _node: node,
        gw,
        owner,
        outbox,
    }
}

/// A key made through the console with `restrictions`: (raw secret, the key as answered).
fn restricted_key(owner: &mut Browser, restrictions: Value) -> (String, Value) {
    let r = owner.send(
        "POST",
        "/v1/keys",
        Some(json!({"name": "narrow", "scopes": ["rpc:read", "rpc:write"], "restrictions": restrictions})),
        None,
    );
    assert_eq!(r.status, 201, "{}", r.text());
    let v = r.json();
    (v["raw"].as_str().unwrap().to_string(), v)
}

fn call(method: &str, params: Value) -> Value {
    json!({"jsonrpc": "2.0", "id": 1, "method": method, "params": params})
}

fn post(gw: &Gateway, key: &str, headers: &[(&str, &str)], body: &Value) -> Resp {
    let mut h = vec![("Content-Type", "application/json"), ("x-token", key)];
    h.extend_from_slice(headers);
    request(gw.port, "POST", "/rpc/eth", &h, body.to_string().as_bytes()).unwrap()
}

/// The restriction a JSON-RPC refusal names (`error.data.restriction`).
fn refused_by(answer: &Value) -> &str {
    assert_eq!(answer["error"]["code"], -32002, "{answer}");
    assert_eq!(
        answer["error"]["data"]["error"], "key_restricted",
        "{answer}"
    );
    answer["error"]["data"]["restriction"]
        .as_str()
        .unwrap_or("")
}

/// HTTP/2 over TLS with curl: (protocol version, status, body).
fn h2(gw: &Gateway, key: &str, origin: Option<&str>, body: &Value) -> (String, u16, Value) {
    let url = format!("https://127.0.0.1:{}/rpc/eth", gw.tls_port.unwrap());
    let token = format!("x-token: {key}");
    let mut args = vec![
        "-sk",
        "--http2",
        "-o",
        "-",
        "-w",
        "\n%{http_version} %{http_code}",
        "-H",
        "Content-Type: application/json",
        "-H",
        &token,
    ];
    let origin_header = origin.map(|o| format!("Origin: {o}"));
    if let Some(o) = &origin_header {
        args.extend(["-H", o.as_str()]);
    }
    let body = body.to_string();
    args.extend(["--data-binary", &body, &url]);
    let out = std::process::Command::new("curl")
        .args(&args)
        .output()
        .unwrap();
    let text = String::from_utf8_lossy(&out.stdout).into_owned();
    let (answer, tail) = text.rsplit_once('\n').unwrap();
    let (version, status) = tail.split_once(' ').unwrap();
    (
        version.to_string(),
        status.parse().unwrap(),
        serde_json::from_str(answer).unwrap_or(Value::Null),
    )
}

fn ws(gw: &Gateway, key: &str, origin: Option<&str>) -> Result<Ws, u16> {
    let mut headers = vec![("x-token", key)];
    headers.extend(origin.map(|o| ("origin", o)));
    ws_connect(gw.port, "/rpc/eth", &headers).map_err(|(status, _)| status)
}

fn ask(ws: &mut Ws, body: &Value) -> Value {
    ws.send(Message::text(body.to_string())).unwrap();
    loop {
        match ws.read().expect("an answer") {
            Message::Text(t) => return serde_json::from_str(&t).unwrap(),
            Message::Close(c) => panic!("closed: {c:?}"),
            _ => {}
        }
    }
}

#[test]
fn origins_and_client_addresses_hold_on_every_way_in() {
    let mut s = setup();
    let (key, shown) = restricted_key(
        &mut s.owner,
        json!({"allowed_origins": ["https://App.Example.com/", "https://*.dapp.io"]}),
    );
    assert_eq!(
        shown["restrictions"],
        json!({"allowed_origins": ["https://app.example.com", "https://*.dapp.io"]})
    );
    let block = call("eth_blockNumber", json!([]));

    // HTTP/1.1: no Origin (a script holding the key), a foreign one, a look-alike.
    for origin in [
        None,
        Some("https://evil.io"),
        Some("https://app.example.com.evil.io"),
        Some("https://dapp.io"),
    ] {
        let headers: Vec<(&str, &str)> = origin.iter().map(|o| ("Origin", *o)).collect();
        let r = post(&s.gw, &key, &headers, &block);
        assert_eq!(r.status, 403, "{origin:?}: {}", r.text());
        assert_eq!(refused_by(&r.json()), "allowed_origins");
    }
    for origin in ["https://app.example.com", "https://wallet.dapp.io"] {
        let r = post(&s.gw, &key, &[("Origin", origin)], &block);
        assert_eq!(r.status, 200, "{origin}: {}", r.text());
        assert!(r.json()["result"].is_string());
    }
    // HTTP/2 over TLS.
    let (version, status, answer) = h2(&s.gw, &key, None, &block);
    assert_eq!((version.as_str(), status), ("2", 403), "{answer}");
    assert_eq!(refused_by(&answer), "allowed_origins");
    let (version, status, answer) = h2(&s.gw, &key, Some("https://app.example.com"), &block);
    assert_eq!((version.as_str(), status), ("2", 200), "{answer}");
    // WebSocket: the upgrade is the request that is judged.
    assert_eq!(ws(&s.gw, &key, None).err(), Some(403));
    assert_eq!(ws(&s.gw, &key, Some("https://evil.io")).err(), Some(403));
    let mut socket = ws(&s.gw, &key, Some("https://a.dapp.io")).unwrap();
    assert!(ask(&mut socket, &block)["result"].is_string());
    // A REST route of the same key.
    let r = request(
        s.gw.port,
        "GET",
        &format!("/v1/eth/wallet/{DEV}/balance"),
        &[("x-token", &key)],
        b"",
    )
    .unwrap();
    assert_eq!(r.status, 403, "{}", r.text());
    assert_eq!(r.json()["error"], "key_restricted");
    assert_eq!(r.json()["restriction"], "allowed_origins");

    // Client addresses: this client is 127.0.0.1, and no X-Forwarded-For from an
    // untrusted peer makes it another.
    let (elsewhere, _) = restricted_key(
        &mut s.owner,
        json!({"allowed_ips": ["10.0.0.0/8", "2001:db8::/32"]}),
    );
    for headers in [
        vec![],
        vec![("X-Forwarded-For", "10.1.2.3")],
        vec![("Forwarded", "for=10.1.2.3")],
    ] {
        let r = post(&s.gw, &elsewhere, &headers, &block);
        assert_eq!(r.status, 403, "{headers:?}: {}", r.text());
        assert_eq!(refused_by(&r.json()), "allowed_ips");
    }
    assert_eq!(ws(&s.gw, &elsewhere, None).err(), Some(403));
    let (here, _) = restricted_key(&mut s.owner, json!({"allowed_ips": ["127.0.0.1"]}));
    assert_eq!(post(&s.gw, &here, &[], &block).status, 200);

    // Chains: a Solana-only key gets nothing of Ethereum.
    let (sol_only, _) = restricted_key(&mut s.owner, json!({"allowed_chains": ["sol"]}));
    let r = post(&s.gw, &sol_only, &[], &block);
    assert_eq!(refused_by(&r.json()), "allowed_chains");
    let (_, status, answer) = h2(&s.gw, &sol_only, None, &block);
    assert_eq!(status, 403);
    assert_eq!(refused_by(&answer), "allowed_chains");
    assert_eq!(ws(&s.gw, &sol_only, None).err(), Some(403));
}

#[test]
fn methods_and_contracts_hold_per_call_in_batches_messages_and_senders() {
    let mut s = setup();
    let (key, made) = restricted_key(
        &mut s.owner,
        json!({"allowed_methods": ["eth_blockNumber", "eth_call", "eth_getLogs", "eth_sendRawTransaction", "net_*"],
               "allowed_contracts": [ALLOWED]}),
    );
    let ok = |r: &Value| assert!(r.get("result").is_some(), "{r}");

    // Methods, one call at a time.
    ok(&post(&s.gw, &key, &[], &call("eth_blockNumber", json!([]))).json());
    ok(&post(&s.gw, &key, &[], &call("net_version", json!([]))).json());
    let r = post(&s.gw, &key, &[], &call("eth_chainId", json!([])));
    assert_eq!(r.status, 403, "{}", r.text());
    assert_eq!(refused_by(&r.json()), "allowed_methods");
    // Contracts, where a call names one.
    let to_allowed = call("eth_call", json!([{"to": ALLOWED, "data": "0x"}, "latest"]));
    ok(&post(&s.gw, &key, &[], &to_allowed).json());
    for refused in [
        call("eth_call", json!([{"to": OTHER, "data": "0x"}, "latest"])),
        call("eth_call", json!([{"data": "0x6000"}, "latest"])),
        call(
            "eth_getLogs",
            json!([{"fromBlock": "0x0", "toBlock": "0x0"}]),
        ),
        call(
            "eth_getLogs",
            json!([{"fromBlock": "0x0", "toBlock": "0x0", "address": [ALLOWED, OTHER]}]),
        ),
    ] {
        let r = post(&s.gw, &key, &[], &refused);
        assert_eq!(refused_by(&r.json()), "allowed_contracts", "{refused}");
    }
    ok(&post(
        &s.gw,
        &key,
        &[],
        &call(
            "eth_getLogs",
            json!([{"fromBlock": "0x0", "toBlock": "0x0", "address": ALLOWED.to_lowercase()}]),
        ),
    )
    .json());

    // A batch: each element meets the same checks; the allowed ones are answered.
    let batch = json!([
        call("eth_blockNumber", json!([])),
        {"jsonrpc": "2.0", "id": 2, "method": "eth_chainId", "params": []},
        {"jsonrpc": "2.0", "id": 3, "method": "eth_call", "params": [{"to": OTHER}, "latest"]},
    ]);
    let r = post(&s.gw, &key, &[], &batch);
    assert_eq!(r.status, 200, "{}", r.text());
    let answers = r.json();
    ok(&answers[0]);
    assert_eq!(refused_by(&answers[1]), "allowed_methods");
    assert_eq!(refused_by(&answers[2]), "allowed_contracts");

    // WebSocket messages, and a subscription the methods do not name.
    let mut socket = ws(&s.gw, &key, None).unwrap();
    ok(&ask(&mut socket, &call("eth_blockNumber", json!([]))));
    assert_eq!(
        refused_by(&ask(&mut socket, &call("eth_chainId", json!([])))),
        "allowed_methods"
    );
    assert_eq!(
        refused_by(&ask(
            &mut socket,
            &call("eth_call", json!([{"to": OTHER}, "latest"]))
        )),
        "allowed_contracts"
    );
    assert_eq!(
        refused_by(&ask(
            &mut socket,
            &call("eth_subscribe", json!(["newHeads"]))
        )),
        "allowed_methods"
    );
    ok(&ask(&mut socket, &to_allowed));

    // Transactions: the recipient is the contract reached, through /rpc/eth and the
    // REST sender alike.
    let sign = |to: &str, nonce: u64| {
        let tx = json!({"from": DEV, "to": to, "value": "0x1", "gas": "0x186a0", "chainId": "0x1", "nonce": format!("0x{nonce:x}")});
        s._node
            .call("eth_signTransaction", json!([tx]))
            .as_str()
            .unwrap()
            .to_string()
    };
    let r = post(
        &s.gw,
        &key,
        &[],
        &call("eth_sendRawTransaction", json!([sign(OTHER, 0)])),
    );
    assert_eq!(refused_by(&r.json()), "allowed_contracts");
    let sender = |raw: String| {
        request(
            s.gw.port,
            "POST",
            "/v1/eth/sender/raw",
            &[("Content-Type", "application/json"), ("x-token", &key)],
            json!({"raw_tx": raw}).to_string().as_bytes(),
        )
        .unwrap()
    };
    let r = sender(sign(OTHER, 0));
    assert_eq!(r.status, 403, "{}", r.text());
    assert_eq!(r.json()["restriction"], "allowed_contracts");
    let r = post(
        &s.gw,
        &key,
        &[],
        &call("eth_sendRawTransaction", json!([sign(ALLOWED, 0)])),
    );
    ok(&r.json());
    // The bundle sender counts as eth_sendBundle, which the methods do not name.
    let r = request(
        s.gw.port,
        "POST",
        "/v1/eth/sender/bundle",
        &[("Content-Type", "application/json"), ("x-token", &key)],
        json!({"txs": [sign(ALLOWED, 1)], "block_number": 100})
            .to_string()
            .as_bytes(),
    )
    .unwrap();
    assert_eq!(r.status, 403, "{}", r.text());
    assert_eq!(r.json()["restriction"], "allowed_methods");

    // The key's request log shows each refusal with its code, the batch, the WebSocket
    // messages and the REST senders, newest first; never a parameter or the secret.
    let path = format!("/v1/keys/{}/requests", made["id"].as_str().unwrap());
    let deadline = Instant::now() + Duration::from_secs(10);
    let log = loop {
        let r = s.owner.send("GET", &path, None, None);
        assert_eq!(r.status, 200, "{}", r.text());
        let log = r.json()["requests"].clone();
        if log
            .as_array()
            .unwrap()
            .iter()
            .any(|e| e["route"] == "eth.sender.bundle")
        {
            break log;
        }
        assert!(Instant::now() < deadline, "{log}");
        std::thread::sleep(Duration::from_millis(200));
    };
    let entries = log.as_array().unwrap();
    assert_eq!(entries[0]["route"], "eth.sender.bundle", "{log}");
    assert_eq!(entries[0]["error"], "key_restricted");
    let has = |route: &str, method: &str, status: u64, error: Option<&str>| {
        entries.iter().any(|e| {
            e["route"] == route
                && e["method"] == method
                && e["status"] == status
                && e.get("error").and_then(Value::as_str) == error
        })
    };
    assert!(
        has("eth.rpc", "eth_chainId", 403, Some("key_restricted")),
        "{log}"
    );
    assert!(has("eth.rpc", "batch", 200, None), "{log}");
    assert!(has("eth.rpc", "eth_blockNumber", 200, None), "{log}");
    assert!(
        has("eth.rpc", "eth_subscribe", 403, Some("key_restricted")),
        "{log}"
    );
    assert!(
        has("eth.sender.raw", "POST", 403, Some("key_restricted")),
        "{log}"
    );
    assert!(entries
        .iter()
        .any(|e| e["upstream"] == "el-1" && e["latency_ms"].as_f64().unwrap() > 0.0));
    let text = log.to_string();
    assert!(
        !text.contains(&key) && !text.contains(OTHER) && !text.contains("0xdead"),
        "{text}"
    );
    let mut eve = Browser::new(s.gw.port);
    assert_eq!(sign_in(&mut eve, &s.outbox, "eve@example.com").status, 200);
    assert_eq!(eve.send("GET", &path, None, None).status, 404);
}

#[test]
fn a_cap_an_expiry_and_a_change_apply_at_once_and_only_the_owner_sees_them() {
    let mut s = setup();
    let block = call("eth_blockNumber", json!([]));

    // Bad restrictions are refused whole, before anything is stored.
    for bad in [
        json!({"allowed_origins": ["app.example.com"]}),
        json!({"allowed_ips": ["10.0.0.0/33"]}),
        json!({"allowed_chains": ["btc"]}),
        json!({"allowed_methods": ["*"]}),
        json!({"allowed_contracts": ["0x1234"]}),
        json!({"max_rps": 0}),
        json!({"expires_at": "2020-01-01T00:00:00Z"}),
        json!({"allowed_referrers": ["x"]}),
        json!({"allowed_ips": vec!["10.0.0.1"; 21]}),
    ] {
        let r = s.owner.send(
            "POST",
            "/v1/keys",
            Some(json!({"name": "bad", "restrictions": bad})),
            None,
        );
        assert_eq!(r.status, 400, "{bad}: {}", r.text());
    }
    // The console's envelope stays the code alone; what is wrong, naming the list and
    // the entry, is in a header the page shows beside the field.
    let r = s.owner.send(
        "POST",
        "/v1/keys",
        Some(json!({"name": "bad", "restrictions": {"allowed_ips": ["10.0.0.1", "no\r\npe"]}})),
        None,
    );
    assert_eq!(
        (r.status, r.json()),
        (400, json!({"error": "invalid_request"}))
    );
    assert_eq!(
        r.header("x-chainedge-error-detail"),
        Some("restrictions.allowed_ips[1]: 'no??pe' is not an address or a range")
    );
    let keys_before = s.owner.send("GET", "/v1/keys", None, None).json()["keys"]
        .as_array()
        .unwrap()
        .len();

    // A cap of 2 requests/s under an unlimited plan: a quick run of 12 is cut, the
    // refusal names the cap, the admitted answers show it as their limit.
    let (capped, _) = restricted_key(&mut s.owner, json!({"max_rps": 2}));
    let answers: Vec<Resp> = (0..12).map(|_| post(&s.gw, &capped, &[], &block)).collect();
    let limited: Vec<&Resp> = answers.iter().filter(|r| r.status == 429).collect();
    assert!(
        !limited.is_empty() && limited.len() <= 10,
        "{} limited",
        limited.len()
    );
    assert_eq!(limited[0].json()["error"]["data"]["restriction"], "max_rps");
    assert_eq!(answers[0].status, 200);
    assert_eq!(answers[0].header("x-ratelimit-limit"), Some("2"));

    // An expiry: served until then, 401 key_expired from then on.
    let at = std::time::SystemTime::now() + Duration::from_secs(3);
    let at = humantime::format_rfc3339_seconds(at).to_string();
    let (expiring, shown) = restricted_key(&mut s.owner, json!({"expires_at": at}));
    assert_eq!(shown["restrictions"]["expires_at"], at);
    assert_eq!(post(&s.gw, &expiring, &[], &block).status, 200);
    let mut socket = ws(&s.gw, &expiring, None).unwrap();
    std::thread::sleep(Duration::from_millis(3200));
    let r = post(&s.gw, &expiring, &[], &block);
    assert_eq!(r.status, 401, "{}", r.text());
    assert_eq!(r.json()["error"]["data"]["error"], "key_expired");
    // The session held with it ends too (within a recheck of the key cache's TTL).
    socket.send(Message::text(block.to_string())).ok();
    let deadline = Instant::now() + Duration::from_secs(30);
    loop {
        match socket.read() {
            Ok(Message::Close(_)) | Err(_) => break,
            Ok(_) => {}
        }
        assert!(
            Instant::now() < deadline,
            "the expired key's session stayed open"
        );
        socket.send(Message::text(block.to_string())).ok();
    }

    // A change: an open key narrowed to one method is refused on its next call, and its
    // open WebSocket session ends.
    let (open, v) = restricted_key(&mut s.owner, json!({}));
    assert_eq!(v["restrictions"], json!({}));
    let id = v["id"].as_str().unwrap().to_string();
    assert!(post(&s.gw, &open, &[], &call("eth_chainId", json!([]))).json()["result"].is_string());
    let mut socket = ws(&s.gw, &open, None).unwrap();
    assert!(ask(&mut socket, &block)["result"].is_string());
    let r = s.owner.send(
        "PATCH",
        &format!("/v1/keys/{id}"),
        Some(json!({"restrictions": {"allowed_methods": ["eth_blockNumber"]}})),
        None,
    );
    assert_eq!(r.status, 200, "{}", r.text());
    assert_eq!(
        r.json()["restrictions"],
        json!({"allowed_methods": ["eth_blockNumber"]})
    );
    assert_eq!(r.json()["name"], "narrow");
    let r = post(&s.gw, &open, &[], &call("eth_chainId", json!([])));
    assert_eq!(refused_by(&r.json()), "allowed_methods");
    socket.send(Message::text(block.to_string())).ok();
    let closed = loop {
        match socket.read() {
            Ok(Message::Close(c)) => break c.map(|c| c.reason.to_string()).unwrap_or_default(),
            Err(_) => break String::new(),
            Ok(_) => {}
        }
    };
    assert!(closed.is_empty() || closed.contains("changed"), "{closed}");
    // A rename keeps the restrictions; an empty object lifts them.
    let r = s.owner.send(
        "PATCH",
        &format!("/v1/keys/{id}"),
        Some(json!({"name": "wide"})),
        None,
    );
    assert_eq!(
        r.json()["restrictions"],
        json!({"allowed_methods": ["eth_blockNumber"]})
    );
    let r = s.owner.send(
        "PATCH",
        &format!("/v1/keys/{id}"),
        Some(json!({"restrictions": {}})),
        None,
    );
    assert_eq!(r.json()["restrictions"], json!({}));
    assert!(post(&s.gw, &open, &[], &call("eth_chainId", json!([]))).json()["result"].is_string());
    assert_eq!(
        s.owner
            .send("PATCH", &format!("/v1/keys/{id}"), Some(json!({})), None)
            .status,
        400
    );
    // Restrictions are an object: an array (serde would read a struct from it, field by
    // field) is refused with 400, on a change as on a new key.
    for body in [
        json!({"restrictions": [[]]}),
        json!({"restrictions": [["https://a.example"]]}),
    ] {
        let r = s
            .owner
            .send("PATCH", &format!("/v1/keys/{id}"), Some(body.clone()), None);
        assert_eq!(r.status, 400, "{body}: {}", r.text());
    }
    let r = s.owner.send(
        "POST",
        "/v1/keys",
        Some(json!({"name": "arr", "restrictions": [[]]})),
        None,
    );
    assert_eq!(r.status, 400, "{}", r.text());

    // Another user can neither read nor change them; without the CSRF header nobody can.
    let mut eve = Browser::new(s.gw.port);
    assert_eq!(sign_in(&mut eve, &s.outbox, "eve@example.com").status, 200);
    let r = eve.send(
        "PATCH",
        &format!("/v1/keys/{id}"),
        Some(json!({"restrictions": {}})),
        None,
    );
    assert_eq!(r.status, 404);
    assert!(!eve.send("GET", "/v1/keys", None, None).text().contains(&id));
    let r = s.owner.send(
        "PATCH",
        &format!("/v1/keys/{id}"),
        Some(json!({"restrictions": {"allowed_chains": ["sol"]}})),
        Some(""),
    );
    assert_eq!(r.status, 403);
    assert!(post(&s.gw, &open, &[], &block).json()["result"].is_string());

    // The audit log has each change to the key, by its owner.
    let events = s.owner.send("GET", "/v1/audit", None, None).json()["events"].clone();
    let of_key: Vec<(&str, &str)> = events
        .as_array()
        .unwrap()
        .iter()
        .filter(|e| e["target"] == id.as_str())
        .map(|e| (e["action"].as_str().unwrap(), e["detail"].as_str().unwrap()))
        .collect();
    assert_eq!(
        of_key,
        [
            ("key.restrict", "none"),
            ("key.rename", "wide"),
            ("key.restrict", r#"{"allowed_methods":["eth_blockNumber"]}"#),
            ("key.create", "narrow (rpc:read, rpc:write)"),
        ],
        "{events}"
    );

    // The list shows each key's restrictions and when it was last used.
    let deadline = Instant::now() + Duration::from_secs(10);
    let listed = loop {
        let keys = s.owner.send("GET", "/v1/keys", None, None).json()["keys"].clone();
        let mine = keys
            .as_array()
            .unwrap()
            .iter()
            .find(|k| k["id"] == id.as_str())
            .cloned()
            .unwrap();
        if mine["last_used_at"].is_string() {
            break keys;
        }
        assert!(Instant::now() < deadline, "{mine}");
        std::thread::sleep(Duration::from_millis(200));
    };
    assert_eq!(listed.as_array().unwrap().len(), keys_before + 3);
    assert!(listed
        .as_array()
        .unwrap()
        .iter()
        .any(|k| k["restrictions"] == json!({"max_rps": 2.0})));
}

/// The operator's CLI sets restrictions too: on a new key, and on a running one (taken
/// up within the key cache's TTL without `cluster.redis`); what does not parse is refused.
#[test]
fn the_cli_creates_and_restricts_keys() {
    let s = setup();
    let tenant =
        s.gw.cli(&["tenants", "create", "--name", "ops", "--plan", "pro"]);
    let tenant = tenant.trim();
    let key = s.gw.cli(&[
        "keys",
        "create",
        "--tenant",
        tenant,
        "--restrictions",
        r#"{"allowed_methods": ["eth_blockNumber"]}"#,
    ]);
    let key = key.trim();
    let block = call("eth_blockNumber", json!([]));
    let chain = call("eth_chainId", json!([]));
    assert!(post(&s.gw, key, &[], &block).json()["result"].is_string());
    assert_eq!(
        refused_by(&post(&s.gw, key, &[], &chain).json()),
        "allowed_methods"
    );

    let listed = s.gw.cli(&["keys", "list", "--tenant", tenant]);
    let listed: Value = serde_json::from_str(listed.lines().next().unwrap()).unwrap();
    assert_eq!(
        listed["restrictions"],
        json!({"allowed_methods": ["eth_blockNumber"]})
    );
    let id = listed["id"].as_str().unwrap();

    let refused = std::process::Command::new(bin())
        .arg("--app")
        .arg(&s.gw.app)
        .args([
            "keys",
            "restrict",
            "--id",
            id,
            "--restrictions",
            r#"{"allowed_ips": ["nope"]}"#,
        ])
        .output()
        .unwrap();
    let why = String::from_utf8_lossy(&refused.stderr);
    assert!(
        !refused.status.success() && why.contains("allowed_ips"),
        "{why}"
    );
    s.gw.cli(&[
        "keys",
        "restrict",
        "--id",
        id,
        "--restrictions",
        r#"{"allowed_chains": ["sol"]}"#,
    ]);
    let deadline = Instant::now() + Duration::from_secs(5);
    loop {
        let r = post(&s.gw, key, &[], &block).json();
        if r.get("error").is_some() {
            assert_eq!(refused_by(&r), "allowed_chains");
            break;
        }
        assert!(
            Instant::now() < deadline,
            "the change was never taken up: {r}"
        );
        std::thread::sleep(Duration::from_millis(100));
    }
}

//! The lean HTTP/1.1 front (src/front/) through the real binary: keep-alive and
//! pipelining, what it hands to Pingora on the same connection, and passthroughs that
//! relay a node's answer as it arrives (length, chunked, until close).

use common::*;
use std::io::{BufRead, BufReader, Read, Write};
use std::net::TcpStream;
use std::time::Duration;

/// A heimdall node that answers its health probe (`/status`) and the paths below with
/// hand-written HTTP/1.1, so every framing the relay must carry is exercised.
fn raw_heimdall() -> Fixture {
    Fixture::start(|req| {
        match req.path.as_str() {
        "/status" => FixtureResponse::json(serde_json::json!(
            {"result": {"sync_info": {"latest_block_height": "100", "catching_up": false}}}
        )),
        // Split across two writes, 50 ms apart.
        "/chunked" => FixtureResponse::raw(
            vec![
                b"HTTP/1.1 200 OK\r\nTransfer-Encoding: chunked\r\nContent-Type: text/plain\r\n\r\n5\r\nhello\r\n".to_vec(),
                b"6\r\n world\r\n0\r\n\r\n".to_vec(),
            ],
            false,
        ),
        "/big" => FixtureResponse {
            body: big_body(),
            ..FixtureResponse::status(200, "")
        },
        "/hop" => FixtureResponse::raw(
            vec![b"HTTP/1.1 200 OK\r\nContent-Length: 3\r\nConnection: keep-alive\r\nKeep-Alive: timeout=5\r\nServer: node/1\r\nX-Node: yes\r\n\r\nhop".to_vec()],
            false,
        ),
        "/close" => FixtureResponse::raw(
            vec![b"HTTP/1.1 200 OK\r\nConnection: close\r\n\r\nuntil the node closes".to_vec()],
            true,
        ),
        _ => FixtureResponse::status(200, "other"),
    }
    })
}

fn big_body() -> Vec<u8> {
    (0..3_000_000u32).map(|i| (i % 251) as u8).collect()
}

/// A gateway whose heimdall pool is these (id, url) hosts, and a pro key's
/// `Authorization` value.
fn heimdall_gateway(hosts: &[(&str, String)]) -> (Gateway, String) {
    let mut pools = "  polygon_heimdall:\n    hosts:\n".to_string();
    for (id, url) in hosts {
        pools.push_str(&format!(
            "      - {{id: {id}, url: \"{url}\", family: heimdall}}\n"
        ));
    }
    let gw = Gateway::start(GatewayOpts {
        pools,
        ..Default::default()
    });
    let auth = format!("Bearer {}", gw.key("pro", &[]));
    (gw, auth)
}

/// Read one response from a kept-alive connection: (status, headers, body).
fn read_one(
    r: &mut BufReader<TcpStream>,
    head_only: bool,
) -> (u16, Vec<(String, String)>, Vec<u8>) {
    let mut line = String::new();
    r.read_line(&mut line).expect("status line");
    let status: u16 = line
        .split_whitespace()
        .nth(1)
        .and_then(|s| s.parse().ok())
        .unwrap_or_else(|| panic!("status line {line:?}"));
    let mut headers = Vec::new();
    loop {
        line.clear();
        r.read_line(&mut line).unwrap();
        let l = line.trim_end();
        if l.is_empty() {
            break;
        }
        let (k, v) = l.split_once(':').unwrap();
        headers.push((k.trim().to_ascii_lowercase(), v.trim().to_string()));
    }
    let get = |n: &str| headers.iter().find(|(k, _)| k == n).map(|(_, v)| v.clone());
    let mut body = Vec::new();
    if head_only {
    } else if let Some(len) = get("content-length") {
        body.resize(len.parse().unwrap(), 0);
        r.read_exact(&mut body).unwrap();
    } else if get("transfer-encoding").is_some() {
        loop {
            line.clear();
            r.read_line(&mut line).unwrap();
            let n = usize::from_str_radix(line.trim(), 16).unwrap();
            let mut chunk = vec![0; n + 2];
            r.read_exact(&mut chunk).unwrap();
            if n == 0 {
                break;
            }
            body.extend_from_slice(&chunk[..n]);
        }
    } else {
        r.read_to_end(&mut body).unwrap();
    }
    (status, headers, body)
}

fn header<'a>(h: &'a [(String, String)], name: &str) -> Option<&'a str> {
    h.iter().find(|(k, _)| k == name).map(|(_, v)| v.as_str())
}

fn connect(port: u16) -> (TcpStream, BufReader<TcpStream>) {
    let s = TcpStream::connect(("127.0.0.1", port)).unwrap();
    s.set_read_timeout(Some(Duration::from_secs(20))).unwrap();
    let r = BufReader::new(s.try_clone().unwrap());
    (s, r)
}

#[test]
fn keep_alive_pipelining_and_handover_to_pingora_on_one_connection() {
    let gw = Gateway::start(GatewayOpts::default());
    let (mut s, mut r) = connect(gw.port);

    // Two requests in one write: both answered, in order, on the same connection.
    s.write_all(
        b"GET /console/app.js HTTP/1.1\r\nHost: a\r\n\r\nGET /v1/auth/me HTTP/1.1\r\nHost: a\r\n\r\n",
    )
    .unwrap();
    let (st, h, body) = read_one(&mut r, false);
    assert_eq!(st, 200);
    assert_eq!(header(&h, "server"), Some("chainedge"));
    assert!(!body.is_empty());
    let (st, h, _) = read_one(&mut r, false);
    assert_eq!(st, 401, "{h:?}");
    assert!(header(&h, "x-request-id").is_some());

    // A chunked request body is Pingora's to read; the connection comes back after.
    s.write_all(
        b"POST /v1/auth/email/start HTTP/1.1\r\nHost: a\r\nTransfer-Encoding: chunked\r\nContent-Type: application/json\r\n\r\n2\r\n{}\r\n0\r\n\r\n",
    )
    .unwrap();
    let (st, h, body) = read_one(&mut r, false);
    assert_eq!(st, 400, "{}", String::from_utf8_lossy(&body));
    assert_eq!(header(&h, "server"), Some("chainedge"));
    s.write_all(b"HEAD /console/app.js HTTP/1.1\r\nHost: a\r\n\r\n")
        .unwrap();
    let (st, h, _) = read_one(&mut r, true);
    assert_eq!(st, 200);
    assert!(header(&h, "content-length").is_some_and(|l| l != "0"));
    assert!(header(&h, "date").is_some());

    // A refused body is dropped when small (the connection stays) ...
    let small = vec![b'x'; 20_000];
    let head = format!(
        "POST /v1/auth/email/start HTTP/1.1\r\nHost: a\r\nContent-Length: {}\r\n\r\n",
        small.len()
    );
    s.write_all(head.as_bytes()).unwrap();
    s.write_all(&small).unwrap();
    let (st, h, _) = read_one(&mut r, false);
    assert_eq!(st, 413);
    assert_eq!(header(&h, "connection"), None);
    s.write_all(b"GET /console/app.js HTTP/1.1\r\nHost: a\r\n\r\n")
        .unwrap();
    assert_eq!(read_one(&mut r, false).0, 200);

    // `Connection: close` is honoured: answered, then closed.
    s.write_all(b"GET /console/app.js HTTP/1.1\r\nHost: a\r\nConnection: close\r\n\r\n")
        .unwrap();
    let (st, h, _) = read_one(&mut r, false);
    assert_eq!(st, 200);
    assert_eq!(header(&h, "connection"), Some("close"));
    let mut rest = Vec::new();
    assert_eq!(
        r.read_to_end(&mut rest).unwrap(),
        0,
        "nothing after a closing answer"
    );

    // ... and a large one ends the connection, said so in the answer.
    let (mut s, mut r) = connect(gw.port);
    s.write_all(b"POST /v1/auth/email/start HTTP/1.1\r\nHost: a\r\nContent-Length: 200000\r\n\r\n")
        .unwrap();
    let (st, h, _) = read_one(&mut r, false);
    assert_eq!(st, 413);
    assert_eq!(header(&h, "connection"), Some("close"));

    // HTTP/1.0 goes to Pingora; a malformed head is refused in our envelope.
    let (mut s, mut r) = connect(gw.port);
    s.write_all(b"GET /console/app.js HTTP/1.0\r\n\r\n")
        .unwrap();
    let (st, _, _) = read_one(&mut r, false);
    assert_eq!(st, 200);
    let (mut s, mut r) = connect(gw.port);
    s.write_all(b"GET /a b c\r\n\r\n").unwrap();
    let (st, h, body) = read_one(&mut r, false);
    assert_eq!(st, 400);
    assert_eq!(header(&h, "connection"), Some("close"));
    assert!(String::from_utf8_lossy(&body).contains("bad_request"));
}

#[test]
fn heimdall_passthrough_forwards_the_raw_tail_and_never_the_caller_credentials() {
    let seen_node = Fixture::start(|req| {
        if req.path == "/lcd/status" {
            return FixtureResponse::json(
                serde_json::json!({"result": {"sync_info": {"latest_block_height": "100", "catching_up": false}}}),
            );
        }
        FixtureResponse::json(serde_json::json!({"path": req.path, "method": req.method}))
    });
    let (gw, auth) = heimdall_gateway(&[("hd-1", format!("{}/lcd", seen_node.url()))]);
    let r = gw.get(
        "/v1/polygon/heimdall/cosmos/base/tendermint/v1beta1/blocks/latest?at=1%202&x=y",
        &[
            ("Authorization", &auth),
            ("Cookie", "nl_session=s"),
            ("X-Request-Id", "trace-7"),
        ],
    );
    assert_eq!(r.status, 200, "{}", r.text());
    assert_eq!(
        r.json()["path"],
        "/lcd/cosmos/base/tendermint/v1beta1/blocks/latest?at=1%202&x=y"
    );
    assert_eq!(r.header("x-request-id"), Some("trace-7"));
    let req = seen_node.seen.lock().unwrap().last().cloned().unwrap();
    assert_eq!(req.header("x-request-id"), Some("trace-7"));
    assert_eq!(req.header("authorization"), None);
    assert_eq!(req.header("cookie"), None);
    assert_eq!(
        req.header("host"),
        Some(format!("127.0.0.1:{}", seen_node.port).as_str())
    );

    // Tendermint RPC is a POST with a body.
    let body = br#"{"jsonrpc":"2.0","id":1,"method":"status"}"#;
    let r = request(
        gw.port,
        "POST",
        "/v1/polygon/heimdall/",
        &[
            ("Authorization", &auth),
            ("Content-Type", "application/json"),
        ],
        body,
    )
    .unwrap();
    assert_eq!(r.status, 200, "{}", r.text());
    assert_eq!(r.json()["method"], "POST");
    let req = seen_node.seen.lock().unwrap().last().cloned().unwrap();
    assert_eq!(req.path, "/lcd");
    assert_eq!(req.body, body.to_vec());

    // Traversal never reaches the node; a plan below pro never either.
    let hits = seen_node.hits();
    let r = gw.get(
        "/v1/polygon/heimdall/a/%2e%2e/b",
        &[("Authorization", &auth)],
    );
    assert_eq!(r.status, 400, "{}", r.text());
    assert_eq!(r.json()["error"], "invalid_path");
    let basic = format!("Bearer {}", gw.key("basic", &[]));
    let r = gw.get("/v1/polygon/heimdall/status", &[("Authorization", &basic)]);
    assert_eq!(r.status, 403);
    assert_eq!(seen_node.hits(), hits);
}

/// Node connections follow the answers in flight, not the clients connected: twenty
/// keep-alive clients that each ask once, one after another, and stay open share the
/// node connection of the answer before theirs (one per worker thread's pool at most).
#[test]
fn clients_that_stay_open_share_node_connections() {
    let node = raw_heimdall();
    let (gw, auth) = heimdall_gateway(&[("hd-1", node.url())]);
    let before = node.accepted();
    let mut clients = Vec::new();
    for _ in 0..20 {
        let (mut s, mut r) = connect(gw.port);
        let req = format!(
            "GET /v1/polygon/heimdall/hop HTTP/1.1\r\nHost: a\r\nAuthorization: {auth}\r\n\r\n"
        );
        s.write_all(req.as_bytes()).unwrap();
        let (st, _, body) = read_one(&mut r, false);
        assert_eq!((st, body.as_slice()), (200, &b"hop"[..]));
        clients.push((s, r));
    }
    let opened = node.accepted() - before;
    assert!(
        opened <= 4,
        "{opened} node connections for 20 clients asking in turn"
    );
}

#[test]
fn passthrough_relays_every_framing_and_fails_over() {
    let node = raw_heimdall();
    let dead = format!("http://127.0.0.1:{}", free_port());
    let (gw, auth) = heimdall_gateway(&[("hd-1", node.url())]);
    let (mut s, mut r) = connect(gw.port);
    let mut get = |method: &str, path: &str| {
        let req = format!("{method} /v1/polygon/heimdall/{path} HTTP/1.1\r\nHost: a\r\nAuthorization: {auth}\r\n\r\n");
        s.write_all(req.as_bytes()).unwrap();
        read_one(&mut r, method == "HEAD")
    };
    // Chunked, relayed as it arrives; the client connection stays usable after.
    let (st, h, body) = get("GET", "chunked");
    assert_eq!(st, 200);
    assert_eq!(header(&h, "transfer-encoding"), Some("chunked"));
    assert_eq!(body, b"hello world");
    // 3 MB with a length.
    let (st, _, body) = get("GET", "big");
    assert_eq!(st, 200);
    assert!(body == big_body(), "big body differs");
    // The node's hop-by-hop headers stay on its hop; ours replace its Server.
    let (st, h, body) = get("GET", "hop");
    assert_eq!((st, body.as_slice()), (200, &b"hop"[..]));
    assert_eq!(header(&h, "server"), Some("chainedge"));
    assert_eq!(header(&h, "keep-alive"), None);
    assert_eq!(header(&h, "x-node"), Some("yes"));
    assert!(header(&h, "x-request-id").is_some());
    // A body that ends when the node closes: sent on in the edge's chunks, so the
    // client connection outlives the node's.
    let (st, h, body) = get("GET", "close");
    assert_eq!(st, 200);
    assert_eq!(header(&h, "connection"), None);
    assert_eq!(header(&h, "transfer-encoding"), Some("chunked"));
    assert_eq!(body, b"until the node closes");
    let (st, _, body) = get("GET", "hop");
    assert_eq!((st, body.as_slice()), (200, &b"hop"[..]));
    drop(gw);

    // A host that refuses connections is skipped; with none left the answer is 502.
    let (gw, auth) = heimdall_gateway(&[("hd-dead", dead.clone()), ("hd-1", node.url())]);
    for _ in 0..4 {
        let r = gw.get("/v1/polygon/heimdall/hop", &[("Authorization", &auth)]);
        assert_eq!(r.status, 200, "{}", r.text());
    }
    drop(gw);
    let (gw, auth) = heimdall_gateway(&[("hd-dead", dead)]);
    let r = gw.get("/v1/polygon/heimdall/hop", &[("Authorization", &auth)]);
    assert!(
        r.status == 502 || r.status == 503,
        "{} {}",
        r.status,
        r.text()
    );
    assert!(r.json()["error"].is_string());
}

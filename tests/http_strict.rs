//! The HTTP layer under hostile input, through the real binary with raw sockets: framing
//! the RFC forbids gets one clear answer whichever internal server would have taken the
//! request, never reaching a node; a hostile node's framing is refused, not relayed;
//! forwarding headers are the edge's; memory follows what clients actually sent.

mod common;

use common::*;
use std::io::{Read, Write};
use std::net::TcpStream;
use std::time::{Duration, Instant};

/// A heimdall node with hand-written answers, one per path, and a health probe.
fn hostile_node() -> Fixture {
    Fixture::start(|req| {
        let raw = |bytes: &[u8]| FixtureResponse::raw(vec![bytes.to_vec()], true);
        match req.path.as_str() {
            "/status" => FixtureResponse::json(serde_json::json!(
                {"result": {"sync_info": {"latest_block_height": "100", "catching_up": false}}}
            )),
            "/inject" => raw(b"HTTP/1.1 200 OK\r\nTransfer-Encoding: chunked\r\n\r\n0\r\n\nHTTP/1.1 200 OK\r\nX-Injected: by-node\r\nContent-Length: 8\r\n\r\ninjected"),
            "/both" => raw(b"HTTP/1.1 200 OK\r\nContent-Length: 5\r\nTransfer-Encoding: chunked\r\n\r\n0\r\n\r\n"),
            "/xchunked" => raw(b"HTTP/1.1 200 OK\r\nTransfer-Encoding: xchunked\r\n\r\n5\r\nhello\r\n0\r\n\r\n"),
            "/ext-lf" => raw(b"HTTP/1.1 200 OK\r\nTransfer-Encoding: chunked\r\n\r\n1;a\nb\r\nx\r\n0\r\n\r\n"),
            "/plus-length" => raw(b"HTTP/1.1 200 OK\r\nContent-Length: +2\r\n\r\nok"),
            "/switch" => raw(b"HTTP/1.1 101 Switching Protocols\r\nUpgrade: websocket\r\nConnection: Upgrade\r\n\r\nraw tunnel bytes"),
            "/cookies" => raw(b"HTTP/1.1 200 OK\r\nSet-Cookie: nl_session=planted; Path=/\r\nSet-Cookie: NL_CSRF=x\r\nSet-Cookie: node_pref=1\r\nConnection: X-Node-Secret\r\nX-Node-Secret: s\r\nContent-Length: 2\r\n\r\nok"),
            "/extensions" => raw(b"HTTP/1.1 200 OK\r\nTransfer-Encoding: chunked\r\n\r\n5;name=\"v\"\r\nhello\r\n0\r\nX-Trailer: t\r\n\r\n"),
            _ => FixtureResponse::json(serde_json::json!({"path": req.path})),
        }
    })
}

fn gateway(node: &Fixture) -> (Gateway, String) {
    let gw = Gateway::start(GatewayOpts {
        pools: format!(
            "  polygon_heimdall:\n    hosts:\n      - {{id: hd-1, url: \"{}\", family: heimdall}}\n",
            node.url()
        ),
        ..Default::default()
    });
    let key = gw.key("pro", &[]);
    (gw, key)
}

/// Send `raw` on a fresh connection; read until the edge closes or 10 s pass.
/// Returns (status, head text, body bytes, closed by the edge).
fn exchange(port: u16, raw: &[u8]) -> (u16, String, Vec<u8>, bool) {
    let mut s = TcpStream::connect(("127.0.0.1", port)).unwrap();
    s.set_read_timeout(Some(Duration::from_millis(300)))
        .unwrap();
    let _ = s.write_all(raw);
    let mut got = Vec::new();
    let until = Instant::now() + Duration::from_secs(10);
    let mut closed = false;
    let mut buf = [0u8; 16384];
    while Instant::now() < until {
        match s.read(&mut buf) {
            Ok(0) => {
                closed = true;
                break;
            }
            Ok(n) => got.extend_from_slice(&buf[..n]),
            Err(e)
                if e.kind() == std::io::ErrorKind::WouldBlock
                    || e.kind() == std::io::ErrorKind::TimedOut =>
            {
                if !got.is_empty() {
                    break;
                }
            }
            Err(_) => {
                closed = true;
                break;
            }
        }
    }
    let text = String::from_utf8_lossy(&got).to_string();
    let (head, body) = match text.find("\r\n\r\n") {
        Some(i) => (text[..i].to_string(), got[i + 4..].to_vec()),
        None => (text.clone(), Vec::new()),
    };
    let status = head
        .split_whitespace()
        .nth(1)
        .and_then(|s| s.parse().ok())
        .unwrap_or(0);
    (status, head, body, closed)
}

fn has_header(head: &str, name: &str) -> Option<String> {
    head.lines().skip(1).find_map(|l| {
        let (k, v) = l.split_once(':')?;
        k.trim()
            .eq_ignore_ascii_case(name)
            .then(|| v.trim().to_string())
    })
}

#[test]
fn framing_the_rfc_forbids_gets_one_answer_on_every_path_and_never_reaches_a_node() {
    let node = hostile_node();
    let (gw, key) = gateway(&node);
    let path = "/v1/polygon/heimdall/echo";
    let big_head = format!(
        "GET {path} HTTP/1.1\r\nHost: a\r\nX-Big: {}\r\n\r\n",
        "b".repeat(70_000)
    );
    let many: String = (0..101).map(|i| format!("X-H{i}: v\r\n")).collect();
    // (case, request head after the request line's method and target, expected status)
    let cases: Vec<(&str, String, u16)> = vec![
        ("plus sign in Content-Length", format!("POST {path} HTTP/1.1\r\nHost: a\r\nx-token: {key}\r\nContent-Length: +2\r\n\r\nok"), 400),
        ("same, over HTTP/1.0", format!("POST {path} HTTP/1.0\r\nHost: a\r\nx-token: {key}\r\nContent-Length: +2\r\n\r\nok"), 400),
        ("no-break space in Content-Length", format!("POST {path} HTTP/1.1\r\nHost: a\r\nx-token: {key}\r\nContent-Length: \u{a0}2\r\n\r\nok"), 400),
        ("Content-Length list", format!("POST {path} HTTP/1.1\r\nHost: a\r\nx-token: {key}\r\nContent-Length: 2, 2\r\n\r\nok"), 400),
        ("two Content-Length", format!("POST {path} HTTP/1.1\r\nHost: a\r\nx-token: {key}\r\nContent-Length: 2\r\nContent-Length: 2\r\n\r\nok"), 400),
        ("Content-Length and chunked", format!("POST {path} HTTP/1.1\r\nHost: a\r\nx-token: {key}\r\nContent-Length: 7\r\nTransfer-Encoding: chunked\r\n\r\n2\r\nok\r\n0\r\n\r\n"), 400),
        ("unknown transfer coding", format!("POST {path} HTTP/1.1\r\nHost: a\r\nx-token: {key}\r\nTransfer-Encoding: gzip, chunked\r\n\r\n2\r\nok\r\n0\r\n\r\n"), 501),
        ("chunked in HTTP/1.0", format!("POST {path} HTTP/1.0\r\nHost: a\r\nx-token: {key}\r\nTransfer-Encoding: chunked\r\n\r\n2\r\nok\r\n0\r\n\r\n"), 400),
        ("no Host", format!("GET {path} HTTP/1.1\r\nx-token: {key}\r\n\r\n"), 400),
        ("two Host", format!("GET {path} HTTP/1.1\r\nHost: a\r\nHost: b\r\nx-token: {key}\r\n\r\n"), 400),
        ("two Host over HTTP/1.0", format!("GET {path} HTTP/1.0\r\nHost: a\r\nHost: b\r\nx-token: {key}\r\n\r\n"), 400),
        ("request line with spaces", format!("GET {path} x HTTP/1.1\r\nHost: a\r\n\r\n"), 400),
        ("head over 64 KiB", big_head, 431),
        ("101 header lines", format!("GET {path} HTTP/1.1\r\nHost: a\r\n{many}\r\n"), 431),
    ];
    let hits = node.hits();
    for (case, raw, want) in &cases {
        let (status, head, body, closed) = exchange(gw.port, raw.as_bytes());
        assert_eq!(status, *want, "{case}: {head}");
        assert_eq!(
            has_header(&head, "server").as_deref(),
            Some("chainedge"),
            "{case}"
        );
        assert_eq!(
            has_header(&head, "connection").as_deref(),
            Some("close"),
            "{case}"
        );
        let json: serde_json::Value = serde_json::from_slice(&body).unwrap_or_default();
        assert!(json["error"].is_string(), "{case}: envelope {body:?}");
        assert!(
            closed,
            "{case}: the connection must close after a framing refusal"
        );
    }
    assert_eq!(node.hits(), hits, "no refused request reached the node");

    // The same checks on the TLS listener's server (Pingora's): one answer.
    let tls_gw = Gateway::start(GatewayOpts {
        tls: true,
        ..Default::default()
    });
    let tls_port = tls_gw.tls_port.unwrap();
    for (host_lines, want) in [
        ("", 400),
        ("Host: a\r\nHost: b\r\n", 400),
        ("Host: a\r\n", 200),
    ] {
        let out = std::process::Command::new("openssl")
            .args([
                "s_client",
                "-quiet",
                "-connect",
                &format!("127.0.0.1:{tls_port}"),
            ])
            .stdin(std::process::Stdio::piped())
            .stdout(std::process::Stdio::piped())
            .stderr(std::process::Stdio::null())
            .spawn()
            .and_then(|mut c| {
                let req = format!(
                    "GET /console/app.js HTTP/1.1\r\n{host_lines}Connection: close\r\n\r\n"
                );
                c.stdin.take().unwrap().write_all(req.as_bytes())?;
                c.wait_with_output()
            })
            .unwrap();
        let text = String::from_utf8_lossy(&out.stdout);
        assert!(
            text.starts_with(&format!("HTTP/1.1 {want}")),
            "TLS {host_lines:?}: {text:.200}"
        );
    }
}

#[test]
fn forwarding_headers_are_the_edges_and_hop_headers_stay_on_their_hop() {
    let node = hostile_node();
    let (gw, key) = gateway(&node);
    let raw = format!(
        "GET /v1/polygon/heimdall/echo HTTP/1.1\r\nHost: a\r\nx-token: {key}\r\n\
         Proxy-Authorization: Basic c2VjcmV0\r\nConnection: keep-alive, X-Private\r\nX-Private: p\r\n\
         Keep-Alive: timeout=5\r\nX-Forwarded-For: 6.6.6.6\r\nForwarded: for=6.6.6.6\r\n\
         TE: trailers\r\nX-Kept: yes\r\n\r\n"
    );
    let (status, head, _, _) = exchange(gw.port, raw.as_bytes());
    assert_eq!(status, 200, "{head}");
    let seen = node.seen.lock().unwrap().last().cloned().unwrap();
    for gone in [
        "proxy-authorization",
        "x-private",
        "keep-alive",
        "forwarded",
        "te",
        "x-token",
    ] {
        assert_eq!(seen.header(gone), None, "{gone} reached the node");
    }
    assert_eq!(seen.header("x-forwarded-for"), Some("127.0.0.1"));
    assert_eq!(seen.header("x-kept"), Some("yes"));

    // An upgrade on a route that is not a WebSocket channel is a plain request: the
    // node never sees `Upgrade`, and a node switching protocols anyway is refused.
    let upgrade = |path: &str| {
        format!(
            "GET /v1/polygon/heimdall/{path} HTTP/1.1\r\nHost: a\r\nx-token: {key}\r\n\
             Connection: Upgrade\r\nUpgrade: websocket\r\nSec-WebSocket-Version: 13\r\n\
             Sec-WebSocket-Key: dGhlIHNhbXBsZSBub25jZQ==\r\n\r\n"
        )
    };
    let (status, head, _, _) = exchange(gw.port, upgrade("echo").as_bytes());
    assert_eq!(status, 200, "{head}");
    let seen = node.seen.lock().unwrap().last().cloned().unwrap();
    assert_eq!(seen.header("upgrade"), None);
    let (status, head, body, _) = exchange(gw.port, upgrade("switch").as_bytes());
    assert_eq!(status, 502, "{head}");
    assert!(!String::from_utf8_lossy(&body).contains("raw tunnel"));
}

#[test]
fn a_hostile_nodes_framing_is_refused_or_reframed_never_relayed() {
    let node = hostile_node();
    let (gw, key) = gateway(&node);
    let get = |path: &str| {
        let raw = format!(
            "GET /v1/polygon/heimdall/{path} HTTP/1.1\r\nHost: a\r\nx-token: {key}\r\nConnection: close\r\n\r\n"
        );
        exchange(gw.port, raw.as_bytes())
    };
    for path in [
        "inject",
        "both",
        "xchunked",
        "ext-lf",
        "plus-length",
        "switch",
    ] {
        let (status, head, body, _) = get(path);
        assert_eq!(status, 502, "{path}: {head}");
        let text = String::from_utf8_lossy(&body);
        assert!(text.contains("upstream_unavailable"), "{path}: {text}");
        assert!(
            !text.contains("injected") && !text.contains("HTTP/1.1"),
            "{path}: {text}"
        );
    }
    // Console cookies and `Connection`-named headers from a node never reach the client.
    let (status, head, body, _) = get("cookies");
    assert_eq!((status, body.as_slice()), (200, &b"ok"[..]), "{head}");
    let cookies: Vec<&str> = head
        .lines()
        .filter(|l| l.to_ascii_lowercase().starts_with("set-cookie:"))
        .collect();
    assert_eq!(cookies, vec!["Set-Cookie: node_pref=1"], "{head}");
    assert_eq!(has_header(&head, "x-node-secret"), None);
    // Extensions and trailers are the node's; the client gets the edge's own chunks.
    let (status, head, body, _) = get("extensions");
    assert_eq!(status, 200);
    assert_eq!(
        has_header(&head, "transfer-encoding").as_deref(),
        Some("chunked")
    );
    assert_eq!(body, b"5\r\nhello\r\n0\r\n\r\n");
}

#[test]
fn a_declared_body_costs_only_what_arrived() {
    let node = hostile_node();
    let (gw, key) = gateway(&node);
    let pid = gw.proc.as_ref().unwrap().pid();
    // Warm the paths once so allocator pools exist before the baseline.
    let _ = exchange(
        gw.port,
        format!("GET /v1/polygon/heimdall/echo HTTP/1.1\r\nHost: a\r\nx-token: {key}\r\nConnection: close\r\n\r\n").as_bytes(),
    );
    let before = rss_kib(pid);
    const N: usize = 800;
    let head = format!(
        "POST /v1/polygon/heimdall/echo HTTP/1.1\r\nHost: a\r\nx-token: {key}\r\nContent-Length: 1048576\r\n\r\nx"
    );
    let held: Vec<TcpStream> = (0..N)
        .map(|_| {
            let mut s = TcpStream::connect(("127.0.0.1", gw.port)).unwrap();
            s.write_all(head.as_bytes()).unwrap();
            s
        })
        .collect();
    std::thread::sleep(Duration::from_secs(2));
    let after = rss_kib(pid);
    let per_conn = after.saturating_sub(before) as f64 / N as f64;
    eprintln!("{N} connections with a 1 MiB body announced and 1 byte sent: {before} -> {after} KiB RSS, {per_conn:.1} KiB each");
    // Before: the whole announced MiB was reserved up front (1.3 GB for 1,500).
    assert!(per_conn < 16.0, "{per_conn:.1} KiB per connection");
    drop(held);
}

#[test]
fn connections_over_the_per_client_cap_are_closed_at_accept() {
    let gw = Gateway::start(GatewayOpts {
        listen_yaml: "  max_connections_per_client: 4\n".into(),
        ..Default::default()
    });
    let open = || {
        let mut s = TcpStream::connect(("127.0.0.1", gw.port)).unwrap();
        s.set_read_timeout(Some(Duration::from_secs(5))).unwrap();
        s.write_all(b"GET /console/app.js HTTP/1.1\r\nHost: a\r\n\r\n")
            .unwrap();
        let mut buf = [0u8; 12];
        let n = s.read(&mut buf).unwrap_or(0);
        (s, String::from_utf8_lossy(&buf[..n]).to_string())
    };
    let held: Vec<TcpStream> = (0..4)
        .map(|_| {
            let (s, first) = open();
            assert!(first.starts_with("HTTP/1.1 200"), "{first:?}");
            s
        })
        .collect();
    let (_, refused) = open();
    assert_eq!(refused, "", "the fifth connection is closed unanswered");
    drop(held);
    std::thread::sleep(Duration::from_millis(200));
    let (_, again) = open();
    assert!(
        again.starts_with("HTTP/1.1 200"),
        "slots come back: {again:?}"
    );
    let metrics = request(gw.metrics_port, "GET", "/metrics", &[], b"")
        .unwrap()
        .text();
    assert!(
        metrics.contains("chainedge_connections_refused_total{cap=\"client\"} 1"),
        "{}",
        metrics
            .lines()
            .filter(|l| l.contains("refused"))
            .collect::<Vec<_>>()
            .join("\n")
    );
}

//! The HTTP layer under hostile input, through the real binary with raw sockets: framing
//! the RFC forbids gets one clear answer whichever internal server would have taken the
//! request, never reaching a node; a hostile node's framing is refused, not relayed;
//! forwarding headers are the edge's; memory follows what clients actually sent.

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
            _ => FixtureResponse::json(serde_json::json!({
                "path": req.path,
                "body": String::from_utf8_lossy(&req.body),
                "content_length": req.header("content-length"),
                "transfer_encoding": req.header("transfer-encoding"),
            })),
        }
    })
}

/// The edge in front of `node`, listening plain and with TLS.
fn gateway(node: &Fixture) -> (Gateway, String) {
    let gw = Gateway::start(GatewayOpts {
        pools: format!(
            "  polygon_heimdall:\n    hosts:\n      - {{id: hd-1, url: \"{}\", family: heimdall}}\n",
            node.url()
        ),
        tls: true,
        ..Default::default()
    });
    let key = gw.key("pro", &[]);
    (gw, key)
}

/// A client connection, plain or TLS (the test certificate is self-signed).
enum Client {
    Plain(TcpStream),
    Tls(Box<openssl::ssl::SslStream<TcpStream>>),
}

impl Client {
    fn connect(port: u16, tls: bool) -> Client {
        let tcp = TcpStream::connect(("127.0.0.1", port)).unwrap();
        tcp.set_read_timeout(Some(Duration::from_millis(300)))
            .unwrap();
        if !tls {
            return Client::Plain(tcp);
        }
        let mut connector =
            openssl::ssl::SslConnector::builder(openssl::ssl::SslMethod::tls()).unwrap();
        connector.set_verify(openssl::ssl::SslVerifyMode::NONE);
        connector.set_alpn_protos(b"\x08http/1.1").unwrap();
        let tls = connector
            .build()
            .connect("localhost", tcp)
            .expect("TLS handshake");
        Client::Tls(Box::new(tls))
    }
}

impl Read for Client {
    fn read(&mut self, buf: &mut [u8]) -> std::io::Result<usize> {
        match self {
            Client::Plain(s) => s.read(buf),
            Client::Tls(s) => s.read(buf),
        }
    }
}

impl Write for Client {
    fn write(&mut self, buf: &[u8]) -> std::io::Result<usize> {
        match self {
            Client::Plain(s) => s.write(buf),
            Client::Tls(s) => s.write(buf),
        }
    }

    fn flush(&mut self) -> std::io::Result<()> {
        match self {
            Client::Plain(s) => s.flush(),
            Client::Tls(s) => s.flush(),
        }
    }
}

/// Both listeners of `gw`: (port, is TLS, name).
fn listeners(gw: &Gateway) -> [(u16, bool, &'static str); 2] {
    [
        (gw.port, false, "plain"),
        (gw.tls_port.unwrap(), true, "TLS"),
    ]
}

/// Send `raw` on a fresh plain connection; read until the edge closes or 10 s pass.
/// Returns (status, head text, body bytes, closed by the edge).
fn exchange(port: u16, raw: &[u8]) -> (u16, String, Vec<u8>, bool) {
    exchange_on(Client::connect(port, false), raw)
}

/// `exchange` on a given connection.
fn exchange_on(mut s: Client, raw: &[u8]) -> (u16, String, Vec<u8>, bool) {
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
    for ((case, raw, want), (port, tls, listener)) in cases
        .iter()
        .flat_map(|c| listeners(&gw).map(move |l| (c, l)))
    {
        let case = format!("{case} ({listener})");
        let (status, head, body, closed) = exchange_on(Client::connect(port, tls), raw.as_bytes());
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
}

#[test]
fn chunked_request_bodies_are_decoded_bounded_and_sent_on_with_a_length() {
    let node = hostile_node();
    let (gw, key) = gateway(&node);
    let post = |extra: &str, body: &str| {
        format!(
            "POST /v1/polygon/heimdall/echo HTTP/1.1\r\nHost: a\r\nx-token: {key}\r\n{extra}\
             Transfer-Encoding: chunked\r\n\r\n{body}"
        )
    };
    let body = "5\r\nhello\r\n6;ext=\"v\"\r\n world\r\n0\r\nX-Trailer: t\r\n\r\n";
    for (port, tls, listener) in listeners(&gw) {
        // Two requests in one write: the connection is still good after the first body.
        let two = post("", body) + &post("Connection: close\r\n", body);
        let (status, head, rest, _) = exchange_on(Client::connect(port, tls), two.as_bytes());
        assert_eq!(status, 200, "{listener}: {head}");
        let text = String::from_utf8_lossy(&rest);
        assert_eq!(
            text.matches("HTTP/1.1 200").count(),
            1,
            "{listener}: second answer: {text}"
        );
        let seen = node.seen.lock().unwrap().last().cloned().unwrap();
        assert_eq!(seen.body, b"hello world", "{listener}");
        assert_eq!(seen.header("content-length"), Some("11"), "{listener}");
        assert_eq!(seen.header("transfer-encoding"), None, "{listener}");
        assert_eq!(seen.header("x-trailer"), None, "{listener}");
        // A chunk announcing more than the body limit is refused before it arrives.
        let hits = node.hits();
        let (status, head, _, closed) = exchange_on(
            Client::connect(port, tls),
            post("", "200000\r\nabc").as_bytes(),
        );
        assert_eq!(status, 413, "{listener}: {head}");
        assert!(closed, "{listener}: the unread body ends the connection");
        // Broken chunk framing is a 400, never the node's to see.
        let (status, head, _, _) = exchange_on(
            Client::connect(port, tls),
            post("", "5\nhello\r\n0\r\n\r\n").as_bytes(),
        );
        assert_eq!(status, 400, "{listener}: {head}");
        assert_eq!(node.hits(), hits, "{listener}");
    }
}

/// Send `start`, then one more byte of `trickle` every 2 s until the edge closes the
/// connection: how long that took.
fn trickle_until_closed(mut s: Client, start: &[u8], trickle: u8) -> Duration {
    let began = Instant::now();
    s.write_all(start).unwrap();
    let mut buf = [0u8; 4096];
    while began.elapsed() < Duration::from_secs(90) {
        match s.read(&mut buf) {
            Ok(0) => return began.elapsed(),
            Ok(_) => continue,
            Err(e)
                if e.kind() == std::io::ErrorKind::WouldBlock
                    || e.kind() == std::io::ErrorKind::TimedOut => {}
            Err(_) => return began.elapsed(),
        }
        std::thread::sleep(Duration::from_millis(1700));
        if s.write_all(&[trickle]).is_err() {
            return began.elapsed();
        }
    }
    panic!("still open after 90 s");
}

#[test]
fn slow_heads_and_bodies_are_cut_at_their_deadlines_on_every_path() {
    let node = hostile_node();
    let (gw, key) = gateway(&node);
    let head = "GET /v1/polygon/heimdall/echo HTTP/1.1\r\nHost: a\r\nX-Slow: ".to_string();
    let chunked = |extra: &str| {
        format!(
            "POST /v1/polygon/heimdall/echo HTTP/1.1\r\nHost: a\r\nx-token: {key}\r\n{extra}\
             Transfer-Encoding: chunked\r\n\r\n100\r\n"
        )
    };
    // (case, listener is TLS, first bytes, fewest and most seconds until closed)
    let cases = vec![
        ("head, TLS", true, head.clone(), 28, 40),
        ("head, plain", false, head, 28, 40),
        (
            "chunked body read by the front, TLS",
            true,
            chunked(""),
            9,
            20,
        ),
        (
            "chunked body read by the front, plain",
            false,
            chunked(""),
            9,
            20,
        ),
        // `Expect` is Pingora's: the body is held to the deadline on its way there.
        (
            "chunked body handed to Pingora",
            false,
            chunked("Expect: 100-continue\r\n"),
            9,
            20,
        ),
    ];
    let listeners = listeners(&gw);
    let mut runs: Vec<_> = cases
        .into_iter()
        .map(|(case, tls, start, least, most)| {
            let port = listeners[usize::from(tls)].0;
            let run = std::thread::spawn(move || {
                trickle_until_closed(Client::connect(port, tls), start.as_bytes(), b'a')
            });
            (case, least, most, run)
        })
        .collect();
    // HTTP/2 (h2 frames it): a body read by a local handler is held to the same
    // deadline. curl streams 10 bytes of a body of unknown length and waits on its
    // stdin (closed at 14 s; curl shows the answer only after its upload). When the
    // edge answered is in its access log: the request's latency.
    let tls_port = listeners[1].0;
    let access_log = gw.access_log();
    let h2 = std::thread::spawn(move || {
        let began = Instant::now();
        let mut curl = std::process::Command::new("curl")
            .args([
                "-sk",
                "--http2",
                "-o",
                "/dev/stderr",
                "-w",
                "%{http_version} %{http_code}",
                "-H",
                "Content-Type: application/json",
                "-X",
                "POST",
                "-T",
                "-",
                &format!("https://127.0.0.1:{tls_port}/v1/auth/email/start"),
            ])
            .stdin(std::process::Stdio::piped())
            .stdout(std::process::Stdio::piped())
            .stderr(std::process::Stdio::piped())
            .spawn()
            .unwrap();
        let mut stdin = curl.stdin.take().unwrap();
        let mut body = curl.stderr.take().unwrap();
        let answer = std::thread::spawn(move || {
            let mut first = [0u8; 1];
            let n = body.read(&mut first).unwrap_or(0);
            let at = began.elapsed();
            let mut rest = Vec::new();
            let _ = body.read_to_end(&mut rest);
            (
                n,
                at,
                String::from_utf8_lossy(&first[..n]).to_string() + &String::from_utf8_lossy(&rest),
            )
        });
        stdin.write_all(b"{\"email\":").unwrap();
        std::thread::sleep(Duration::from_secs(14));
        drop(stdin);
        let out = curl.wait_with_output().unwrap();
        let (n, _, text) = answer.join().unwrap();
        let said = String::from_utf8_lossy(&out.stdout).to_string();
        assert_eq!(
            (said.as_str(), n, text.as_str()),
            ("2 400", 1, r#"{"error":"invalid_body"}"#),
            "HTTP/2 stalled body"
        );
        let log = std::fs::read_to_string(&access_log).unwrap();
        let line: serde_json::Value = log
            .lines()
            .filter_map(|l| serde_json::from_str::<serde_json::Value>(l).ok())
            .find(|l| l["path"] == "/v1/auth/email/start" && l["status"] == 400)
            .expect("the HTTP/2 request in the access log");
        Duration::from_secs_f64(line["latency_ms"].as_f64().unwrap() / 1000.0)
    });
    runs.push(("HTTP/2 body read by a handler (answered)", 9, 13, h2));
    for (case, least, most, run) in runs {
        let took = run.join().unwrap();
        eprintln!("{case}: closed after {took:.1?}");
        assert!(
            took >= Duration::from_secs(least) && took <= Duration::from_secs(most),
            "{case}: closed after {took:.1?}, expected {least}-{most} s"
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

//! Listeners behind an L4 proxy (`listen.proxy_protocol`): the PROXY header names the
//! client, and every rule that judges a client's address judges that one, never the
//! proxy on loopback. Attacked by hand (a header naming an outside client, none at all,
//! one that never completes) and through real proxies: haproxy `send-proxy` (v1) and
//! `send-proxy-v2`, on the plain and the TLS listener, and nginx's `stream` module with
//! `proxy_protocol on`.

use common::*;
use serde_json::Value;
use std::io::{Read, Write};
use std::net::TcpStream;
use std::time::{Duration, Instant};

const ADMIN: &str = "/v1/admin/usage?format=csv";

/// `header` then a request for `path`, on a fresh connection to `port`: the status, or
/// `None` when the edge closed the connection unanswered.
fn through_header(port: u16, header: &[u8], path: &str) -> Option<u16> {
    let mut s = TcpStream::connect(("127.0.0.1", port)).unwrap();
    s.set_read_timeout(Some(Duration::from_secs(10))).unwrap();
    let mut wire = header.to_vec();
    wire.extend_from_slice(
        format!("GET {path} HTTP/1.1\r\nHost: edge\r\nConnection: close\r\n\r\n").as_bytes(),
    );
    let _ = s.write_all(&wire);
    let mut answer = Vec::new();
    let _ = s.read_to_end(&mut answer);
    let text = String::from_utf8_lossy(&answer);
    text.strip_prefix("HTTP/1.1 ")
        .and_then(|t| t.get(..3))
        .and_then(|c| c.parse().ok())
}

/// A v2 header (PROXY, TCP over IPv4) naming `client`.
fn v2_header(client: [u8; 4], port: u16) -> Vec<u8> {
    let mut h = b"\r\n\r\n\0\r\nQUIT\n\x21\x11\x00\x0c".to_vec();
    h.extend_from_slice(&client);
    h.extend_from_slice(&[127, 0, 0, 1]);
    h.extend_from_slice(&port.to_be_bytes());
    h.extend_from_slice(&8080u16.to_be_bytes());
    h
}

/// The access log's client addresses (ports left out) for `path`, once at least `n`
/// lines are there.
fn clients_logged(gw: &Gateway, path: &str, n: usize) -> Vec<String> {
    let until = Instant::now() + Duration::from_secs(10);
    loop {
        let clients: Vec<String> = std::fs::read_to_string(gw.access_log())
            .unwrap_or_default()
            .lines()
            .filter_map(|l| serde_json::from_str::<Value>(l).ok())
            .filter(|l| l["path"] == path)
            .map(|l| {
                let client = l["client"].as_str().unwrap_or("");
                client
                    .rsplit_once(':')
                    .map_or(client, |(ip, _)| ip)
                    .to_string()
            })
            .collect();
        if clients.len() >= n || Instant::now() > until {
            return clients;
        }
        std::thread::sleep(Duration::from_millis(100));
    }
}

fn gateway() -> (Fixture, Gateway) {
    let node = Fixture::json_rpc();
    let gw = Gateway::start(GatewayOpts {
        pools: format!(
            "  eth_el:\n    hosts:\n      - {{id: el-1, url: \"{}\", family: el-geth}}\n",
            node.url()
        ),
        tls: true,
        proxy_protocol: true,
        ..Default::default()
    });
    (node, gw)
}

#[test]
fn the_client_a_header_names_is_the_one_judged() {
    let (_node, gw) = gateway();
    let port = gw.proxied_port.unwrap();
    // Loopback admin is on (the default), and every connection here comes from loopback:
    // only the header decides.
    let outside = b"PROXY TCP4 203.0.113.7 127.0.0.1 51000 8080\r\n";
    assert_eq!(through_header(port, outside, ADMIN), Some(403));
    assert_eq!(
        through_header(port, &v2_header([203, 0, 113, 8], 51001), ADMIN),
        Some(403)
    );
    let local = b"PROXY TCP4 127.0.0.1 127.0.0.1 51002 8080\r\n";
    assert_eq!(through_header(port, local, ADMIN), Some(200));
    // A header naming no client (haproxy's own checks): unknown, never the proxy.
    assert_eq!(through_header(port, b"PROXY UNKNOWN\r\n", ADMIN), Some(403));
    let health = b"\r\n\r\n\0\r\nQUIT\n\x20\x00\x00\x00";
    assert_eq!(through_header(port, health, ADMIN), Some(403));
    let mut clients = clients_logged(&gw, "/v1/admin/usage", 5);
    clients.sort();
    assert_eq!(
        clients,
        [
            "0.0.0.0",
            "0.0.0.0",
            "127.0.0.1",
            "203.0.113.7",
            "203.0.113.8"
        ],
        "the access log names the header's clients"
    );

    // Without a header, or with something else first, the connection closes unanswered.
    assert_eq!(through_header(port, b"", ADMIN), None);
    assert_eq!(
        through_header(port, b"PROXY TCP4 nonsense\r\n", ADMIN),
        None
    );
    // A header sent to a listener that takes none is not believed: a bad request.
    assert_eq!(through_header(gw.port, outside, ADMIN), Some(400));
    // A connection that never completes its header is closed, not held.
    let mut idle = TcpStream::connect(("127.0.0.1", port)).unwrap();
    idle.write_all(b"PROXY TCP4 203.0").unwrap();
    idle.set_read_timeout(Some(Duration::from_secs(20)))
        .unwrap();
    let start = Instant::now();
    let mut buf = [0u8; 16];
    assert!(matches!(idle.read(&mut buf), Ok(0) | Err(_)));
    assert!(
        start.elapsed() < Duration::from_secs(10),
        "{:?}",
        start.elapsed()
    );
    let refused = metric_sum(
        &gw,
        "chainedge_connections_refused_total{cap=\"proxy_protocol\"",
    );
    assert!(refused >= 3.0, "{refused}");
}

/// `curl` from `source` (a loopback address of its own) to `url`: the status.
fn curl_from(source: &str, url: &str) -> u16 {
    let out = std::process::Command::new("curl")
        .args([
            "-sk",
            "-o",
            "/dev/null",
            "-w",
            "%{http_code}",
            "--max-time",
            "10",
        ])
        .args(["--interface", source, url])
        .output()
        .expect("curl");
    String::from_utf8_lossy(&out.stdout)
        .trim()
        .parse()
        .unwrap_or(0)
}

#[test]
fn real_l4_proxies_hand_the_edge_their_clients() {
    let (_node, gw) = gateway();
    let (plain, tls) = (gw.proxied_port.unwrap(), gw.tls_port.unwrap());
    let dir = tempdir("proxy-protocol");
    let (v1, v2, v2_tls, stream) = (free_port(), free_port(), free_port(), free_port());
    std::fs::write(
        dir.join("haproxy.cfg"),
        format!(
            "defaults\n  mode tcp\n  timeout connect 5s\n  timeout client 30s\n  timeout server 30s\n\
             listen v1\n  bind 127.0.0.1:{v1}\n  server edge 127.0.0.1:{plain} send-proxy\n\
             listen v2\n  bind 127.0.0.1:{v2}\n  server edge 127.0.0.1:{plain} send-proxy-v2\n\
             listen v2tls\n  bind 127.0.0.1:{v2_tls}\n  server edge 127.0.0.1:{tls} send-proxy-v2\n"
        ),
    )
    .unwrap();
    let _haproxy = haproxy(&dir.join("haproxy.cfg"));
    let d = dir.display();
    std::fs::write(
        dir.join("nginx.conf"),
        format!(
            "load_module /usr/lib/nginx/modules/ngx_stream_module.so;\n\
             daemon off; worker_processes 1; pid {d}/nginx.pid; error_log {d}/nginx.err;\n\
             events {{ worker_connections 64; }}\n\
             stream {{ server {{ listen 127.0.0.1:{stream}; proxy_pass 127.0.0.1:{plain}; proxy_protocol on; }} }}\n"
        ),
    )
    .unwrap();
    let _nginx = nginx(&dir);
    for port in [v1, v2, v2_tls, stream] {
        wait_for_port(port, Duration::from_secs(10));
    }
    // Each proxy reports the loopback address its client connected from: the edge logs
    // that one, not the proxy's 127.0.0.1 (a loopback client, so admin answers 200).
    let ways = [
        ("127.0.0.11", format!("http://127.0.0.1:{v1}{ADMIN}")),
        ("127.0.0.12", format!("http://127.0.0.1:{v2}{ADMIN}")),
        ("127.0.0.13", format!("https://127.0.0.1:{v2_tls}{ADMIN}")),
        ("127.0.0.14", format!("http://127.0.0.1:{stream}{ADMIN}")),
    ];
    for (source, url) in &ways {
        assert_eq!(curl_from(source, url), 200, "{url} from {source}");
    }
    let mut clients = clients_logged(&gw, "/v1/admin/usage", ways.len());
    clients.retain(|c| c.starts_with("127.0.0.1") && c != "127.0.0.1");
    clients.sort();
    assert_eq!(
        clients,
        ["127.0.0.11", "127.0.0.12", "127.0.0.13", "127.0.0.14"]
    );
}

//! A small HTTP/1.1 fixture upstream for tests: keep-alive, one thread per connection,
//! answers from a closure, counts every request it receives, and can be told to fail.

use std::io::{BufRead, BufReader, Read, Write};
use std::net::{TcpListener, TcpStream};
use std::sync::atomic::{AtomicBool, AtomicUsize, Ordering};
use std::sync::{Arc, Mutex};
use std::time::Duration;

#[derive(Debug, Clone)]
pub struct FixtureRequest {
    pub method: String,
    pub path: String,
    pub headers: Vec<(String, String)>,
    pub body: Vec<u8>,
}

impl FixtureRequest {
    pub fn header(&self, name: &str) -> Option<&str> {
        self.headers
            .iter()
            .find(|(k, _)| k.eq_ignore_ascii_case(name))
            .map(|(_, v)| v.as_str())
    }
}

pub struct FixtureResponse {
    pub status: u16,
    pub content_type: &'static str,
    pub body: Vec<u8>,
    /// An event stream instead of a body: these chunks, one every `sse_every`, cycling
    /// until the client goes away. `{tick}` in a chunk is the wall clock in units of
    /// `sse_every`: two fixtures streaming at once send the same tick at the same time,
    /// as two beacon nodes send the same head.
    pub sse: Option<(Vec<String>, Duration)>,
    /// Hand-written answer bytes instead: these parts, 50 ms apart, then the connection
    /// is closed when the flag says so.
    pub raw: Option<(Vec<Vec<u8>>, bool)>,
}

impl FixtureResponse {
    pub fn json(v: serde_json::Value) -> Self {
        FixtureResponse {
            status: 200,
            content_type: "application/json",
            body: v.to_string().into_bytes(),
            sse: None,
            raw: None,
        }
    }
    pub fn status(status: u16, body: &str) -> Self {
        FixtureResponse {
            status,
            content_type: "text/plain",
            body: body.as_bytes().to_vec(),
            sse: None,
            raw: None,
        }
    }

    pub fn raw(parts: Vec<Vec<u8>>, then_close: bool) -> Self {
        FixtureResponse {
            raw: Some((parts, then_close)),
            ..FixtureResponse::status(200, "")
        }
    }

    pub fn events(chunks: Vec<String>, every: Duration) -> Self {
        FixtureResponse {
            status: 200,
            content_type: "text/event-stream",
            body: Vec::new(),
            sse: Some((chunks, every)),
            raw: None,
        }
    }
}

type Handler = dyn Fn(&FixtureRequest) -> FixtureResponse + Send + Sync;

pub struct Fixture {
    pub port: u16,
    hits: Arc<AtomicUsize>,
    /// When set, connections are accepted and closed without an answer.
    pub down: Arc<AtomicBool>,
    pub seen: Arc<Mutex<Vec<FixtureRequest>>>,
    stop: Arc<AtomicBool>,
    /// Open connections, shut down when the fixture is dropped (a node that dies).
    conns: Arc<Mutex<Vec<TcpStream>>>,
}

impl Fixture {
    pub fn start(
        handler: impl Fn(&FixtureRequest) -> FixtureResponse + Send + Sync + 'static,
    ) -> Fixture {
        let listener = TcpListener::bind("127.0.0.1:0").unwrap();
        let port = listener.local_addr().unwrap().port();
        let handler: Arc<Handler> = Arc::new(handler);
        let hits = Arc::new(AtomicUsize::new(0));
        let down = Arc::new(AtomicBool::new(false));
        let stop = Arc::new(AtomicBool::new(false));
        let seen = Arc::new(Mutex::new(Vec::new()));
        let conns = Arc::new(Mutex::new(Vec::new()));
        let (h2, d2, s2, seen2) = (hits.clone(), down.clone(), stop.clone(), seen.clone());
        let conns2 = conns.clone();
        std::thread::spawn(move || {
            for conn in listener.incoming() {
                if s2.load(Ordering::Relaxed) {
                    break;
                }
                let Ok(conn) = conn else { continue };
                if let Ok(c) = conn.try_clone() {
                    conns2.lock().unwrap().push(c);
                }
                if d2.load(Ordering::Relaxed) {
                    drop(conn);
                    continue;
                }
                let (handler, hits, seen, down) =
                    (handler.clone(), h2.clone(), seen2.clone(), d2.clone());
                std::thread::spawn(move || serve(conn, &*handler, &hits, &seen, &down));
            }
        });
        Fixture {
            port,
            hits,
            down,
            seen,
            stop,
            conns,
        }
    }

    /// A JSON-RPC node answering `eth_chainId` (0x1), `eth_blockNumber` (0x10) and
    /// `null` for anything else, batches included.
    pub fn json_rpc() -> Fixture {
        Fixture::start(json_rpc_answer)
    }

    /// `json_rpc`, keeping the path of every request it gets in `paths`.
    pub fn json_rpc_keeping_paths(paths: Arc<Mutex<Vec<String>>>) -> Fixture {
        Fixture::start(move |req| {
            paths.lock().unwrap().push(req.path.clone());
            json_rpc_answer(req)
        })
    }

    pub fn url(&self) -> String {
        format!("http://127.0.0.1:{}", self.port)
    }

    /// Requests received, not counting the gateway's health checks.
    pub fn hits(&self) -> usize {
        self.hits.load(Ordering::SeqCst)
    }

    /// The client requests it answered (health checks aside), one line each: request id,
    /// method, path and body, for an assertion's message.
    pub fn client_requests(&self) -> String {
        let seen = self.seen.lock().unwrap();
        let mut out = String::new();
        for r in seen.iter() {
            let id = r.header("x-request-id").unwrap_or("-");
            if id == "chainedge-health-check" {
                continue;
            }
            let body = String::from_utf8_lossy(&r.body);
            out.push_str(&format!("\n  {id} {} {} {body}", r.method, r.path));
        }
        out
    }

    /// Connections accepted so far (health checks' included).
    pub fn accepted(&self) -> usize {
        self.conns.lock().unwrap().len()
    }
}

impl Drop for Fixture {
    fn drop(&mut self) {
        self.stop.store(true, Ordering::Relaxed);
        let _ = TcpStream::connect(("127.0.0.1", self.port));
        for c in self.conns.lock().unwrap().drain(..) {
            let _ = c.shutdown(std::net::Shutdown::Both);
        }
    }
}

fn serve(
    conn: TcpStream,
    handler: &Handler,
    hits: &AtomicUsize,
    seen: &Mutex<Vec<FixtureRequest>>,
    down: &AtomicBool,
) {
    let _ = conn.set_read_timeout(Some(Duration::from_secs(30)));
    // An answer's head and body are two writes: without this, Nagle holds the body until
    // the edge's delayed ACK (40 ms a request).
    let _ = conn.set_nodelay(true);
    let mut w = conn.try_clone().unwrap();
    let mut r = BufReader::new(conn);
    loop {
        let mut line = String::new();
        if r.read_line(&mut line).unwrap_or(0) == 0 {
            return;
        }
        let mut parts = line.split_whitespace();
        let method = parts.next().unwrap_or("").to_string();
        let path = parts.next().unwrap_or("").to_string();
        let mut headers = Vec::new();
        loop {
            let mut h = String::new();
            if r.read_line(&mut h).unwrap_or(0) == 0 {
                return;
            }
            let h = h.trim_end();
            if h.is_empty() {
                break;
            }
            if let Some((k, v)) = h.split_once(':') {
                headers.push((k.trim().to_string(), v.trim().to_string()));
            }
        }
        let len = headers
            .iter()
            .find(|(k, _)| k.eq_ignore_ascii_case("content-length"))
            .and_then(|(_, v)| v.parse::<usize>().ok())
            .unwrap_or(0);
        let mut body = vec![0; len];
        if r.read_exact(&mut body).is_err() {
            return;
        }
        // The gateway's own health checks are not client traffic.
        let is_health_check = headers
            .iter()
            .any(|(k, v)| k.eq_ignore_ascii_case("x-request-id") && v == "chainedge-health-check");
        if !is_health_check {
            hits.fetch_add(1, Ordering::SeqCst);
        }
        if down.load(Ordering::Relaxed) {
            return;
        }
        let req = FixtureRequest {
            method,
            path,
            headers,
            body,
        };
        let resp = handler(&req);
        seen.lock().unwrap().push(req);
        if let Some((chunks, every)) = resp.sse {
            let head = "HTTP/1.1 200 OK\r\nContent-Type: text/event-stream\r\nCache-Control: no-cache\r\nConnection: close\r\n\r\n";
            if w.write_all(head.as_bytes()).is_err() {
                return;
            }
            for chunk in chunks.iter().cycle().take(100_000) {
                let tick = std::time::SystemTime::now()
                    .duration_since(std::time::UNIX_EPOCH)
                    .unwrap()
                    .as_millis()
                    / every.as_millis().max(1);
                let chunk = chunk.replace("{tick}", &tick.to_string());
                if w.write_all(chunk.as_bytes())
                    .and_then(|_| w.flush())
                    .is_err()
                {
                    return;
                }
                std::thread::sleep(every);
            }
            return;
        }
        if let Some((parts, then_close)) = resp.raw {
            for (i, part) in parts.iter().enumerate() {
                if i > 0 {
                    std::thread::sleep(Duration::from_millis(50));
                }
                if w.write_all(part).and_then(|_| w.flush()).is_err() {
                    return;
                }
            }
            if then_close {
                // Other handles to this socket stay open (`conns`): end it explicitly.
                let _ = w.shutdown(std::net::Shutdown::Both);
                return;
            }
            continue;
        }
        let head = format!(
            "HTTP/1.1 {} X\r\nContent-Type: {}\r\nContent-Length: {}\r\n\r\n",
            resp.status,
            resp.content_type,
            resp.body.len()
        );
        if w.write_all(head.as_bytes()).is_err() || w.write_all(&resp.body).is_err() {
            return;
        }
    }
}

/// A node that knows `eth_chainId` (1), `eth_blockNumber` (16) and `eth_syncing`; null
/// for anything else; batches answered call by call.
fn json_rpc_answer(req: &FixtureRequest) -> FixtureResponse {
    let one = |call: &serde_json::Value| {
        let result = match call["method"].as_str() {
            Some("eth_chainId") => serde_json::json!("0x1"),
            Some("eth_blockNumber") => serde_json::json!("0x10"),
            Some("eth_syncing") => serde_json::json!(false),
            _ => serde_json::Value::Null,
        };
        serde_json::json!({"jsonrpc": "2.0", "id": call["id"], "result": result})
    };
    let v: serde_json::Value = serde_json::from_slice(&req.body).unwrap_or_default();
    FixtureResponse::json(match &v {
        serde_json::Value::Array(calls) => calls.iter().map(one).collect(),
        call => one(call),
    })
}

//! The attempt policy through the pipeline: a read goes on past a host that fails or
//! answers a node-state error, and a host that stays silent is hedged long before its
//! attempt times out. The nodes are in-process HTTP/1.1 listeners that answer the health
//! check's batch like an execution client and each other call as their role says.

use super::{run, setup_with, Fake};
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::Arc;
use std::time::{Duration, Instant};
use tokio::io::{AsyncReadExt, AsyncWriteExt};
use tokio::net::TcpListener;

/// How a fake node answers calls other than the health check.
#[derive(Clone, Copy)]
pub(super) enum Role {
    Answers,
    /// Accepts the call and never answers it.
    Silent,
    /// "header not found": this node cannot answer now, another may.
    Behind,
    /// HTTP 503.
    Fails,
}

/// A node on a loopback port; its address.
async fn node(role: Role) -> String {
    counting_node(role).await.0
}

/// A node on a loopback port: its address, and how many calls other than the health
/// check it has taken.
pub(super) async fn counting_node(role: Role) -> (String, Arc<AtomicUsize>) {
    let listener = TcpListener::bind("127.0.0.1:0").await.unwrap();
    let addr = listener.local_addr().unwrap();
    let calls = Arc::new(AtomicUsize::new(0));
    let counted = calls.clone();
    tokio::spawn(async move {
        loop {
            let Ok((mut sock, _)) = listener.accept().await else {
                return;
            };
            let calls = counted.clone();
            tokio::spawn(async move {
                let mut buf = Vec::new();
                let mut chunk = [0u8; 4096];
                loop {
                    let Some(body) = request_body(&buf) else {
                        match sock.read(&mut chunk).await {
                            Ok(0) | Err(_) => return,
                            Ok(n) => buf.extend_from_slice(&chunk[..n]),
                        }
                        continue;
                    };
                    let health = body.contains("eth_syncing");
                    if !health {
                        calls.fetch_add(1, Ordering::Relaxed);
                    }
                    buf.clear();
                    let (status, answer) = match role {
                        _ if health => (
                            200,
                            r#"[{"jsonrpc":"2.0","id":1,"result":"0x10"},{"jsonrpc":"2.0","id":2,"result":false}]"#,
                        ),
                        Role::Answers => (200, r#"{"jsonrpc":"2.0","id":1,"result":"0x2a"}"#),
                        Role::Silent => {
                            std::future::pending::<()>().await;
                            unreachable!()
                        }
                        Role::Behind => (
                            200,
                            r#"{"jsonrpc":"2.0","id":1,"error":{"code":-32000,"message":"header not found"}}"#,
                        ),
                        Role::Fails => (503, "busy"),
                    };
                    let head = format!(
                        "HTTP/1.1 {status} X\r\ncontent-type: application/json\r\ncontent-length: {}\r\n\r\n",
                        answer.len()
                    );
                    if sock.write_all(head.as_bytes()).await.is_err()
                        || sock.write_all(answer.as_bytes()).await.is_err()
                    {
                        return;
                    }
                }
            });
        }
    });
    (format!("http://{addr}"), calls)
}

/// The body of the first complete request in `buf` (heads carry a Content-Length).
fn request_body(buf: &[u8]) -> Option<String> {
    let end = buf.windows(4).position(|w| w == b"\r\n\r\n")? + 4;
    let head = std::str::from_utf8(&buf[..end]).ok()?.to_ascii_lowercase();
    let len: usize = head
        .lines()
        .find_map(|l| l.strip_prefix("content-length:"))
        .and_then(|v| v.trim().parse().ok())
        .unwrap_or(0);
    (buf.len() >= end + len).then(|| String::from_utf8_lossy(&buf[end..end + len]).into())
}

/// A state whose `eth_el` pool is these nodes (healthy after one health round), with
/// attempts of 10 s and hedges after 50 ms at most.
async fn fleet(nodes: &[(&str, Role)]) -> super::Setup {
    let mut hosts = String::new();
    for (id, role) in nodes {
        hosts += &format!(
            "      - {{id: {id}, url: \"{}\", family: el-anvil}}\n",
            node(*role).await
        );
    }
    let s = setup_with(&format!(
        "rpc:\n  cache: {{enabled: false}}\n  coalesce: false\n  timeout_ms: 20000\n  attempt_timeout_ms: 10000\n\
         \x20 class_timeouts: {{read: {{timeout_ms: 20000, attempt_timeout_ms: 10000}}}}\n\
         \x20 hedge: {{min_delay_ms: 10, max_delay_ms: 50}}\n\
         pools:\n  eth_el:\n    hosts:\n{hosts}"
    ))
    .await;
    let st = &s.edge.state;
    crate::pools::health::round(&st.gateway.client, &st.pools, &st.config.app.health).await;
    s
}

/// One read through the pipeline: who answered it, and how long it took.
async fn read(s: &super::Setup) -> (String, Duration) {
    let mut call = Fake::new("POST", "/rpc/eth")
        .key(&s.free_key)
        .json(r#"{"jsonrpc":"2.0","id":1,"method":"eth_getBalance","params":["0x0000000000000000000000000000000000000000","latest"]}"#);
    let mut ctx = super::Ctx::new();
    let started = Instant::now();
    let outcome = s.edge.pipeline(&mut call, &mut ctx).await;
    let took = started.elapsed();
    match outcome {
        Ok(super::Outcome::Reply(r)) => {
            let answer: serde_json::Value = serde_json::from_slice(&r.body).unwrap();
            assert_eq!(answer["result"], "0x2a", "{answer}");
        }
        other => panic!("not an answer: {:?}", other.err()),
    }
    (ctx.upstream.clone().unwrap_or_default(), took)
}

#[tokio::test]
async fn a_read_goes_on_past_a_failing_or_lagging_host() {
    for bad in [Role::Fails, Role::Behind] {
        let s = fleet(&[("el-0", bad), ("el-1", Role::Answers)]).await;
        // The pool starts each read on the next host: both orders are taken.
        for _ in 0..2 {
            let (host, _) = read(&s).await;
            assert_eq!(host, "el-1");
        }
    }
    // Nothing answers: 502 with the last failure, after every host was tried once.
    let s = fleet(&[("el-0", Role::Fails), ("el-1", Role::Fails)]).await;
    let call = || {
        Fake::new("POST", "/rpc/eth")
            .key(&s.free_key)
            .json(r#"{"jsonrpc":"2.0","id":1,"method":"eth_chainId"}"#)
    };
    let (status, code, _) = super::refused(run(&s.edge, &mut call()).await);
    assert_eq!((status, code), (502, "upstream_unavailable"));
    // Every host behind: the node's own error is the answer (the caller may wait).
    let s = fleet(&[("el-0", Role::Behind), ("el-1", Role::Behind)]).await;
    let mut call = Fake::new("POST", "/rpc/eth")
        .key(&s.free_key)
        .json(r#"{"jsonrpc":"2.0","id":1,"method":"eth_chainId"}"#);
    let mut ctx = super::Ctx::new();
    let Ok(super::Outcome::Reply(r)) = s.edge.pipeline(&mut call, &mut ctx).await else {
        panic!("no answer");
    };
    let answer: serde_json::Value = serde_json::from_slice(&r.body).unwrap();
    assert_eq!(answer["error"]["message"], "header not found", "{answer}");
}

#[tokio::test]
async fn a_silent_host_is_hedged_long_before_its_attempt_times_out() {
    let s = fleet(&[("el-0", Role::Silent), ("el-1", Role::Answers)]).await;
    // One of the two reads starts on the silent host: without the hedge it would wait
    // out its 10 s attempt.
    for _ in 0..2 {
        let (host, took) = read(&s).await;
        assert_eq!(host, "el-1");
        assert!(took < Duration::from_secs(5), "took {took:?}");
    }
}

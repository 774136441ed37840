//! The node connection pool and the node-answer reader against scripted nodes.

use super::*;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::Arc;
use tokio::net::TcpListener;

/// A node that answers each request on a connection with the next canned answer, and
/// closes after `per_conn` answers. Returns its address and a count of connections.
async fn node(answers: Vec<&'static str>, per_conn: usize) -> (SocketAddr, Arc<AtomicUsize>) {
    node_with(answers, per_conn, "", 0).await
}

/// `node`, writing `after` on the connection `delay_ms` after each answer, unasked.
async fn node_with(
    answers: Vec<&'static str>,
    per_conn: usize,
    after: &'static str,
    delay_ms: u64,
) -> (SocketAddr, Arc<AtomicUsize>) {
    let l = TcpListener::bind("127.0.0.1:0").await.unwrap();
    let addr = l.local_addr().unwrap();
    let conns = Arc::new(AtomicUsize::new(0));
    let seen = conns.clone();
    tokio::spawn(async move {
        let mut next = 0;
        while let Ok((mut s, _)) = l.accept().await {
            seen.fetch_add(1, Ordering::SeqCst);
            for _ in 0..per_conn {
                let mut buf = vec![0u8; 4096];
                let mut got = Vec::new();
                // Read one request: head, then Content-Length bytes.
                loop {
                    let n = s.read(&mut buf).await.unwrap_or(0);
                    if n == 0 {
                        break;
                    }
                    got.extend_from_slice(&buf[..n]);
                    let text = String::from_utf8_lossy(&got).to_string();
                    if let Some(h) = text.find("\r\n\r\n") {
                        let len = text
                            .lines()
                            .find_map(|l| l.strip_prefix("Content-Length: "))
                            .and_then(|v| v.trim().parse::<usize>().ok())
                            .unwrap_or(0);
                        if got.len() >= h + 4 + len {
                            break;
                        }
                    }
                }
                if got.is_empty() {
                    break;
                }
                let a = answers[next % answers.len()];
                next += 1;
                s.write_all(a.as_bytes()).await.unwrap();
                if !after.is_empty() {
                    tokio::time::sleep(Duration::from_millis(delay_ms)).await;
                    s.write_all(after.as_bytes()).await.unwrap();
                }
            }
        }
    });
    (addr, conns)
}

fn post<'a>(headers: &'a [(&'a str, &'a [u8])]) -> H1Request<'a> {
    H1Request {
        method: "POST",
        path: "/",
        headers,
        body: Some(br#"{"jsonrpc":"2.0","id":1,"method":"eth_chainId"}"#),
    }
}

const H: &[(&str, &[u8])] = &[("Host", b"node")];

#[tokio::test]
async fn length_and_chunked_bodies_and_reuse() {
    let (addr, conns) = node(
        vec![
            "HTTP/1.1 200 OK\r\nContent-Length: 5\r\n\r\nhello",
            "HTTP/1.1 200 OK\r\nTransfer-Encoding: chunked\r\n\r\n3;x=y\r\nabc\r\n2\r\nde\r\n0\r\nX-T: 1\r\n\r\n",
            "HTTP/1.1 100 Continue\r\n\r\nHTTP/1.1 503 Busy\r\nContent-Length: 0\r\n\r\n",
        ],
        10,
    )
    .await;
    let pool = H1Pool::default();
    let r = pool.exchange(addr, &post(H), 100, None).await.unwrap();
    assert_eq!((r.status, &r.body[..]), (200, &b"hello"[..]));
    let r = pool.exchange(addr, &post(H), 100, None).await.unwrap();
    assert_eq!((r.status, &r.body[..]), (200, &b"abcde"[..]));
    let r = pool.exchange(addr, &post(H), 100, None).await.unwrap();
    assert_eq!((r.status, r.body.len()), (503, 0));
    assert_eq!(conns.load(Ordering::SeqCst), 1, "one connection, reused");
}

#[tokio::test]
async fn a_connection_the_node_closed_is_replaced() {
    // One answer per connection, then the node closes: each pooled connection is
    // stale by the next call, which must go out again on a fresh one.
    let (addr, conns) = node(vec!["HTTP/1.1 200 OK\r\nContent-Length: 2\r\n\r\nok"], 1).await;
    let pool = H1Pool::default();
    for _ in 0..3 {
        let r = pool.exchange(addr, &post(H), 100, None).await.unwrap();
        assert_eq!(&r.body[..], b"ok");
    }
    assert_eq!(conns.load(Ordering::SeqCst), 3);
}

#[tokio::test]
async fn unsolicited_bytes_on_an_idle_connection_are_never_an_answer() {
    // Right behind the answer (read with it), or later while the connection idles in
    // the pool: either way the answer stands and the connection is not used again.
    for delay_ms in [0, 5] {
        let (addr, conns) = node_with(
            vec!["HTTP/1.1 200 OK\r\nContent-Length: 2\r\n\r\nok"],
            10,
            "HTTP/1.1 408 Request Timeout\r\nContent-Length: 0\r\n\r\n",
            delay_ms,
        )
        .await;
        let pool = H1Pool::default();
        for _ in 0..3 {
            let r = pool.exchange(addr, &post(H), 100, None).await.unwrap();
            assert_eq!((r.status, &r.body[..]), (200, &b"ok"[..]));
            tokio::time::sleep(Duration::from_millis(30)).await;
        }
        assert_eq!(conns.load(Ordering::SeqCst), 3, "delay {delay_ms} ms");
    }
}

#[tokio::test]
async fn limits_and_malformed_answers() {
    let (addr, _) = node(vec!["HTTP/1.1 200 OK\r\nContent-Length: 500\r\n\r\n"], 10).await;
    let pool = H1Pool::default();
    let e = pool.exchange(addr, &post(H), 100, None).await.unwrap_err();
    assert!(matches!(e, UpstreamError::TooLarge(100)), "{e}");

    let (addr, _) = node(
        vec!["HTTP/1.1 200 OK\r\nTransfer-Encoding: chunked\r\n\r\n80\r\n"],
        10,
    )
    .await;
    let e = pool.exchange(addr, &post(H), 100, None).await.unwrap_err();
    assert!(matches!(e, UpstreamError::TooLarge(100)), "{e}");

    let (addr, _) = node(vec!["NOT HTTP AT ALL\r\n\r\n"], 10).await;
    let e = pool.exchange(addr, &post(H), 100, None).await.unwrap_err();
    assert!(e.to_string().contains("bad response head"), "{e}");

    // Bare LF line ends: refused at once, not after the read deadline.
    let (addr, _) = node(vec!["HTTP/1.1 200 OK\nContent-Length: 2\n\nok"], 10).await;
    let started = std::time::Instant::now();
    let e = pool.exchange(addr, &post(H), 100, None).await.unwrap_err();
    assert!(e.to_string().contains("bare LF"), "{e}");
    assert!(started.elapsed() < Duration::from_secs(2));

    let (addr, _) = node(
        vec!["HTTP/1.1 200 OK\r\nContent-Length: 2\r\nContent-Length: 3\r\n\r\nok"],
        10,
    )
    .await;
    let e = pool.exchange(addr, &post(H), 100, None).await.unwrap_err();
    assert!(e.to_string().contains("conflicting"), "{e}");

    // Framing a proxy must not guess at: refused, never relayed.
    for (answer, why) in [
        (
            "HTTP/1.1 200 OK\r\nContent-Length: 2\r\nTransfer-Encoding: chunked\r\n\r\n0\r\n\r\n",
            "both",
        ),
        (
            "HTTP/1.1 200 OK\r\nTransfer-Encoding: xchunked\r\n\r\n",
            "transfer-encoding",
        ),
        (
            "HTTP/1.1 200 OK\r\nTransfer-Encoding: gzip\r\nTransfer-Encoding: chunked\r\n\r\n",
            "transfer-encoding",
        ),
        (
            "HTTP/1.1 200 OK\r\nContent-Length: +2\r\n\r\nok",
            "content-length",
        ),
        (
            "HTTP/1.1 101 Switching Protocols\r\nUpgrade: x\r\n\r\n",
            "101",
        ),
    ] {
        let (addr, _) = node(vec![answer], 10).await;
        let e = pool.exchange(addr, &post(H), 100, None).await.unwrap_err();
        assert!(e.to_string().contains(why), "{answer:?}: {e}");
    }
}

/// A node that answers the first request on each connection and, on the second,
/// reads it and closes without answering. Counts the requests it read.
async fn answers_once_then_drops() -> (SocketAddr, Arc<AtomicUsize>) {
    let l = TcpListener::bind("127.0.0.1:0").await.unwrap();
    let addr = l.local_addr().unwrap();
    let requests = Arc::new(AtomicUsize::new(0));
    let seen = requests.clone();
    tokio::spawn(async move {
        while let Ok((mut s, _)) = l.accept().await {
            let seen = seen.clone();
            tokio::spawn(async move {
                let mut buf = vec![0u8; 4096];
                for answer in [true, false] {
                    if s.read(&mut buf).await.unwrap_or(0) == 0 {
                        return;
                    }
                    seen.fetch_add(1, Ordering::SeqCst);
                    if answer {
                        let ok = b"HTTP/1.1 200 OK\r\nContent-Length: 2\r\n\r\nok";
                        s.write_all(ok).await.unwrap();
                    }
                }
            });
        }
    });
    (addr, requests)
}

#[tokio::test]
async fn a_request_that_may_have_reached_the_node_is_not_sent_twice() {
    for safe_to_resend in [false, true] {
        let (addr, requests) = answers_once_then_drops().await;
        let pool = H1Pool::default();
        pool.exchange(addr, &post(H), 100, None).await.unwrap();
        let wire = encode(&post(H));
        let how = Open {
            kept: pool.take(addr),
            safe_to_resend,
            ..Open::default()
        };
        let got = pool.open(addr, &wire, &mut Deadline::default(), how).await;
        if safe_to_resend {
            assert!(got.is_ok(), "sent again on a fresh connection");
            assert_eq!(requests.load(Ordering::SeqCst), 3);
        } else {
            assert!(matches!(got, Err(OpenError::Transport(_))));
            assert_eq!(
                requests.load(Ordering::SeqCst),
                2,
                "the POST reached the node once"
            );
        }
    }
}

/// A node that answers the first request on each connection at once and holds every
/// later one for `hold_ms` before answering.
async fn slow_after_first(hold_ms: u64) -> SocketAddr {
    let l = TcpListener::bind("127.0.0.1:0").await.unwrap();
    let addr = l.local_addr().unwrap();
    tokio::spawn(async move {
        while let Ok((mut s, _)) = l.accept().await {
            tokio::spawn(async move {
                let mut buf = vec![0u8; 4096];
                let mut first = true;
                while s.read(&mut buf).await.unwrap_or(0) > 0 {
                    if !first {
                        tokio::time::sleep(Duration::from_millis(hold_ms)).await;
                    }
                    first = false;
                    let ok = b"HTTP/1.1 200 OK\r\nContent-Length: 2\r\n\r\nok";
                    if s.write_all(ok).await.is_err() {
                        return;
                    }
                }
            });
        }
    });
    addr
}

#[tokio::test]
async fn a_call_past_its_limit_times_out_and_its_connection_is_not_kept() {
    let addr = slow_after_first(5_000).await;
    let pool = H1Pool::default();
    let limit = Some(Duration::from_millis(200));
    pool.exchange(addr, &post(H), 100, limit).await.unwrap();
    let began = Instant::now();
    let e = pool.exchange(addr, &post(H), 100, limit).await.unwrap_err();
    assert!(matches!(e, UpstreamError::Timeout), "{e:?}");
    let waited = began.elapsed();
    assert!(waited >= Duration::from_millis(190) && waited < Duration::from_secs(2));
    assert!(
        pool.take(addr).is_none(),
        "a timed-out connection went back to the pool"
    );
}

#[tokio::test]
async fn a_kept_connections_timer_that_fired_does_not_end_a_later_call() {
    // Limits of 300 ms, answers after 120 ms (but the first). The first call arms the
    // connection's timer for 300 ms; it fires while the connection sits in the pool,
    // is moved to the second call's end, and fires again during the fourth call: each
    // call still gets its own whole limit.
    let addr = slow_after_first(120).await;
    let pool = H1Pool::default();
    let limit = Some(Duration::from_millis(300));
    pool.exchange(addr, &post(H), 100, limit).await.unwrap();
    tokio::time::sleep(Duration::from_millis(350)).await;
    for _ in 0..3 {
        let r = pool.exchange(addr, &post(H), 100, limit).await.unwrap();
        assert_eq!(&r.body[..], b"ok");
    }
}

#[test]
fn request_is_one_buffer_with_its_length() {
    let w = encode(&post(&[
        ("Host", &b"n:1"[..]),
        ("X-Request-Id", &b"r1"[..]),
    ]));
    let text = String::from_utf8(w).unwrap();
    assert!(text.starts_with("POST / HTTP/1.1\r\nHost: n:1\r\nX-Request-Id: r1\r\n"));
    assert!(
        text.contains("Content-Length: 47\r\n\r\n{\"jsonrpc\""),
        "{text}"
    );
}

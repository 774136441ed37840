//! The edge's HTTP/1.1 framing against hyper's, on the same bytes. Whatever the edge
//! would serve itself, hyper must read the same way, so no peer of the edge (client,
//! node, or a proxy in between that frames like hyper) sees other message boundaries:
//!
//! - request side: a head the lean front serves (complete, not refused, not handed to
//!   Pingora) is one hyper's server also accepts, with the same method, target and body
//!   length;
//! - response side: a node answer the lean client accepts whole (status, framing, body
//!   through `ChunkedScanner`) is one hyper's client reads with the same status and the
//!   same body bytes.
//!
//! The input's first byte picks the side. The edge may refuse more than hyper; never less.
#![no_main]

use bytes::Bytes;
use chainedge::parsers::{Head, Parsed};
use chainedge::parsers::{ChunkedScanner, Scan};
use chainedge::parsers::{parse_head_visit, Framing};
use http_body_util::{BodyExt, Empty};
use hyper::service::service_fn;
use hyper_util::rt::TokioIo;
use libfuzzer_sys::fuzz_target;
use std::sync::{Arc, Mutex};
use tokio::io::{AsyncReadExt, AsyncWriteExt};

fn runtime() -> &'static tokio::runtime::Runtime {
    static RT: std::sync::OnceLock<tokio::runtime::Runtime> = std::sync::OnceLock::new();
    RT.get_or_init(|| {
        tokio::runtime::Builder::new_current_thread()
            .enable_all()
            .build()
            .unwrap()
    })
}

fuzz_target!(|data: &[u8]| {
    let Some((&side, bytes)) = data.split_first() else {
        return;
    };
    if side % 2 == 0 {
        request_side(bytes);
    } else {
        response_side(bytes);
    }
});

/// (method, target, body length) as hyper's server read the request, if it did.
fn hyper_request(bytes: &[u8]) -> Option<(String, String, u64)> {
    let seen = Arc::new(Mutex::new(None));
    let record = seen.clone();
    let input = bytes.to_vec();
    runtime().block_on(async move {
        let (mut client, server) = tokio::io::duplex(1 << 20);
        client.write_all(&input).await.unwrap();
        let called = Arc::new(tokio::sync::Notify::new());
        let on_call = called.clone();
        let service = service_fn(move |req: hyper::Request<hyper::body::Incoming>| {
            let record = record.clone();
            let on_call = on_call.clone();
            async move {
                let len = hyper::body::Body::size_hint(req.body())
                    .exact()
                    .unwrap_or(u64::MAX);
                // The first request only: the bytes after it are another request.
                record.lock().unwrap().get_or_insert_with(|| {
                    (req.method().to_string(), req.uri().to_string(), len)
                });
                on_call.notify_one();
                Ok::<_, hyper::Error>(hyper::Response::new(Empty::<Bytes>::new()))
            }
        });
        // The client stays open (hyper reads a half-closed connection as an incomplete
        // message): done when hyper calls the service, refuses, or 300 ms pass.
        let serve = hyper::server::conn::http1::Builder::new()
            .serve_connection(TokioIo::new(server), service);
        tokio::select! {
            biased;
            _ = called.notified() => {}
            served = serve => {
                if std::env::var_os("DIFF_DEBUG").is_some() {
                    eprintln!("hyper server: {served:?}");
                }
            }
            _ = tokio::time::sleep(std::time::Duration::from_millis(300)) => {}
        }
        drop(client);
    });
    let got = seen.lock().unwrap().take();
    got
}

fn request_side(bytes: &[u8]) {
    let Parsed::Complete(head) = Head::parse(bytes) else {
        return;
    };
    if head.refusal.is_some() || head.needs_pingora || head.len > 64 * 1024 {
        return;
    }
    let (method, path, query, length) = (
        head_text(&bytes[..head.len], |h| h.method().to_string()),
        head_text(&bytes[..head.len], |h| h.path().to_string()),
        head_text(&bytes[..head.len], |h| h.query().map(str::to_string)),
        // A chunked body's length is not known from the head (hyper's size hint: none).
        if head.chunked {
            u64::MAX
        } else {
            head.content_length as u64
        },
    );
    let Some((h_method, h_target, h_len)) = hyper_request(bytes) else {
        panic!("the edge serves a head hyper refuses: {:?}", String::from_utf8_lossy(bytes));
    };
    let target = match query {
        Some(q) => format!("{path}?{q}"),
        None => path,
    };
    assert_eq!(method, h_method);
    assert_eq!(target, h_target);
    assert_eq!(length, h_len, "body length differs");
}

/// Text of a head parsed again from its own bytes (`Head` reads its ranges from there).
fn head_text<T>(raw: &[u8], f: impl Fn(&Head) -> T) -> T {
    let mut buf = bytes::BytesMut::from(raw);
    match Head::parse(&buf) {
        Parsed::Complete(mut h) => {
            h.take_from(&mut buf);
            f(&h)
        }
        _ => unreachable!("parsed once already"),
    }
}

/// The edge's reading of a whole answer: (status, body), or `None` where it refuses or
/// the answer is incomplete or ends with the connection.
fn edge_answer(bytes: &[u8]) -> Option<(u16, Vec<u8>)> {
    let head = parse_head_visit(bytes, false, |_, _| {}).ok()??;
    if head.status < 200 {
        return None;
    }
    let rest = &bytes[head.len..];
    match head.framing {
        Framing::None => Some((head.status, Vec::new())),
        Framing::Length(n) => (rest.len() >= n).then(|| (head.status, rest[..n].to_vec())),
        Framing::Chunked => {
            let mut body = Vec::new();
            match ChunkedScanner::default().feed(rest, |d| body.extend_from_slice(d)) {
                Ok(Scan::Done(_)) => Some((head.status, body)),
                _ => None,
            }
        }
        Framing::UntilClose => None,
    }
}

fn response_side(bytes: &[u8]) {
    let Some((status, body)) = edge_answer(bytes) else {
        return;
    };
    let input = bytes.to_vec();
    let got: Result<(u16, Vec<u8>), String> = runtime().block_on(async move {
        let (client, mut node) = tokio::io::duplex(1 << 20);
        let (mut sender, conn) = hyper::client::conn::http1::handshake::<_, Empty<Bytes>>(
            TokioIo::new(client),
        )
        .await
        .map_err(|e| e.to_string())?;
        let conn = tokio::spawn(conn);
        let answer = async {
            let req = hyper::Request::get("/")
                .header("host", "node")
                .body(Empty::new())
                .map_err(|e| e.to_string())?;
            let sent = sender.send_request(req);
            // Answer only once the request is out, as a node does.
            let mut asked = Vec::new();
            while !asked.ends_with(b"\r\n\r\n") {
                let mut byte = [0u8; 1];
                if node.read(&mut byte).await.map_err(|e| e.to_string())? == 0 {
                    return Err("no request".into());
                }
                asked.push(byte[0]);
            }
            node.write_all(&input).await.map_err(|e| e.to_string())?;
            node.shutdown().await.map_err(|e| e.to_string())?;
            let resp = sent.await.map_err(|e| format!("answer: {e:?}"))?;
            let status = resp.status().as_u16();
            let body = resp.into_body().collect().await.map_err(|e| format!("body: {e:?}"))?;
            Ok((status, body.to_bytes().to_vec()))
        };
        let got = tokio::time::timeout(std::time::Duration::from_secs(1), answer)
            .await
            .unwrap_or_else(|_| Err("timed out".into()));
        conn.abort();
        got
    });
    let (h_status, h_body) = match got {
        Ok(answer) => answer,
        Err(e) => panic!(
            "the edge accepts an answer hyper refuses ({e}): {:?}",
            String::from_utf8_lossy(bytes)
        ),
    };
    assert_eq!(status, h_status);
    assert_eq!(body, h_body, "body differs");
}

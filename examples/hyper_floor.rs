//! A proxy whose HTTP/1.1 is hyper's on both sides: hyper's server reads each request
//! (strict Content-Length / Transfer-Encoding, header-read timeout, buffer cap), hyper's
//! client sends it over a per-thread pool of keep-alive node connections, and the node's
//! answer is streamed back re-framed by hyper. No routing, no logging. The same thread
//! model as `tokio_floor` (one event loop per thread, shared listener). For bench/: how
//! fast library framing can be here, against nginx in the same run.
//! `hyper_floor <listen> <upstream> <threads>`.
use hyper::body::Incoming;
use hyper::client::conn::http1::SendRequest;
use hyper::service::service_fn;
use hyper::{Request, Response};
use hyper_util::rt::{TokioIo, TokioTimer};
use std::cell::RefCell;
use std::time::Duration;
use tokio::net::{TcpListener, TcpStream};

fn main() {
    let args: Vec<String> = std::env::args().collect();
    let (listen, upstream) = (args[1].clone(), args[2].clone());
    let threads: usize = args[3].parse().unwrap_or(2);
    let listener = std::net::TcpListener::bind(&listen).expect("bind");
    listener.set_nonblocking(true).expect("nonblocking");
    let workers: Vec<_> = (0..threads)
        .map(|_| {
            let listener = listener.try_clone().expect("listener");
            let upstream = upstream.clone();
            std::thread::spawn(move || worker(listener, upstream))
        })
        .collect();
    for w in workers {
        let _ = w.join();
    }
}

thread_local! {
    /// This thread's idle node connections.
    static POOL: RefCell<Vec<SendRequest<Incoming>>> = const { RefCell::new(Vec::new()) };
}

fn worker(listener: std::net::TcpListener, upstream: String) {
    let rt = tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()
        .expect("runtime");
    let local = tokio::task::LocalSet::new();
    local.block_on(&rt, async move {
        let listener = TcpListener::from_std(listener).expect("listener");
        let upstream: &'static str = Box::leak(upstream.into_boxed_str());
        loop {
            let Ok((client, _)) = listener.accept().await else {
                continue;
            };
            let _ = client.set_nodelay(true);
            tokio::task::spawn_local(async move {
                let service = service_fn(move |req| forward(req, upstream));
                let _ = hyper::server::conn::http1::Builder::new()
                    .timer(TokioTimer::new())
                    .header_read_timeout(Duration::from_secs(30))
                    .max_buf_size(64 * 1024)
                    .serve_connection(TokioIo::new(client), service)
                    .await;
            });
        }
    });
}

async fn forward(
    req: Request<Incoming>,
    upstream: &'static str,
) -> Result<Response<Incoming>, hyper::Error> {
    let idle = POOL.with(|p| {
        let mut p = p.borrow_mut();
        p.retain(|s| !s.is_closed());
        // Connections still carrying an earlier answer's body stay for later.
        let ready = p.iter().rposition(|s| s.is_ready())?;
        Some(p.swap_remove(ready))
    });
    let mut sender = match idle {
        Some(s) => s,
        None => {
            let node = TcpStream::connect(upstream).await.expect("node");
            let _ = node.set_nodelay(true);
            let (sender, conn) = hyper::client::conn::http1::handshake(TokioIo::new(node)).await?;
            tokio::task::spawn_local(conn);
            sender
        }
    };
    let answer = sender.send_request(req).await;
    // Ready again once this answer's body has been read; checked when taken.
    POOL.with(|p| p.borrow_mut().push(sender));
    answer
}

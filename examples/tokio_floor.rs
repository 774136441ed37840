//! The floor of any tokio proxy on this machine: a connection task per client that reads a
//! request head (httparse), forwards it over its own keep-alive node connection and copies
//! the answer back (Content-Length framing only). No routing, no logging, no pool, no
//! timeouts. Each thread runs its own event loop and accepts on the shared listener (as
//! nginx workers, and chainedge without work stealing). `tokio_floor <listen> <upstream>
//! <threads>`; for bench/ comparisons only.
use tokio::io::{AsyncReadExt, AsyncWriteExt};
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

/// One thread's event loop: accept, and serve each client on this thread.
fn worker(listener: std::net::TcpListener, upstream: String) {
    let rt = tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()
        .expect("runtime");
    rt.block_on(async move {
        let listener = TcpListener::from_std(listener).expect("listener");
        loop {
            let Ok((client, _)) = listener.accept().await else {
                continue;
            };
            let upstream = upstream.clone();
            tokio::spawn(async move {
                let _ = serve(client, &upstream).await;
            });
        }
    });
}

/// Bytes up to the end of a complete message in `buf` (head plus Content-Length body).
fn message_len(buf: &[u8], request: bool) -> Option<usize> {
    let mut headers = [httparse::EMPTY_HEADER; 32];
    let (head, found) = if request {
        let mut r = httparse::Request::new(&mut headers);
        match r.parse(buf).ok()? {
            httparse::Status::Complete(n) => (n, r.headers.to_vec()),
            httparse::Status::Partial => return None,
        }
    } else {
        let mut r = httparse::Response::new(&mut headers);
        match r.parse(buf).ok()? {
            httparse::Status::Complete(n) => (n, r.headers.to_vec()),
            httparse::Status::Partial => return None,
        }
    };
    let body: usize = found
        .iter()
        .find(|h| h.name.eq_ignore_ascii_case("content-length"))
        .and_then(|h| std::str::from_utf8(h.value).ok()?.trim().parse().ok())
        .unwrap_or(0);
    (buf.len() >= head + body).then_some(head + body)
}

async fn read_message(io: &mut TcpStream, buf: &mut Vec<u8>, request: bool) -> Option<usize> {
    loop {
        if let Some(n) = message_len(buf, request) {
            return Some(n);
        }
        buf.reserve(4096);
        if io.read_buf(buf).await.ok()? == 0 {
            return None;
        }
    }
}

async fn serve(mut client: TcpStream, upstream: &str) -> Option<()> {
    client.set_nodelay(true).ok()?;
    let mut node = TcpStream::connect(upstream).await.ok()?;
    node.set_nodelay(true).ok()?;
    let (mut inbuf, mut outbuf) = (Vec::with_capacity(4096), Vec::with_capacity(4096));
    loop {
        let n = read_message(&mut client, &mut inbuf, true).await?;
        node.write_all(&inbuf[..n]).await.ok()?;
        inbuf.drain(..n);
        let m = read_message(&mut node, &mut outbuf, false).await?;
        client.write_all(&outbuf[..m]).await.ok()?;
        outbuf.drain(..m);
    }
}

//! An event stream written on a lean connection: the head, then each chunk as the
//! producer gives it (chunked framing), until the producer ends, the client goes away or
//! the server shuts down; the connection closes after it.

use super::answer::{date_header, header, status_line};
use super::Conn;
use crate::edge::{Ctx, Edge};
use crate::reply::EventStream;

/// A held event stream and what its access-log line needs.
pub(super) struct StreamJob {
    pub ctx: Ctx,
    pub method: String,
    pub path: String,
    pub stream: EventStream,
}

impl StreamJob {
    /// Write the stream as it comes, chunk by chunk (chunked framing), until the producer
    /// ends, the client goes away or the server shuts down; then its access-log line, and
    /// the connection closes.
    pub(super) async fn run(self: Box<Self>, edge: &Edge, mut conn: Conn) {
        // The stream only writes: the connection's read buffer is not needed again.
        conn.buf = bytes::BytesMut::new();
        let StreamJob {
            ctx,
            method,
            path,
            stream,
        } = *self;
        let error = write_stream(&mut conn, &ctx, method == "HEAD", stream).await;
        edge.request_done(
            &ctx,
            &method,
            &path,
            &conn.client_text,
            200,
            error.as_deref(),
        );
    }
}

/// An event stream's head, then its chunks: the error that ended it early, if any.
async fn write_stream(
    conn: &mut Conn,
    ctx: &Ctx,
    head_only: bool,
    mut stream: EventStream,
) -> Option<String> {
    let mut out = Vec::with_capacity(512);
    status_line(&mut out, 200, "");
    date_header(&mut out);
    ctx.edge_headers(|k, v| header(&mut out, k, v.as_bytes()));
    header(&mut out, "Content-Type", stream.content_type.as_bytes());
    for (k, v) in &stream.headers {
        header(&mut out, k, v.as_bytes());
    }
    header(&mut out, "Transfer-Encoding", b"chunked");
    header(&mut out, "Connection", b"close");
    out.extend_from_slice(b"\r\n");
    if head_only {
        return conn.write(&out).await.err().map(|e| e.to_string());
    }
    if let Err(e) = conn.write(&out).await {
        return Some(format!("write to client: {e}"));
    }
    let mut shutdown = conn.shutdown.clone();
    loop {
        let chunk = tokio::select! {
            chunk = stream.next() => chunk,
            _ = shutdown.changed() => None,
        };
        let Some(chunk) = chunk else { break };
        out.clear();
        out.extend_from_slice(format!("{:x}\r\n", chunk.len()).as_bytes());
        out.extend_from_slice(&chunk);
        out.extend_from_slice(b"\r\n");
        if let Err(e) = conn.write(&out).await {
            return Some(format!("write to client: {e}"));
        }
    }
    conn.write(b"0\r\n\r\n")
        .await
        .err()
        .map(|e| format!("write to client: {e}"))
}

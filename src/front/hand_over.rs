//! A client connection as Pingora's HTTP server gets it for one request the front does
//! not serve itself: the head's bytes (already read) put back in front, and the request
//! body held to the front's body deadline.
//!
//! Pingora reads bodies with a per-read timeout only, so a body trickled in one byte
//! at a time would hold the connection for as long as the client likes. The guard here
//! follows the body's framing as Pingora reads it (a length, or the chunked coding) and
//! fails the read that would wait past the deadline; once the body is over it steps
//! aside, so a long answer (an event stream) is never cut by it.

use super::prefixed::Prefixed;
use crate::deadline::{body_deadline, BODY_TIMEOUT};
use crate::upstream::chunked::{ChunkedScanner, Scan};
use async_trait::async_trait;
use bytes::Bytes;
use pingora_core::protocols::raw_connect::ProxyDigest;
use pingora_core::protocols::tls::TlsRef;
use pingora_core::protocols::{
    GetProxyDigest, GetSocketDigest, GetTimingDigest, Peek, Shutdown, SocketDigest, Ssl, Stream,
    TimingDigest, UniqueID, UniqueIDType, ALPN,
};
use std::future::Future;
use std::io;
use std::pin::Pin;
use std::sync::Arc;
use std::task::{Context, Poll};
use std::time::{Duration, Instant};
use tokio::io::{AsyncRead, AsyncWrite, ReadBuf};
use tokio::time::Sleep;

/// How the handed-over request's body is framed (from its head, parsed by the front).
#[derive(Debug, Clone, Copy, PartialEq)]
pub enum BodyFraming {
    None,
    Length(usize),
    Chunked,
}

pub struct HandOverIo {
    io: Prefixed<Stream>,
    guard: Option<BodyGuard>,
}

impl HandOverIo {
    /// `unread` starts with a request head of `head_len` bytes whose body is `body`.
    pub fn new(io: Stream, unread: Bytes, head_len: usize, body: BodyFraming) -> Self {
        let framing = match body {
            BodyFraming::None | BodyFraming::Length(0) => None,
            BodyFraming::Length(n) => Some(Framing::Length(n as u64)),
            BodyFraming::Chunked => Some(Framing::Chunked(ChunkedScanner::default())),
        };
        let guard = framing.map(|framing| {
            let start = Instant::now();
            let until = start
                + match framing {
                    Framing::Length(n) => body_deadline(n as usize),
                    Framing::Chunked(_) => BODY_TIMEOUT,
                };
            BodyGuard {
                skip: head_len,
                framing,
                start,
                received: 0,
                sleep: Box::pin(tokio::time::sleep_until(until.into())),
            }
        });
        HandOverIo {
            io: Prefixed::new(unread, io),
            guard,
        }
    }

    /// The connection without this wrapper, once nothing of it is needed any more (its
    /// put-back bytes were read and the body is over).
    pub fn unwrap_if_done(self: Box<Self>) -> Result<Stream, Box<Self>> {
        if self.guard.is_none() && self.io.unread_is_empty() {
            Ok(self.io.into_inner())
        } else {
            Err(self)
        }
    }
}

enum Framing {
    /// Body bytes still to come.
    Length(u64),
    Chunked(ChunkedScanner),
}

struct BodyGuard {
    /// Head bytes still to pass before the body starts.
    skip: usize,
    framing: Framing,
    start: Instant,
    /// Body bytes seen (a chunked body's deadline grows with them).
    received: usize,
    sleep: Pin<Box<Sleep>>,
}

impl BodyGuard {
    /// Account for bytes the reader got: `Ok(true)` once the body is complete.
    fn saw(&mut self, mut bytes: &[u8]) -> io::Result<bool> {
        let skipped = self.skip.min(bytes.len());
        self.skip -= skipped;
        bytes = &bytes[skipped..];
        if bytes.is_empty() {
            return Ok(false);
        }
        self.received += bytes.len();
        match &mut self.framing {
            Framing::Length(left) => {
                *left = left.saturating_sub(bytes.len() as u64);
                Ok(*left == 0)
            }
            Framing::Chunked(scanner) => match scanner.feed(bytes, |_| {}) {
                Ok(Scan::Done(_)) => Ok(true),
                Ok(Scan::More) => {
                    let until = self.start + body_deadline(self.received);
                    self.sleep.as_mut().reset(until.into());
                    Ok(false)
                }
                Err(e) => Err(io::Error::new(io::ErrorKind::InvalidData, e)),
            },
        }
    }
}

impl AsyncRead for HandOverIo {
    fn poll_read(
        self: Pin<&mut Self>,
        cx: &mut Context<'_>,
        buf: &mut ReadBuf<'_>,
    ) -> Poll<io::Result<()>> {
        let this = self.get_mut();
        let before = buf.filled().len();
        match Pin::new(&mut this.io).poll_read(cx, buf) {
            Poll::Ready(Ok(())) => {
                if let Some(guard) = &mut this.guard {
                    if guard.saw(&buf.filled()[before..])? {
                        this.guard = None;
                    }
                }
                Poll::Ready(Ok(()))
            }
            Poll::Pending => {
                let late = this
                    .guard
                    .as_mut()
                    .is_some_and(|g| g.sleep.as_mut().poll(cx).is_ready());
                if late {
                    return Poll::Ready(Err(io::Error::new(
                        io::ErrorKind::TimedOut,
                        "request body not received in time",
                    )));
                }
                Poll::Pending
            }
            other => other,
        }
    }
}

impl AsyncWrite for HandOverIo {
    fn poll_write(
        self: Pin<&mut Self>,
        cx: &mut Context<'_>,
        buf: &[u8],
    ) -> Poll<io::Result<usize>> {
        Pin::new(&mut self.get_mut().io).poll_write(cx, buf)
    }

    fn poll_flush(self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<io::Result<()>> {
        Pin::new(&mut self.get_mut().io).poll_flush(cx)
    }

    fn poll_shutdown(self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<io::Result<()>> {
        Pin::new(&mut self.get_mut().io).poll_shutdown(cx)
    }
}

impl std::fmt::Debug for HandOverIo {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("HandOverIo")
            .field("io", self.io.get_ref())
            .field("body_guard", &self.guard.is_some())
            .finish()
    }
}

// What Pingora asks of a connection, answered by the connection inside.

#[async_trait]
impl Shutdown for HandOverIo {
    async fn shutdown(&mut self) {
        self.io.get_mut().shutdown().await
    }
}

impl UniqueID for HandOverIo {
    fn id(&self) -> UniqueIDType {
        self.io.get_ref().id()
    }
}

impl Ssl for HandOverIo {
    fn get_ssl(&self) -> Option<&TlsRef> {
        self.io.get_ref().get_ssl()
    }

    fn get_ssl_digest(&self) -> Option<Arc<pingora_core::protocols::tls::SslDigest>> {
        self.io.get_ref().get_ssl_digest()
    }

    fn selected_alpn_proto(&self) -> Option<ALPN> {
        self.io.get_ref().selected_alpn_proto()
    }
}

impl GetTimingDigest for HandOverIo {
    fn get_timing_digest(&self) -> Vec<Option<TimingDigest>> {
        self.io.get_ref().get_timing_digest()
    }

    fn get_read_pending_time(&self) -> Duration {
        self.io.get_ref().get_read_pending_time()
    }

    fn get_write_pending_time(&self) -> Duration {
        self.io.get_ref().get_write_pending_time()
    }
}

impl GetProxyDigest for HandOverIo {
    fn get_proxy_digest(&self) -> Option<Arc<ProxyDigest>> {
        self.io.get_ref().get_proxy_digest()
    }
}

impl GetSocketDigest for HandOverIo {
    fn get_socket_digest(&self) -> Option<Arc<SocketDigest>> {
        self.io.get_ref().get_socket_digest()
    }
}

// `try_peek` answers "not supported" (the default): the put-back bytes would have to
// come first, and nothing on this path peeks.
impl Peek for HandOverIo {}

#[cfg(test)]
mod tests {
    use super::*;
    use tokio::io::{AsyncReadExt, AsyncWriteExt};

    fn handed(
        unread: &'static [u8],
        head_len: usize,
        body: BodyFraming,
    ) -> (HandOverIo, tokio::io::DuplexStream) {
        let (far, near) = tokio::io::duplex(1024);
        let stream: Stream = Box::new(near);
        (
            HandOverIo::new(stream, Bytes::from_static(unread), head_len, body),
            far,
        )
    }

    #[tokio::test(start_paused = true)]
    async fn a_stalled_body_fails_the_read_at_its_deadline() {
        let head = b"POST / HTTP/1.1\r\nContent-Length: 10\r\n\r\nab";
        let (mut io, _far) = handed(head, head.len() - 2, BodyFraming::Length(10));
        let mut got = vec![0u8; 64];
        let n = io.read(&mut got).await.unwrap();
        assert_eq!(n, head.len());
        let e = io.read(&mut got).await.unwrap_err();
        assert_eq!(e.kind(), io::ErrorKind::TimedOut);
    }

    #[tokio::test(start_paused = true)]
    async fn after_the_body_reads_wait_as_long_as_they_like() {
        let head = b"POST / HTTP/1.1\r\nTransfer-Encoding: chunked\r\n\r\n";
        let (mut io, mut far) = handed(head, head.len(), BodyFraming::Chunked);
        let mut got = vec![0u8; 64];
        let n = io.read(&mut got).await.unwrap();
        assert_eq!(n, head.len());
        far.write_all(b"3\r\nabc\r\n0\r\n\r\n").await.unwrap();
        let n = io.read(&mut got).await.unwrap();
        assert_eq!(&got[..n], b"3\r\nabc\r\n0\r\n\r\n");
        assert!(io.guard.is_none());
        // An hour of quiet (an event stream's client) is not a body timeout.
        let quiet = tokio::time::timeout(Duration::from_secs(3600), io.read(&mut got)).await;
        assert!(quiet.is_err(), "the read was still waiting");
        let io = Box::new(io);
        let io = io.unwrap_if_done();
        assert!(io.is_ok());
    }
}

//! One client connection of the lean front: its socket, the bytes read but not yet used,
//! and its timers; reads of heads and bodies within their deadlines, and writes.

use super::client_io::ClientIo;
use super::prefixed::Prefixed;
use super::{BODY_STEP, READ_STEP, WRITE_TIMEOUT};
use crate::deadline::{body_deadline, Deadline};
use crate::upstream::chunked::{ChunkedScanner, Scan};
use bytes::{Bytes, BytesMut};
use pingora_core::server::ShutdownWatch;
use std::net::SocketAddr;
use std::time::Duration;
use tokio::io::{AsyncReadExt, AsyncWriteExt};

/// One client connection and the bytes read from it but not yet used.
pub struct Conn {
    pub(super) io: ClientIo,
    pub(super) buf: BytesMut,
    pub(super) client: Option<SocketAddr>,
    /// The listener's address the connection came in on.
    pub(super) local: Option<SocketAddr>,
    pub(super) client_text: String,
    /// The connection is TLS (HTTP/1.1 by ALPN or by default).
    pub(super) tls: bool,
    /// The client is a trusted proxy: its `X-Forwarded-For` chain is kept.
    pub(super) trusted_proxy: bool,
    pub(super) shutdown: ShutdownWatch,
    /// Times reads and writes on the client side (one lazily moved timer).
    pub(super) deadline: Deadline,
}

impl Conn {
    /// The socket alone, with the bytes read past the last head put back in front; the
    /// rest of the connection's state (buffers, timers) is dropped here.
    pub(super) fn into_prefixed_io(self) -> Prefixed<ClientIo> {
        let Conn { io, buf, .. } = self;
        Prefixed::new(Bytes::copy_from_slice(&buf), io)
    }

    pub(super) fn new(io: ClientIo, client: Option<SocketAddr>, shutdown: ShutdownWatch) -> Self {
        Conn {
            io,
            // Taken when the first bytes arrive (`read_more_within`): a connection that
            // never sends holds none.
            buf: BytesMut::new(),
            client,
            local: None,
            client_text: client.map(|a| a.to_string()).unwrap_or_default(),
            tls: false,
            trusted_proxy: false,
            shutdown,
            deadline: Deadline::default(),
        }
    }

    /// The client's address as `X-Forwarded-For` gives it: `client_text` without its
    /// port, an IPv6 address's brackets or its scope (the address alone, as
    /// `IpAddr`'s text). Read from the one string a connection keeps.
    pub(super) fn client_ip_text(&self) -> &str {
        ip_text(&self.client_text)
    }

    /// Between requests a plain TCP connection holds no read buffer: the next one is
    /// taken when bytes arrive (from the allocator's thread cache, where this one just
    /// went), so thousands of keep-alive clients never hold a buffer each while they
    /// think. A TLS stream has buffers of its own, so it keeps this one.
    pub(super) fn drop_empty_buffer(&mut self) {
        if matches!(self.io, ClientIo::Tcp(_)) && self.buf.is_empty() {
            self.buf = BytesMut::new();
        }
    }

    /// Until the client's bytes can be read, within `wait` (a TLS stream: at once). The
    /// operation itself, not an `async fn` around it: this is what an idle connection
    /// waits on.
    pub(super) fn readable_within(
        &mut self,
        wait: Duration,
    ) -> impl std::future::Future<Output = std::io::Result<()>> + '_ {
        self.deadline.run(Some(wait), self.io.readable())
    }

    /// Read what arrives within `wait`.
    pub(super) async fn read_more_within(&mut self, wait: Duration) -> std::io::Result<usize> {
        if self.buf.capacity() == 0 {
            // No buffer until the client sends something.
            let io = &self.io;
            self.deadline.run(Some(wait), io.readable()).await?;
        }
        // Small steps: request heads are usually a few hundred bytes (`reserve` reuses the
        // space once it is free).
        if self.buf.capacity() - self.buf.len() < 512 {
            self.buf.reserve(READ_STEP);
        }
        debug_assert!(self.buf.capacity() - self.buf.len() >= 512);
        let read = self.io.read_buf(&mut self.buf);
        self.deadline.run(Some(wait), read).await
    }

    /// The next `n` bytes of the connection (a body), within `body_deadline(n)`. The
    /// buffer grows with what arrives, at most `BODY_STEP` ahead of it.
    pub(super) async fn read_exact_bytes(&mut self, n: usize) -> std::io::Result<Bytes> {
        let until = std::time::Instant::now() + body_deadline(n);
        while self.buf.len() < n {
            let step = (n - self.buf.len()).min(self.buf.len().clamp(READ_STEP, BODY_STEP));
            if self.buf.capacity() - self.buf.len() < step {
                self.buf.reserve(step);
            }
            let left = until.saturating_duration_since(std::time::Instant::now());
            if left.is_zero() {
                return Err(std::io::ErrorKind::TimedOut.into());
            }
            if self.read_more_within(left).await? == 0 {
                return Err(std::io::ErrorKind::UnexpectedEof.into());
            }
        }
        Ok(self.buf.split_to(n).freeze())
    }

    /// A chunked body, decoded, of at most `limit` bytes. It must keep arriving at
    /// `MIN_BODY_RATE` after `BODY_TIMEOUT` (its size is unknown up front); the buffer
    /// grows with the data that arrived.
    pub(super) async fn read_chunked(&mut self, limit: usize) -> Result<Bytes, ChunkedBodyError> {
        let start = std::time::Instant::now();
        let mut scanner = ChunkedScanner::default();
        let mut body = BytesMut::new();
        let mut received = 0usize;
        loop {
            let mut over = false;
            let scan = scanner
                .feed(&self.buf, |data| {
                    over |= body.len() + data.len() > limit;
                    if !over {
                        body.extend_from_slice(data);
                    }
                })
                .map_err(|e| ChunkedBodyError::Io(std::io::Error::other(e)))?;
            if over || body.len() as u64 + scanner.announced() > limit as u64 {
                return Err(ChunkedBodyError::TooLarge);
            }
            match scan {
                Scan::Done(n) => {
                    let _ = self.buf.split_to(n);
                    return Ok(body.freeze());
                }
                Scan::More => {
                    received += self.buf.len();
                    self.buf.clear();
                }
            }
            // Room for the announced chunk (bounded by the limit above), so a large body
            // is not read a kilobyte at a time.
            let want = (scanner.announced() as usize).min(BODY_STEP);
            if self.buf.capacity() < want {
                self.buf.reserve(want);
            }
            let until = start + body_deadline(received);
            let left = until.saturating_duration_since(std::time::Instant::now());
            if left.is_zero() {
                return Err(ChunkedBodyError::Io(std::io::ErrorKind::TimedOut.into()));
            }
            if self.read_more_within(left).await? == 0 {
                return Err(ChunkedBodyError::Io(
                    std::io::ErrorKind::UnexpectedEof.into(),
                ));
            }
        }
    }

    /// Write and flush; a client that stops reading is dropped after `WRITE_TIMEOUT`.
    pub(super) async fn write(&mut self, bytes: &[u8]) -> std::io::Result<()> {
        let io = &mut self.io;
        let write = async {
            io.write_all(bytes).await?;
            io.flush().await
        };
        self.deadline.run(Some(WRITE_TIMEOUT), write).await
    }

    pub(super) fn shutting_down(&self) -> bool {
        *self.shutdown.borrow()
    }
}

/// Why a chunked request body was not read.
pub enum ChunkedBodyError {
    /// Its data exceeds the limit (the rest is left unread: the connection closes).
    TooLarge,
    /// The client stalled, went away or broke the chunked framing.
    Io(std::io::Error),
}

impl From<std::io::Error> for ChunkedBodyError {
    fn from(e: std::io::Error) -> Self {
        ChunkedBodyError::Io(e)
    }
}

/// The address part of a `SocketAddr`'s text.
fn ip_text(socket_addr: &str) -> &str {
    let host = socket_addr
        .rsplit_once(':')
        .map_or(socket_addr, |(host, _port)| host);
    let host = host
        .strip_prefix('[')
        .and_then(|h| h.strip_suffix(']'))
        .unwrap_or(host);
    host.split('%').next().unwrap_or(host)
}

#[cfg(test)]
mod tests {
    #[test]
    fn the_address_of_a_socket_address_as_its_ip_writes_it() {
        for a in [
            "127.0.0.1:80",
            "[::1]:8080",
            "[fe80::1%2]:443",
            "[::ffff:1.2.3.4]:1",
        ] {
            let addr: std::net::SocketAddr = a.parse().unwrap();
            assert_eq!(super::ip_text(&addr.to_string()), addr.ip().to_string());
        }
        assert_eq!(super::ip_text(""), "");
    }

    /// Every idle keep-alive connection holds its boxed `Conn`: 224 bytes is mimalloc's
    /// size class it fits, and one byte more would cost 32 per connection (the next
    /// class is 256).
    #[test]
    fn a_connection_stays_in_its_allocation_class() {
        let size = std::mem::size_of::<super::Conn>();
        assert!(size <= 224, "Conn is {size} bytes");
    }
}

//! The client connection as the lean front reads and writes it.
//!
//! Pingora hands every accepted connection over as its `Stream` (a boxed L4 stream with
//! read/write buffers, replay and per-poll timing). On the lean path that layering cost
//! more user CPU per request than the reads and writes themselves, so a fresh plain TCP
//! connection is taken out of it: the socket is duplicated, Pingora's wrapper dropped
//! (which deregisters and closes its descriptor) and the duplicate registered as a tokio
//! `TcpStream`. For a hand-over to Pingora the socket is wrapped again; a connection
//! Pingora gives back stays in Pingora's wrapper, which may hold replayed bytes. TLS
//! connections stay in Pingora's TLS stream throughout.

use super::hand_over::{BodyFraming, HandOverIo};
use bytes::BytesMut;
use pingora_core::protocols::l4::stream::Stream as L4Stream;
use pingora_core::protocols::{GetSocketDigest, SocketDigest, Stream};
use std::future::Future;
use std::io;
use std::net::SocketAddr;
use std::os::fd::{AsRawFd, BorrowedFd};
use std::pin::Pin;
use std::task::{Context, Poll};
use tokio::io::{AsyncRead, AsyncWrite, ReadBuf};
use tokio::net::TcpStream;

pub enum ClientIo {
    Tcp(TcpStream),
    Pingora(Stream),
}

impl ClientIo {
    /// A plain TCP connection as a bare socket, with its peer address; anything else
    /// (a Unix socket) is given back as it came.
    pub fn take(io: Stream) -> Result<(ClientIo, Option<SocketAddr>), Stream> {
        let peer = io
            .get_socket_digest()
            .and_then(|d| d.peer_addr().cloned())
            .and_then(|a| a.as_inet().copied());
        let Some(raw) = io
            .as_any()
            .downcast_ref::<L4Stream>()
            .map(|l4| l4.as_raw_fd())
        else {
            return Err(io);
        };
        if peer.is_none() {
            return Err(io);
        }
        // SAFETY: the descriptor belongs to `io`, which lives until after the duplicate
        // is made.
        let fd = unsafe { BorrowedFd::borrow_raw(raw) };
        let Ok(own) = fd.try_clone_to_owned() else {
            return Ok((ClientIo::Pingora(io), peer));
        };
        // The socket is already non-blocking (the flag lives on the shared description).
        match TcpStream::from_std(std::net::TcpStream::from(own)) {
            Ok(tcp) => {
                drop(io);
                Ok((ClientIo::Tcp(tcp), peer))
            }
            // The duplicate is closed with the error; Pingora's wrapper still works.
            Err(_) => Ok((ClientIo::Pingora(io), peer)),
        }
    }

    /// The connection as Pingora's stream for one request, `unread` bytes (a head of
    /// `head_len` bytes first, then what followed it) to be read first, and the request's
    /// body held to the front's deadline.
    /// Its peer is `client`: the socket's, or the one a PROXY header named.
    pub fn into_pingora(
        self,
        client: Option<SocketAddr>,
        unread: BytesMut,
        head_len: usize,
        body: BodyFraming,
    ) -> Stream {
        let io: Stream = match self {
            ClientIo::Pingora(io) => io,
            ClientIo::Tcp(tcp) => {
                let fd = tcp.as_raw_fd();
                let mut l4 = Box::new(L4Stream::from(tcp));
                l4.set_socket_digest(match client {
                    Some(c) => super::proxy_protocol::digest_for(fd, Some(c)),
                    None => SocketDigest::from_raw_fd(fd),
                });
                if body == BodyFraming::None {
                    // The cheapest replay: Pingora's own.
                    l4.rewind(&unread);
                    return l4;
                }
                l4
            }
        };
        Box::new(HandOverIo::new(io, unread.freeze(), head_len, body))
    }

    /// Until bytes can be read (a TLS stream: at once, its reads wait on their own).
    /// Polled on the socket's own read-readiness slot: the future is a reference, where
    /// `TcpStream::readable`'s carries a waiter of its own (168 bytes held by every idle
    /// connection's task).
    pub fn readable(&self) -> impl Future<Output = io::Result<()>> + '_ {
        std::future::poll_fn(move |cx| match self {
            ClientIo::Tcp(s) => s.poll_read_ready(cx),
            ClientIo::Pingora(_) => Poll::Ready(Ok(())),
        })
    }

    /// A connection Pingora gives back, its hand-over wrapper dropped once done with.
    pub fn from_pingora(io: Stream) -> ClientIo {
        if !io.as_any().is::<HandOverIo>() {
            return ClientIo::Pingora(io);
        }
        let Ok(handed) = io.into_any().downcast::<HandOverIo>() else {
            unreachable!("checked just above");
        };
        match handed.unwrap_if_done() {
            Ok(io) => ClientIo::Pingora(io),
            Err(still) => ClientIo::Pingora(still),
        }
    }
}

impl AsyncRead for ClientIo {
    fn poll_read(
        self: Pin<&mut Self>,
        cx: &mut Context<'_>,
        buf: &mut ReadBuf<'_>,
    ) -> Poll<io::Result<()>> {
        match self.get_mut() {
            ClientIo::Tcp(s) => Pin::new(s).poll_read(cx, buf),
            ClientIo::Pingora(s) => Pin::new(s).poll_read(cx, buf),
        }
    }
}

impl AsyncWrite for ClientIo {
    fn poll_write(
        self: Pin<&mut Self>,
        cx: &mut Context<'_>,
        buf: &[u8],
    ) -> Poll<io::Result<usize>> {
        match self.get_mut() {
            ClientIo::Tcp(s) => Pin::new(s).poll_write(cx, buf),
            ClientIo::Pingora(s) => Pin::new(s).poll_write(cx, buf),
        }
    }

    fn poll_flush(self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<io::Result<()>> {
        match self.get_mut() {
            ClientIo::Tcp(s) => Pin::new(s).poll_flush(cx),
            ClientIo::Pingora(s) => Pin::new(s).poll_flush(cx),
        }
    }

    fn poll_shutdown(self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<io::Result<()>> {
        match self.get_mut() {
            ClientIo::Tcp(s) => Pin::new(s).poll_shutdown(cx),
            ClientIo::Pingora(s) => Pin::new(s).poll_shutdown(cx),
        }
    }
}

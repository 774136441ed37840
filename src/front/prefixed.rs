//! A connection with bytes already read from it put back in front: what the client sent
//! right after a WebSocket handshake is the session's first input, not lost, and a head
//! handed to Pingora is read again by Pingora (`hand_over`).

use bytes::Bytes;
use std::io;
use std::pin::Pin;
use std::task::{Context, Poll};
use tokio::io::{AsyncRead, AsyncWrite, ReadBuf};

pub struct Prefixed<S> {
    unread: Bytes,
    io: S,
}

impl<S> Prefixed<S> {
    pub fn new(unread: Bytes, io: S) -> Self {
        Prefixed { unread, io }
    }

    pub fn get_ref(&self) -> &S {
        &self.io
    }

    pub fn get_mut(&mut self) -> &mut S {
        &mut self.io
    }

    pub fn unread_is_empty(&self) -> bool {
        self.unread.is_empty()
    }

    pub fn into_inner(self) -> S {
        self.io
    }
}

impl<S: AsyncRead + Unpin> AsyncRead for Prefixed<S> {
    fn poll_read(
        self: Pin<&mut Self>,
        cx: &mut Context<'_>,
        buf: &mut ReadBuf<'_>,
    ) -> Poll<io::Result<()>> {
        let this = self.get_mut();
        if !this.unread.is_empty() {
            let n = this.unread.len().min(buf.remaining());
            buf.put_slice(&this.unread.split_to(n));
            return Poll::Ready(Ok(()));
        }
        Pin::new(&mut this.io).poll_read(cx, buf)
    }
}

impl<S: AsyncWrite + Unpin> AsyncWrite for Prefixed<S> {
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

#[cfg(test)]
mod tests {
    use super::Prefixed;
    use tokio::io::{AsyncReadExt, AsyncWriteExt};

    #[tokio::test]
    async fn unread_bytes_come_first() {
        let (mut far, near) = tokio::io::duplex(64);
        let mut p = Prefixed::new(bytes::Bytes::from_static(b"ab"), near);
        far.write_all(b"cd").await.unwrap();
        let mut got = [0u8; 4];
        p.read_exact(&mut got).await.unwrap();
        assert_eq!(&got, b"abcd");
    }
}

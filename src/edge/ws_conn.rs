//! One server-side WebSocket connection, read and written from its session's own task:
//! messages to send wait in a bounded queue and go out as the socket takes them, polled
//! alongside the next read. No writer task and no channel per connection: a held
//! connection costs its socket, its codec's buffers and this queue (empty when idle).

use crate::observe::metrics;
use futures_util::{Sink, Stream};
use std::collections::VecDeque;
use std::future::poll_fn;
use std::pin::Pin;
use std::task::{ready, Context, Poll};
use std::time::Duration;
use tokio::io::{AsyncRead, AsyncWrite};
use tokio_tungstenite::tungstenite::protocol::frame::coding::CloseCode;
use tokio_tungstenite::tungstenite::protocol::{CloseFrame, Role, WebSocketConfig};
use tokio_tungstenite::tungstenite::{Error, Message, Utf8Bytes};
use tokio_tungstenite::WebSocketStream;

/// A queue that grew past this many slots is given back once it drains, so one burst
/// does not stay resident for the connection's life.
const KEPT_QUEUE: usize = 8;

/// How long a closing connection may take to get its last frames out.
const CLOSE_GRACE: Duration = Duration::from_secs(5);

/// The queue is full: the client reads slower than it is sent to.
#[derive(Debug)]
pub struct SlowConsumer;

pub struct WsConn<S> {
    ws: WebSocketStream<S>,
    queue: VecDeque<Message>,
    max_queue: usize,
    unflushed: bool,
}

impl<S: AsyncRead + AsyncWrite + Unpin> WsConn<S> {
    /// The session on `io` (the client's bytes after the 101), with at most `max_queue`
    /// messages waiting to be sent.
    pub async fn accept(io: S, config: WebSocketConfig, max_queue: usize) -> Self {
        WsConn {
            ws: WebSocketStream::from_raw_socket(io, Role::Server, Some(config)).await,
            queue: VecDeque::new(),
            max_queue: max_queue.max(1),
            unflushed: false,
        }
    }

    /// Queue a message to send; refused when the queue is full.
    pub fn send(&mut self, message: Message) -> Result<(), SlowConsumer> {
        if self.queue.len() >= self.max_queue {
            return Err(SlowConsumer);
        }
        self.queue.push_back(message);
        Ok(())
    }

    /// The next message from the client (`None`: it closed or went away; `Some(Err)`: a
    /// protocol, size or write error), sending what is queued meanwhile. With `read`
    /// false only the queue moves (the caller holds further input back).
    pub async fn next(&mut self, read: bool) -> Option<Result<Message, Error>> {
        poll_fn(|cx| {
            if let Poll::Ready(Err(e)) = self.poll_send(cx) {
                return Poll::Ready(Some(Err(e)));
            }
            if read {
                Pin::new(&mut self.ws).poll_next(cx)
            } else {
                Poll::Pending
            }
        })
        .await
    }

    /// Hand queued messages to the socket as far as it takes them, then flush.
    fn poll_send(&mut self, cx: &mut Context<'_>) -> Poll<Result<(), Error>> {
        while !self.queue.is_empty() {
            ready!(Pin::new(&mut self.ws).poll_ready(cx))?;
            if let Some(message) = self.queue.pop_front() {
                Pin::new(&mut self.ws).start_send(message)?;
                self.unflushed = true;
            }
        }
        if self.queue.capacity() > KEPT_QUEUE {
            self.queue = VecDeque::new();
        }
        if self.unflushed {
            ready!(Pin::new(&mut self.ws).poll_flush(cx))?;
            self.unflushed = false;
        }
        Poll::Ready(Ok(()))
    }

    /// End the session: with a close frame (it jumps the queue) or, when the client
    /// ended it, after what is queued; a client that reads nothing gets `CLOSE_GRACE`.
    pub async fn finish(mut self, close: Option<(CloseCode, String)>) {
        if close
            .as_ref()
            .is_some_and(|(code, _)| *code == CloseCode::Policy)
        {
            metrics::SLOW_CONSUMERS.inc();
        }
        let end = async {
            if let Some((code, reason)) = close {
                self.queue.clear();
                let frame = CloseFrame {
                    code,
                    reason: Utf8Bytes::from(reason),
                };
                self.queue.push_back(Message::Close(Some(frame)));
            }
            if poll_fn(|cx| self.poll_send(cx)).await.is_ok() {
                let _ = poll_fn(|cx| Pin::new(&mut self.ws).poll_close(cx)).await;
            }
        };
        let _ = tokio::time::timeout(CLOSE_GRACE, end).await;
    }
}

//! What a local handler returns: a complete response, or an event stream, as a value.
//! Only the edge and the front write them to the wire (with the edge's own headers added).

use crate::errors::{ApiError, Envelope};
use bytes::Bytes;

/// A header value of an answer: static text borrowed, built text owned.
pub type HeaderText = std::borrow::Cow<'static, str>;

/// A response produced by the edge or a local handler (no Pingora types inside).
pub struct Reply {
    pub status: u16,
    pub content_type: Option<&'static str>,
    /// Most values are static text (`X-Cache-Status: HIT`): borrowed, not copied.
    pub headers: Vec<(&'static str, HeaderText)>,
    pub body: Bytes,
    /// The node that served it, for the access log (never sent to the client).
    pub upstream: Option<String>,
}

impl Reply {
    pub fn json(status: u16, body: impl Into<Bytes>) -> Self {
        Reply {
            status,
            content_type: Some("application/json"),
            headers: Vec::new(),
            body: body.into(),
            upstream: None,
        }
    }

    pub fn empty(status: u16) -> Self {
        Reply {
            status,
            content_type: None,
            headers: Vec::new(),
            body: Bytes::new(),
            upstream: None,
        }
    }

    pub fn error(e: &ApiError, envelope: Envelope, request_id: &str) -> Self {
        let mut r = Reply::json(e.status, e.body(envelope, request_id));
        (r.headers).extend(e.headers.iter().map(|(k, v)| (*k, v.clone().into())));
        r
    }

    /// Name the node that served this answer (access log, metrics).
    pub fn served_by(mut self, upstream: Option<String>) -> Self {
        self.upstream = upstream;
        self
    }

    pub fn with_headers(mut self, h: Vec<(&'static str, HeaderText)>) -> Self {
        self.headers.extend(h);
        self
    }
}

/// A long-lived answer (server-sent events): its head, and the chunks a producer task
/// sends as they come. Dropping the stream (the client went away, the edge is done)
/// stops the producer, which releases whatever it holds.
pub struct EventStream {
    pub content_type: &'static str,
    pub headers: Vec<(&'static str, String)>,
    /// The node feeding the stream, for the access log.
    pub upstream: Option<String>,
    events: tokio::sync::mpsc::Receiver<Bytes>,
    producer: tokio::task::JoinHandle<()>,
}

impl EventStream {
    /// Run `produce` as its own task, with room for `backlog` chunks between it and the
    /// writer (a slow client holds the producer back rather than growing memory).
    pub fn spawn<F>(
        content_type: &'static str,
        headers: Vec<(&'static str, String)>,
        upstream: Option<String>,
        backlog: usize,
        produce: impl FnOnce(tokio::sync::mpsc::Sender<Bytes>) -> F,
    ) -> Self
    where
        F: std::future::Future<Output = ()> + Send + 'static,
    {
        let (tx, events) = tokio::sync::mpsc::channel(backlog.max(1));
        let producer = tokio::spawn(produce(tx));
        EventStream {
            content_type,
            headers,
            upstream,
            events,
            producer,
        }
    }

    /// The next chunk; `None` once the producer has finished.
    pub async fn next(&mut self) -> Option<Bytes> {
        self.events.recv().await
    }
}

impl Drop for EventStream {
    fn drop(&mut self) {
        self.producer.abort();
    }
}

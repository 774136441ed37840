//! What a local handler returns: a complete response as a value. Only the edge and the
//! front write it to the wire (with the edge's own headers added).

use crate::errors::{ApiError, Envelope};
use bytes::Bytes;

/// A response produced by the edge or a local handler (no Pingora types inside).
pub struct Reply {
    pub status: u16,
    pub content_type: Option<&'static str>,
    pub headers: Vec<(&'static str, String)>,
    pub body: Bytes,
}

impl Reply {
    pub fn json(status: u16, body: impl Into<Bytes>) -> Self {
        Reply {
            status,
            content_type: Some("application/json"),
            headers: Vec::new(),
            body: body.into(),
        }
    }

    pub fn empty(status: u16) -> Self {
        Reply {
            status,
            content_type: None,
            headers: Vec::new(),
            body: Bytes::new(),
        }
    }

    pub fn error(e: &ApiError, envelope: Envelope, request_id: &str) -> Self {
        let mut r = Reply::json(e.status, e.body(envelope, request_id));
        r.headers.extend(e.headers.iter().cloned());
        r
    }

    pub fn with_headers(mut self, h: Vec<(&'static str, String)>) -> Self {
        self.headers.extend(h);
        self
    }
}

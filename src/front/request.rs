//! A request head read by the lean front, and the request it becomes for the pipeline.

use super::Conn;
use crate::edge::downstream::{payload_too_large, unreadable_body, Downstream, PreMatch};
use crate::errors::ApiError;
use async_trait::async_trait;
use bytes::{Bytes, BytesMut};
use std::net::IpAddr;
use std::ops::Range;

/// Most header lines in a request head (more goes to Pingora, which refuses it its way).
pub const MAX_HEADERS: usize = 100;

/// A parsed request head: ranges into its bytes, so nothing is copied per header.
pub struct Head {
    /// The head's bytes, exactly those `parse` saw (`take_from`).
    raw: Bytes,
    /// Bytes of the head, blank line included.
    pub len: usize,
    method: Range<usize>,
    path: Range<usize>,
    query: Option<Range<usize>>,
    pub headers: Vec<(Range<usize>, Range<usize>)>,
    /// Declared body length (0 when none).
    pub content_length: usize,
    /// The client asked to close after this answer.
    pub close: bool,
    /// Something only Pingora's full HTTP/1 server handles: HTTP/1.0, a chunked or
    /// otherwise encoded body, `Expect`, an upgrade, a bad or repeated `Content-Length`.
    pub needs_pingora: bool,
}

pub enum Parsed {
    Complete(Head),
    Partial,
    /// Malformed or over a limit: Pingora answers it.
    Invalid,
}

impl Head {
    /// Parse the head at the start of `buf` (ranges are offsets into `buf`).
    pub fn parse(buf: &[u8]) -> Parsed {
        let mut headers = [httparse::EMPTY_HEADER; MAX_HEADERS];
        let mut req = httparse::Request::new(&mut headers);
        let len = match req.parse(buf) {
            Ok(httparse::Status::Complete(n)) => n,
            Ok(httparse::Status::Partial) => return Parsed::Partial,
            Err(_) => return Parsed::Invalid,
        };
        let at = |s: &[u8]| {
            let start = s.as_ptr() as usize - buf.as_ptr() as usize;
            start..start + s.len()
        };
        let (Some(method), Some(target)) = (req.method, req.path) else {
            return Parsed::Invalid;
        };
        let target_range = at(target.as_bytes());
        let (path, query) = match target.find('?') {
            Some(q) => (
                target_range.start..target_range.start + q,
                Some(target_range.start + q + 1..target_range.end),
            ),
            None => (target_range, None),
        };
        let mut head = Head {
            raw: Bytes::new(),
            len,
            method: at(method.as_bytes()),
            path,
            query,
            headers: Vec::with_capacity(req.headers.len()),
            content_length: 0,
            close: false,
            needs_pingora: req.version != Some(1) || !target.starts_with('/'),
        };
        let mut lengths = 0;
        for h in req.headers.iter() {
            let name = h.name;
            if name.eq_ignore_ascii_case("content-length") {
                lengths += 1;
                match std::str::from_utf8(h.value)
                    .ok()
                    .and_then(|v| v.trim().parse().ok())
                {
                    Some(n) => head.content_length = n,
                    None => head.needs_pingora = true,
                }
            } else if name.eq_ignore_ascii_case("connection") {
                let v = String::from_utf8_lossy(h.value).to_ascii_lowercase();
                head.close |= v.contains("close");
                head.needs_pingora |= v.contains("upgrade");
            } else if name.eq_ignore_ascii_case("transfer-encoding")
                || name.eq_ignore_ascii_case("expect")
                || name.eq_ignore_ascii_case("upgrade")
            {
                head.needs_pingora = true;
            }
            head.headers.push((at(name.as_bytes()), at(h.value)));
        }
        head.needs_pingora |= lengths > 1;
        Parsed::Complete(head)
    }

    /// Move the parsed head's bytes out of the front of `buf` (the bytes `parse` read).
    pub fn take_from(&mut self, buf: &mut BytesMut) {
        self.raw = buf.split_to(self.len).freeze();
    }

    pub fn raw(&self) -> &[u8] {
        &self.raw
    }

    fn text(&self, r: &Range<usize>) -> &str {
        let bytes = &self.raw[r.clone()];
        debug_assert!(std::str::from_utf8(bytes).is_ok());
        // SAFETY: every range given here (method, path, query, header names) was cut from
        // a `&str` httparse returned while parsing these same bytes (`raw` is only set by
        // `take_from`, from the buffer `parse` read, or by the tests' `parse`); the query
        // split is at an ASCII '?'. These run many times per request, on the hot path.
        unsafe { std::str::from_utf8_unchecked(bytes) }
    }

    pub fn method(&self) -> &str {
        self.text(&self.method)
    }

    pub fn path(&self) -> &str {
        self.text(&self.path)
    }

    pub fn query(&self) -> Option<&str> {
        self.query.as_ref().map(|q| self.text(q))
    }

    /// Header lines as (name, raw value).
    pub fn header_lines(&self) -> impl Iterator<Item = (&str, &[u8])> {
        self.headers
            .iter()
            .map(|(n, v)| (self.text(n), &self.raw[v.clone()]))
    }

    pub fn header(&self, name: &str) -> Option<&str> {
        self.header_lines()
            .find(|(n, _)| n.eq_ignore_ascii_case(name))
            .and_then(|(_, v)| std::str::from_utf8(v).ok())
    }
}

/// A lean request: its head, and the connection its body (if any) is still on.
pub struct LeanRequest<'c> {
    pub head: Head,
    pub conn: &'c mut Conn,
    /// The body once read (`read_body`); `None` while it is still on the connection.
    pub body: Option<Bytes>,
    /// The route the front matched to decide it serves this request.
    pub pre: Option<PreMatch>,
}

/// An unread request body up to this size is read and dropped to keep the connection.
const MAX_DISCARD: usize = 64 * 1024;

impl LeanRequest<'_> {
    /// The body is unread and too large to drop: the answer must close the connection.
    pub fn body_blocks_reuse(&self) -> bool {
        self.body.is_none() && self.head.content_length > MAX_DISCARD
    }

    /// Leave the connection at the start of the next request: an unread body is read
    /// and dropped when small, otherwise the connection cannot be reused (`false`).
    pub async fn discard_body(&mut self) -> bool {
        if self.body.is_some() || self.head.content_length == 0 {
            return true;
        }
        if self.body_blocks_reuse() {
            return false;
        }
        self.conn
            .read_exact_bytes(self.head.content_length)
            .await
            .is_ok()
    }
}

#[async_trait]
impl Downstream for LeanRequest<'_> {
    fn take_match(&mut self) -> Option<PreMatch> {
        self.pre.take()
    }

    fn method(&self) -> &str {
        self.head.method()
    }

    fn path(&self) -> &str {
        self.head.path()
    }

    fn query(&self) -> Option<&str> {
        self.head.query()
    }

    fn header(&self, name: &str) -> Option<&str> {
        self.head.header(name)
    }

    fn cookies(&self) -> Option<String> {
        let parts: Vec<&str> = self
            .head
            .header_lines()
            .filter(|(n, _)| n.eq_ignore_ascii_case("cookie"))
            .filter_map(|(_, v)| std::str::from_utf8(v).ok())
            .collect();
        (!parts.is_empty()).then(|| parts.join("; "))
    }

    fn authority(&self) -> Option<&str> {
        self.head.header("host")
    }

    fn is_upgrade(&self) -> bool {
        // Upgrades never take the lean path.
        false
    }

    fn client_ip(&self) -> Option<IpAddr> {
        self.conn.client.map(|a| a.ip())
    }

    fn is_tls(&self) -> bool {
        false
    }

    async fn read_body(&mut self, limit: usize) -> Result<Bytes, ApiError> {
        if let Some(body) = &self.body {
            return Ok(body.clone());
        }
        if self.head.content_length > limit {
            return Err(payload_too_large(limit));
        }
        let body = self
            .conn
            .read_exact_bytes(self.head.content_length)
            .await
            .map_err(unreadable_body)?;
        self.body = Some(body.clone());
        Ok(body)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn parse(raw: &[u8]) -> Head {
        match Head::parse(raw) {
            Parsed::Complete(mut h) => {
                h.raw = Bytes::copy_from_slice(&raw[..h.len]);
                h
            }
            _ => panic!("not complete"),
        }
    }

    #[test]
    fn ranges_point_into_the_head() {
        let h = parse(b"POST /rpc/eth?x=1 HTTP/1.1\r\nHost: a\r\nX-Token: k\r\nContent-Length: 5\r\n\r\nhello");
        assert_eq!(h.method(), "POST");
        assert_eq!(h.path(), "/rpc/eth");
        assert_eq!(h.query(), Some("x=1"));
        assert_eq!(h.header("x-token"), Some("k"));
        assert_eq!(h.content_length, 5);
        assert!(!h.needs_pingora && !h.close);
    }

    #[test]
    fn what_only_pingora_serves_is_flagged() {
        for raw in [
            &b"GET / HTTP/1.0\r\n\r\n"[..],
            b"POST / HTTP/1.1\r\nTransfer-Encoding: chunked\r\n\r\n",
            b"POST / HTTP/1.1\r\nExpect: 100-continue\r\nContent-Length: 3\r\n\r\n",
            b"GET / HTTP/1.1\r\nConnection: Upgrade\r\nUpgrade: websocket\r\n\r\n",
            b"POST / HTTP/1.1\r\nContent-Length: 3\r\nContent-Length: 4\r\n\r\n",
            b"POST / HTTP/1.1\r\nContent-Length: -1\r\n\r\n",
            b"GET http://a/ HTTP/1.1\r\n\r\n",
        ] {
            assert!(parse(raw).needs_pingora, "{}", String::from_utf8_lossy(raw));
        }
        assert!(parse(b"GET / HTTP/1.1\r\nConnection: close\r\n\r\n").close);
        assert!(matches!(
            Head::parse(b"GET / HTTP/1.1\r\nHost"),
            Parsed::Partial
        ));
        assert!(matches!(
            Head::parse(b"GET /a b c\r\n\r\n"),
            Parsed::Invalid
        ));
    }
}

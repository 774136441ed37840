//! A request head read by the lean front, and the request it becomes for the pipeline.

use super::Conn;
use crate::edge::{payload_too_large, unreadable_body, Downstream, PreMatch};
use crate::errors::ApiError;
use crate::upstream::h1::{content_length_value, lists_token};
use async_trait::async_trait;
use bytes::{Bytes, BytesMut};
use std::net::IpAddr;
use std::ops::Range;

/// Most header lines in a request head (more is refused with 431).
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
    /// The client asked to switch protocols (`Connection: upgrade` and `Upgrade`).
    pub upgrade: bool,
    /// The body comes in the chunked coding (decoded here, `Conn::read_chunked`).
    pub chunked: bool,
    /// Something only Pingora's full HTTP/1 server handles: HTTP/1.0, `Expect`, a
    /// target that is not a path.
    pub needs_pingora: bool,
    /// The head breaks HTTP/1.1's framing rules: answered with this, whoever would
    /// have served it, and the connection closed.
    pub refusal: Option<Refusal>,
}

/// Why a request is refused before any route is looked at (RFC 9112). The same bytes get
/// the same answer whichever server would have taken the request.
#[derive(Debug, Clone, Copy, PartialEq)]
pub enum Refusal {
    /// 400: malformed request line or header, bad or repeated `Content-Length`, both
    /// `Content-Length` and `Transfer-Encoding`, missing or repeated `Host`.
    Malformed(&'static str),
    /// 431: head over `MAX_HEAD` bytes or over `MAX_HEADERS` lines.
    HeadTooLarge,
    /// 501: a transfer coding other than `chunked`.
    UnknownCoding,
}

impl Refusal {
    pub fn error(self) -> ApiError {
        match self {
            Refusal::Malformed(why) => ApiError::new(400, "bad_request", why),
            Refusal::HeadTooLarge => ApiError::new(
                431,
                "header_too_large",
                format!(
                    "request head exceeds {} bytes or {MAX_HEADERS} header lines",
                    super::MAX_HEAD
                ),
            ),
            Refusal::UnknownCoding => ApiError::new(
                501,
                "unsupported_transfer_encoding",
                "only the chunked transfer coding is supported",
            ),
        }
    }
}

pub enum Parsed {
    Complete(Head),
    Partial,
    /// Not a request head at all (or over a limit): refused without a route.
    Invalid(Refusal),
}

/// Whether an origin-form request target holds only the bytes `http::Uri` (Pingora's and
/// hyper's URI type) accepts: the same target must not be served here and refused there.
/// A fragment (`#`) never belongs in a request target (RFC 9112 §3.2) and is refused too.
fn target_is_valid(target: &[u8]) -> bool {
    const fn table(query: bool) -> [bool; 256] {
        let mut t = [false; 256];
        let mut i = 0;
        while i < 256 {
            let b = i as u8;
            t[i] = matches!(b, 0x21 | 0x24..=0x3B | 0x3D | 0x80..=0xFF)
                || if query {
                    matches!(b, 0x3F..=0x7E) && b != b'#'
                } else {
                    matches!(b, 0x40..=0x5F | 0x61..=0x7A | 0x7C | 0x7E | b'"' | b'{' | b'}')
                };
            i += 1;
        }
        t
    }
    static PATH: [bool; 256] = table(false);
    static QUERY: [bool; 256] = table(true);
    if target.len() >= u16::MAX as usize {
        return false;
    }
    let (path, query) = match target.iter().position(|&b| b == b'?') {
        Some(q) => (&target[..q], &target[q + 1..]),
        None => (target, &[][..]),
    };
    path.iter().all(|&b| PATH[b as usize]) && query.iter().all(|&b| QUERY[b as usize])
}

/// What a head's fields said about its framing, counted while they are read.
struct Framing {
    lengths: usize,
    hosts: usize,
    codings: usize,
    chunked: bool,
}

impl Head {
    /// Parse the head at the start of `buf` (ranges are offsets into `buf`).
    pub fn parse(buf: &[u8]) -> Parsed {
        let mut headers = [httparse::EMPTY_HEADER; MAX_HEADERS];
        let mut req = httparse::Request::new(&mut headers);
        let len = match req.parse(buf) {
            Ok(httparse::Status::Complete(n)) => n,
            Ok(httparse::Status::Partial) => return Parsed::Partial,
            Err(httparse::Error::TooManyHeaders) => return Parsed::Invalid(Refusal::HeadTooLarge),
            Err(httparse::Error::Version) => {
                return Parsed::Invalid(Refusal::Malformed("unsupported HTTP version"))
            }
            Err(_) => return Parsed::Invalid(Refusal::Malformed("malformed request head")),
        };
        let at = |s: &[u8]| {
            let start = s.as_ptr() as usize - buf.as_ptr() as usize;
            start..start + s.len()
        };
        let (Some(method), Some(target), Some(version)) = (req.method, req.path, req.version)
        else {
            return Parsed::Invalid(Refusal::Malformed("malformed request line"));
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
            close: version == 0,
            chunked: false,
            upgrade: false,
            needs_pingora: version != 1 || !target.starts_with('/'),
            refusal: None,
        };
        if target.starts_with('/') && !target_is_valid(target.as_bytes()) {
            head.refusal = Some(Refusal::Malformed("invalid character in request target"));
        }
        let mut lengths = 0;
        let mut hosts = 0;
        let mut codings = 0;
        let mut chunked = false;
        let mut upgrade_header = false;
        let refuse = |r: Refusal, head: &mut Head| {
            head.refusal.get_or_insert(r);
        };
        for h in req.headers.iter() {
            let name = h.name;
            if name.eq_ignore_ascii_case("content-length") {
                lengths += 1;
                match content_length_value(h.value) {
                    Some(n) => head.content_length = n,
                    None => refuse(Refusal::Malformed("invalid Content-Length"), &mut head),
                }
            } else if name.eq_ignore_ascii_case("host") {
                hosts += 1;
            } else if name.eq_ignore_ascii_case("connection") {
                if lists_token(h.value, "close") {
                    head.close = true;
                } else if lists_token(h.value, "keep-alive") && version == 0 {
                    // HTTP/1.0 keep-alive is Pingora's to honour.
                    head.close = false;
                }
                head.upgrade |= lists_token(h.value, "upgrade");
            } else if name.eq_ignore_ascii_case("transfer-encoding") {
                codings += 1;
                chunked = h.value.trim_ascii().eq_ignore_ascii_case(b"chunked");
            } else if name.eq_ignore_ascii_case("upgrade") {
                upgrade_header = true;
            } else if name.eq_ignore_ascii_case("expect") {
                head.needs_pingora = true;
            }
            head.headers.push((at(name.as_bytes()), at(h.value)));
        }
        head.upgrade &= upgrade_header;
        head.check_framing(
            Framing {
                lengths,
                hosts,
                codings,
                chunked,
            },
            version,
        );
        Parsed::Complete(head)
    }

    /// The framing rules of RFC 9112 on what the header fields said: one
    /// Content-Length, never with Transfer-Encoding, chunked the only coding (and not on
    /// HTTP/1.0), one Host on HTTP/1.1. The first broken rule is the refusal.
    fn check_framing(&mut self, seen: Framing, version: u8) {
        let refuse = |r: Refusal, head: &mut Head| {
            head.refusal.get_or_insert(r);
        };
        if seen.lengths > 1 {
            refuse(Refusal::Malformed("repeated Content-Length"), self);
        }
        if seen.codings > 0 {
            if seen.lengths > 0 {
                refuse(
                    Refusal::Malformed("both Content-Length and Transfer-Encoding"),
                    self,
                );
            } else if version == 0 {
                refuse(
                    Refusal::Malformed("Transfer-Encoding in an HTTP/1.0 request"),
                    self,
                );
            } else if seen.codings > 1 || !seen.chunked {
                refuse(Refusal::UnknownCoding, self);
            }
            self.chunked = self.refusal.is_none();
        }
        // RFC 9112 §3.2: exactly one Host in HTTP/1.1; at most one in HTTP/1.0.
        if seen.hosts > 1 || (seen.hosts == 0 && version == 1) {
            refuse(Refusal::Malformed("missing or repeated Host header"), self);
        }
    }

    /// How the body after this head is framed.
    pub fn body_framing(&self) -> super::hand_over::BodyFraming {
        use super::hand_over::BodyFraming;
        if self.chunked {
            BodyFraming::Chunked
        } else if self.content_length > 0 {
            BodyFraming::Length(self.content_length)
        } else {
            BodyFraming::None
        }
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
        // A chunked body's size is unknown until it is read.
        self.body.is_none() && (self.head.content_length > MAX_DISCARD || self.head.chunked)
    }

    /// Leave the connection at the start of the next request: an unread body is read
    /// and dropped when small, otherwise the connection cannot be reused (`false`).
    pub async fn discard_body(&mut self) -> bool {
        if self.body.is_some() || (self.head.content_length == 0 && !self.head.chunked) {
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

    fn header_list(&self, name: &str) -> Option<String> {
        let parts: Vec<&str> = self
            .head
            .header_lines()
            .filter(|(n, _)| n.eq_ignore_ascii_case(name))
            .map(|(_, v)| std::str::from_utf8(v).ok())
            .collect::<Option<_>>()?;
        (!parts.is_empty()).then(|| parts.join(", "))
    }

    fn authority(&self) -> Option<&str> {
        self.head.header("host")
    }

    fn is_upgrade(&self) -> bool {
        // Only WebSocket JSON-RPC upgrades take the lean path (`LeanFront::lean`); an
        // upgrade elsewhere is served as the plain request it also is.
        self.head.upgrade && self.pre.as_ref().is_none_or(|m| m.route.websocket)
    }

    fn client_ip(&self) -> Option<IpAddr> {
        self.conn.client.map(|a| a.ip())
    }

    fn local_addr(&self) -> Option<std::net::SocketAddr> {
        self.conn.local
    }

    fn is_tls(&self) -> bool {
        self.conn.tls
    }

    async fn read_body(&mut self, limit: usize) -> Result<Bytes, ApiError> {
        if let Some(body) = &self.body {
            return Ok(body.clone());
        }
        let body = if self.head.chunked {
            self.conn.read_chunked(limit).await.map_err(|e| match e {
                super::ChunkedBodyError::TooLarge => payload_too_large(limit),
                super::ChunkedBodyError::Io(e) => unreadable_body(e),
            })?
        } else {
            if self.head.content_length > limit {
                return Err(payload_too_large(limit));
            }
            self.conn
                .read_exact_bytes(self.head.content_length)
                .await
                .map_err(unreadable_body)?
        };
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
            b"POST / HTTP/1.1\r\nHost: a\r\nExpect: 100-continue\r\nContent-Length: 3\r\n\r\n",
            b"GET http://a/ HTTP/1.1\r\nHost: a\r\n\r\n",
        ] {
            let h = parse(raw);
            assert!(h.needs_pingora, "{}", String::from_utf8_lossy(raw));
            assert_eq!(h.refusal, None, "{}", String::from_utf8_lossy(raw));
        }
        let chunked = parse(b"POST / HTTP/1.1\r\nHost: a\r\nTransfer-Encoding: chunked\r\n\r\n");
        assert!(chunked.chunked && !chunked.needs_pingora);
        let up = parse(b"GET / HTTP/1.1\r\nHost: a\r\nConnection: keep-alive, Upgrade\r\nUpgrade: websocket\r\n\r\n");
        assert!(up.upgrade && !up.needs_pingora);
        assert!(!parse(b"GET / HTTP/1.1\r\nHost: a\r\nUpgrade: websocket\r\n\r\n").upgrade);
        assert!(parse(b"GET / HTTP/1.1\r\nHost: a\r\nConnection: close\r\n\r\n").close);
        assert!(matches!(
            Head::parse(b"GET / HTTP/1.1\r\nHost"),
            Parsed::Partial
        ));
    }

    #[test]
    fn framing_the_rfc_forbids_is_refused() {
        use Refusal::*;
        let bad = Malformed("");
        for (raw, want) in [
            (&b"POST / HTTP/1.1\r\nHost: a\r\nContent-Length: +5\r\n\r\n"[..], bad),
            (b"POST / HTTP/1.1\r\nHost: a\r\nContent-Length: 5 5\r\n\r\n", bad),
            (b"POST / HTTP/1.1\r\nHost: a\r\nContent-Length: 5,5\r\n\r\n", bad),
            (b"POST / HTTP/1.1\r\nHost: a\r\nContent-Length: -1\r\n\r\n", bad),
            ("POST / HTTP/1.1\r\nHost: a\r\nContent-Length: \u{a0}5\r\n\r\n".as_bytes(), bad),
            (b"POST / HTTP/1.1\r\nHost: a\r\nContent-Length: 3\r\nContent-Length: 3\r\n\r\n", bad),
            (b"POST / HTTP/1.1\r\nHost: a\r\nContent-Length: 3\r\nTransfer-Encoding: chunked\r\n\r\n", bad),
            (b"POST / HTTP/1.1\r\nHost: a\r\nTransfer-Encoding: gzip, chunked\r\n\r\n", UnknownCoding),
            (b"POST / HTTP/1.1\r\nHost: a\r\nTransfer-Encoding: xchunked\r\n\r\n", UnknownCoding),
            (b"POST / HTTP/1.0\r\nTransfer-Encoding: chunked\r\n\r\n", bad),
            (b"GET / HTTP/1.1\r\n\r\n", bad),
            (b"GET / HTTP/1.1\r\nHost: a\r\nHost: b\r\n\r\n", bad),
            (b"GET / HTTP/1.0\r\nHost: a\r\nHost: b\r\n\r\n", bad),
        ] {
            let got = match Head::parse(raw) {
                Parsed::Complete(h) => h.refusal,
                Parsed::Invalid(r) => Some(r),
                Parsed::Partial => None,
            };
            let same = match (got, want) {
                (Some(Malformed(_)), Malformed(_)) => true,
                (g, w) => g == Some(w),
            };
            assert!(same, "{}: {got:?}", String::from_utf8_lossy(raw));
        }
        assert!(matches!(
            Head::parse(b"GET /a b c\r\n\r\n"),
            Parsed::Invalid(Malformed(_))
        ));
        let many: String = (0..MAX_HEADERS + 1)
            .map(|i| format!("X-{i}: v\r\n"))
            .collect();
        let raw = format!("GET / HTTP/1.1\r\nHost: a\r\n{many}\r\n");
        assert!(matches!(
            Head::parse(raw.as_bytes()),
            Parsed::Invalid(HeadTooLarge)
        ));
        // What `http::Uri` refuses is refused here too.
        for target in ["/a?b\"c", "/a?<x>", "/a#frag", "/a?b#c", "/a?b\u{7f}"] {
            let raw = format!("GET {target} HTTP/1.1\r\nHost: a\r\n\r\n");
            let refused = match Head::parse(raw.as_bytes()) {
                Parsed::Complete(h) => h.refusal.is_some(),
                Parsed::Invalid(_) => true,
                Parsed::Partial => false,
            };
            let uri_refuses = target.parse::<http::Uri>().is_err() || target.contains('#');
            assert_eq!(refused, uri_refuses, "{target}");
            assert!(refused, "{target}");
        }
        for target in [
            "/a\"{b}",
            "/a?b=c&d=%20e/?",
            "/%zz",
            "/\u{e9}?\u{e9}",
            "/a\\b^",
        ] {
            let raw = format!("GET {target} HTTP/1.1\r\nHost: a\r\n\r\n");
            assert_eq!(parse(raw.as_bytes()).refusal, None, "{target}");
            assert!(target.parse::<http::Uri>().is_ok(), "{target}");
        }
        // HTTP/1.0 may leave out Host.
        assert_eq!(parse(b"GET / HTTP/1.0\r\n\r\n").refusal, None);
    }
}

//! Node answer heads: parsed with httparse, framed by RFC 9112's rules (length,
//! chunked, none, until close), refused when a line ends in a bare LF.

use crate::upstream::UpstreamError;

const MAX_HEADERS: usize = 64;

#[derive(Debug, Clone, Copy, PartialEq)]
pub enum Framing {
    Length(usize),
    Chunked,
    /// 204 / 304: no body.
    None,
    /// Neither length nor chunked: the body ends when the node closes.
    UntilClose,
}

/// `Some((status, head length, framing, connection: close))` once the head is complete.
#[allow(clippy::type_complexity)]
pub fn parse_head(buf: &[u8]) -> Result<Option<(u16, usize, Framing, bool)>, UpstreamError> {
    Ok(parse_head_visit(buf, false, |_, _| {})?.map(|h| (h.status, h.len, h.framing, h.close)))
}

/// A `Content-Length` value (RFC 9110 §8.6): 1-19 ASCII digits, nothing else (no sign,
/// no list, no whitespace inside; httparse has removed the whitespace around it).
pub fn content_length_value(value: &[u8]) -> Option<usize> {
    if value.is_empty() || value.len() > 19 || !value.iter().all(u8::is_ascii_digit) {
        return None;
    }
    std::str::from_utf8(value).ok()?.parse().ok()
}

/// Whether a comma-separated header value lists `token` (case-insensitively).
pub fn lists_token(value: &[u8], token: &str) -> bool {
    value
        .split(|&b| b == b',')
        .any(|t| t.trim_ascii().eq_ignore_ascii_case(token.as_bytes()))
}

/// A complete response head.
pub struct HeadInfo<'b> {
    pub status: u16,
    pub reason: &'b str,
    /// Bytes of the head, blank line included.
    pub len: usize,
    pub framing: Framing,
    /// `Content-Length` as the node sent it (an answer to HEAD repeats it).
    pub declared_length: Option<usize>,
    /// The node said `Transfer-Encoding: chunked`.
    pub chunked: bool,
    /// The node closes the connection after this answer.
    pub close: bool,
}

/// Whether `head` has a LF that no CR comes before.
pub(super) fn has_bare_lf(head: &[u8]) -> bool {
    memchr::memchr_iter(b'\n', head).any(|i| i == 0 || head[i - 1] != b'\r')
}

/// Parse a response head, showing each header to `visit`; `None` while it is incomplete.
/// An answer to HEAD has no body whatever its headers say.
pub fn parse_head_visit<'b>(
    buf: &'b [u8],
    head_request: bool,
    mut visit: impl FnMut(&'b str, &'b [u8]),
) -> Result<Option<HeadInfo<'b>>, UpstreamError> {
    let mut headers = [httparse::EMPTY_HEADER; MAX_HEADERS];
    let mut resp = httparse::Response::new(&mut headers);
    let head_len = match resp.parse(buf) {
        Ok(httparse::Status::Complete(n)) => n,
        Ok(httparse::Status::Partial) => return Ok(None),
        Err(e) => return Err(UpstreamError::Io(format!("bad response head: {e}"))),
    };
    let status = resp.code.unwrap_or(0);
    if status < 100 {
        return Err(UpstreamError::Io(format!("bad response status {status}")));
    }
    let bad = |why: &str| Err(UpstreamError::Io(format!("bad response framing: {why}")));
    let mut length = None;
    let mut codings = 0;
    let mut chunked = false;
    let http10 = resp.version == Some(0);
    let mut close = http10;
    for h in resp.headers.iter() {
        visit(h.name, h.value);
        if h.name.eq_ignore_ascii_case("content-length") {
            let Some(n) = content_length_value(h.value) else {
                return bad("invalid content-length");
            };
            if length.is_some_and(|m| m != n) {
                return bad("conflicting content-length");
            }
            length = Some(n);
        } else if h.name.eq_ignore_ascii_case("transfer-encoding") {
            codings += 1;
            chunked = h.value.trim_ascii().eq_ignore_ascii_case(b"chunked");
        } else if h.name.eq_ignore_ascii_case("connection") {
            if lists_token(h.value, "close") {
                close = true;
            } else if lists_token(h.value, "keep-alive") {
                close = false;
            }
        }
    }
    // RFC 9112 §6.3: both, or a coding other than one `chunked`, is a framing the edge
    // will not guess at (nginx refuses both too).
    if codings > 0 {
        if length.is_some() {
            return bad("both content-length and transfer-encoding");
        }
        if codings > 1 || !chunked || http10 {
            return bad("unsupported transfer-encoding");
        }
    }
    let framing = if status == 204 || status == 304 || head_request || status < 200 {
        Framing::None
    } else if chunked {
        Framing::Chunked
    } else if let Some(n) = length {
        Framing::Length(n)
    } else {
        Framing::UntilClose
    };
    Ok(Some(HeadInfo {
        status,
        reason: resp.reason.unwrap_or(""),
        len: head_len,
        framing,
        declared_length: length,
        chunked,
        close,
    }))
}

//! Hop-by-hop rules: what the caller sent that never reaches a node, what a node sent
//! that never reaches the caller, and `X-Forwarded-For`.

/// Caller credentials, console headers and forwarding headers the edge sets itself never
/// travel to a node as the caller sent them.
pub(crate) const CALLER_ONLY_HEADERS: &[&str] = &[
    "authorization",
    "proxy-authorization",
    "x-token",
    "cookie",
    "x-admin-token",
    "x-csrf-token",
    "x-forwarded-for",
    "forwarded",
    // The client's own claim of its address: a node behind the edge must not believe it.
    "x-real-ip",
];

/// Which of the hop lists a header name is on, one `match` on its lowercase form
/// instead of a comparison per listed name (a passthrough checks every header of the
/// request and of the answer). Names longer than any listed one are on none.
#[derive(Clone, Copy, PartialEq, Debug)]
pub(crate) enum Listed {
    /// Hop-by-hop headers (RFC 9110 §7.6.1) stay on their own hop, and the framing
    /// headers are the edge's to write on each side.
    HopByHop,
    /// `CALLER_ONLY_HEADERS` (a test holds the two equal).
    CallerOnly,
    /// `Host` and `X-Request-Id`: the edge writes its own toward the node.
    EdgeWritten,
    None,
}

pub(crate) fn listed(name: &str) -> Listed {
    let mut lower = [0u8; 20];
    let Some(room) = lower.get_mut(..name.len()) else {
        return Listed::None;
    };
    room.copy_from_slice(name.as_bytes());
    room.make_ascii_lowercase();
    match &*room {
        b"connection" | b"keep-alive" | b"proxy-connection" | b"te" | b"trailer" | b"upgrade"
        | b"transfer-encoding" | b"content-length" | b"expect" => Listed::HopByHop,
        b"authorization"
        | b"proxy-authorization"
        | b"x-token"
        | b"cookie"
        | b"x-admin-token"
        | b"x-csrf-token"
        | b"x-forwarded-for"
        | b"forwarded"
        | b"x-real-ip" => Listed::CallerOnly,
        b"host" | b"x-request-id" => Listed::EdgeWritten,
        _ => Listed::None,
    }
}

/// A header name with an underscore never reaches a node: many servers read
/// `Transfer_Encoding` or `X_Forwarded_For` as their dashed twins (CGI's mapping), and
/// nginx drops such names by default for the same reason.
pub(crate) fn has_underscore(name: &str) -> bool {
    name.contains('_')
}

/// Whether a node's `Set-Cookie` value sets one of the console's cookies: never passed
/// on, a node must not be able to plant or clear a console session on the edge's origin.
pub(crate) fn sets_console_cookie(value: &[u8]) -> bool {
    let name = value
        .split(|&b| b == b'=')
        .next()
        .unwrap_or_default()
        .trim_ascii();
    [crate::console::SESSION_COOKIE, crate::console::CSRF_COOKIE]
        .iter()
        .any(|c| name.eq_ignore_ascii_case(c.as_bytes()))
}

/// `X-Forwarded-For` toward a node: the client's address (`peer`), after the chain a
/// trusted proxy (`console.trusted_proxies`) sent; anyone else's header is replaced.
/// Borrowed when nothing is appended (the lean front keeps `peer` per connection).
pub(crate) fn forwarded_for<'a>(
    trusted: bool,
    peer: &'a str,
    sent: Option<&str>,
) -> std::borrow::Cow<'a, str> {
    match sent.map(str::trim) {
        Some(chain) if trusted && !chain.is_empty() => format!("{chain}, {peer}").into(),
        _ => peer.into(),
    }
}

/// Header names a `Connection` header lists (RFC 9110 §7.6.1): they stay on their hop.
pub(crate) fn connection_options(values: &[&[u8]]) -> Vec<String> {
    values
        .iter()
        .flat_map(|v| v.split(|&b| b == b','))
        .map(|t| String::from_utf8_lossy(t.trim_ascii()).to_ascii_lowercase())
        .filter(|t| !t.is_empty())
        .collect()
}

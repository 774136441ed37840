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

//! Answers written by the front itself, head and body in one buffer: local replies,
//! the 101 of a WebSocket upgrade, and the head pieces the relay uses.

use crate::edge::{each_header, handshake_headers, Ctx, WsUpgrade};
use crate::reply::Reply;

/// A local answer on the wire, head and body in one buffer.
pub(super) fn local_answer(ctx: &Ctx, reply: &Reply, closing: bool, head_only: bool) -> Vec<u8> {
    // Room for the usual head (status, date, request id, rate limits, cache notes).
    let mut out = Vec::with_capacity(512 + reply.body.len());
    status_line(&mut out, reply.status, "");
    date_header(&mut out);
    let Ok(()) = each_header(ctx, reply, |k, v| {
        header(&mut out, k, v.as_bytes());
        Ok::<(), std::convert::Infallible>(())
    });
    if closing {
        header(&mut out, "Connection", b"close");
    }
    out.extend_from_slice(b"\r\n");
    if !head_only {
        out.extend_from_slice(&reply.body);
    }
    out
}

/// The 101 of an accepted WebSocket upgrade, with the edge's headers.
pub(super) fn switching_protocols(ctx: &Ctx, up: &WsUpgrade) -> Vec<u8> {
    let mut out = Vec::with_capacity(256);
    status_line(&mut out, 101, "");
    ctx.edge_headers(|k, v| {
        header(&mut out, k, v.as_bytes());
    });
    for (k, v) in handshake_headers(up) {
        header(&mut out, k, v.as_bytes());
    }
    out.extend_from_slice(b"\r\n");
    out
}

pub(super) fn status_line(out: &mut Vec<u8>, status: u16, reason: &str) {
    let reason = if reason.is_empty() {
        http::StatusCode::from_u16(status)
            .ok()
            .and_then(|s| s.canonical_reason())
            .unwrap_or("Unknown")
    } else {
        reason
    };
    out.extend_from_slice(b"HTTP/1.1 ");
    out.extend_from_slice(itoa::Buffer::new().format(status).as_bytes());
    out.push(b' ');
    out.extend_from_slice(reason.as_bytes());
    out.extend_from_slice(b"\r\n");
}

/// `Date` (RFC 9110 §6.6.1), from Pingora's once-a-second cache.
pub(super) fn date_header(out: &mut Vec<u8>) {
    let date = pingora_core::protocols::http::date::get_cached_date();
    header(out, "Date", date.as_bytes());
}

pub(super) fn header(out: &mut Vec<u8>, name: &str, value: &[u8]) {
    out.extend_from_slice(name.as_bytes());
    out.extend_from_slice(b": ");
    out.extend_from_slice(value);
    out.extend_from_slice(b"\r\n");
}

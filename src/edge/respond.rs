//! Writing a local answer on Pingora's session: one complete response (keep-alive
//! preserved), or an event stream chunk by chunk.

use super::Ctx;
use crate::reply::EventStream;
pub use crate::reply::Reply;
use pingora_core::Result;
use pingora_http::ResponseHeader;
use pingora_proxy::Session;

/// Every header of a local answer, in order: the edge's, then its content type and
/// length, then the reply's own. Both servers write exactly these.
pub fn each_header<E>(
    ctx: &Ctx,
    reply: &Reply,
    mut f: impl FnMut(&str, &str) -> std::result::Result<(), E>,
) -> std::result::Result<(), E> {
    ctx.try_edge_headers(&mut f)?;
    if let Some(ct) = reply.content_type {
        f("Content-Type", ct)?;
    }
    f(
        "Content-Length",
        itoa::Buffer::new().format(reply.body.len()),
    )?;
    for (k, v) in &reply.headers {
        f(k, v)?;
    }
    Ok(())
}

pub async fn write(session: &mut Session, ctx: &Ctx, reply: Reply) -> Result<()> {
    let mut h = ResponseHeader::build(reply.status, Some(8 + reply.headers.len()))?;
    each_header(ctx, &reply, |k, v| {
        h.append_header(k.to_string(), v).map(|_| ())
    })?;
    let head_only = session.req_header().method == http::Method::HEAD || reply.body.is_empty();
    session
        .write_response_header(Box::new(h), head_only)
        .await?;
    if !head_only {
        session.write_response_body(Some(reply.body), true).await?;
    }
    Ok(())
}

/// An event stream: the edge's headers and the stream's, then each chunk as the producer
/// sends it. Ends when the producer does, or when the client is gone (dropping the
/// stream stops the producer).
pub async fn write_stream(session: &mut Session, ctx: &Ctx, mut stream: EventStream) -> Result<()> {
    let mut h = ResponseHeader::build(200, Some(8 + stream.headers.len()))?;
    ctx.try_edge_headers(|k, v| h.append_header(k.to_string(), v).map(|_| ()))?;
    h.append_header("Content-Type", stream.content_type)?;
    for (k, v) in &stream.headers {
        h.append_header(k.to_string(), v.as_str())?;
    }
    session.set_read_timeout(None);
    session.write_response_header(Box::new(h), false).await?;
    while let Some(chunk) = stream.next().await {
        session.write_response_body(Some(chunk), false).await?;
    }
    session.write_response_body(None, true).await
}

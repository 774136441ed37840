//! `GET /openapi.json`: the OpenAPI 3.1 document of this edge's route table and its
//! contract (`src/contract.rs`), built once at start.

use crate::reply::Reply;

pub fn serve(document: &bytes::Bytes) -> Reply {
    Reply::json(200, document.clone())
        .with_headers(vec![("Cache-Control", "public, max-age=300".into())])
}

pub const HANDLERS: &[super::Handler] = &[super::Handler::new("openapi", |s, _| {
    Box::pin(async move { Ok(serve(s.openapi)) })
})];

//! `GET /rpc/base` at the edge: what a person opening the JSON-RPC URL in a browser sees
//! (`edge_only`: an origin gateway has no such route and answers 405 `Allow: POST`).

use crate::reply::Reply;

const PAGE: &str = "<!doctype html><html lang=\"en\"><head><meta charset=\"utf-8\">\
<title>Base JSON-RPC endpoint - chainedge</title>\
<meta name=\"description\" content=\"Base mainnet (chain id 8453) JSON-RPC and WebSocket endpoint by chainedge.\">\
</head><body><h1>Base mainnet JSON-RPC</h1>\
<p>This is a JSON-RPC endpoint for Base mainnet (chain id 8453, <code>0x2105</code>). \
Send <code>POST</code> requests with an API key in <code>Authorization: Bearer</code> or <code>x-token</code>; \
WebSocket clients connect to the same URL or <code>/ws/base</code>.</p></body></html>\n";

pub fn serve() -> Reply {
    let mut r = Reply::json(200, PAGE.as_bytes());
    r.content_type = Some("text/html; charset=utf-8");
    r.with_headers(vec![("Cache-Control", "public, max-age=3600".into())])
}

pub const HANDLERS: &[super::Handler] = &[super::Handler::new("base_page", |_, _| {
    Box::pin(async { Ok(serve()) })
})];

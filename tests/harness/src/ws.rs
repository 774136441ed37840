//! A WebSocket client for the edge's JSON-RPC channel, shared by the tiers that open one.

use std::net::TcpStream;
use std::time::Duration;
use tungstenite::client::IntoClientRequest;
use tungstenite::WebSocket;

pub type Ws = WebSocket<TcpStream>;

/// A WebSocket on `path` of 127.0.0.1:`port` with `headers` (reads time out after 10 s);
/// the HTTP status and body when the upgrade is refused.
pub fn ws_connect(port: u16, path: &str, headers: &[(&str, &str)]) -> Result<Ws, (u16, String)> {
    ws_connect_protocol(port, path, headers).map(|(ws, _)| ws)
}

/// As `ws_connect`, with the subprotocol the edge chose (`Sec-WebSocket-Protocol`).
pub fn ws_connect_protocol(
    port: u16,
    path: &str,
    headers: &[(&str, &str)],
) -> Result<(Ws, Option<String>), (u16, String)> {
    let stream = TcpStream::connect(("127.0.0.1", port)).unwrap();
    stream
        .set_read_timeout(Some(Duration::from_secs(10)))
        .unwrap();
    let mut req = format!("ws://127.0.0.1:{port}{path}")
        .into_client_request()
        .unwrap();
    for (name, value) in headers {
        let name: tungstenite::http::HeaderName = name.parse().unwrap();
        req.headers_mut().insert(name, value.parse().unwrap());
    }
    // The handshake gets a second handle on the socket: a refusal's body may arrive after
    // the head tungstenite read, and is read to its length from this one.
    let mut rest = stream.try_clone().unwrap();
    match tungstenite::client(req, stream) {
        Ok((ws, resp)) => Ok((
            ws,
            resp.headers()
                .get("sec-websocket-protocol")
                .map(|v| v.to_str().unwrap().to_string()),
        )),
        Err(tungstenite::HandshakeError::Failure(tungstenite::Error::Http(r))) => {
            let mut body = r.body().clone().unwrap_or_default();
            let length = r.headers().get("content-length");
            let length: usize = length
                .and_then(|l| l.to_str().ok()?.parse().ok())
                .unwrap_or(0);
            let mut chunk = [0u8; 4096];
            while body.len() < length {
                match std::io::Read::read(&mut rest, &mut chunk) {
                    Ok(0) | Err(_) => break,
                    Ok(n) => body.extend_from_slice(&chunk[..n]),
                }
            }
            Err((
                r.status().as_u16(),
                String::from_utf8_lossy(&body).into_owned(),
            ))
        }
        Err(e) => panic!("handshake: {e}"),
    }
}

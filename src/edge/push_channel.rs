//! Server-to-client WebSocket channels (the Polygon firehose, the Solana watchlist
//! channel): items from a source as text messages until either side ends it. The client
//! sends nothing but control frames. The same bounds as a JSON-RPC session: a bounded
//! send buffer (a slow consumer is closed with 1008), ping and idle timeout, "going
//! away" (1001) at shutdown.

use super::websocket::{going_away, Writer};
use super::{State, WsUpgrade};
use crate::observe::metrics;
use futures_util::StreamExt;
use std::future::Future;
use std::time::{Duration, Instant};
use tokio_tungstenite::tungstenite::protocol::frame::coding::CloseCode;
use tokio_tungstenite::tungstenite::protocol::{Role, WebSocketConfig};
use tokio_tungstenite::tungstenite::Message;
use tokio_tungstenite::WebSocketStream;

/// What a channel's source gives next.
pub(super) enum Item {
    Send(Message),
    /// The reader fell too far behind the source: closed as a slow consumer.
    Lagged,
    /// The source ended: close with this code and reason.
    End(CloseCode, String),
}

pub(super) trait Source {
    fn next(&mut self) -> impl Future<Output = Item> + Send;
}

/// Run one channel on `io`: `open` gives the source, or the reason it cannot be had
/// (the client is told with 1013, try again later).
pub(super) async fn run<S, P, O>(state: &State, up: WsUpgrade, io: S, open: O)
where
    S: tokio::io::AsyncRead + tokio::io::AsyncWrite + Unpin + Send + 'static,
    P: Source,
    O: Future<Output = Result<P, String>>,
{
    let conf = state.config.app.streams.websocket.clone();
    let config = WebSocketConfig::default()
        .read_buffer_size(1024)
        .write_buffer_size(0)
        .max_write_buffer_size(1 << 20)
        .max_message_size(Some(4096))
        .max_frame_size(Some(4096));
    let ws = WebSocketStream::from_raw_socket(io, Role::Server, Some(config)).await;
    let (sink, mut client) = ws.split();
    let writer = Writer::spawn(sink, conf.send_queue);
    let mut source = match open.await {
        Ok(s) => s,
        Err(reason) => {
            writer.finish(Some((CloseCode::Again, reason))).await;
            return;
        }
    };
    metrics::WS_SESSIONS.inc();
    let mut shutdown = crate::shutdown::server();
    let idle = Duration::from_secs(conf.idle_timeout_secs.max(1));
    let mut ping = tokio::time::interval(Duration::from_secs(conf.ping_interval_secs.max(1)));
    ping.tick().await;
    let mut heard = Instant::now();
    let slow = || {
        (
            CloseCode::Policy,
            "slow consumer: send buffer full".to_string(),
        )
    };
    let close = loop {
        tokio::select! {
            msg = client.next() => match msg {
                Some(Ok(Message::Close(_))) | None | Some(Err(_)) => break None,
                Some(Ok(_)) => heard = Instant::now(),
            },
            item = source.next() => match item {
                Item::Send(m) => {
                    if writer.out.try_send(m).is_err() {
                        break Some(slow());
                    }
                }
                Item::Lagged => break Some(slow()),
                Item::End(code, reason) => break Some((code, reason)),
            },
            _ = ping.tick() => {
                if heard.elapsed() > idle {
                    break Some((CloseCode::Normal, "idle timeout".into()));
                }
                if writer.out.try_send(Message::Ping(Default::default())).is_err() {
                    break Some(slow());
                }
            }
            _ = going_away(&mut shutdown) => {
                break Some((CloseCode::Away, "server restarting; reconnect".into()));
            }
        }
    };
    metrics::WS_SESSIONS.dec();
    drop(up);
    writer.finish(close).await;
}

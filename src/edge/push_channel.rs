//! Server-to-client WebSocket channels (the Polygon firehose, the Solana watchlist
//! channel): items from a source as text messages until either side ends it. The client
//! sends nothing but control frames. The same bounds as a JSON-RPC session: a bounded
//! send buffer (a slow consumer is closed with 1008), ping and idle timeout, "going
//! away" (1001) at shutdown.

use super::ws_conn::WsConn;
use super::ws_upgrade::{going_away, Item, PushSource, WsUpgrade};
use super::State;
use crate::observe::metrics;
use std::sync::Arc;
use std::time::{Duration, Instant};
use tokio_tungstenite::tungstenite::protocol::frame::coding::CloseCode;
use tokio_tungstenite::tungstenite::protocol::WebSocketConfig;
use tokio_tungstenite::tungstenite::Message;

/// Run the channel an upgrade opened on `io` until either side ends it.
pub(super) async fn serve<S>(state: Arc<State>, mut up: Box<WsUpgrade>, io: S)
where
    S: tokio::io::AsyncRead + tokio::io::AsyncWrite + Unpin + Send + 'static,
{
    if let Some(feed) = up.push.take() {
        run(&state, up, io, feed).await
    }
}

/// Run one channel on `io`, items from `source`.
async fn run<S>(state: &State, up: Box<WsUpgrade>, io: S, mut source: Box<dyn PushSource>)
where
    S: tokio::io::AsyncRead + tokio::io::AsyncWrite + Unpin + Send + 'static,
{
    let conf = state.config.app.streams.websocket.clone();
    let config = WebSocketConfig::default()
        .read_buffer_size(1024)
        .write_buffer_size(0)
        .max_write_buffer_size(1 << 20)
        .max_message_size(Some(4096))
        .max_frame_size(Some(4096));
    let mut conn = Box::pin(WsConn::accept(io, config, conf.send_queue)).await;
    metrics::WS_SESSIONS.inc();
    let mut shutdown = crate::shutdown::server();
    let idle = Duration::from_secs(conf.idle_timeout_secs.max(1));
    let mut ping = tokio::time::interval(Duration::from_secs(conf.ping_interval_secs.max(1)));
    ping.tick().await;
    let mut heard = Instant::now();
    let mut lease = up.lease(state.keys());
    let slow = || {
        (
            CloseCode::Policy,
            "slow consumer: send buffer full".to_string(),
        )
    };
    let close = loop {
        tokio::select! {
            msg = conn.next(true) => match msg {
                Some(Ok(Message::Close(_))) | None | Some(Err(_)) => break None,
                Some(Ok(_)) => heard = Instant::now(),
            },
            item = source.next() => match item {
                Item::Send(m) => {
                    if conn.send(m).is_err() {
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
                if conn.send(Message::Ping(Default::default())).is_err() {
                    break Some(slow());
                }
            }
            _ = going_away(&mut shutdown) => {
                break Some((CloseCode::Away, "server restarting; reconnect".into()));
            }
            why = lease.ended(state.keys()) => {
                break Some((CloseCode::Policy, why.into()));
            }
        }
    };
    metrics::WS_SESSIONS.dec();
    drop(up);
    Box::pin(conn.finish(close)).await;
}

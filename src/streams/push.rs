//! What a server-to-client channel reads from: a source of items, each a message to
//! send, or the news that the reader fell behind or that the source ended. The edge's
//! held-socket loop drives any source; the channels (`handlers::channels`) make them.

use std::future::Future;
use std::pin::Pin;
use tokio_tungstenite::tungstenite::protocol::frame::coding::CloseCode;
use tokio_tungstenite::tungstenite::Message;

/// What a channel's source gives next.
pub enum Item {
    Send(Message),
    /// The reader fell too far behind the source: closed as a slow consumer.
    Lagged,
    /// The source ended: close with this code and reason.
    End(CloseCode, String),
}

/// A server-to-client channel's source (boxed in the upgrade, so the session does not
/// need to know which channel it serves).
pub trait PushSource: Send + Sync {
    fn next(&mut self) -> Pin<Box<dyn Future<Output = Item> + Send + '_>>;
}

//! Shutdown as seen from one worker thread, and the server's channel for long-lived
//! sessions (WebSocket) that close with "going away" when it turns.
//!
//! Every keep-alive connection waits for its next request and for shutdown at once. On
//! Pingora's one shutdown channel that wait clones a receiver and registers a waiter,
//! then drops both, per request: four atomic writes to memory every worker thread
//! shares. Each thread relays the server's channel to one of its own, which only its
//! connections touch (without work stealing a connection never leaves its thread).

use pingora_core::server::ShutdownWatch;
use std::cell::RefCell;
use tokio::sync::watch;

/// The server's own channel, for tasks that live outside any connection's wait (a
/// WebSocket session on Pingora's path closes with "going away" when it turns).
static SERVER: std::sync::OnceLock<ShutdownWatch> = std::sync::OnceLock::new();

/// The server's shutdown channel, once the front has seen it.
pub fn server() -> Option<ShutdownWatch> {
    SERVER.get().cloned()
}

thread_local! {
    static RELAY: RefCell<Option<ShutdownWatch>> = const { RefCell::new(None) };
}

/// This thread's copy of `server`'s shutdown channel: it turns `true` when `server` does,
/// and closes (which waiters also take as shutdown) if the relay stops with its runtime.
pub fn for_this_thread(server: &ShutdownWatch) -> ShutdownWatch {
    SERVER.get_or_init(|| server.clone());
    RELAY.with(|relay| {
        let mut relay = relay.borrow_mut();
        if let Some(rx) = relay.as_ref().filter(|rx| rx.has_changed().is_ok()) {
            return rx.clone();
        }
        let (tx, rx) = watch::channel(*server.borrow());
        let mut server = server.clone();
        tokio::spawn(async move {
            while !*server.borrow_and_update() {
                if server.changed().await.is_err() {
                    break;
                }
            }
            let _ = tx.send(true);
        });
        *relay = Some(rx.clone());
        rx
    })
}

#[cfg(test)]
mod tests {
    use super::for_this_thread;
    use tokio::sync::watch;

    #[tokio::test]
    async fn the_thread_copy_follows_the_server() {
        let (tx, server) = watch::channel(false);
        let mut a = for_this_thread(&server);
        let b = for_this_thread(&server);
        assert!(!*a.borrow() && !*b.borrow());
        tx.send(true).unwrap();
        tokio::time::timeout(std::time::Duration::from_secs(5), a.changed())
            .await
            .expect("relayed")
            .unwrap();
        assert!(*a.borrow() && *b.borrow());
    }
}

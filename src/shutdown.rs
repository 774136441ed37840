//! Shutdown as seen from one worker thread, and the server's channel for long-lived
//! sessions (WebSocket) that close with "going away" when it turns.
//!
//! Every keep-alive connection waits for its next request and for shutdown at once. On
//! Pingora's one shutdown channel that wait clones a receiver and registers a waiter,
//! then drops both, per request: four atomic writes to memory every worker thread
//! shares. Each thread relays the server's channel to one of its own, which only its
//! connections touch (without work stealing a connection never leaves its thread).

use pingora_core::server::ShutdownWatch;
use std::cell::{Cell, RefCell};
use std::sync::atomic::{AtomicBool, Ordering};
use tokio::sync::{watch, Notify};

/// The server's own channel, for tasks that live outside any connection's wait (a
/// WebSocket session on Pingora's path closes with "going away" when it turns).
static SERVER: std::sync::OnceLock<ShutdownWatch> = std::sync::OnceLock::new();

/// The server's shutdown channel, once the front has seen it.
pub fn server() -> Option<ShutdownWatch> {
    SERVER.get().cloned()
}

thread_local! {
    static RELAY: RefCell<Option<ShutdownWatch>> = const { RefCell::new(None) };
    static SIGNAL: Cell<Option<&'static ThreadSignal>> = const { Cell::new(None) };
}

/// This thread's shutdown as a flag and a wake-up, set by the same relay as its channel:
/// what an idle keep-alive connection waits on. Its `Notified` is 64 bytes where a
/// channel receiver and its `changed()` future are 136, and every idle connection's task
/// holds one (with the rest of `front::idle_wait`, the task fits 256 bytes).
pub struct ThreadSignal {
    set: AtomicBool,
    notify: Notify,
}

impl ThreadSignal {
    const fn new() -> ThreadSignal {
        ThreadSignal {
            set: AtomicBool::new(false),
            notify: Notify::const_new(),
        }
    }

    /// Shutdown has begun.
    pub fn is_set(&self) -> bool {
        self.set.load(Ordering::Acquire)
    }

    /// Completes when shutdown begins after this call: make it before reading
    /// `is_set`, so that a shutdown in between is not missed.
    pub fn notified(&self) -> tokio::sync::futures::Notified<'_> {
        self.notify.notified()
    }

    fn raise(&self) {
        self.set.store(true, Ordering::Release);
        self.notify.notify_waiters();
    }
}

/// Raises a signal when the relay ends, however it ends (its runtime stopping too).
struct RaiseOnDrop(&'static ThreadSignal);

impl Drop for RaiseOnDrop {
    fn drop(&mut self) {
        self.0.raise();
    }
}

/// A thread where no relay ever ran waits on a signal nobody raises.
static NEVER: ThreadSignal = ThreadSignal::new();

/// The signal of this thread's relay (`for_this_thread`).
pub fn this_thread_signal() -> &'static ThreadSignal {
    SIGNAL.with(Cell::get).unwrap_or(&NEVER)
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
        // One per relay, so one per worker thread (another only if a thread's runtime
        // were started again): left in place for the thread's connections to borrow.
        let signal: &'static ThreadSignal = Box::leak(Box::new(ThreadSignal::new()));
        SIGNAL.with(|s| s.set(Some(signal)));
        tokio::spawn(async move {
            let _raise = RaiseOnDrop(signal);
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
    use super::{for_this_thread, this_thread_signal};
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

    #[tokio::test]
    async fn the_thread_signal_is_raised_with_the_channel() {
        let (tx, server) = watch::channel(false);
        let _ = for_this_thread(&server);
        let signal = this_thread_signal();
        let raised = signal.notified();
        assert!(!signal.is_set());
        tx.send(true).unwrap();
        tokio::time::timeout(std::time::Duration::from_secs(5), raised)
            .await
            .expect("woken");
        assert!(signal.is_set());
    }
}

//! One JSON line per request on stdout. Never a secret: no query string, no headers
//! beyond what is listed, no credential. Lines are queued and written in batches by a
//! background thread, like nginx's `access_log ... buffer=`: the proxy path never makes
//! a syscall to log.

use super::metrics;
use once_cell::sync::Lazy;
use serde::Serialize;
use std::io::Write;
use std::sync::mpsc::{sync_channel, Receiver, SyncSender};
use std::sync::Mutex;
use std::time::Duration;

#[derive(Serialize)]
pub struct AccessLine<'a> {
    pub ts: &'a str,
    pub request_id: &'a str,
    pub client: &'a str,
    pub method: &'a str,
    /// Path without the query string (queries may carry what callers should not have sent).
    pub path: &'a str,
    pub route: &'a str,
    pub surface: &'a str,
    /// Tenant and key *id* of an API-key caller (ids, never the secret).
    pub tenant: Option<&'a str>,
    pub key_id: Option<&'a str>,
    pub user: Option<&'a str>,
    pub status: u16,
    pub latency_ms: f64,
    pub upstream: Option<&'a str>,
    pub error: Option<&'a str>,
}

/// Lines waiting for the writer; beyond this (stdout stalled) new lines are dropped and
/// counted rather than blocking the proxy.
const QUEUE_LINES: usize = 65_536;
/// How often the writer drains the queue. Requests never wake it, so logging costs a
/// queue push per request, not a syscall.
const DRAIN_EVERY: Duration = Duration::from_millis(50);

struct Queue {
    tx: SyncSender<Vec<u8>>,
    rx: Mutex<Receiver<Vec<u8>>>,
}

/// Created on the first line, i.e. after Pingora has daemonised (a thread started before
/// the fork would not survive it).
static QUEUE: Lazy<Queue> = Lazy::new(|| {
    let (tx, rx) = sync_channel(QUEUE_LINES);
    std::thread::Builder::new()
        .name("access-log".into())
        .spawn(|| loop {
            std::thread::sleep(DRAIN_EVERY);
            flush();
        })
        .expect("spawn the access-log writer");
    Queue {
        tx,
        rx: Mutex::new(rx),
    }
});

/// The current time as RFC 3339 with milliseconds, formatted once per millisecond and
/// thread (every request logs it).
pub fn with_timestamp<T>(f: impl FnOnce(&str) -> T) -> T {
    use std::cell::RefCell;
    use std::time::{SystemTime, UNIX_EPOCH};
    thread_local! {
        static LAST: RefCell<(u128, String)> = const { RefCell::new((0, String::new())) };
    }
    let now = SystemTime::now();
    let ms = now
        .duration_since(UNIX_EPOCH)
        .map(|d| d.as_millis())
        .unwrap_or(0);
    LAST.with(|last| {
        let mut last = last.borrow_mut();
        if last.0 != ms || last.1.is_empty() {
            *last = (ms, humantime::format_rfc3339_millis(now).to_string());
        }
        f(&last.1)
    })
}

pub fn write(line: &AccessLine) {
    let Ok(mut text) = serde_json::to_vec(line) else {
        return;
    };
    text.push(b'\n');
    if QUEUE.tx.try_send(text).is_err() {
        metrics::ACCESS_LOG_DROPPED.inc();
    }
}

/// Write every queued line to stdout in one go (the writer thread, and once at exit).
pub fn flush() {
    let Ok(rx) = QUEUE.rx.lock() else {
        return;
    };
    let mut out = Vec::new();
    while let Ok(line) = rx.try_recv() {
        out.extend_from_slice(&line);
    }
    if !out.is_empty() {
        let mut stdout = std::io::stdout().lock();
        let _ = stdout.write_all(&out).and_then(|()| stdout.flush());
    }
}

//! One JSON line per request on stdout. Never a secret: no query string, no headers
//! beyond what is listed, no credential. Lines are queued and written in batches by a
//! background thread, like nginx's `access_log ... buffer=`: the proxy path never makes
//! a syscall to log.

use super::metrics;
use once_cell::sync::Lazy;
use std::io::Write;
use std::sync::mpsc::{sync_channel, Receiver, SyncSender};
use std::sync::Mutex;
use std::time::Duration;

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
    /// Time to the answer, in microseconds (written as milliseconds with 3 decimals).
    pub latency_us: u64,
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
    if QUEUE.tx.try_send(line.to_json()).is_err() {
        metrics::ACCESS_LOG_DROPPED.inc();
    }
}

impl AccessLine<'_> {
    /// The line as JSON, newline-terminated. Written by hand: it runs on every request,
    /// and a generic serializer cost more than the rest of the log path together.
    fn to_json(&self) -> Vec<u8> {
        let mut out = Vec::with_capacity(320);
        out.push(b'{');
        string_field(&mut out, "ts", Some(self.ts));
        for (name, value) in [
            ("request_id", Some(self.request_id)),
            ("client", Some(self.client)),
            ("method", Some(self.method)),
            ("path", Some(self.path)),
            ("route", Some(self.route)),
            ("surface", Some(self.surface)),
            ("tenant", self.tenant),
            ("key_id", self.key_id),
            ("user", self.user),
        ] {
            out.push(b',');
            string_field(&mut out, name, value);
        }
        let mut digits = Decimal::default();
        out.extend_from_slice(b",\"status\":");
        out.extend_from_slice(digits.format(u64::from(self.status)));
        out.extend_from_slice(b",\"latency_ms\":");
        out.extend_from_slice(digits.format(self.latency_us / 1000));
        let frac = self.latency_us % 1000;
        out.extend_from_slice(&[
            b'.',
            b'0' + (frac / 100) as u8,
            b'0' + (frac / 10 % 10) as u8,
            b'0' + (frac % 10) as u8,
        ]);
        for (name, value) in [("upstream", self.upstream), ("error", self.error)] {
            out.push(b',');
            string_field(&mut out, name, value);
        }
        out.extend_from_slice(b"}\n");
        out
    }
}

/// `"name":"value"` (or `null`).
fn string_field(out: &mut Vec<u8>, name: &str, value: Option<&str>) {
    out.push(b'"');
    out.extend_from_slice(name.as_bytes());
    out.extend_from_slice(b"\":");
    match value {
        Some(v) => json_string(out, v),
        None => out.extend_from_slice(b"null"),
    }
}

/// Decimal digits of a number, without allocating.
#[derive(Default)]
struct Decimal([u8; 20]);

impl Decimal {
    fn format(&mut self, mut v: u64) -> &[u8] {
        let mut at = self.0.len();
        loop {
            at -= 1;
            self.0[at] = b'0' + (v % 10) as u8;
            v /= 10;
            if v == 0 {
                return &self.0[at..];
            }
        }
    }
}

/// `s` as a JSON string literal (RFC 8259 §7).
fn json_string(out: &mut Vec<u8>, s: &str) {
    out.push(b'"');
    let bytes = s.as_bytes();
    let mut start = 0;
    for (i, &b) in bytes.iter().enumerate() {
        let escape: &[u8] = match b {
            b'"' => b"\\\"",
            b'\\' => b"\\\\",
            b'\n' => b"\\n",
            b'\r' => b"\\r",
            b'\t' => b"\\t",
            0..=0x1f | 0x7f => b"",
            _ => continue,
        };
        out.extend_from_slice(&bytes[start..i]);
        if escape.is_empty() {
            const HEX: &[u8; 16] = b"0123456789abcdef";
            out.extend_from_slice(b"\\u00");
            out.push(HEX[usize::from(b >> 4)]);
            out.push(HEX[usize::from(b & 0xf)]);
        } else {
            out.extend_from_slice(escape);
        }
        start = i + 1;
    }
    out.extend_from_slice(&bytes[start..]);
    out.push(b'"');
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

#[cfg(test)]
mod tests {
    use super::AccessLine;

    #[test]
    fn a_line_is_json_with_every_field_and_escapes() {
        let line = AccessLine {
            ts: "2026-11-21T00:00:00.000Z",
            request_id: "id\"1",
            client: "127.0.0.1:1",
            method: "GET",
            path: "/a\\b\n\u{1}é",
            route: "r",
            surface: "s",
            tenant: Some("t"),
            key_id: None,
            user: None,
            status: 200,
            latency_us: 12_045,
            upstream: Some("u"),
            error: None,
        };
        let text = line.to_json();
        assert_eq!(text.last(), Some(&b'\n'));
        let v: serde_json::Value = serde_json::from_slice(&text).unwrap();
        assert_eq!(v["request_id"], "id\"1");
        assert_eq!(v["path"], "/a\\b\n\u{1}é");
        assert_eq!(v["status"], 200);
        assert_eq!(v["latency_ms"].as_f64(), Some(12.045));
        assert_eq!(v["tenant"], "t");
        assert!(v["key_id"].is_null() && v["error"].is_null());
        assert_eq!(v["upstream"], "u");
        assert_eq!(v.as_object().unwrap().len(), 14);
    }
}

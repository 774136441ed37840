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
    /// How a JSON-RPC answer was checked (`x-chainedge-verified`); absent elsewhere.
    pub verified: Option<&'a str>,
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
    /// The line as JSON, newline-terminated. Fields are written one by one with
    /// serde_json's value writers: deriving `Serialize` for the whole line (a map with a
    /// float) cost more than the rest of the log path together, and it runs per request.
    fn to_json(&self) -> Vec<u8> {
        let mut out = Vec::with_capacity(320);
        out.push(b'{');
        str_field(&mut out, "ts", Some(self.ts));
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
            str_field(&mut out, name, value);
        }
        out.push(b',');
        field(&mut out, "status", &self.status);
        // Milliseconds with three decimals, from whole microseconds (no float to format).
        out.push(b',');
        field(&mut out, "latency_ms", &(self.latency_us / 1000));
        let frac = self.latency_us % 1000;
        out.extend_from_slice(&[
            b'.',
            b'0' + (frac / 100) as u8,
            b'0' + (frac / 10 % 10) as u8,
            b'0' + (frac % 10) as u8,
        ]);
        for (name, value) in [("upstream", self.upstream), ("error", self.error)] {
            out.push(b',');
            str_field(&mut out, name, value);
        }
        if let Some(verified) = self.verified {
            out.push(b',');
            str_field(&mut out, "verified", Some(verified));
        }
        out.extend_from_slice(b"}\n");
        out
    }
}

/// `"name":value`, the value as serde_json writes it (strings escaped, `None` as null).
fn field(out: &mut Vec<u8>, name: &str, value: &impl serde::Serialize) {
    out.push(b'"');
    out.extend_from_slice(name.as_bytes());
    out.extend_from_slice(b"\":");
    // Writing into a Vec cannot fail, and these values always serialize.
    let _ = serde_json::to_writer(&mut *out, value);
}

/// `"name":"value"` (`null` for `None`). Almost every value (ids, routes, addresses,
/// paths) has nothing to escape and is copied as is; serde_json escapes the rest.
fn str_field(out: &mut Vec<u8>, name: &str, value: Option<&str>) {
    out.push(b'"');
    out.extend_from_slice(name.as_bytes());
    out.extend_from_slice(b"\":");
    match value {
        None => out.extend_from_slice(b"null"),
        Some(v) if !needs_escape(v.as_bytes()) => {
            out.push(b'"');
            out.extend_from_slice(v.as_bytes());
            out.push(b'"');
        }
        Some(v) => {
            let _ = serde_json::to_writer(&mut *out, v);
        }
    }
}

/// Whether JSON needs any of these bytes escaped (a control byte, `"` or `\\`), eight
/// bytes at a time: the check runs over every field of every line.
fn needs_escape(bytes: &[u8]) -> bool {
    const ONES: u64 = 0x0101_0101_0101_0101;
    const HIGHS: u64 = 0x8080_8080_8080_8080;
    // A byte of `x` is zero / below `n` (n <= 128): its high bit set in the result.
    let zero = |x: u64| x.wrapping_sub(ONES) & !x & HIGHS;
    let below = |x: u64, n: u64| x.wrapping_sub(ONES * n) & !x & HIGHS;
    let mut chunks = bytes.chunks_exact(8);
    for chunk in &mut chunks {
        let x = u64::from_le_bytes(chunk.try_into().unwrap_or([0; 8]));
        if below(x, 0x20) | zero(x ^ (ONES * 0x22)) | zero(x ^ (ONES * 0x5c)) != 0 {
            return true;
        }
    }
    (chunks.remainder().iter()).any(|&b| b < 0x20 || b == b'"' || b == b'\\')
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
            verified: Some("self"),
        };
        let text = line.to_json();
        assert_eq!(text.last(), Some(&b'\n'));
        let v: serde_json::Value = serde_json::from_slice(&text).unwrap();
        assert_eq!(v["request_id"], "id\"1");
        assert_eq!(v["path"], "/a\\b\n\u{1}é");
        assert_eq!(v["status"], 200);
        assert_eq!(v["verified"], "self");
        assert_eq!(v["latency_ms"].as_f64(), Some(12.045));
        assert_eq!(v["tenant"], "t");
        assert!(v["key_id"].is_null() && v["error"].is_null());
        assert_eq!(v["upstream"], "u");
        assert_eq!(v.as_object().unwrap().len(), 15);
    }

    #[test]
    fn needs_escape_finds_every_byte_json_escapes_and_no_other() {
        for b in 0u8..=255 {
            let escaped = b < 0x20 || b == b'"' || b == b'\\';
            for at in [0, 3, 7, 8, 12] {
                let mut s = vec![b'a'; 13];
                s[at] = b;
                assert_eq!(super::needs_escape(&s), escaped, "byte {b:#x} at {at}");
            }
        }
        assert!(!super::needs_escape("/v1/éth/ü".as_bytes()));
        assert!(!super::needs_escape(b""));
    }
}

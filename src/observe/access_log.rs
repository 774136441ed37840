//! One JSON line per request on stdout. Never a secret: no query string, no headers
//! beyond what is listed, no credential. Each worker thread writes its lines into a
//! buffer of its own, and a background thread writes every buffer out in batches, like
//! nginx's `access_log ... buffer=`: the proxy path makes no syscall and no allocation
//! to log (the line is written straight into the buffer's spare room).

use super::metrics;
use once_cell::sync::Lazy;
use std::io::Write;
use std::sync::{Arc, Mutex};
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

/// Bytes one thread's lines may wait for the writer; beyond this (stdout stalled) new
/// lines are dropped and counted rather than blocking the proxy.
const PENDING_BYTES: usize = 4 << 20;
/// Room a buffer starts with again after the writer took its lines.
const BUFFER_START: usize = 16 << 10;
/// How often the writer drains the buffers. Requests never wake it, so logging costs a
/// write into memory per request, not a syscall.
const DRAIN_EVERY: Duration = Duration::from_millis(50);

/// One thread's lines waiting for the writer: locked by that thread per line and by the
/// writer once per drain, so the lock is all but never contended.
type Pending = Arc<Mutex<Vec<u8>>>;

/// Every thread's buffer. Created with the first line, i.e. after Pingora has
/// daemonised (a thread started before the fork would not survive it).
static BUFFERS: Lazy<Mutex<Vec<Pending>>> = Lazy::new(|| {
    std::thread::Builder::new()
        .name("access-log".into())
        .spawn(|| loop {
            std::thread::sleep(DRAIN_EVERY);
            flush();
        })
        .expect("spawn the access-log writer");
    Mutex::new(Vec::new())
});

thread_local! {
    static MINE: Pending = {
        let pending: Pending = Arc::new(Mutex::new(Vec::with_capacity(BUFFER_START)));
        if let Ok(mut all) = BUFFERS.lock() {
            all.push(pending.clone());
        }
        pending
    };
}

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
    let kept = MINE.with(|pending| {
        let Ok(mut buf) = pending.lock() else {
            return false;
        };
        if buf.len() >= PENDING_BYTES {
            return false;
        }
        line.write_json(&mut buf);
        true
    });
    if !kept {
        metrics::ACCESS_LOG_DROPPED.inc();
    }
}

impl AccessLine<'_> {
    /// The line as JSON, newline-terminated.
    #[cfg(test)]
    fn to_json(&self) -> Vec<u8> {
        let mut out = Vec::new();
        self.write_json(&mut out);
        out
    }

    /// The line as JSON, newline-terminated, onto `out`. Fields are written one by one
    /// with serde_json's value writers: deriving `Serialize` for the whole line (a map
    /// with a float) cost more than the rest of the log path together, and it runs per
    /// request.
    fn write_json(&self, out: &mut Vec<u8>) {
        str_field(out, b"{\"ts\":", Some(self.ts));
        str_field(out, b",\"request_id\":", Some(self.request_id));
        str_field(out, b",\"client\":", Some(self.client));
        str_field(out, b",\"method\":", Some(self.method));
        str_field(out, b",\"path\":", Some(self.path));
        str_field(out, b",\"route\":", Some(self.route));
        str_field(out, b",\"surface\":", Some(self.surface));
        str_field(out, b",\"tenant\":", self.tenant);
        str_field(out, b",\"key_id\":", self.key_id);
        str_field(out, b",\"user\":", self.user);
        let mut digits = itoa::Buffer::new();
        out.extend_from_slice(b",\"status\":");
        out.extend_from_slice(digits.format(self.status).as_bytes());
        // Milliseconds with three decimals, from whole microseconds (no float to format).
        out.extend_from_slice(b",\"latency_ms\":");
        out.extend_from_slice(digits.format(self.latency_us / 1000).as_bytes());
        let frac = self.latency_us % 1000;
        out.extend_from_slice(&[
            b'.',
            b'0' + (frac / 100) as u8,
            b'0' + (frac / 10 % 10) as u8,
            b'0' + (frac % 10) as u8,
        ]);
        str_field(out, b",\"upstream\":", self.upstream);
        str_field(out, b",\"error\":", self.error);
        if let Some(verified) = self.verified {
            str_field(out, b",\"verified\":", Some(verified));
        }
        out.extend_from_slice(b"}\n");
    }
}

/// A field: its `prefix` (`,"name":`), then the value as a JSON string (`null` for
/// `None`). Almost every value (ids, routes, addresses, paths) has nothing to escape and
/// is copied as is; serde_json escapes the rest.
fn str_field(out: &mut Vec<u8>, prefix: &[u8], value: Option<&str>) {
    out.extend_from_slice(prefix);
    match value {
        None => out.extend_from_slice(b"null"),
        Some(v) if !needs_escape(v.as_bytes()) => {
            out.push(b'"');
            out.extend_from_slice(v.as_bytes());
            out.push(b'"');
        }
        Some(v) => {
            // Writing into a Vec cannot fail.
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

/// Write every thread's waiting lines to stdout in one go (the writer thread, and once
/// at exit).
pub fn flush() {
    let buffers: Vec<Pending> = match BUFFERS.lock() {
        Ok(mut all) => {
            // A thread that ended left its buffer to this writer alone: once written, gone.
            all.retain(|p| Arc::strong_count(p) > 1 || p.lock().is_ok_and(|b| !b.is_empty()));
            all.clone()
        }
        Err(_) => return,
    };
    let mut out = Vec::new();
    for pending in &buffers {
        let Ok(mut buf) = pending.lock() else {
            continue;
        };
        if buf.is_empty() {
            continue;
        }
        // The thread gets fresh room and goes on; its lines are written outside its lock.
        // Half again the last window's lines: sized by them exactly, any busier window
        // grew the buffer, copying its lines (a realloc most windows under load).
        let room = (buf.len() + buf.len() / 2).clamp(BUFFER_START, PENDING_BYTES);
        let lines = std::mem::replace(&mut *buf, Vec::with_capacity(room));
        drop(buf);
        if out.is_empty() {
            out = lines;
        } else {
            out.extend_from_slice(&lines);
        }
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

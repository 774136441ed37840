//! Wall-clock time, for everything that stamps or compares it (sessions, leases, key
//! standing, rows written, tokens). One place, so no layer takes the time from another
//! (the store used to own it), and a reading is always Unix seconds. Durations and
//! deadlines use `Instant`, never this.

use std::time::{SystemTime, UNIX_EPOCH};

/// Now, in Unix seconds (0 before 1970, which no clock here reads).
pub fn now() -> i64 {
    SystemTime::now()
        .duration_since(UNIX_EPOCH)
        .map(|d| d.as_secs() as i64)
        .unwrap_or(0)
}

/// Now, in milliseconds since the epoch.
pub fn now_ms() -> i64 {
    SystemTime::now()
        .duration_since(UNIX_EPOCH)
        .map(|d| d.as_millis() as i64)
        .unwrap_or(0)
}

/// Now, in microseconds since the epoch: orders rows made within the same second.
pub fn now_us() -> i64 {
    SystemTime::now()
        .duration_since(UNIX_EPOCH)
        .map(|d| d.as_micros() as i64)
        .unwrap_or(0)
}

/// Unix seconds as an RFC 3339 UTC time (`2026-11-26T05:00:00Z`), as answers carry times.
pub fn rfc3339(unix_secs: i64) -> String {
    let at = UNIX_EPOCH + std::time::Duration::from_secs(unix_secs.max(0) as u64);
    humantime::format_rfc3339_seconds(at).to_string()
}

/// Unix milliseconds as RFC 3339 UTC with milliseconds (`2026-11-26T05:00:00.250Z`).
pub fn rfc3339_ms(unix_ms: i64) -> String {
    let at = UNIX_EPOCH + std::time::Duration::from_millis(unix_ms.max(0) as u64);
    humantime::format_rfc3339_millis(at).to_string()
}

#[cfg(test)]
mod tests {
    #[test]
    fn now_is_after_this_code_was_written_and_formats_as_rfc3339() {
        assert!(super::now() > 1_790_000_000);
        assert_eq!(super::rfc3339(1_795_669_200), "2026-11-26T05:00:00Z");
        assert_eq!(super::rfc3339(-5), "1970-01-01T00:00:00Z");
        assert_eq!(
            super::rfc3339_ms(1_795_669_200_250),
            "2026-11-26T05:00:00.250Z"
        );
    }
}

//! One JSON line per request on stdout. Never a secret: no query string, no headers
//! beyond what is listed, no credential.

use serde::Serialize;
use std::io::Write;

#[derive(Serialize)]
pub struct AccessLine<'a> {
    pub ts: String,
    pub request_id: &'a str,
    pub client: String,
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

pub fn write(line: &AccessLine) {
    if let Ok(mut text) = serde_json::to_vec(line) {
        text.push(b'\n');
        // One write per line keeps lines whole when several threads log at once.
        let _ = std::io::stdout().lock().write_all(&text);
    }
}

//! A browser-like client for the console's cookie sessions, shared by the console and
//! security tiers.

use super::{request, Resp};
use serde_json::{json, Value};

/// A browser-like client: keeps the cookies the gateway sets.
pub struct Browser {
    pub port: u16,
    pub cookies: Vec<(String, String)>,
    pub last_set_cookies: Vec<String>,
}

impl Browser {
    pub fn new(port: u16) -> Self {
        Browser {
            port,
            cookies: Vec::new(),
            last_set_cookies: Vec::new(),
        }
    }

    pub fn cookie(&self, name: &str) -> Option<&str> {
        self.cookies
            .iter()
            .find(|(k, _)| k == name)
            .map(|(_, v)| v.as_str())
    }

    /// Send with cookies; unsafe methods echo `nl_csrf` in `X-CSRF-Token` unless `csrf` says otherwise.
    pub fn send(
        &mut self,
        method: &str,
        path: &str,
        body: Option<Value>,
        csrf: Option<&str>,
    ) -> Resp {
        self.try_send(method, path, body, csrf).unwrap()
    }

    /// `send` that reports a transport error (a gateway that is gone) instead of panicking.
    pub fn try_send(
        &mut self,
        method: &str,
        path: &str,
        body: Option<Value>,
        csrf: Option<&str>,
    ) -> std::io::Result<Resp> {
        let jar: Vec<String> = self
            .cookies
            .iter()
            .map(|(k, v)| format!("{k}={v}"))
            .collect();
        let jar = jar.join("; ");
        let token = csrf
            .map(str::to_string)
            .or_else(|| self.cookie("nl_csrf").map(str::to_string));
        let mut h: Vec<(&str, &str)> = vec![("Content-Type", "application/json")];
        if !jar.is_empty() {
            h.push(("Cookie", &jar));
        }
        if method != "GET" {
            if let Some(t) = token.as_deref().filter(|t| !t.is_empty()) {
                h.push(("X-CSRF-Token", t));
            }
        }
        let body = body.map(|b| b.to_string()).unwrap_or_default();
        let r = request(self.port, method, path, &h, body.as_bytes())?;
        self.last_set_cookies = r
            .headers
            .iter()
            .filter(|(k, _)| k.eq_ignore_ascii_case("set-cookie"))
            .map(|(_, v)| v.clone())
            .collect();
        for c in &self.last_set_cookies {
            let (kv, attrs) = c.split_once(';').unwrap_or((c, ""));
            let (k, v) = kv.split_once('=').unwrap();
            self.cookies.retain(|(n, _)| n != k);
            if !attrs.contains("Max-Age=0") {
                self.cookies.push((k.to_string(), v.to_string()));
            }
        }
        Ok(r)
    }
}

/// The code mailed to `to` most recently (the console's outbox file, one JSON line per
/// message).
pub fn outbox_code(outbox: &std::path::Path, to: &str) -> Option<String> {
    let text = std::fs::read_to_string(outbox).ok()?;
    let line = text
        .lines()
        .rev()
        .find(|l| l.contains(&format!("\"to\":\"{to}\"")))?;
    let v: Value = serde_json::from_str(line).ok()?;
    let body = v["body"].as_str()?;
    let at = body.find("code is ")? + 8;
    Some(body[at..at + 6].to_string())
}

/// Sign `b` in as `email` with the code from `outbox`: the verify answer.
pub fn sign_in(b: &mut Browser, outbox: &std::path::Path, email: &str) -> Resp {
    let r = b.send(
        "POST",
        "/v1/auth/email/start",
        Some(json!({"email": email})),
        None,
    );
    assert_eq!(r.status, 202, "{}", r.text());
    let code = outbox_code(outbox, email).expect("a code in the outbox");
    b.send(
        "POST",
        "/v1/auth/email/verify",
        Some(json!({"email": email, "code": code})),
        None,
    )
}

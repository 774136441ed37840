//! A browser-like client for the console's cookie sessions, shared by the console and
//! security tiers.

use super::{request, Resp};
use serde_json::Value;

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

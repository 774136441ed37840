//! One error type for every surface, rendered in the envelope SPEC "Errors" gives each.

use serde::Serialize;
use serde_json::{Map, Value};

/// Which JSON shape an error takes on the wire (SPEC "Errors" → "Envelopes").
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, serde::Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum Envelope {
    /// `{"error": code, "message": ..., "request_id": ...}` plus per-code extras.
    ChainRest,
    /// `{"error": code}` only.
    Console,
    /// `{"error": "<human message>"}` only (mesh health).
    Admin,
    /// `{"error": code, "code": <status>}` (SSE streams and the metrics mirror).
    Stream,
}

/// A refusal or failure that becomes one complete HTTP response.
#[derive(Debug, Clone)]
pub struct ApiError {
    pub status: u16,
    pub code: &'static str,
    pub message: String,
    /// Extra body fields (for example `required_tier` on `tier_insufficient`).
    pub extra: Map<String, Value>,
    /// Extra response headers (for example `Allow`, `Retry-After`).
    pub headers: Vec<(&'static str, String)>,
}

impl ApiError {
    pub fn new(status: u16, code: &'static str, message: impl Into<String>) -> Self {
        ApiError {
            status,
            code,
            message: message.into(),
            extra: Map::new(),
            headers: Vec::new(),
        }
    }

    pub fn with_field(mut self, key: &str, value: impl Into<Value>) -> Self {
        self.extra.insert(key.to_string(), value.into());
        self
    }

    pub fn with_header(mut self, name: &'static str, value: impl Into<String>) -> Self {
        self.headers.push((name, value.into()));
        self
    }

    pub fn route_not_found() -> Self {
        Self::new(404, "route_not_found", "no route matches this path")
    }

    pub fn method_not_allowed(allow: &str) -> Self {
        Self::new(
            405,
            "method_not_allowed",
            "method not allowed on this route",
        )
        .with_header("Allow", allow.to_string())
    }

    pub fn not_implemented(route: &str) -> Self {
        Self::new(
            501,
            "not_implemented",
            format!("route {route} is classified but not built yet"),
        )
    }

    pub fn invalid_params(message: impl Into<String>) -> Self {
        Self::new(400, "invalid_params", message)
    }

    pub fn internal(message: impl Into<String>) -> Self {
        Self::new(500, "internal", message)
    }

    pub fn bad_gateway(code: &'static str, message: impl Into<String>) -> Self {
        Self::new(502, code, message)
    }

    /// Every host of a passthrough's pool failed (either server's proxy path).
    pub fn no_node_answered() -> Self {
        Self::bad_gateway("upstream_unavailable", "no node of the pool could answer")
    }

    /// The body for `envelope`, as serialized JSON bytes.
    pub fn body(&self, envelope: Envelope, request_id: &str) -> Vec<u8> {
        let mut obj = Map::new();
        match envelope {
            Envelope::ChainRest => {
                obj.insert("error".into(), self.code.into());
                obj.insert("message".into(), self.message.clone().into());
                obj.insert("request_id".into(), request_id.into());
                for (k, v) in &self.extra {
                    obj.insert(k.clone(), v.clone());
                }
            }
            Envelope::Console => {
                obj.insert("error".into(), self.code.into());
            }
            Envelope::Admin => {
                obj.insert("error".into(), self.message.clone().into());
            }
            Envelope::Stream => {
                obj.insert("error".into(), self.code.into());
                obj.insert("code".into(), self.status.into());
            }
        }
        serde_json::to_vec(&Value::Object(obj)).unwrap_or_else(|_| b"{}".to_vec())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn parse(e: &ApiError, env: Envelope) -> Value {
        serde_json::from_slice(&e.body(env, "rid-1")).unwrap()
    }

    #[test]
    fn chain_rest_carries_code_message_request_id_and_extras() {
        let e =
            ApiError::new(403, "tier_insufficient", "needs pro").with_field("required_tier", "pro");
        let v = parse(&e, Envelope::ChainRest);
        assert_eq!(v["error"], "tier_insufficient");
        assert_eq!(v["message"], "needs pro");
        assert_eq!(v["request_id"], "rid-1");
        assert_eq!(v["required_tier"], "pro");
    }

    #[test]
    fn console_is_code_only() {
        let v = parse(
            &ApiError::new(401, "unauthenticated", "x"),
            Envelope::Console,
        );
        assert_eq!(v, serde_json::json!({"error": "unauthenticated"}));
    }

    #[test]
    fn admin_is_message_only() {
        let e = ApiError::new(403, "admin_forbidden", "admin endpoint loopback-only");
        let v = parse(&e, Envelope::Admin);
        assert_eq!(
            v,
            serde_json::json!({"error": "admin endpoint loopback-only"})
        );
    }

    #[test]
    fn stream_is_code_and_status() {
        let v = parse(
            &ApiError::new(429, "stream_cap_exceeded", "x"),
            Envelope::Stream,
        );
        assert_eq!(
            v,
            serde_json::json!({"error": "stream_cap_exceeded", "code": 429})
        );
    }
}

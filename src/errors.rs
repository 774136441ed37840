//! One error type for every surface, rendered in the envelope SPEC "Errors" gives each.

use crate::jsonrpc::{ErrorObject, Id, Response};
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
    /// A JSON-RPC 2.0 error response (`/rpc/eth`): the edge's code, message and extras in
    /// `error.data`, the HTTP status kept. Rendered here with a null id (a refusal made
    /// before the body was read); the gateway answers with the call's id once it has one.
    JsonRpc,
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

    /// The store could not be reached in time: 503 with `Retry-After`, so a client
    /// tries again rather than giving up.
    pub fn store_unavailable() -> Self {
        const RETRY_SECS: u64 = 2;
        ApiError::new(
            503,
            "store_unavailable",
            "the key and account store cannot be reached; try again shortly",
        )
        .with_field("retry_after_sec", RETRY_SECS)
        .with_header("Retry-After", RETRY_SECS.to_string())
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
            Envelope::JsonRpc => {
                let answer = Response::error(Id::Null, self.error_object(request_id));
                return serde_json::to_vec(&answer).unwrap_or_else(|_| b"{}".to_vec());
            }
        }
        serde_json::to_vec(&Value::Object(obj)).unwrap_or_else(|_| b"{}".to_vec())
    }

    /// The JSON-RPC error code of this refusal: the standard code where one fits, EIP-1474's
    /// -32005 "limit exceeded" for rate and size limits, -32002 (as Infura answers a key's
    /// settings) for a credential or plan that does not allow the call, -32603 for the
    /// edge's or the nodes' failures. `docs/rpc.md` has the table.
    pub fn jsonrpc_code(&self) -> i64 {
        if let Some(code) = self.extra.get("jsonrpc_code").and_then(Value::as_i64) {
            return code;
        }
        match (self.status, self.code) {
            (_, "method_unknown") => -32601,
            (_, "rate_limited") | (413, _) => -32005,
            (401, _)
            | (_, "tier_insufficient" | "tier_locked" | "scope_missing" | "key_restricted") => {
                -32002
            }
            (400, _) => -32602,
            (404 | 405 | 411 | 415 | 426, _) => -32600,
            _ => -32603,
        }
    }

    /// This refusal as a JSON-RPC error object: the code a JSON-RPC client understands,
    /// the message prefixed with the edge's code, and in `data` what the HTTP envelope
    /// carries (`error`, `request_id` when there is one, `retry_after_sec`, ...).
    pub fn error_object(&self, request_id: &str) -> ErrorObject {
        let mut data = Map::new();
        data.insert("error".into(), self.code.into());
        if !request_id.is_empty() {
            data.insert("request_id".into(), request_id.into());
        }
        for (k, v) in &self.extra {
            if k != "jsonrpc_code" {
                data.insert(k.clone(), v.clone());
            }
        }
        ErrorObject {
            code: self.jsonrpc_code(),
            message: format!("{}: {}", self.code, self.message),
            data: Some(Value::Object(data)),
        }
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
    fn json_rpc_is_an_error_response_with_the_fields_in_data() {
        let e = ApiError::new(429, "rate_limited", "slow down").with_field("retry_after_sec", 2);
        let v = parse(&e, Envelope::JsonRpc);
        assert_eq!(
            v,
            serde_json::json!({"jsonrpc": "2.0", "id": null, "error": {
                "code": -32005, "message": "rate_limited: slow down",
                "data": {"error": "rate_limited", "request_id": "rid-1", "retry_after_sec": 2}}})
        );
        let codes = [
            (ApiError::new(403, "method_unknown", "x"), -32601),
            (ApiError::new(401, "unauthorized", "x"), -32002),
            (ApiError::new(403, "tier_insufficient", "x"), -32002),
            (ApiError::new(413, "body_too_large", "x"), -32005),
            (ApiError::invalid_params("x"), -32602),
            (
                ApiError::invalid_params("x").with_field("jsonrpc_code", -32700),
                -32700,
            ),
            (ApiError::method_not_allowed("POST"), -32600),
            (ApiError::no_node_answered(), -32603),
        ];
        for (e, code) in codes {
            assert_eq!(e.jsonrpc_code(), code, "{}", e.code);
        }
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

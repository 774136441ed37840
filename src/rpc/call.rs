//! A JSON-RPC call as the gateway reads it: the borrowed fast-path view, the method of a
//! parsed call, and error objects.

use super::methods::MethodClass;
use crate::errors::ApiError;
use serde_json::{json, Value};

/// A single call as the fast path reads it: `method` borrowed from the body (a string
/// with escapes fails here and takes the general path), `params` parsed, the rest
/// (`jsonrpc`, `id`) skipped. A repeated field also fails here, so the general path keeps
/// its meaning for such bodies.
#[derive(serde::Deserialize)]
pub struct CallView<'a> {
    pub method: &'a str,
    #[serde(default)]
    pub params: Option<Value>,
}

impl<'a> CallView<'a> {
    /// The body's one call, when it is a JSON object the view can read. The whole body
    /// must be UTF-8: the fields the view skips are not checked as they are skipped, and
    /// the general path refuses a body with bad UTF-8 anywhere (fuzz: jsonrpc).
    pub fn of(body: &'a [u8]) -> Option<Self> {
        let first = body.iter().find(|b| !b.is_ascii_whitespace())?;
        if *first != b'{' {
            return None;
        }
        serde_json::from_str(std::str::from_utf8(body).ok()?).ok()
    }
}

/// A read call's method, its class and its params.
pub(super) struct ReadCall<'a> {
    pub(super) method: &'a str,
    pub(super) class: MethodClass,
    pub(super) params: Option<&'a Value>,
}

pub(super) fn jsonrpc_error(id: &Value, code: i64, message: &str) -> Value {
    json!({"jsonrpc": "2.0", "id": id, "error": {"code": code, "message": message}})
}

pub fn method_of(call: &Value) -> Result<&str, ApiError> {
    call.get("method")
        .and_then(Value::as_str)
        .ok_or_else(|| ApiError::invalid_params("each JSON-RPC call needs a string 'method'"))
}

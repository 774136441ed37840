//! A JSON-RPC call as the gateway reads it: the borrowed fast-path view, and the edge's
//! refusals as JSON-RPC error answers.

use crate::errors::ApiError;
use crate::jsonrpc::methods::MethodClass;
use crate::jsonrpc::{ErrorObject, Id, Request, Response};
use serde::Deserialize;
use serde_json::Value;

/// A single call as the fast path reads it: `method` borrowed from the body (a string
/// with escapes fails here and takes the general path), `params` parsed, `jsonrpc` and
/// `id` read and dropped. Only those four members: anything else takes the general path,
/// so no member is merely skipped (skipping does not check what a full parse refuses,
/// such as a number out of range; fuzz: jsonrpc). A repeated member also fails here, so
/// the general path keeps its meaning for such bodies.
#[derive(serde::Deserialize)]
#[serde(deny_unknown_fields)]
pub struct CallView<'a> {
    pub method: &'a str,
    #[serde(default)]
    pub params: Option<Value>,
    #[serde(default, rename = "jsonrpc", borrow)]
    _jsonrpc: Option<&'a str>,
    /// Present when the call has one, null included (a call without is a notification).
    #[serde(default, deserialize_with = "crate::jsonrpc::present")]
    id: Option<Value>,
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

    /// The call's id: none for a notification; a number, a string or null.
    pub(super) fn id(&self) -> Result<Option<Id>, ApiError> {
        self.id
            .as_ref()
            .map(|id| {
                Id::deserialize(id).map_err(|_| {
                    ApiError::invalid_params("a JSON-RPC id is a number, a string or null")
                        .with_field("jsonrpc_code", -32600)
                })
            })
            .transpose()
    }

    /// The call as the general path's `Request` (a write, a filter), without parsing the
    /// body again.
    pub(super) fn into_request(self) -> Result<Request, ApiError> {
        Ok(Request {
            id: self.id()?,
            method: self.method.to_string(),
            params: self.params,
        })
    }
}

/// A read call's method, its class and its params.
pub(super) struct ReadCall<'a> {
    pub(super) method: &'a str,
    pub(super) class: MethodClass,
    pub(super) params: Option<&'a Value>,
}

/// An error answer to call `id`.
pub(super) fn jsonrpc_error(id: &Id, code: i64, message: &str) -> Response {
    Response::error(id.clone(), ErrorObject::new(code, message))
}

pub fn method_of(call: &Value) -> Result<&str, ApiError> {
    call.get("method")
        .and_then(Value::as_str)
        .ok_or_else(|| ApiError::invalid_params("each JSON-RPC call needs a string 'method'"))
}

/// A refusal as the JSON-RPC error answer to call `id` (see `ApiError::error_object`).
pub fn error_from(id: &Id, e: &ApiError) -> Response {
    Response::error(id.clone(), e.error_object(""))
}

/// A refusal of a whole message as JSON-RPC: the error object with the call's id, or
/// with a null id for a batch (one answer for the batch as a whole, as JSON-RPC 2.0
/// gives an invalid batch; clients then fail every call of it with this error).
pub fn refusal_of(body: &[u8], e: &ApiError) -> Response {
    error_from(&id_of(body), e)
}

/// The id of a single call's body (null for a batch or what is not a call).
pub fn id_of(body: &[u8]) -> Id {
    #[derive(Deserialize)]
    struct IdOnly {
        #[serde(default = "null")]
        id: Id,
    }
    fn null() -> Id {
        Id::Null
    }
    serde_json::from_slice::<IdOnly>(body)
        .map(|c| c.id)
        .unwrap_or(Id::Null)
}

//! JSON-RPC 2.0 messages as types: ids, requests, responses and error objects (model:
//! web3-proxy's `jsonrpc/{id,request,response,error}.rs`). The gateway's fast path still
//! reads a plain single call through the borrowed `CallView` (`call.rs`): no tree, no
//! copies; everything else (batches, writes, filters, the edge's own answers) goes
//! through these types.

pub mod methods;
pub mod quantity;
pub mod strict;

use memchr::memmem::Finder;
use serde::{Deserialize, Deserializer, Serialize, Serializer};
use serde_json::Value;
use std::sync::LazyLock;

/// A request id as the client sent it: a number, a string or null (JSON-RPC 2.0 §4).
#[derive(Clone, Debug, PartialEq, Eq, Hash, Serialize, Deserialize)]
#[serde(untagged)]
pub enum Id {
    Number(serde_json::Number),
    String(String),
    Null,
}

impl Id {
    /// The id of a batch position (the edge's own calls to nodes).
    pub fn index(i: usize) -> Id {
        Id::Number(i.into())
    }

    pub fn as_index(&self) -> Option<usize> {
        match self {
            Id::Number(n) => n.as_u64().and_then(|n| usize::try_from(n).ok()),
            _ => None,
        }
    }
}

/// One call. `id: None` is a notification (no `id` member at all; `"id": null` is a call
/// with a null id, which is answered).
#[derive(Clone, Debug, PartialEq, Deserialize)]
pub struct Request {
    #[serde(default, deserialize_with = "present")]
    pub id: Option<Id>,
    pub method: String,
    #[serde(default, deserialize_with = "present")]
    pub params: Option<Value>,
}

impl Request {
    pub fn new(id: Id, method: &str, params: Value) -> Self {
        Request {
            id: Some(id),
            method: method.to_string(),
            params: Some(params),
        }
    }

    /// The id an answer to this call carries (null for a notification's refusal).
    pub fn answer_id(&self) -> Id {
        self.id.clone().unwrap_or(Id::Null)
    }

    pub fn is_notification(&self) -> bool {
        self.id.is_none()
    }

    /// The `i`th positional parameter.
    pub fn param(&self, i: usize) -> Option<&Value> {
        self.params.as_ref()?.get(i)
    }

    /// One element of a batch (or a single call's parsed body): the call, or the answer
    /// it gets when it is not one (-32600 with its id when one can be read).
    pub fn from_value(v: Value) -> Result<Request, Response> {
        let id = v
            .get("id")
            .and_then(|id| Id::deserialize(id).ok())
            .unwrap_or(Id::Null);
        if !v.is_object() {
            return Err(Response::error(
                Id::Null,
                ErrorObject::new(-32600, "a JSON-RPC call is an object"),
            ));
        }
        if let Err(why) = strict::check_call(&v) {
            return Err(Response::error(id, ErrorObject::new(-32600, why)));
        }
        serde_json::from_value(v).map_err(|e| {
            let why = if e.to_string().contains("method") {
                "each JSON-RPC call needs a string 'method'".to_string()
            } else {
                format!("not a JSON-RPC call: {e}")
            };
            Response::error(id, ErrorObject::new(-32600, why))
        })
    }

    pub fn to_bytes(&self) -> bytes::Bytes {
        bytes::Bytes::from(serde_json::to_vec(self).unwrap_or_default())
    }
}

impl Serialize for Request {
    fn serialize<S: Serializer>(&self, s: S) -> Result<S::Ok, S::Error> {
        Outgoing::new(self.id.as_ref(), &self.method, self.params.as_ref()).serialize(s)
    }
}

/// A call as the edge writes it to a node: the four members of JSON-RPC 2.0, from the
/// edge's own parse, never the caller's bytes (`strict`: the node reads what the edge
/// checked, and nothing else).
///
/// Kept small (three references): the fast read path holds one across the node call,
/// and its future sizes every connection's task.
pub struct Outgoing<'a> {
    id: Option<&'a Id>,
    method: &'a str,
    params: Option<&'a Value>,
}

impl Serialize for Outgoing<'_> {
    fn serialize<S: Serializer>(&self, s: S) -> Result<S::Ok, S::Error> {
        use serde::ser::SerializeMap;
        let mut m = s.serialize_map(None)?;
        m.serialize_entry("jsonrpc", "2.0")?;
        if let Some(id) = self.id {
            m.serialize_entry("id", id)?;
        }
        m.serialize_entry("method", self.method)?;
        if let Some(params) = self.params {
            m.serialize_entry("params", params)?;
        }
        m.end()
    }
}

impl<'a> Outgoing<'a> {
    pub fn new(id: Option<&'a Id>, method: &'a str, params: Option<&'a Value>) -> Self {
        Outgoing { id, method, params }
    }

    pub fn to_bytes(&self) -> bytes::Bytes {
        bytes::Bytes::from(serde_json::to_vec(self).unwrap_or_default())
    }

    pub fn params(&self) -> Option<&'a Value> {
        self.params
    }

    /// The call written, the params given already written (`params_json`: what
    /// serde_json writes for `self.params`, which the read path has in the call's cache
    /// key): writing them was most of a distinct read's serialization. A `Vec`, sized
    /// once: a `Bytes` made from a `Vec` with room to spare allocates again.
    pub fn to_vec_with_params(&self, params_json: &[u8]) -> Vec<u8> {
        // The members' names and punctuation are 45 bytes; an id is rarely over 35.
        let mut out = Vec::with_capacity(80 + self.method.len() + params_json.len());
        out.extend_from_slice(br#"{"jsonrpc":"2.0""#);
        // Writing into a `Vec` cannot fail.
        if let Some(id) = self.id {
            out.extend_from_slice(br#","id":"#);
            let _ = serde_json::to_writer(&mut out, id);
        }
        out.extend_from_slice(br#","method":"#);
        let _ = serde_json::to_writer(&mut out, self.method);
        if self.params.is_some() {
            out.extend_from_slice(br#","params":"#);
            out.extend_from_slice(params_json);
        }
        out.push(b'}');
        out
    }

    /// The id an answer to this call carries (null for a notification's).
    pub fn answer_id(&self) -> Id {
        self.id.cloned().unwrap_or(Id::Null)
    }
}

/// A JSON-RPC error object.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct ErrorObject {
    #[serde(default)]
    pub code: i64,
    #[serde(default)]
    pub message: String,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub data: Option<Value>,
}

impl ErrorObject {
    pub fn new(code: i64, message: impl Into<String>) -> Self {
        ErrorObject {
            code,
            message: message.into(),
            data: None,
        }
    }
}

/// An answer: the caller's id and either a result or an error.
#[derive(Clone, Debug, PartialEq)]
pub struct Response {
    pub id: Id,
    pub payload: Payload,
}

#[derive(Clone, Debug, PartialEq)]
pub enum Payload {
    Result(Value),
    Error(ErrorObject),
}

impl Response {
    pub fn result(id: Id, result: Value) -> Self {
        Response {
            id,
            payload: Payload::Result(result),
        }
    }

    pub fn error(id: Id, error: ErrorObject) -> Self {
        Response {
            id,
            payload: Payload::Error(error),
        }
    }

    pub fn error_object(&self) -> Option<&ErrorObject> {
        match &self.payload {
            Payload::Error(e) => Some(e),
            Payload::Result(_) => None,
        }
    }

    /// The result, or the error's message.
    pub fn into_result(self) -> Result<Value, ErrorObject> {
        match self.payload {
            Payload::Result(v) => Ok(v),
            Payload::Error(e) => Err(e),
        }
    }

    pub fn to_bytes(&self) -> bytes::Bytes {
        bytes::Bytes::from(serde_json::to_vec(self).unwrap_or_default())
    }
}

impl Serialize for Response {
    fn serialize<S: Serializer>(&self, s: S) -> Result<S::Ok, S::Error> {
        #[derive(Serialize)]
        struct Wire<'a> {
            jsonrpc: &'static str,
            id: &'a Id,
            #[serde(skip_serializing_if = "Option::is_none")]
            result: Option<&'a Value>,
            #[serde(skip_serializing_if = "Option::is_none")]
            error: Option<&'a ErrorObject>,
        }
        let (result, error) = match &self.payload {
            Payload::Result(v) => (Some(v), None),
            Payload::Error(e) => (None, Some(e)),
        };
        Wire {
            jsonrpc: "2.0",
            id: &self.id,
            result,
            error,
        }
        .serialize(s)
    }
}

impl<'de> Deserialize<'de> for Response {
    fn deserialize<D: Deserializer<'de>>(d: D) -> Result<Self, D::Error> {
        #[derive(Deserialize)]
        struct Wire {
            #[serde(default = "null_id")]
            id: Id,
            #[serde(default, deserialize_with = "present")]
            result: Option<Value>,
            #[serde(default)]
            error: Option<ErrorObject>,
        }
        let w = Wire::deserialize(d)?;
        Ok(Response {
            id: w.id,
            payload: match (w.error, w.result) {
                (Some(e), _) => Payload::Error(e),
                (None, Some(v)) => Payload::Result(v),
                (None, None) => {
                    return Err(serde::de::Error::custom(
                        "a JSON-RPC response has a result or an error",
                    ))
                }
            },
        })
    }
}

fn null_id() -> Id {
    Id::Null
}

/// Whether an answer's bytes hold `"error"` anywhere: the look taken before parsing an
/// answer for its error, as nearly every answer is a result. The searchers are built
/// once: building one costs more than searching a short answer.
pub fn mentions_error(body: &[u8]) -> bool {
    static ERROR: LazyLock<Finder<'static>> = LazyLock::new(|| Finder::new(b"\"error\""));
    ERROR.find(body).is_some()
}

/// Where `"result"` first appears in an answer's bytes.
pub fn find_result_member(body: &[u8]) -> Option<usize> {
    static RESULT: LazyLock<Finder<'static>> = LazyLock::new(|| Finder::new(b"\"result\""));
    RESULT.find(body)
}

/// A member that is present, null included (serde's `Option` reads null as absent).
pub(crate) fn present<'de, D: Deserializer<'de>, T: Deserialize<'de>>(
    d: D,
) -> Result<Option<T>, D::Error> {
    T::deserialize(d).map(Some)
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    #[test]
    fn a_call_written_with_its_params_given_is_the_call_written_whole() {
        let ids = [
            None,
            Some(Id::Null),
            Some(Id::String("a\"b\\c\u{1}é".into())),
            Some(Id::Number(18446744073709551615u64.into())),
            Some(Id::Number(serde_json::Number::from_f64(-1.5).unwrap())),
        ];
        let params = [
            None,
            Some(json!([])),
            Some(json!(["0xab", "pending"])),
            Some(json!([{"to": "0x1", "data": "0x\"2", "b": [1, 2.5, null, true]}])),
            Some(json!({"z": 1, "a": "\u{7f}\n"})),
        ];
        for id in &ids {
            for p in &params {
                for method in ["eth_getBalance", "odd\"method\n"] {
                    let call = Outgoing::new(id.as_ref(), method, p.as_ref());
                    let written = p.as_ref().map(|p| serde_json::to_vec(p).unwrap());
                    assert_eq!(
                        call.to_vec_with_params(written.as_deref().unwrap_or_default()),
                        call.to_bytes(),
                        "{id:?} {p:?} {method}"
                    );
                }
            }
        }
    }

    #[test]
    fn ids_keep_their_type_and_null_is_not_absent() {
        let r: Request = serde_json::from_str(r#"{"id":null,"method":"m"}"#).unwrap();
        assert_eq!(r.id, Some(Id::Null));
        assert!(!r.is_notification());
        let n: Request = serde_json::from_str(r#"{"method":"m","params":[1]}"#).unwrap();
        assert!(n.is_notification());
        let s: Request = serde_json::from_str(r#"{"id":"a-1","method":"m"}"#).unwrap();
        assert_eq!(s.id, Some(Id::String("a-1".into())));
        let big: Request =
            serde_json::from_str(r#"{"id":18446744073709551615,"method":"m"}"#).expect("u64 ids");
        assert_eq!(
            serde_json::to_string(&big).unwrap(),
            r#"{"jsonrpc":"2.0","id":18446744073709551615,"method":"m"}"#
        );
        // Objects and arrays are not ids.
        assert!(serde_json::from_str::<Request>(r#"{"id":{},"method":"m"}"#).is_err());
    }

    #[test]
    fn a_batch_element_that_is_not_a_call_gets_its_own_error() {
        let e = Request::from_value(json!({"id": 4, "method": 7})).unwrap_err();
        assert_eq!(e.id, Id::Number(4.into()));
        assert_eq!(e.error_object().unwrap().code, -32600);
        let e = Request::from_value(json!(5)).unwrap_err();
        assert_eq!(e.id, Id::Null);
    }

    #[test]
    fn responses_round_trip_with_null_results() {
        let r: Response = serde_json::from_str(r#"{"jsonrpc":"2.0","id":1,"result":null}"#)
            .expect("a null result is a result");
        assert_eq!(r.payload, Payload::Result(Value::Null));
        assert_eq!(
            serde_json::to_value(&r).unwrap(),
            json!({"jsonrpc": "2.0", "id": 1, "result": null})
        );
        let e: Response =
            serde_json::from_str(r#"{"id":"x","error":{"code":-32000,"message":"nope"}}"#).unwrap();
        assert_eq!(e.error_object().unwrap().message, "nope");
        assert!(serde_json::from_str::<Response>(r#"{"id":1}"#).is_err());
    }
}

//! The one way a JSON-RPC body enters the gateway, over HTTP or as a WebSocket message:
//! parsed once, priced, held to the batch cap, charged to the caller's limit, then served.
//!
//! Most bodies are one plain call and are read through the borrowed `CallView` (no
//! `Value` tree); anything else is parsed once into a tree that the cost, the batch cap
//! and the general path all read.

use super::call::{id_of, CallView, ReadCall};
use super::compute_units::{ComputeUnits, Cost};
use super::{Caller, Gateway, RpcReply};
use crate::errors::ApiError;
use crate::jsonrpc::methods::{classify_on, known, MethodClass, MethodsConf};
use crate::jsonrpc::{strict, Id, Outgoing, Request};
use crate::pools::Pool;
use serde::Deserialize;
use serde_json::Value;

/// What a JSON-RPC body asked for, in a word (`Incoming::label`).
pub type MethodLabel = std::borrow::Cow<'static, str>;

/// A JSON-RPC body as it came in, parsed once.
pub struct Incoming<'a> {
    raw: &'a [u8],
    form: Form<'a>,
}

enum Form<'a> {
    /// One call the borrowed view can read (the common case).
    View(CallView<'a>),
    /// A batch, or a call the view cannot read (escapes, other members).
    Tree(Value),
    /// Not JSON: refused, but still counted.
    NotJson(String),
}

impl<'a> Incoming<'a> {
    pub fn parse(raw: &'a [u8]) -> Self {
        let form = match CallView::of(raw) {
            Some(view) => Form::View(view),
            None => match serde_json::from_slice::<Value>(raw) {
                Ok(tree) => Form::Tree(tree),
                Err(e) => Form::NotJson(e.to_string()),
            },
        };
        Incoming { raw, form }
    }

    /// The refusal of a single call a node would read differently than the edge
    /// (`strict`; a batch's elements are checked one by one as they are read).
    pub fn refusal(&self) -> Option<ApiError> {
        let why = match &self.form {
            Form::View(v) => strict::check_params(v.params.as_ref()?).err(),
            Form::Tree(call @ Value::Object(_)) => strict::check_call(call).err(),
            _ => None,
        }?;
        Some(ApiError::invalid_params(why).with_field("jsonrpc_code", -32600))
    }

    /// The method of a single call; `None` for a batch or what is not a call.
    pub fn method(&self) -> Option<&str> {
        match &self.form {
            Form::View(v) => Some(v.method),
            Form::Tree(t) => t.get("method").and_then(Value::as_str),
            Form::NotJson(_) => None,
        }
    }

    /// What the body asks for, in a word for a key's request log and breakdown: the
    /// single call's method when the pool's method table (`methods`) knows it, else
    /// `unknown`; `batch`; `invalid` for what is not a call. Never a
    /// name of the caller's choosing: what is stored is bounded by the table.
    /// The table's own name is borrowed, not copied; only a method an operator's
    /// `allow` adds is.
    pub fn label(&self, methods: Option<&MethodsConf>) -> MethodLabel {
        match (&self.form, self.method(), methods) {
            (Form::Tree(Value::Array(_)), _, _) => "batch".into(),
            (_, Some(m), Some(table)) if classify_on(table, m) != MethodClass::Unknown => {
                known(m).map_or_else(|| m.to_string().into(), |(name, _)| name.into())
            }
            (_, Some(_), _) => "unknown".into(),
            (_, None, _) => "invalid".into(),
        }
    }

    /// The params of a single call.
    pub fn params(&self) -> Option<&Value> {
        match &self.form {
            Form::View(v) => v.params.as_ref(),
            Form::Tree(t) => t.get("params").filter(|p| !p.is_null()),
            Form::NotJson(_) => None,
        }
    }

    /// The id a refusal answers with: the single call's, null for a batch.
    pub fn id(&self) -> Id {
        id_of(self.raw)
    }

    /// The calls of the body and what they cost together. Elements that are not calls
    /// count at the default cost (the gateway answers each with an error), and a body
    /// that is not JSON counts as many calls as it seems to hold: the limiter counts
    /// what the caller tried.
    pub fn cost(&self, prices: &ComputeUnits) -> Cost {
        let one = |call: &Value| {
            call.get("method")
                .and_then(Value::as_str)
                .map_or(prices.default_cost(), |m| prices.method(m)) as u64
        };
        match &self.form {
            Form::View(v) => Cost {
                calls: 1,
                compute_units: prices.method(v.method) as u64,
            },
            Form::Tree(Value::Array(calls)) => Cost {
                calls: calls.len().clamp(1, u32::MAX as usize) as u32,
                compute_units: calls.iter().map(one).sum(),
            },
            Form::Tree(call) => Cost {
                calls: 1,
                compute_units: one(call),
            },
            Form::NotJson(_) => {
                let calls = crate::jsonrpc::quantity::batch_len(self.raw);
                Cost {
                    calls,
                    compute_units: calls as u64 * prices.default_cost() as u64,
                }
            }
        }
    }
}

/// What became of a body: what it cost (counted in usage whether or not it was
/// served) and the answer.
pub struct Entered {
    pub cost: Cost,
    pub reply: Result<RpcReply, ApiError>,
}

impl Gateway {
    /// A body from `caller`: priced, the batch cap (a batch that can never be served
    /// costs nothing), then `limit` (the way in's limit stage, given the cost), then
    /// served.
    pub async fn enter(
        &self,
        pool: &Pool,
        body: Incoming<'_>,
        caller: &Caller<'_>,
        request_id: &str,
        prices: &ComputeUnits,
        limit: impl FnOnce(Cost) -> Result<(), ApiError>,
    ) -> Entered {
        let cost = body.cost(prices);
        let admitted = super::check_batch_size(cost.calls as usize, self.conf.max_batch)
            .and_then(|()| limit(cost));
        let reply = match admitted {
            Ok(()) => self.serve(pool, body, request_id, caller).await,
            Err(e) => Err(e),
        };
        Entered { cost, reply }
    }

    /// An admitted body: a plain single read takes the fast path; batches, writes,
    /// filters and calls the view cannot read take the general one. What goes to a node
    /// is written from the edge's parse (`Outgoing`), never the caller's bytes.
    async fn serve(
        &self,
        pool: &Pool,
        body: Incoming<'_>,
        rid: &str,
        caller: &Caller<'_>,
    ) -> Result<RpcReply, ApiError> {
        // A method the table does not serve is refused as such (and never reaches a
        // node), whatever else the call holds; any other is refused first when a node
        // would read it otherwise.
        let class = body.method().map(|m| classify_on(&pool.methods, m));
        if class != Some(MethodClass::Unknown) {
            if let Some(refused) = body.refusal() {
                return Err(refused);
            }
        }
        let call = match body.form {
            Form::View(view) => {
                let class = class.unwrap_or(MethodClass::Unknown);
                if class.is_plain_read() {
                    if let Some(refused) = caller.refusal(class, view.method, view.params.as_ref())
                    {
                        return Err(refused);
                    }
                    let id = view.id()?;
                    let sent = Outgoing::new(id.as_ref(), view.method, view.params.as_ref());
                    let call = ReadCall {
                        method: view.method,
                        class,
                        params: view.params.as_ref(),
                    };
                    return self.single_read(pool, call, &sent, rid, caller).await;
                }
                view.into_request()?
            }
            Form::NotJson(e) => {
                return Err(ApiError::invalid_params(format!("body is not JSON: {e}"))
                    .with_field("jsonrpc_code", -32700))
            }
            // The general path is boxed: its futures (a batch's, a write's broadcast)
            // would otherwise size the fast path's, and with it every connection's task.
            Form::Tree(Value::Array(calls)) => {
                return Box::pin(self.batch(pool, calls, rid, caller)).await
            }
            Form::Tree(call @ Value::Object(_)) => Request::deserialize(call).map_err(|_| {
                ApiError::invalid_params("each JSON-RPC call needs a string 'method'")
            })?,
            Form::Tree(_) => {
                return Err(ApiError::invalid_params(
                    "a JSON-RPC request is an object or a non-empty array",
                ))
            }
        };
        Box::pin(self.single(pool, &call, rid, caller)).await
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::config::usage::ComputeUnitsConf;

    fn prices() -> ComputeUnits {
        let mut conf = ComputeUnitsConf::default();
        conf.methods.insert("eth_call".into(), 30);
        ComputeUnits::new(&conf)
    }

    fn cost(body: &[u8]) -> Cost {
        Incoming::parse(body).cost(&prices())
    }

    #[test]
    fn single_calls_batches_and_bad_bodies_are_priced() {
        let one = br#"{"jsonrpc":"2.0","id":1,"method":"eth_getLogs","params":[{"x":[1,{"method":"eth_call"}]}]}"#;
        assert_eq!(
            cost(one),
            Cost {
                calls: 1,
                compute_units: 75
            }
        );
        let batch = br#" [{"method":"eth_blockNumber","id":1},{"id":2,"method":"eth_call"},{"method":"x_unknown"},{"id":3}]"#;
        assert_eq!(
            cost(batch),
            Cost {
                calls: 4,
                compute_units: 10 + 30 + 20 + 20
            }
        );
        // Escaped method names are read as the node would read them.
        assert_eq!(cost(br#"{"method":"eth_ge\u0074Logs"}"#).compute_units, 75);
        assert_eq!(cost(b"not json").calls, 1);
        // Elements that are not calls count as calls at the default cost.
        assert_eq!(
            cost(br#"[1, {"method": 7}, {"method":"eth_call"}]"#),
            Cost {
                calls: 3,
                compute_units: 20 + 20 + 30
            }
        );
        assert_eq!(cost(b"[]").calls, 1);
    }

    #[test]
    fn a_body_is_read_once_and_keeps_what_a_refusal_needs() {
        let view = Incoming::parse(br#"{"id":7,"method":"eth_chainId","params":[]}"#);
        assert!(matches!(view.form, Form::View(_)));
        assert_eq!(view.method(), Some("eth_chainId"));
        assert_eq!(view.id(), Id::Number(7.into()));
        let escaped = Incoming::parse(br#"{"id":"a","method":"eth_chain\u0049d"}"#);
        assert!(matches!(escaped.form, Form::Tree(_)));
        assert_eq!(escaped.method(), Some("eth_chainId"));
        assert_eq!(escaped.id(), Id::String("a".into()));
        let batch = Incoming::parse(br#"[{"id":1,"method":"eth_chainId"}]"#);
        assert_eq!(batch.method(), None);
        assert_eq!(batch.id(), Id::Null);
        assert!(matches!(Incoming::parse(b"{").form, Form::NotJson(_)));
    }

    #[test]
    fn a_call_a_go_node_would_read_otherwise_is_refused() {
        let table = MethodsConf::default();
        for body in [
            &br#"{"id":1,"method":"eth_blockNumber","METHOD":"debug_setHead"}"#[..],
            br#"{"id":1,"method":"eth_call","params":[{"to":"0xa","TO":"0xb"}]}"#,
        ] {
            let call = Incoming::parse(body);
            let refused = call.refusal().expect("refused");
            assert_eq!((refused.status, refused.jsonrpc_code()), (400, -32600));
        }
        let plain = Incoming::parse(br#"{"id":1,"method":"eth_call","params":[{"to":"0xa"}]}"#);
        assert!(plain.refusal().is_none());
        assert_eq!(plain.label(Some(&table)), "eth_call");
        // Names outside the method table are never stored as given.
        let made_up = Incoming::parse(br#"{"id":1,"method":"spam_aaaaaaaaaaaaaaaaaaaa"}"#);
        assert_eq!(made_up.label(Some(&table)), "unknown");
        assert_eq!(made_up.label(None), "unknown");
        // A batch's elements are checked one by one (`Request::from_value`).
        let batch = Incoming::parse(br#"[{"id":1,"method":"eth_chainId","Method":"x"}]"#);
        assert!(batch.refusal().is_none());
        assert!(Request::from_value(
            serde_json::json!({"id":1,"method":"eth_chainId","Method":"x"})
        )
        .is_err());
    }
}

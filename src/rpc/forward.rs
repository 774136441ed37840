//! Builder and private-transaction endpoints: calls whose every method is on the
//! endpoint's own list, forwarded to its hosts in order.

use super::call::method_of;
use super::{Gateway, RpcReply};
use crate::errors::ApiError;
use crate::jsonrpc::Request;
use crate::pools::Host;
use bytes::Bytes;
use serde_json::Value;
use std::sync::Arc;

/// Methods a block builder accepts (Flashbots-style bundle API).
pub const BUILDER_METHODS: &[&str] = &[
    "eth_sendBundle",
    "eth_callBundle",
    "eth_cancelBundle",
    "mev_sendBundle",
    "mev_simBundle",
    "eth_sendRawTransaction",
];
/// Methods a private transaction relay accepts.
pub const PRIVATE_TX_METHODS: &[&str] = &[
    "eth_sendRawTransaction",
    "eth_sendPrivateTransaction",
    "eth_sendPrivateRawTransaction",
    "eth_cancelPrivateTransaction",
];

impl Gateway {
    /// Whether `body` is a call (or a bounded batch) whose every method is in `allow`:
    /// checked before any pool is looked at, so a bad call is a 400 or 403 whether or
    /// not the endpoint's pool is configured. Its answer is the body a node gets: the
    /// calls written again from this parse (`Outgoing`), so the node reads what was
    /// checked (`jsonrpc::strict`).
    pub fn check_forwarded(
        &self,
        body: &[u8],
        allow: &[&str],
        restrictions: Option<&crate::key_restrictions::Restrictions>,
    ) -> Result<Bytes, ApiError> {
        let parsed: Value = serde_json::from_slice(body)
            .map_err(|e| ApiError::invalid_params(format!("body is not JSON: {e}")))?;
        let (calls, batch) = match parsed {
            Value::Array(a) if !a.is_empty() && a.len() <= self.conf.max_batch => (a, true),
            call @ Value::Object(_) => (vec![call], false),
            _ => {
                return Err(ApiError::invalid_params(
                    "a JSON-RPC call or a bounded batch",
                ))
            }
        };
        let mut checked = Vec::with_capacity(calls.len());
        for call in calls {
            let method = method_of(&call)?;
            if !allow.contains(&method) {
                return Err(ApiError::new(
                    403,
                    "method_unknown",
                    format!("{method} is not served on this endpoint"),
                ));
            }
            let call = Request::from_value(call).map_err(|refused| {
                let why = refused.error_object().map_or("", |e| e.message.as_str());
                ApiError::invalid_params(why.to_string()).with_field("jsonrpc_code", -32600)
            })?;
            let method = call.method.as_str();
            if let Some(r) = restrictions {
                r.call(method, call.params.as_ref())?;
            }
            checked.push(call);
        }
        let sent = if batch {
            serde_json::to_vec(&checked)
        } else {
            serde_json::to_vec(&checked[0])
        };
        Ok(Bytes::from(sent.unwrap_or_default()))
    }

    /// Forward a call (or batch) whose every method is in `allow` to the hosts in order
    /// until one answers; for builder and private-transaction endpoints, whose methods
    /// are not part of the general method table.
    pub async fn forward(
        &self,
        hosts: Vec<Arc<Host>>,
        body: &[u8],
        allow: &[&str],
        rid: &str,
    ) -> Result<RpcReply, ApiError> {
        let sent = self.check_forwarded(body, allow, None)?;
        if hosts.is_empty() {
            return Err(ApiError::new(
                503,
                "no_upstream",
                "no healthy host for this endpoint",
            ));
        }
        let hosts: Vec<&Arc<Host>> = hosts.iter().collect();
        self.try_hosts(
            &hosts,
            &sent,
            rid,
            super::attempts::NodeState::Answer,
            // Bundles and private transactions have effects: one host at a time.
            self.conf
                .budget(crate::jsonrpc::methods::MethodClass::Write),
        )
        .await
    }
}

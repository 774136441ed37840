//! What a client's `eth_subscribe` asks for, as the node will get it.

use crate::errors::ApiError;
use serde_json::{json, Value};

/// An `eth_subscribe` call's params as the node gets them: the kind and only what that
/// kind takes (a `logs` filter's `address` and `topics`; `newPendingTransactions`'
/// full-transactions flag), rebuilt from the edge's parse, so what the edge checked
/// (restrictions, the share's key) is all a node reads. Anything else is refused.
pub fn subscription_params(params: &Value) -> Result<Value, ApiError> {
    let refuse = |why: &str| Err(ApiError::invalid_params(why.to_string()));
    let Some(items) = params.as_array() else {
        return refuse("eth_subscribe params are an array: [kind, options?]");
    };
    let kind = items.first().cloned().unwrap_or(Value::Null);
    match (kind.as_str(), items.get(1), items.len()) {
        (Some(_), _, 0) | (None, _, _) => refuse("eth_subscribe needs a kind"),
        (Some(_), None, _) => Ok(json!([kind])),
        (_, _, 3..) => refuse("eth_subscribe takes a kind and at most one options value"),
        (Some("logs"), Some(Value::Object(filter)), _) => {
            if let Some(other) = filter
                .keys()
                .find(|k| !matches!(k.as_str(), "address" | "topics"))
            {
                return refuse(&format!(
                    "a logs subscription's filter takes 'address' and 'topics' only, not '{other}'"
                ));
            }
            Ok(json!([kind, filter]))
        }
        (Some("newPendingTransactions"), Some(full @ Value::Bool(_)), _) => Ok(json!([kind, full])),
        (Some(kind), Some(_), _) => refuse(&format!("eth_subscribe {kind} takes no such options")),
    }
}

#[cfg(test)]
mod tests {
    use super::subscription_params;
    use serde_json::json;

    #[test]
    fn a_subscription_reaches_the_node_as_the_edge_read_it() {
        let a = "0x00000000000000000000000000000000000000aa";
        assert_eq!(
            subscription_params(&json!(["logs", {"address": a, "topics": [null]}])).unwrap(),
            json!(["logs", {"address": a, "topics": [null]}])
        );
        assert_eq!(
            subscription_params(&json!(["newHeads"])).unwrap(),
            json!(["newHeads"])
        );
        assert_eq!(
            subscription_params(&json!(["newPendingTransactions", true])).unwrap(),
            json!(["newPendingTransactions", true])
        );
        for refused in [
            json!(["logs", {"address": a, "fromBlock": "0x0"}]),
            json!(["logs", {"address": a, "ADDRESS": a}]),
            json!(["newHeads", {"x": 1}]),
            json!(["logs", {}, 1]),
            json!([]),
            json!([7]),
            json!({"kind": "logs"}),
        ] {
            assert!(subscription_params(&refused).is_err(), "{refused}");
        }
    }
}

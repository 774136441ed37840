//! A block's logs as a filter selects them: an `eth_getLogs` answer for one block
//! (`blockHash`) is exactly the logs of the block's checked receipts the filter matches,
//! in order: none forged, none missing.

use super::Verdict;
use alloy_primitives::{Bloom, BloomInput};
use serde_json::Value;

/// An `eth_getLogs` filter's selection: addresses (any of, lowercase; empty: any) and
/// topics by position (each any of; empty: any).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct LogFilter {
    addresses: Vec<String>,
    topics: Vec<Vec<String>>,
}

impl LogFilter {
    /// The selection of a one-block filter object (`blockHash`), when the edge reads
    /// every member of it.
    pub fn of(filter: &Value) -> Option<LogFilter> {
        Self::reading(filter, &["blockHash", "address", "topics"])
    }

    /// The selection of a range filter object (`fromBlock`, `toBlock`), when the edge
    /// reads every member of it.
    pub fn of_range(filter: &Value) -> Option<LogFilter> {
        Self::reading(filter, &["fromBlock", "toBlock", "address", "topics"])
    }

    fn reading(filter: &Value, known: &[&str]) -> Option<LogFilter> {
        let members = filter.as_object()?;
        if members.keys().any(|k| !known.contains(&k.as_str())) {
            return None;
        }
        let addresses = any_of(members.get("address"))?;
        let topics = match members.get("topics") {
            None | Some(Value::Null) => Vec::new(),
            Some(Value::Array(ts)) => ts.iter().map(|t| any_of(Some(t))).collect::<Option<_>>()?,
            Some(_) => return None,
        };
        Some(LogFilter { addresses, topics })
    }

    /// Whether a block whose logs bloom is `bloom` may hold a log this filter selects:
    /// one of the addresses, and one of the topics at each position, are in the bloom.
    /// `false` is a proof that it holds none.
    pub fn may_match(&self, bloom: &Bloom) -> bool {
        let any_in = |wanted: &[String]| {
            wanted.is_empty()
                || wanted
                    .iter()
                    .any(|w| match hex::decode(w.trim_start_matches("0x")) {
                        Ok(raw) => bloom.contains_input(BloomInput::Raw(&raw)),
                        // Not hex: no node matches it either; the receipts will tell.
                        Err(_) => true,
                    })
        };
        any_in(&self.addresses) && self.topics.iter().all(|t| any_in(t))
    }

    fn matches(&self, log: &Value) -> bool {
        let lower = |v: Option<&Value>| v.and_then(Value::as_str).map(str::to_ascii_lowercase);
        if !self.addresses.is_empty()
            && !lower(log.get("address")).is_some_and(|a| self.addresses.contains(&a))
        {
            return false;
        }
        let topics = log.get("topics").and_then(Value::as_array);
        self.topics.iter().enumerate().all(|(i, wanted)| {
            wanted.is_empty()
                || lower(topics.and_then(|t| t.get(i))).is_some_and(|t| wanted.contains(&t))
        })
    }
}

/// `null` or absent: any; a string: it; an array of strings: any of them.
fn any_of(v: Option<&Value>) -> Option<Vec<String>> {
    match v {
        None | Some(Value::Null) => Some(Vec::new()),
        Some(Value::String(s)) => Some(vec![s.to_ascii_lowercase()]),
        Some(Value::Array(items)) => items
            .iter()
            .map(|i| i.as_str().map(str::to_ascii_lowercase))
            .collect(),
        Some(_) => None,
    }
}

/// Check a one-block `eth_getLogs` answer against that block's checked receipts.
pub fn check(logs: &Value, receipts: &Value, filter: &LogFilter) -> Verdict<()> {
    let Some(answered) = logs.as_array() else {
        return Verdict::Disproved("the logs are not a list".into());
    };
    let answered: Vec<&Value> = answered.iter().collect();
    check_block(&answered, receipts, filter)
}

/// One block's logs of an answer (in the answer's order) against that block's checked
/// receipts: exactly the logs the filter selects, in order.
pub fn check_block(answered: &[&Value], receipts: &Value, filter: &LogFilter) -> Verdict<()> {
    let expected: Vec<&Value> = receipts
        .as_array()
        .into_iter()
        .flatten()
        .filter_map(|r| r.get("logs").and_then(Value::as_array))
        .flatten()
        .filter(|l| filter.matches(l))
        .collect();
    if answered.len() != expected.len() {
        return Verdict::Disproved(format!(
            "{} logs where the block's receipts have {} matching",
            answered.len(),
            expected.len()
        ));
    }
    match answered.iter().zip(&expected).position(|(a, e)| a != e) {
        Some(i) => Verdict::Disproved(format!("log {i} is not the block's")),
        None => Verdict::Proven(()),
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    fn receipts() -> Value {
        serde_json::from_str(include_str!("testdata/anvil_receipts.json")).unwrap()
    }

    #[test]
    fn a_blocks_logs_are_exactly_what_the_filter_selects() {
        let r = receipts();
        let all_logs: Vec<Value> = r[3]["logs"].as_array().unwrap().clone();
        let log = all_logs[0].clone();
        let any = LogFilter::of(&json!({"blockHash": "0x01"})).unwrap();
        assert!(matches!(
            check(&json!(all_logs), &r, &any),
            Verdict::Proven(())
        ));
        // By address (any case) and by topic.
        let addr = log["address"]
            .as_str()
            .unwrap()
            .to_ascii_uppercase()
            .replace("0X", "0x");
        let by_address = LogFilter::of(&json!({"blockHash": "0x01", "address": [addr]})).unwrap();
        assert!(matches!(
            check(&json!([log]), &r, &by_address),
            Verdict::Proven(())
        ));
        let by_topic =
            LogFilter::of(&json!({"blockHash": "0x01", "topics": [log["topics"][0]]})).unwrap();
        assert!(matches!(
            check(&json!([log]), &r, &by_topic),
            Verdict::Proven(())
        ));
        // Nothing matches another topic: an empty answer is the right one.
        let other = LogFilter::of(&json!({"topics": [format!("0x{}", "00".repeat(32))]})).unwrap();
        assert!(matches!(check(&json!([]), &r, &other), Verdict::Proven(())));
        // Logs withheld, forged or reordered are disproved.
        assert!(matches!(check(&json!([]), &r, &any), Verdict::Disproved(_)));
        let mut forged = log.clone();
        forged["data"] = json!("0x01");
        assert!(matches!(
            check(&json!([forged]), &r, &any),
            Verdict::Disproved(_)
        ));
        // A filter member the edge does not read: not checked.
        assert_eq!(
            LogFilter::of(&json!({"blockHash": "0x01", "fromBlock": "0x1"})),
            None
        );
    }
}

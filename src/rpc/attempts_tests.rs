//! The attempt policy on paused time: retries, node-state errors, hedging and the
//! deadline, against fake hosts whose answers and delays are set per host.

use super::attempts::{Attempts, NodeState};
use super::{Budget, HedgeDelay};
use crate::pools::Host;
use bytes::Bytes;
use std::collections::HashMap;
use std::sync::{Arc, Mutex};
use std::time::Duration;
use tokio::time::Instant;

const MS: Duration = Duration::from_millis(1);
const RESULT: &str = r#"{"jsonrpc":"2.0","id":1,"result":"0x1"}"#;
const EMPTY: &str = r#"{"jsonrpc":"2.0","id":1,"result" : null}"#;
const LAGGING: &str =
    r#"{"jsonrpc":"2.0","id":1,"error":{"code":-32000,"message":"header not found"}}"#;

/// What a fake host does with a call: answer after a delay, or fail.
#[derive(Clone, Copy)]
enum Does {
    Answer(&'static str, u64),
    Fail(u64),
    Silent,
}

/// Fake hosts, and which of them were called, in order.
struct Fleet {
    hosts: Vec<Arc<Host>>,
    does: HashMap<String, Does>,
    called: Mutex<Vec<String>>,
}

impl Fleet {
    fn new(hosts: &[(&str, Does)]) -> Self {
        Fleet {
            hosts: hosts
                .iter()
                .map(|(id, _)| Arc::new(Host::for_test("test", id)))
                .collect(),
            does: hosts.iter().map(|(id, d)| (id.to_string(), *d)).collect(),
            called: Mutex::new(Vec::new()),
        }
    }

    /// One attempt as the transport makes it: within its share, else a timeout.
    async fn attempt(&self, host: &Host, share: Duration) -> Result<Bytes, String> {
        self.called.lock().unwrap().push(host.id.clone());
        let (after, outcome) = match self.does[&host.id] {
            Does::Answer(body, ms) => (MS * ms as u32, Ok(Bytes::from_static(body.as_bytes()))),
            Does::Fail(ms) => (MS * ms as u32, Err("connection refused".to_string())),
            Does::Silent => (Duration::from_secs(3600), Err(String::new())),
        };
        if after > share {
            tokio::time::sleep(share).await;
            return Err("timeout".to_string());
        }
        tokio::time::sleep(after).await;
        outcome
    }

    /// The policy run over the fleet: the answer's host or the error's code, and the
    /// paused clock's time taken.
    async fn run(&self, policy: Attempts) -> (Result<String, String>, Duration) {
        let began = Instant::now();
        let hosts: Vec<&Arc<Host>> = self.hosts.iter().collect();
        let out = policy
            .run(&hosts, |host, share| async move {
                let body = self.attempt(host, share).await?;
                Ok((body, crate::verify::Verified::None))
            })
            .await;
        let out = out
            .map(|r| format!("{} {}", r.upstream.unwrap_or_default(), r.body.len()))
            .map_err(|e| e.code.to_string());
        (out, began.elapsed())
    }

    fn called(&self) -> Vec<String> {
        self.called.lock().unwrap().clone()
    }
}

fn policy(total_ms: u64, attempt_ms: u64, hedge_ms: Option<u64>) -> Attempts {
    Attempts {
        max: 3,
        budget: Budget {
            total: MS * total_ms as u32,
            attempt: MS * attempt_ms as u32,
            hedge: hedge_ms.map(|ms| HedgeDelay {
                quantile: 0.9,
                min: MS * ms as u32,
                max: MS * ms as u32,
            }),
        },
        on_node_state: NodeState::NextHostElseAnswer,
        ask_past_empty: 0,
    }
}

#[tokio::test(start_paused = true)]
async fn a_failure_goes_on_to_the_next_host_at_once() {
    let fleet = Fleet::new(&[("a", Does::Fail(5)), ("b", Does::Answer(RESULT, 20))]);
    let (out, took) = fleet.run(policy(1000, 500, None)).await;
    assert_eq!(out, Ok(format!("b {}", RESULT.len())));
    assert_eq!(took, MS * 25);
    assert_eq!(fleet.called(), ["a", "b"]);
}

#[tokio::test(start_paused = true)]
async fn a_lagging_host_is_passed_over_and_its_answer_kept_as_the_last_resort() {
    let fleet = Fleet::new(&[
        ("a", Does::Answer(LAGGING, 5)),
        ("b", Does::Answer(RESULT, 5)),
    ]);
    let (out, _) = fleet.run(policy(1000, 500, None)).await;
    assert_eq!(out, Ok(format!("b {}", RESULT.len())));

    // Every host lagging: the node's own error is the answer.
    let fleet = Fleet::new(&[
        ("a", Does::Answer(LAGGING, 5)),
        ("b", Does::Answer(LAGGING, 5)),
    ]);
    let (out, _) = fleet.run(policy(1000, 500, None)).await;
    assert_eq!(out, Ok(format!("b {}", LAGGING.len())));

    // A call whose every error is the caller's: the first answer stands.
    let mut answer = policy(1000, 500, None);
    answer.on_node_state = NodeState::Answer;
    let (out, _) = fleet.run(answer).await;
    assert_eq!(out, Ok(format!("a {}", LAGGING.len())));
}

#[tokio::test(start_paused = true)]
async fn a_silent_host_is_hedged_after_the_delay_not_after_its_timeout() {
    let fleet = Fleet::new(&[
        ("a", Does::Answer(RESULT, 900)),
        ("b", Does::Answer(RESULT, 10)),
    ]);
    let (out, took) = fleet.run(policy(2000, 1000, Some(50))).await;
    assert_eq!(out, Ok(format!("b {}", RESULT.len())));
    assert_eq!(took, MS * 60, "hedged at 50 ms, answered 10 ms later");
    assert_eq!(fleet.called(), ["a", "b"]);

    // Without a hedge the slow host is waited for.
    let fleet = Fleet::new(&[
        ("a", Does::Answer(RESULT, 900)),
        ("b", Does::Answer(RESULT, 10)),
    ]);
    let (out, took) = fleet.run(policy(2000, 1000, None)).await;
    assert_eq!(out, Ok(format!("a {}", RESULT.len())));
    assert_eq!(took, MS * 900);
    assert_eq!(fleet.called(), ["a"]);

    // The first host answering after the hedge began still wins if it is first.
    let fleet = Fleet::new(&[
        ("a", Does::Answer(RESULT, 70)),
        ("b", Does::Answer(RESULT, 500)),
    ]);
    let (out, took) = fleet.run(policy(2000, 1000, Some(50))).await;
    assert_eq!(out, Ok(format!("a {}", RESULT.len())));
    assert_eq!(took, MS * 70);
}

#[tokio::test(start_paused = true)]
async fn silent_hosts_in_a_row_are_each_hedged() {
    // A node and the front before it, frozen together: each costs one hedge delay.
    let fleet = Fleet::new(&[
        ("a", Does::Silent),
        ("a-front", Does::Silent),
        ("b", Does::Answer(RESULT, 10)),
    ]);
    let (out, took) = fleet.run(policy(5000, 4000, Some(50))).await;
    assert_eq!(out, Ok(format!("b {}", RESULT.len())));
    assert_eq!(
        took,
        MS * 110,
        "hedged at 50 ms and 100 ms, answered 10 ms later"
    );
    assert_eq!(fleet.called(), ["a", "a-front", "b"]);

    // Within the retry budget: a fourth host is never asked.
    let fleet = Fleet::new(&[
        ("a", Does::Silent),
        ("b", Does::Silent),
        ("c", Does::Silent),
        ("d", Does::Answer(RESULT, 10)),
    ]);
    let (out, took) = fleet.run(policy(1000, 400, Some(50))).await;
    assert_eq!(out, Err("upstream_unavailable".to_string()));
    assert_eq!(took, MS * 500, "the last hedge's attempt ran its share");
    assert_eq!(fleet.called(), ["a", "b", "c"]);
}

#[tokio::test(start_paused = true)]
async fn the_deadline_bounds_every_attempt_together() {
    // Each silent host costs one attempt's share; the last gets what is left of the
    // call's budget, and no attempt begins past it.
    let fleet = Fleet::new(&[
        ("a", Does::Silent),
        ("b", Does::Silent),
        ("c", Does::Silent),
    ]);
    let (out, took) = fleet.run(policy(300, 200, None)).await;
    assert_eq!(out, Err("upstream_unavailable".to_string()));
    assert_eq!(took, MS * 300);
    assert_eq!(fleet.called(), ["a", "b"]);
}

#[tokio::test(start_paused = true)]
async fn no_more_hosts_are_tried_than_the_retry_budget_allows() {
    let fleet = Fleet::new(&[
        ("a", Does::Fail(1)),
        ("b", Does::Fail(1)),
        ("c", Does::Fail(1)),
    ]);
    let mut two = policy(1000, 500, None);
    two.max = 2;
    let (out, took) = fleet.run(two).await;
    assert_eq!(out, Err("upstream_unavailable".to_string()));
    assert_eq!(took, MS * 2);
    assert_eq!(fleet.called(), ["a", "b"]);
}

#[tokio::test(start_paused = true)]
async fn a_null_is_asked_past_once_and_served_when_no_host_has_better() {
    let mut asking = policy(1000, 500, None);
    asking.ask_past_empty = 1;
    // Another host has it: its answer.
    let fleet = Fleet::new(&[
        ("a", Does::Answer(EMPTY, 5)),
        ("b", Does::Answer(RESULT, 5)),
    ]);
    assert_eq!(fleet.run(asking).await.0, Ok(format!("b {}", RESULT.len())));
    // Nobody has better (b fails, c lags): the first null.
    let fleet = Fleet::new(&[
        ("a", Does::Answer(EMPTY, 5)),
        ("b", Does::Fail(5)),
        ("c", Does::Answer(LAGGING, 5)),
    ]);
    assert_eq!(fleet.run(asking).await.0, Ok(format!("a {}", EMPTY.len())));
    // One more host only: the second null is served, the third host not asked.
    let fleet = Fleet::new(&[
        ("a", Does::Answer(EMPTY, 5)),
        ("b", Does::Answer(EMPTY, 5)),
        ("c", Does::Answer(RESULT, 5)),
    ]);
    assert_eq!(fleet.run(asking).await.0, Ok(format!("b {}", EMPTY.len())));
    assert_eq!(fleet.called(), ["a", "b"]);
    // Off (the unchecked reads' policy): the first answer stands.
    let fleet = Fleet::new(&[
        ("a", Does::Answer(EMPTY, 5)),
        ("b", Does::Answer(RESULT, 5)),
    ]);
    assert_eq!(
        fleet.run(policy(1000, 500, None)).await.0,
        Ok(format!("a {}", EMPTY.len()))
    );
}

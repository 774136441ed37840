//! In-flight coalescing: identical reads at the same moment share one upstream call.
//!
//! The first caller of a (pool, method, params) leads: it makes the call and publishes
//! the outcome; callers that come while it is in flight wait for that outcome instead of
//! calling a node themselves (a thundering herd of wallets asking for the same balance
//! at a new block is one call). The answer carries the leader's id, so each follower's
//! copy is re-stamped with its own. A leader that goes away (its client hung up, its
//! task dropped) unregisters, and its followers make their own calls: nobody waits on
//! a call nobody is making.

use super::RpcReply;
use crate::errors::ApiError;
use crate::jsonrpc::{Id, Response};
use std::collections::HashMap;
use std::future::Future;
use std::sync::Mutex;
use tokio::sync::watch;

type Outcome = Result<RpcReply, ApiError>;

#[derive(Default)]
pub struct InFlight {
    calls: Mutex<HashMap<String, watch::Receiver<Option<Outcome>>>>,
}

impl InFlight {
    /// `call`'s outcome, or the outcome of the identical call already in flight (then
    /// re-stamped with `id`, the caller's own).
    pub async fn run(
        &self,
        key: String,
        id: impl FnOnce() -> Id,
        call: impl Future<Output = Outcome>,
    ) -> Outcome {
        let mut publish = None;
        let waiting = {
            let Ok(mut calls) = self.calls.lock() else {
                return call.await;
            };
            match calls.get(&key) {
                Some(rx) => Some(rx.clone()),
                None => {
                    let (tx, rx) = watch::channel(None);
                    calls.insert(key.clone(), rx);
                    publish = Some(tx);
                    None
                }
            }
        };
        if let Some(mut rx) = waiting {
            crate::observe::metrics::coalesced_read();
            if let Ok(shared) = rx.wait_for(Option::is_some).await {
                let outcome = shared.clone().expect("waited for an outcome");
                drop(shared);
                return outcome.map(|reply| restamp(reply, id()));
            }
            // The leader went away without an outcome.
            return call.await;
        }
        let _registered = Registered {
            calls: &self.calls,
            key,
        };
        let outcome = call.await;
        if let Some(tx) = publish {
            let _ = tx.send(Some(outcome.clone()));
        }
        outcome
    }

    #[cfg(test)]
    fn is_empty(&self) -> bool {
        self.calls.lock().map(|c| c.is_empty()).unwrap_or(false)
    }
}

/// Unregisters a leader's call when it ends, however it ends.
struct Registered<'a> {
    calls: &'a Mutex<HashMap<String, watch::Receiver<Option<Outcome>>>>,
    key: String,
}

impl Drop for Registered<'_> {
    fn drop(&mut self) {
        if let Ok(mut calls) = self.calls.lock() {
            calls.remove(&self.key);
        }
    }
}

/// The leader's answer with the follower's id.
fn restamp(reply: RpcReply, id: Id) -> RpcReply {
    match serde_json::from_slice::<Response>(&reply.body) {
        Ok(mut answer) if answer.id != id => {
            answer.id = id;
            RpcReply {
                body: answer.to_bytes(),
                ..reply
            }
        }
        _ => reply,
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use bytes::Bytes;
    use std::sync::atomic::{AtomicUsize, Ordering};
    use std::sync::Arc;
    use std::time::Duration;

    fn answer(id: u64) -> RpcReply {
        RpcReply {
            body: Bytes::from(format!(r#"{{"jsonrpc":"2.0","id":{id},"result":"0x1"}}"#)),
            upstream: Some("el-1".into()),
            block: Some(16),
            cache: None,
        }
    }

    #[tokio::test(start_paused = true)]
    async fn identical_calls_in_flight_share_one_and_keep_their_ids() {
        let inflight = Arc::new(InFlight::default());
        let made = Arc::new(AtomicUsize::new(0));
        let mut tasks = Vec::new();
        for n in 0..10u64 {
            let (inflight, made) = (inflight.clone(), made.clone());
            tasks.push(tokio::spawn(async move {
                let call = async {
                    made.fetch_add(1, Ordering::SeqCst);
                    tokio::time::sleep(Duration::from_millis(100)).await;
                    Ok(answer(n))
                };
                inflight
                    .run("k".into(), || Id::index(n as usize), call)
                    .await
            }));
        }
        for (n, t) in tasks.into_iter().enumerate() {
            let reply = t.await.unwrap().unwrap();
            let v: serde_json::Value = serde_json::from_slice(&reply.body).unwrap();
            assert_eq!(v["id"], n as u64);
            assert_eq!(v["result"], "0x1");
        }
        assert_eq!(made.load(Ordering::SeqCst), 1);
        assert!(inflight.is_empty());
        // Once done, the next call is a call of its own.
        inflight
            .run("k".into(), || Id::index(0), async {
                made.fetch_add(1, Ordering::SeqCst);
                Ok(answer(0))
            })
            .await
            .unwrap();
        assert_eq!(made.load(Ordering::SeqCst), 2);
    }

    #[tokio::test(start_paused = true)]
    async fn followers_of_a_leader_that_went_away_call_themselves() {
        let inflight = Arc::new(InFlight::default());
        let leader = {
            let inflight = inflight.clone();
            tokio::spawn(async move {
                inflight
                    .run("k".into(), || Id::index(1), async {
                        tokio::time::sleep(Duration::from_secs(60)).await;
                        Ok(answer(1))
                    })
                    .await
            })
        };
        tokio::time::sleep(Duration::from_millis(10)).await;
        let follower = {
            let inflight = inflight.clone();
            tokio::spawn(async move {
                inflight
                    .run("k".into(), || Id::index(2), async { Ok(answer(2)) })
                    .await
            })
        };
        tokio::time::sleep(Duration::from_millis(10)).await;
        leader.abort();
        let reply = follower.await.unwrap().unwrap();
        assert!(String::from_utf8_lossy(&reply.body).contains(r#""id":2"#));
        assert!(inflight.is_empty());
    }
}

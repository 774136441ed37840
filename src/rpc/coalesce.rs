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
use foldhash::HashMap;
use std::future::Future;
use std::sync::{Arc, Mutex};
use tokio::sync::Notify;

type Outcome = Result<RpcReply, ApiError>;

/// Calls in flight by key. A leader's entry is `None` until a follower comes: most reads
/// are never shared, so they cost a map entry and nothing to publish.
type Calls = Mutex<HashMap<String, Option<Arc<Shared>>>>;

#[derive(Default)]
pub struct InFlight {
    calls: Calls,
}

/// What followers of one call wait on.
#[derive(Default)]
struct Shared {
    state: Mutex<State>,
    changed: Notify,
}

#[derive(Default)]
enum State {
    #[default]
    Pending,
    Done(Outcome),
    /// The leader went away without an outcome.
    Abandoned,
}

impl InFlight {
    /// `call`'s outcome, or the outcome of the identical call already in flight (then
    /// re-stamped with `id`, the caller's own). `call` is awaited in one place only and is
    /// best passed pinned on the heap: this future then stays small whatever it wraps.
    pub async fn run<F>(&self, key: &str, id: impl FnOnce() -> Id, call: F) -> Outcome
    where
        F: Future<Output = Outcome> + Unpin,
    {
        let role = match self.calls.lock() {
            Ok(mut calls) => match calls.get_mut(key) {
                Some(entry) => Role::Follower(entry.get_or_insert_with(Default::default).clone()),
                None => {
                    calls.insert(key.to_owned(), None);
                    Role::Leader
                }
            },
            Err(_) => Role::Alone,
        };
        let leader = match role {
            Role::Follower(shared) => {
                crate::observe::metrics::coalesced_read();
                if let Some(outcome) = shared.outcome().await {
                    return outcome.map(|reply| restamp(reply, id()));
                }
                // The leader went away: this caller makes its own call.
                None
            }
            Role::Leader => Some(Registered {
                calls: &self.calls,
                key,
                published: false,
            }),
            Role::Alone => None,
        };
        let outcome = call.await;
        if let Some(leader) = leader {
            leader.publish(&outcome);
        }
        outcome
    }

    #[cfg(test)]
    fn is_empty(&self) -> bool {
        self.calls.lock().map(|c| c.is_empty()).unwrap_or(false)
    }
}

enum Role {
    Leader,
    Follower(Arc<Shared>),
    /// The map's lock is poisoned: no sharing.
    Alone,
}

impl Shared {
    /// The leader's outcome; `None` when it went away without one.
    async fn outcome(&self) -> Option<Outcome> {
        loop {
            let changed = self.changed.notified();
            tokio::pin!(changed);
            // Registered before the state is read, so a publish in between is not missed.
            changed.as_mut().enable();
            match &*self.state.lock().ok()? {
                State::Pending => {}
                State::Done(outcome) => return Some(outcome.clone()),
                State::Abandoned => return None,
            }
            changed.await;
        }
    }

    fn settle(&self, state: State) {
        if let Ok(mut s) = self.state.lock() {
            *s = state;
        }
        self.changed.notify_waiters();
    }
}

/// A leader's entry: removed when the call ends, however it ends. Followers get the
/// outcome (`publish`) or, when the leader's task was dropped, are told to call alone.
struct Registered<'a> {
    calls: &'a Calls,
    key: &'a str,
    /// The entry is gone already (published): a later leader may hold the key now.
    published: bool,
}

impl Registered<'_> {
    fn take_followers(&self) -> Option<Arc<Shared>> {
        self.calls.lock().ok()?.remove(self.key).flatten()
    }

    fn publish(mut self, outcome: &Outcome) {
        self.published = true;
        if let Some(shared) = self.take_followers() {
            shared.settle(State::Done(outcome.clone()));
        }
    }
}

impl Drop for Registered<'_> {
    fn drop(&mut self) {
        if self.published {
            return;
        }
        if let Some(shared) = self.take_followers() {
            shared.settle(State::Abandoned);
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
    use crate::verify::Verified;
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
            verified: Verified::None,
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
                    .run("k", || Id::index(n as usize), Box::pin(call))
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
            .run(
                "k",
                || Id::index(0),
                Box::pin(async {
                    made.fetch_add(1, Ordering::SeqCst);
                    Ok(answer(0))
                }),
            )
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
                    .run(
                        "k",
                        || Id::index(1),
                        Box::pin(async {
                            tokio::time::sleep(Duration::from_secs(60)).await;
                            Ok(answer(1))
                        }),
                    )
                    .await
            })
        };
        tokio::time::sleep(Duration::from_millis(10)).await;
        let follower = {
            let inflight = inflight.clone();
            tokio::spawn(async move {
                inflight
                    .run("k", || Id::index(2), Box::pin(async { Ok(answer(2)) }))
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

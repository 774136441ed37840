//! Transactions the senders accepted recently or are sending now, by hash: resending the
//! same signed transaction is answered from here instead of reaching the nodes again,
//! and a resend that arrives while the first submission is still in flight waits for
//! that submission's outcome rather than racing it.
//!
//! Per instance and bounded: the last [`CAPACITY`] transactions, each remembered for
//! [`REMEMBERED_FOR`]. A resend past that (or on another instance) reaches the nodes,
//! which answer "already known" or, once mined, "nonce too low"; the senders count both
//! as accepted, so the answer is the same either way.

use crate::errors::ApiError;
use lru::LruCache;
use std::future::Future;
use std::num::NonZeroUsize;
use std::sync::Mutex;
use std::time::{Duration, Instant};
use tokio::sync::watch;

/// Most transactions remembered.
pub const CAPACITY: usize = 10_000;
/// How long an accepted transaction is answered from memory.
pub const REMEMBERED_FOR: Duration = Duration::from_secs(600);

/// Which route took a transaction, and the node that did.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Accepted {
    pub path_used: &'static str,
    pub upstream: Option<String>,
}

type Outcome = Option<Result<Accepted, ApiError>>;

enum Entry {
    /// Being sent: the outcome arrives on this channel.
    InFlight(watch::Receiver<Outcome>),
    Accepted(Accepted, Instant),
}

pub struct SentTransactions {
    entries: Mutex<LruCache<String, Entry>>,
}

impl Default for SentTransactions {
    fn default() -> Self {
        SentTransactions {
            entries: Mutex::new(LruCache::new(NonZeroUsize::new(CAPACITY).unwrap())),
        }
    }
}

impl SentTransactions {
    /// Send the transaction `hash` with `send`, unless it was accepted recently (that
    /// acceptance is the answer) or is being sent now (its outcome is the answer). A
    /// failed send is forgotten, so a later resend tries again.
    pub async fn send_once<F, Fut>(&self, hash: &str, send: F) -> Result<Accepted, ApiError>
    where
        F: FnOnce() -> Fut,
        Fut: Future<Output = Result<Accepted, ApiError>>,
    {
        let tx = loop {
            let mut rx = {
                let mut entries = self.entries.lock().unwrap();
                match entries.get(hash) {
                    Some(Entry::Accepted(a, at)) if at.elapsed() < REMEMBERED_FOR => {
                        return Ok(a.clone())
                    }
                    Some(Entry::InFlight(rx)) => rx.clone(),
                    _ => {
                        // Nobody is sending it: this request does, and says so under
                        // the same lock so a concurrent resend waits for it.
                        let (tx, rx) = watch::channel(None);
                        entries.put(hash.to_string(), Entry::InFlight(rx));
                        break tx;
                    }
                }
            };
            // The sender either publishes an outcome or is dropped (its client went
            // away): then this request sends the transaction itself.
            let outcome = rx
                .wait_for(Option::is_some)
                .await
                .ok()
                .and_then(|o| (*o).clone());
            if let Some(outcome) = outcome {
                return outcome;
            }
        };
        let mut guard = InFlight {
            sent: self,
            hash,
            done: false,
        };
        let outcome = send().await;
        guard.done = true;
        {
            let mut entries = self.entries.lock().unwrap();
            match &outcome {
                Ok(a) => {
                    entries.put(hash.to_string(), Entry::Accepted(a.clone(), Instant::now()));
                }
                Err(_) => {
                    entries.pop(hash);
                }
            }
        }
        let _ = tx.send(Some(outcome.clone()));
        outcome
    }

    #[cfg(test)]
    fn len(&self) -> usize {
        self.entries.lock().unwrap().len()
    }
}

/// Forgets an in-flight entry whose send was dropped before it finished, so the next
/// resend is not left waiting on nothing.
struct InFlight<'a> {
    sent: &'a SentTransactions,
    hash: &'a str,
    done: bool,
}

impl Drop for InFlight<'_> {
    fn drop(&mut self) {
        if !self.done {
            let mut entries = self.sent.entries.lock().unwrap();
            if matches!(entries.peek(self.hash), Some(Entry::InFlight(_))) {
                entries.pop(self.hash);
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::sync::atomic::{AtomicUsize, Ordering};
    use std::sync::Arc;

    fn accepted(path: &'static str) -> Accepted {
        Accepted {
            path_used: path,
            upstream: Some("node-1".into()),
        }
    }

    #[tokio::test]
    async fn a_resend_in_flight_or_after_acceptance_sends_nothing() {
        let sent = Arc::new(SentTransactions::default());
        let calls = Arc::new(AtomicUsize::new(0));
        let send = |calls: Arc<AtomicUsize>| {
            move || async move {
                calls.fetch_add(1, Ordering::SeqCst);
                tokio::time::sleep(Duration::from_millis(50)).await;
                Ok(accepted("upstreama_own"))
            }
        };
        let (a, b) = tokio::join!(
            sent.send_once("0xaa", send(calls.clone())),
            sent.send_once("0xaa", send(calls.clone()))
        );
        assert_eq!(a.unwrap(), accepted("upstreama_own"));
        assert_eq!(b.unwrap(), accepted("upstreama_own"));
        assert_eq!(calls.load(Ordering::SeqCst), 1);
        let c = sent.send_once("0xaa", send(calls.clone())).await;
        assert_eq!(c.unwrap().path_used, "upstreama_own");
        assert_eq!(calls.load(Ordering::SeqCst), 1);
        // Another transaction is sent.
        sent.send_once("0xbb", send(calls.clone())).await.unwrap();
        assert_eq!(calls.load(Ordering::SeqCst), 2);
    }

    #[tokio::test]
    async fn a_failure_is_shared_then_forgotten_and_a_dropped_send_frees_its_place() {
        let sent = SentTransactions::default();
        let refused = || async {
            tokio::time::sleep(Duration::from_millis(20)).await;
            Err(ApiError::new(400, "tx_rejected", "nonce too low"))
        };
        let (a, b) = tokio::join!(sent.send_once("0xaa", refused), async {
            tokio::task::yield_now().await;
            sent.send_once("0xaa", || async { Ok(accepted("x")) }).await
        });
        assert_eq!(a.unwrap_err().code, "tx_rejected");
        assert_eq!(b.unwrap_err().code, "tx_rejected");
        assert_eq!(sent.len(), 0);
        // A send whose client went away mid-flight: the waiter sends it itself.
        let never = sent.send_once("0xcc", std::future::pending);
        let r = tokio::time::timeout(Duration::from_millis(20), never).await;
        assert!(r.is_err());
        assert_eq!(sent.len(), 0);
        let again = sent.send_once("0xcc", || async { Ok(accepted("y")) }).await;
        assert_eq!(again.unwrap().path_used, "y");
    }
}

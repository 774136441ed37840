//! How each webhook delivery ended (the delivery log both pushes write), and the
//! deliveries a tenant makes by hand: a signed test to an entry's endpoint, and a dead
//! letter sent again.

use super::webhook::Sender;
use crate::store::deliveries::Delivery;
use crate::store::sol_watchlist::{DeadLetter, Letters};
use crate::store::sql::StoreError;
use crate::store::Store;
use bytes::Bytes;
use serde_json::Value;
use std::time::Instant;

/// What one delivery made by hand came to.
#[derive(Debug, Clone)]
pub struct Outcome {
    pub delivery_id: String,
    pub delivered: bool,
    /// The attempts the delivery has taken in all (a retried letter's earlier ones too).
    pub attempts: i64,
    /// Why it was not delivered ("" when it was).
    pub error: String,
    pub latency_ms: u64,
}

impl Outcome {
    pub fn json(&self) -> Value {
        serde_json::json!({
            "delivery_id": self.delivery_id,
            "delivered": self.delivered,
            "attempts": self.attempts,
            "error": (!self.delivered).then_some(&self.error),
            "latency_ms": self.latency_ms,
        })
    }
}

/// Log how a delivery ended; a log that cannot be written costs the delivery nothing.
pub async fn record(
    store: &Store,
    of: Letters,
    entry_id: &str,
    delivery_id: &str,
    ended: Result<u32, (u32, &str)>,
) {
    let (delivered, attempts, error) = match ended {
        Ok(n) => (true, n, ""),
        Err((n, why)) => (false, n, why),
    };
    let d = Delivery {
        delivery_id: delivery_id.to_string(),
        at_ms: crate::clock::now_ms(),
        delivered,
        attempts: attempts as i64,
        error: error.chars().take(500).collect(),
    };
    if let Err(e) = store.record_delivery(of, entry_id, &d).await {
        log::warn!("{}: logging delivery {delivery_id}: {e}", of.push());
    }
}

/// Where an entry's deliveries go, and the secret they are signed with.
pub struct Endpoint<'a> {
    pub url: &'a str,
    pub secret: &'a str,
}

/// One signed attempt of `body` (a `"type": "test"` message with its `delivery_id`) to
/// the entry's endpoint, logged.
pub async fn test(
    sender: &Sender,
    store: &Store,
    of: Letters,
    entry_id: &str,
    to: Endpoint<'_>,
    body: &Value,
) -> Outcome {
    let started = Instant::now();
    let delivery_id = body["delivery_id"].as_str().unwrap_or_default();
    let bytes = Bytes::from(body.to_string());
    let sent = sender.once(to.url, &bytes, to.secret, delivery_id, 1).await;
    let error = sent.err().unwrap_or_default();
    let delivered = error.is_empty();
    let ended = if delivered {
        Ok(1)
    } else {
        Err((1, error.as_str()))
    };
    record(store, of, entry_id, delivery_id, ended).await;
    Outcome {
        delivery_id: delivery_id.to_string(),
        delivered,
        attempts: 1,
        error,
        latency_ms: started.elapsed().as_millis() as u64,
    }
}

/// A dead letter sent again, once, under its own delivery id (so a receiver that did
/// get it before drops the repeat): removed when delivered, its attempts counted when
/// not. `Ok(None)`: another retry took it meanwhile.
pub async fn retry(
    sender: &Sender,
    store: &Store,
    of: Letters,
    mut letter: DeadLetter,
    to: Endpoint<'_>,
) -> Result<Option<Outcome>, StoreError> {
    let started = Instant::now();
    let delivery_id = serde_json::from_str::<Value>(&letter.payload)
        .ok()
        .and_then(|p| p["delivery_id"].as_str().map(str::to_string))
        .unwrap_or_else(|| letter.id.clone());
    let attempt = letter.attempts.max(0) as u32 + 1;
    let body = Bytes::from(letter.payload.clone());
    let sent = sender
        .once(to.url, &body, to.secret, &delivery_id, attempt)
        .await;
    let error = sent.err().unwrap_or_default();
    let delivered = error.is_empty();
    letter.attempts = attempt as i64;
    letter.last_error = error.chars().take(500).collect();
    if !store.retried_dead_letter(of, &letter, delivered).await? {
        return Ok(None);
    }
    let ended = if delivered {
        Ok(attempt)
    } else {
        Err((attempt, error.as_str()))
    };
    record(store, of, &letter.entry_id, &delivery_id, ended).await;
    Ok(Some(Outcome {
        delivery_id,
        delivered,
        attempts: attempt as i64,
        error,
        latency_ms: started.elapsed().as_millis() as u64,
    }))
}

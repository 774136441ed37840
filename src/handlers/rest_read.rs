//! A REST read from a pool's healthy hosts, for the handlers that ask a node's REST API
//! themselves (the beacon API for validator intel, heimdall's LCD): the hosts in health
//! order until one answers; a node saying the object does not exist ends the search.

use crate::errors::ApiError;
use crate::observe::metrics;
use crate::pools::{Host, Pool};
use serde_json::Value;
use std::future::Future;
use std::sync::Arc;

/// `ask` each healthy host of `pool` in turn: `Ok(Some(answer))` is the answer and the
/// host that gave it; `Ok(None)` (no such object) is `missing`; an `Err` counts as the
/// host's failure (metrics, set aside for the cool-down) and hands over to the next.
/// No healthy host: 503 `no_upstream`; none answering: 502 `upstream_unavailable`.
pub async fn first_answer<F, Fut>(
    pool: &Pool,
    api: &str,
    missing: ApiError,
    mut ask: F,
) -> Result<(Value, String), ApiError>
where
    F: FnMut(Arc<Host>) -> Fut,
    Fut: Future<Output = Result<Option<Value>, String>>,
{
    let hosts = pool.candidates(None);
    if hosts.is_empty() {
        return Err(ApiError::new(
            503,
            "no_upstream",
            format!("no healthy host in pool {}", pool.name),
        ));
    }
    let mut last = String::new();
    for host in hosts {
        metrics::upstream_attempt(&host.pool, &host.id);
        match ask(host.clone()).await {
            Ok(Some(answer)) => return Ok((answer, host.id.clone())),
            Ok(None) => return Err(missing),
            Err(e) => {
                metrics::upstream_failure(&host.pool, &host.id, "transport");
                host.record_failure(&format!("{api}: {e}"));
                last = format!("{}: {e}", host.id);
            }
        }
    }
    Err(ApiError::new(
        502,
        "upstream_unavailable",
        format!("no {api} host answered ({last})"),
    ))
}

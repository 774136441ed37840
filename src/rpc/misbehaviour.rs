//! An answer the edge would not believe: one JSON line in the misbehaviour log (target
//! `misbehaviour`), a count per host and check, and a step towards the host's cordon.

use crate::observe::metrics;
use crate::pools::Host;
use serde_json::json;

/// How much of a request and an answer the misbehaviour log keeps.
const LOGGED_BYTES: usize = 2048;

/// One answer the edge would not believe (disproved by its own commitments, or outvoted):
/// a JSON line in the misbehaviour log (target `misbehaviour`), counted, and towards the
/// host's cordon.
pub(super) struct Misbehaviour<'a> {
    pub(super) method: &'a str,
    pub(super) check: &'static str,
    pub(super) why: &'a str,
    pub(super) rid: &'a str,
    pub(super) request: &'a [u8],
    pub(super) answer: &'a [u8],
    /// The answer that won, when other hosts outvoted this one.
    pub(super) winning: Option<&'a [u8]>,
}

impl Misbehaviour<'_> {
    pub(super) fn record(&self, host: &Host) {
        let clip = |b: &[u8]| String::from_utf8_lossy(&b[..b.len().min(LOGGED_BYTES)]).into_owned();
        let mut line = json!({
            "pool": host.pool,
            "host": host.id,
            "method": self.method,
            "check": self.check,
            "why": self.why,
            "request_id": self.rid,
            "request": clip(self.request),
            "answer": clip(self.answer),
        });
        if let Some(won) = self.winning {
            line["winning_answer"] = clip(won).into();
        }
        log::warn!(target: "misbehaviour", "{line}");
        metrics::disproved_answer(&host.pool, &host.id, self.check);
        host.record_failure(&format!(
            "answer not believed ({}): {}",
            self.check, self.why
        ));
        if host.conduct.disproved() {
            log::warn!(
                "pool {} host {}: cordoned for 5 minutes after 3 answers not believed in 10",
                host.pool,
                host.id
            );
        }
    }
}

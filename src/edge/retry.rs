//! The passthrough retry rule, one for both servers: after a host fails, is the request
//! sent to the next host of the pass?
//!
//! A connect failure reached no node, so the next host is always safe. A failure after
//! the request went out is retried only for a method safe to send twice (RFC 9110
//! §9.2.2) and only while no answer has started toward the client. The JSON-RPC gateway
//! has its own budget (`rpc.max_attempts`, `rpc.timeout_ms`): its reads are all safe
//! and its writes follow the pool's write policy.

use crate::observe::metrics;
use crate::pools::Host;

/// How a host failed.
#[derive(Clone, Copy, PartialEq, Eq, Debug)]
pub enum Failure {
    /// No connection: nothing reached the node.
    Connect,
    /// The connection failed or the node's answer was unusable after the request went out.
    Transport,
}

/// Methods a node may receive twice.
pub fn safe_to_resend(method: &str) -> bool {
    matches!(method, "GET" | "HEAD" | "OPTIONS")
}

/// Record the failure (the host's cool-down and last error, metrics) and say whether
/// the request goes on to the next host.
pub fn after_failure(
    host: &Host,
    failure: Failure,
    detail: &dyn std::fmt::Display,
    resend_safe: bool,
    answer_started: bool,
) -> bool {
    let (prefix, label) = match failure {
        Failure::Connect => ("connect", "connect"),
        Failure::Transport => ("proxy", "transport"),
    };
    host.record_failure(&format!("{prefix}: {detail}"));
    metrics::upstream_failure(&host.pool, &host.id, label);
    match failure {
        Failure::Connect => true,
        Failure::Transport => resend_safe && !answer_started,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn only_safe_methods_are_sent_twice() {
        assert!(safe_to_resend("GET"));
        assert!(safe_to_resend("HEAD"));
        assert!(!safe_to_resend("POST"));
        assert!(!safe_to_resend("PUT"));
    }
}

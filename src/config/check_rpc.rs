//! The JSON-RPC section's checks at load: budgets and hedging by method class, and the
//! verification settings (proofs' hosts and ranges, votes by a strict majority of reads).

use super::RpcConf;

/// Budgets and hedging: every class named is one a read can have, and no attempt may
/// outlast its call.
pub(super) fn check_rpc_timing(rpc: &RpcConf, bad: &mut dyn FnMut(&str, String)) {
    const CLASSES: [&str; 4] = ["read", "trace", "debug", "txpool"];
    for (class, t) in &rpc.class_timeouts {
        let at = format!("rpc.class_timeouts.{class}");
        if !CLASSES.contains(&class.as_str()) {
            bad(
                &at,
                "method classes are read, trace, debug and txpool".into(),
            );
        }
        let total = t.timeout_ms.unwrap_or(rpc.timeout_ms);
        let attempt = t.attempt_timeout_ms.unwrap_or(rpc.attempt_timeout_ms);
        if total == 0 || attempt == 0 || attempt > total {
            bad(
                &at,
                "timeouts positive, attempt_timeout_ms at most timeout_ms".into(),
            );
        }
    }
    if rpc.timeout_ms == 0 || rpc.attempt_timeout_ms == 0 || rpc.attempt_timeout_ms > rpc.timeout_ms
    {
        bad(
            "rpc.attempt_timeout_ms",
            "timeouts positive, attempt_timeout_ms at most timeout_ms".into(),
        );
    }
    let h = &rpc.hedge;
    if !(h.quantile > 0.0 && h.quantile < 1.0) || h.min_delay_ms > h.max_delay_ms {
        bad(
            "rpc.hedge",
            "quantile between 0 and 1, min_delay_ms at most max_delay_ms".into(),
        );
    }
    for class in &h.classes {
        if !CLASSES.contains(&class.as_str()) {
            bad(
                "rpc.hedge.classes",
                format!(
                    "'{class}': hedged classes are read, trace, debug and txpool (never writes)"
                ),
            );
        }
    }
    if let Some(r) = &rpc.verify.root {
        if !(1..=5).contains(&r.ask) || r.window == 0 || !(1..=1000).contains(&r.logs_blocks) {
            bad(
                "rpc.verify.root",
                format!(
                    "ask 1 to 5 hosts, a window of at least 1 block and logs_blocks 1 to 1,000 \
                     (ask {}, window {}, logs_blocks {})",
                    r.ask, r.window, r.logs_blocks
                ),
            );
        }
    }
    if let Some(q) = &rpc.verify.quorum {
        let agree = q.agreeing();
        if q.ask < 2 || q.ask > 5 || agree <= q.ask / 2 || agree > q.ask {
            bad(
                "rpc.verify.quorum",
                format!(
                    "ask 2 to 5 hosts and agree on a strict majority of them (ask {}, agree {agree})",
                    q.ask
                ),
            );
        }
        for m in q.all_methods() {
            let read = crate::jsonrpc::methods::classify(&m).is_plain_read()
                || super::SOLANA_VOTABLE.contains(&m.as_str());
            if !read {
                bad(
                    "rpc.verify.quorum.methods",
                    format!("'{m}': only reads are put to a vote (a write would be sent twice)"),
                );
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn proofs_ask_few_hosts_and_bound_their_ranges() {
        let problems = |root: &str| {
            let mut rpc: RpcConf =
                serde_yaml::from_str(&format!("verify: {{root: {root}}}")).expect("parses");
            rpc.timeout_ms = 10_000;
            let mut found = Vec::new();
            check_rpc_timing(&rpc, &mut |at: &str, why: String| {
                found.push(format!("{at}: {why}"))
            });
            found
        };
        assert!(problems("{}").is_empty(), "the defaults hold");
        assert!(problems("{ask: 1, window: 1, logs_blocks: 1000}").is_empty());
        for bad in [
            "{ask: 0}",
            "{ask: 9}",
            "{window: 0}",
            "{logs_blocks: 0}",
            "{logs_blocks: 100000}",
        ] {
            let found = problems(bad);
            assert_eq!(found.len(), 1, "{bad}: {found:?}");
            assert!(
                found[0].starts_with("rpc.verify.root: ask 1 to 5"),
                "{found:?}"
            );
        }
    }

    #[test]
    fn a_vote_is_a_strict_majority_of_reads() {
        let problems = |quorum: &str| {
            let mut rpc: RpcConf =
                serde_yaml::from_str(&format!("verify: {{quorum: {quorum}}}")).expect("parses");
            rpc.timeout_ms = 10_000;
            let mut found = Vec::new();
            check_rpc_timing(&rpc, &mut |at: &str, why: String| {
                found.push(format!("{at}: {why}"))
            });
            found
        };
        assert!(problems("{methods: [eth_getBalance], ask: 3, agree: 2}").is_empty());
        assert!(
            problems("{preset: verifier, ask: 2}").is_empty(),
            "unanimous by default"
        );
        assert_eq!(
            problems("{methods: [eth_getBalance], ask: 3, agree: 1}").len(),
            1
        );
        assert_eq!(
            problems("{methods: [eth_getBalance], ask: 4, agree: 2}").len(),
            1
        );
        assert_eq!(problems("{methods: [eth_getBalance], ask: 1}").len(), 1);
        let write = problems("{methods: [eth_sendRawTransaction]}");
        assert!(write[0].contains("only reads"), "{write:?}");
        assert!(problems("{methods: [getBalance, getAccountInfo]}").is_empty());
        assert_eq!(problems("{methods: [sendTransaction]}").len(), 1);
    }
}

//! Scrub a node's Prometheus exposition text before customers see it.
//!
//! Kept: `# HELP` / `# TYPE` lines and samples, in order. Dropped: other comments,
//! labels that identify the operator's machines (pod, node, namespace, hostnames,
//! addresses), any label whose value carries an IPv4 or IPv6 address, exemplars and
//! lines that do not parse; from `# HELP` text, every word that carries an address or
//! looks like a host name. `instance` is rewritten to the host id. When dropping labels makes two
//! series identical, the first one wins, so the output never repeats a series.

use std::collections::HashSet;

/// Label names removed wherever they appear (compared case-insensitively).
const DROPPED_LABELS: &[&str] = &[
    "pod",
    "pod_name",
    "pod_ip",
    "node",
    "node_name",
    "nodename",
    "namespace",
    "kubernetes_namespace",
    "kubernetes_pod_name",
    "kubernetes_node",
    "host",
    "hostname",
    "host_ip",
    "fqdn",
    "ip",
    "ip_address",
    "address",
    "addr",
    "exported_instance",
    "instance_ip",
    "machine",
    "server",
];

pub fn scrub(input: &str, host_id: &str) -> String {
    let mut out = String::with_capacity(input.len());
    let mut seen_series: HashSet<String> = HashSet::new();
    let mut seen_meta: HashSet<(bool, String)> = HashSet::new();
    for line in input.lines() {
        let line = line.trim_end_matches('\r');
        if line.trim().is_empty() {
            continue;
        }
        if let Some(rest) = line.strip_prefix('#') {
            if let Some((is_type, name)) = meta_line(rest) {
                if name_carries_address(name) {
                    continue;
                }
                // One HELP and one TYPE per family, as the format requires.
                if seen_meta.insert((is_type, name.to_string())) {
                    if is_type {
                        out.push_str(line);
                    } else {
                        out.push_str(&scrub_help(rest, name));
                    }
                    out.push('\n');
                }
            }
            continue;
        }
        let Some(sample) = parse_sample(line) else {
            continue;
        };
        // A family named after a machine (`node_10_0_0_5_peer_up`) goes whole.
        if name_carries_address(sample.name) {
            continue;
        }
        let mut kept = String::new();
        for (name, raw_value) in &sample.labels {
            let lname = name.to_ascii_lowercase();
            if DROPPED_LABELS.contains(&lname.as_str()) || lname.starts_with("kubernetes_") {
                continue;
            }
            let value = if lname == "instance" {
                escape(host_id)
            } else if carries_ip(&unescape(raw_value)) || names_a_place(&unescape(raw_value)) {
                continue;
            } else {
                raw_value.to_string()
            };
            if !kept.is_empty() {
                kept.push(',');
            }
            kept.push_str(name);
            kept.push_str("=\"");
            kept.push_str(&value);
            kept.push('"');
        }
        let series = if kept.is_empty() {
            sample.name.to_string()
        } else {
            format!("{}{{{kept}}}", sample.name)
        };
        if !seen_series.insert(series.clone()) {
            continue;
        }
        out.push_str(&series);
        out.push(' ');
        out.push_str(sample.value);
        if let Some(ts) = sample.timestamp {
            out.push(' ');
            out.push_str(ts);
        }
        out.push('\n');
    }
    out
}

/// `# HELP name text` with the text's words that name a machine left out.
fn scrub_help(rest: &str, name: &str) -> String {
    let text = rest
        .trim_start()
        .strip_prefix("HELP ")
        .unwrap_or("")
        .trim_start()
        .strip_prefix(name)
        .unwrap_or("");
    let kept: Vec<&str> = text
        .split_whitespace()
        .filter(|w| !carries_ip(w) && !looks_like_host(w))
        .collect();
    if kept.is_empty() {
        format!("# HELP {name}")
    } else {
        format!("# HELP {name} {}", kept.join(" "))
    }
}

/// A metric name with an IPv4 address spelled in underscores (`peer_192_168_1_20_…`).
fn name_carries_address(name: &str) -> bool {
    let parts: Vec<&str> = name.split(['_', ':']).collect();
    parts.windows(4).any(|w| {
        w.iter()
            .all(|p| !p.is_empty() && p.len() <= 3 && p.parse::<u16>().is_ok_and(|n| n <= 255))
    })
}

/// A label value that names where something lives: a URL or DSN (`postgres://…`,
/// credentials included), user-info (`admin:pw@db`), or a host name.
fn names_a_place(value: &str) -> bool {
    value.contains("://")
        || value.contains('@')
        || value
            .split(|c: char| c.is_whitespace() || c == ',' || c == ';' || c == '=')
            .any(looks_like_host)
}

/// A word shaped like a DNS name: dot-separated labels of letters, digits and `-`, the
/// last alphabetic and at least two long (`geth-0.internal`, `node1.example.com:8545`);
/// version numbers (`1.14.3`, `v1.2`) are not.
pub fn looks_like_host(word: &str) -> bool {
    let w = word.trim_matches(|c: char| !c.is_ascii_alphanumeric());
    // A port or a path after the name.
    let w = w
        .split([':', '/', '@'])
        .find(|p| p.contains('.'))
        .unwrap_or("");
    let labels: Vec<&str> = w.split('.').collect();
    labels.len() >= 2
        && labels
            .iter()
            .all(|l| !l.is_empty() && l.chars().all(|c| c.is_ascii_alphanumeric() || c == '-'))
        && labels
            .last()
            .is_some_and(|l| l.len() >= 2 && l.chars().all(|c| c.is_ascii_alphabetic()))
}

/// `# HELP name …` → (false, name); `# TYPE name kind` → (true, name); else None.
fn meta_line(rest: &str) -> Option<(bool, &str)> {
    let rest = rest.trim_start();
    let (is_type, rest) = if let Some(r) = rest.strip_prefix("HELP ") {
        (false, r)
    } else if let Some(r) = rest.strip_prefix("TYPE ") {
        (true, r)
    } else {
        return None;
    };
    let mut parts = rest.split_whitespace();
    let name = parts.next().filter(|n| valid_metric_name(n))?;
    if is_type {
        let kind = parts.next()?;
        if !matches!(
            kind,
            "counter" | "gauge" | "histogram" | "summary" | "untyped"
        ) || parts.next().is_some()
        {
            return None;
        }
    }
    Some((is_type, name))
}

struct Sample<'a> {
    name: &'a str,
    /// (name, value as written, still escaped)
    labels: Vec<(&'a str, &'a str)>,
    value: &'a str,
    timestamp: Option<&'a str>,
}

fn parse_sample(line: &str) -> Option<Sample<'_>> {
    let line = line.trim_start();
    let name_end = line
        .find(|c: char| c == '{' || c.is_whitespace())
        .unwrap_or(line.len());
    let name = &line[..name_end];
    if !valid_metric_name(name) {
        return None;
    }
    let mut rest = &line[name_end..];
    let mut labels = Vec::new();
    if let Some(body) = rest.strip_prefix('{') {
        let (parsed, after) = parse_labels(body)?;
        labels = parsed;
        rest = after;
    }
    // Value, optional timestamp; anything after (an exemplar) is dropped.
    let rest = rest.split(" # ").next().unwrap_or("");
    let mut parts = rest.split_whitespace();
    let value = parts.next().filter(|v| valid_value(v))?;
    let timestamp = match parts.next() {
        Some(t) if t.parse::<i64>().is_ok() => Some(t),
        Some(_) => return None,
        None => None,
    };
    if parts.next().is_some() {
        return None;
    }
    Some(Sample {
        name,
        labels,
        value,
        timestamp,
    })
}

/// Parse `a="x",b="y"}` (after the `{`); returns the labels and the text after `}`.
fn parse_labels(s: &str) -> Option<(Vec<(&str, &str)>, &str)> {
    let mut labels = Vec::new();
    let mut rest = s.trim_start();
    loop {
        if let Some(after) = rest.strip_prefix('}') {
            return Some((labels, after));
        }
        let eq = rest.find('=')?;
        let name = rest[..eq].trim();
        if !valid_label_name(name) {
            return None;
        }
        let after_eq = rest[eq + 1..].trim_start().strip_prefix('"')?;
        // Find the closing quote, honouring backslash escapes.
        let bytes = after_eq.as_bytes();
        let mut i = 0;
        loop {
            match bytes.get(i)? {
                b'\\' => {
                    if !matches!(bytes.get(i + 1)?, b'\\' | b'"' | b'n') {
                        return None;
                    }
                    i += 2;
                }
                b'"' => break,
                b'\n' => return None,
                _ => i += 1,
            }
        }
        labels.push((name, &after_eq[..i]));
        rest = after_eq[i + 1..].trim_start();
        if let Some(r) = rest.strip_prefix(',') {
            rest = r.trim_start();
        } else if !rest.starts_with('}') {
            return None;
        }
    }
}

fn valid_metric_name(n: &str) -> bool {
    let mut chars = n.chars();
    matches!(chars.next(), Some(c) if c.is_ascii_alphabetic() || c == '_' || c == ':')
        && chars.all(|c| c.is_ascii_alphanumeric() || c == '_' || c == ':')
}

fn valid_label_name(n: &str) -> bool {
    let mut chars = n.chars();
    matches!(chars.next(), Some(c) if c.is_ascii_alphabetic() || c == '_')
        && chars.all(|c| c.is_ascii_alphanumeric() || c == '_')
}

fn valid_value(v: &str) -> bool {
    matches!(v, "NaN" | "+Inf" | "-Inf" | "Inf") || v.parse::<f64>().is_ok_and(|f| f.is_finite())
}

fn unescape(v: &str) -> String {
    v.replace("\\\"", "\"")
        .replace("\\n", "\n")
        .replace("\\\\", "\\")
}

fn escape(v: &str) -> String {
    v.replace('\\', "\\\\")
        .replace('"', "\\\"")
        .replace('\n', "\\n")
}

/// True when the value contains something shaped like an IPv4 or IPv6 address
/// (`10.0.0.1`, `10.0.0.1:30303`, `[fe80::1]:9000`, `enode://…@1.2.3.4:30303`, `::1`).
pub fn carries_ip(v: &str) -> bool {
    // IPv4: four dot-separated runs of 1-3 digits, each ≤ 255.
    let tokens = v.split(|c: char| !(c.is_ascii_digit() || c == '.'));
    for t in tokens {
        let parts: Vec<&str> = t.split('.').collect();
        if parts.len() >= 4 {
            for w in parts.windows(4) {
                if w.iter().all(|p| {
                    !p.is_empty() && p.len() <= 3 && p.parse::<u16>().is_ok_and(|n| n <= 255)
                }) {
                    return true;
                }
            }
        }
    }
    // IPv6: any run of hex digits, colons and dots that parses as an address.
    let hexish = |c: char| c.is_ascii_hexdigit() || c == ':' || c == '.';
    v.split(|c: char| !hexish(c))
        .filter(|t| t.matches(':').count() >= 2)
        .any(|t| {
            t.parse::<std::net::Ipv6Addr>().is_ok()
                // `[::1]:9000` splits off the port after the bracket; try without a suffix.
                || t.rsplit_once(':').is_some_and(|(a, _)| a.parse::<std::net::Ipv6Addr>().is_ok())
        })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn drops_operator_labels_and_addresses_and_rewrites_instance() {
        let input = "\
# HELP geth_peers Number of peers
# TYPE geth_peers gauge
geth_peers{instance=\"10.1.2.3:6060\",job=\"geth\",pod=\"geth-0\",namespace=\"eth\",node=\"ip-10-1-2-3\"} 25
# an operator comment with 10.0.0.7
p2p_dials{peer=\"enode://abc@52.1.2.3:30303\",kind=\"out\"} 3 1700000000000
p2p_v6{remote=\"[2001:db8::7]:30303\",kind=\"v6\"} 1
p2p_v6b{remote=\"fe80::1\"} 1
quoted{msg=\"say \\\"hi\\\" from 1.2.3.4\",ok=\"a\\\\b\"} 1
version_info{version=\"1.14.3\",hostname=\"geth-0.internal\"} 1
";
        let out = scrub(input, "el-1");
        assert_eq!(
            out,
            "\
# HELP geth_peers Number of peers
# TYPE geth_peers gauge
geth_peers{instance=\"el-1\",job=\"geth\"} 25
p2p_dials{kind=\"out\"} 3 1700000000000
p2p_v6{kind=\"v6\"} 1
p2p_v6b 1
quoted{ok=\"a\\\\b\"} 1
version_info{version=\"1.14.3\"} 1
"
        );
    }

    /// Addresses spelled into metric names, and credentials or host names in values.
    #[test]
    fn names_with_addresses_and_values_with_places_go() {
        let input = "\
# HELP node_10_0_0_5_peer_up Peer up
# TYPE node_10_0_0_5_peer_up gauge
node_10_0_0_5_peer_up 1
peer_192_168_1_20_latency_seconds 0.2
db_info{dsn=\"postgres://admin:hunter2@db.internal:5432/chain\",role=\"primary\"} 1
upstream{target=\"db.internal:5432\",who=\"admin:pw@x\",kind=\"rpc\"} 1
geth_chain_head_block 1200
";
        assert_eq!(
            scrub(input, "el-1"),
            "\
db_info{role=\"primary\"} 1
upstream{kind=\"rpc\"} 1
geth_chain_head_block 1200
"
        );
    }

    /// Machine names in every position a node's exposition can carry them.
    #[test]
    fn hostile_corpus_leaves_no_address_or_host_name() {
        let input = "\
# HELP build_info Build information from host 172.16.5.4
# TYPE build_info gauge
build_info{version=\"1.14.3\",host=\"geth-0.internal\"} 1
# HELP peers Peers of geth-0.eu-west.internal (see node1.example.com:8545) via [2001:db8::9]:30303
# TYPE peers gauge
peers{remote=\"10.9.8.7:30303\",kind=\"in\"} 4 # {trace_id=\"10.1.1.1\"} 1.0
# HELP rpc_calls Calls by method, e.g. eth_call, version 1.14.3
rpc_calls{method=\"eth_call\",peer=\"enode://ab@[fe80::2]:30303\"} 7
";
        let out = scrub(input, "el-1");
        assert_eq!(
            out,
            "\
# HELP build_info Build information from host
# TYPE build_info gauge
build_info{version=\"1.14.3\"} 1
# HELP peers Peers of (see via
# TYPE peers gauge
peers{kind=\"in\"} 4
# HELP rpc_calls Calls by method, e.g. eth_call, version 1.14.3
rpc_calls{method=\"eth_call\"} 7
"
        );
        for needle in [
            "172.16",
            "10.9.8",
            "10.1.1",
            "2001:db8",
            "fe80",
            "internal",
            "example.com",
        ] {
            assert!(!out.contains(needle), "{needle} left in:\n{out}");
        }
    }

    #[test]
    fn host_name_shapes() {
        for w in [
            "geth-0.internal",
            "node1.example.com:8545",
            "(a.b.cd)",
            "x@host.lan/metrics",
        ] {
            assert!(looks_like_host(w), "{w}");
        }
        for w in ["1.14.3", "v1.2", "e.g.", "eth_call", "go1.22.4", "a.b.c1"] {
            assert!(!looks_like_host(w), "{w}");
        }
    }

    #[test]
    fn histograms_keep_le_and_collapsed_series_are_not_repeated() {
        let input = "\
# TYPE rpc_duration_seconds histogram
rpc_duration_seconds_bucket{le=\"0.1\",pod=\"a\"} 1
rpc_duration_seconds_bucket{le=\"+Inf\",pod=\"a\"} 2
rpc_duration_seconds_sum{pod=\"a\"} 0.3
rpc_duration_seconds_count{pod=\"a\"} 2
rpc_duration_seconds_bucket{le=\"0.1\",pod=\"b\"} 5
rpc_duration_seconds_bucket{le=\"+Inf\",pod=\"b\"} 9
rpc_duration_seconds_sum{pod=\"b\"} 1.3
rpc_duration_seconds_count{pod=\"b\"} 9
";
        let out = scrub(input, "h");
        assert_eq!(
            out,
            "\
# TYPE rpc_duration_seconds histogram
rpc_duration_seconds_bucket{le=\"0.1\"} 1
rpc_duration_seconds_bucket{le=\"+Inf\"} 2
rpc_duration_seconds_sum 0.3
rpc_duration_seconds_count 2
"
        );
    }

    #[test]
    fn malformed_lines_are_dropped_not_passed_through() {
        let input =
            "ok 1\nbad{x=\"unterminated} 1\n9bad 1\nnovalue\nx{a=\"1\"} notanumber\ny{a=1} 2\n";
        assert_eq!(scrub(input, "h"), "ok 1\n");
    }

    #[test]
    fn ip_shapes() {
        for v in [
            "10.0.0.1",
            "x@1.2.3.4:30303",
            "::1",
            "[::1]:9000",
            "2001:db8::1",
            "::ffff:10.0.0.1",
        ] {
            assert!(carries_ip(v), "{v}");
        }
        for v in ["1.14.3", "v1.2.3", "geth", "12:30", "a:b:c", "999.1.1.1"] {
            assert!(!carries_ip(v), "{v}");
        }
    }
}

//! The origin and method rules of a key's restrictions: parsed from what the owner
//! wrote, and matched against a request's `Origin` and a call's method.

/// An allowed browser origin.
#[derive(Debug, Clone, PartialEq)]
pub(super) enum OriginRule {
    /// `scheme://host[:port]`, compared whole.
    Exact(String),
    /// `scheme://*.suffix[:port]`: any host ending in `.suffix` with that scheme and port.
    Subdomains {
        scheme: String,
        suffix: String,
        port: Option<u16>,
    },
}

/// A method rule: a whole name, or a namespace prefix (`eth_`).
#[derive(Debug, Clone, PartialEq)]
pub(super) enum MethodRule {
    Name(String),
    Namespace(String),
}

pub(super) fn origin_rule(raw: &str) -> Result<(OriginRule, String), String> {
    let bad = || {
        format!("allowed_origins: '{raw}' is not an origin (https://app.example.com or https://*.example.com)")
    };
    if raw.len() > 200 {
        return Err(bad());
    }
    let lower = raw.trim().trim_end_matches('/').to_ascii_lowercase();
    let (scheme, host, port) = split_origin(&lower).ok_or_else(bad)?;
    let port_text = port.map_or(String::new(), |p| format!(":{p}"));
    if let Some(suffix) = host.strip_prefix("*.") {
        if suffix.is_empty() || suffix.contains('*') || !suffix.contains('.') {
            return Err(bad());
        }
        let text = format!("{scheme}://*.{suffix}{port_text}");
        return Ok((
            OriginRule::Subdomains {
                scheme: scheme.to_string(),
                suffix: format!(".{suffix}"),
                port,
            },
            text,
        ));
    }
    if host.contains('*') {
        return Err(bad());
    }
    let text = format!("{scheme}://{host}{port_text}");
    Ok((OriginRule::Exact(text.clone()), text))
}

/// `scheme://host[:port]` with the scheme's default port dropped (as browsers send it).
fn split_origin(o: &str) -> Option<(&str, &str, Option<u16>)> {
    let (scheme, rest) = o.split_once("://")?;
    if !matches!(scheme, "http" | "https")
        || rest.is_empty()
        || rest.contains(['/', '?', '#', '@', ' '])
    {
        return None;
    }
    // An IPv6 literal keeps its colons inside the brackets.
    let (host, port) = match rest.rfind(':') {
        Some(i) if !rest[i..].contains(']') => {
            (&rest[..i], Some(rest[i + 1..].parse::<u16>().ok()?))
        }
        _ => (rest, None),
    };
    if host.is_empty() {
        return None;
    }
    let default = if scheme == "https" { 443 } else { 80 };
    Some((scheme, host, port.filter(|p| *p != default)))
}

pub(super) fn origin_matches(rule: &OriginRule, origin: &str) -> bool {
    let lower = origin.to_ascii_lowercase();
    let Some((scheme, host, port)) = split_origin(&lower) else {
        return false;
    };
    match rule {
        OriginRule::Exact(text) => {
            let port_text = port.map_or(String::new(), |p| format!(":{p}"));
            *text == format!("{scheme}://{host}{port_text}")
        }
        OriginRule::Subdomains {
            scheme: s,
            suffix,
            port: p,
        } => {
            s == scheme
                && *p == port
                && host.len() > suffix.len()
                && host.ends_with(suffix.as_str())
        }
    }
}

pub(super) fn method_rule(raw: &str) -> Result<MethodRule, String> {
    let bad = || {
        format!("allowed_methods: '{raw}' is not a method name (eth_call) or a namespace (eth_*)")
    };
    let (name, namespace) = match raw.strip_suffix('*') {
        Some(prefix) if prefix.ends_with('_') && prefix.len() > 1 => (prefix, true),
        Some(_) => return Err(bad()),
        None => (raw, false),
    };
    let ok = !name.is_empty()
        && name.len() <= 64
        && name.chars().next().is_some_and(|c| c.is_ascii_alphabetic())
        && name.chars().all(|c| c.is_ascii_alphanumeric() || c == '_');
    if !ok {
        return Err(bad());
    }
    Ok(if namespace {
        MethodRule::Namespace(name.to_string())
    } else {
        MethodRule::Name(name.to_string())
    })
}

pub(super) fn method_matches(rule: &MethodRule, method: &str) -> bool {
    match rule {
        MethodRule::Name(n) => n == method,
        MethodRule::Namespace(prefix) => method.starts_with(prefix.as_str()),
    }
}

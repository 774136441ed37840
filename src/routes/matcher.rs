//! The route table compiled once at start-up into a segment trie.
//!
//! Precedence at every segment: literal, then `{param}`, then `{*tail}`. Two routes
//! "overlap" when they have the same shape (literals equal, params anywhere alike) and share
//! a method; that is refused at load because neither could be reached deterministically.

use super::spec::HttpMethod;
use super::Route;
use foldhash::HashMap;
use std::borrow::Cow;
use std::sync::Arc;

#[derive(Default)]
struct Node {
    literal: HashMap<String, Node>,
    param: Option<Box<Node>>,
    /// Routes whose path ends here, in manifest order.
    endpoints: Vec<usize>,
    /// Routes whose path is `…/{*tail}` at this node.
    tail: Vec<usize>,
}

/// A request path split into decoded segments (borrowed from the path unless a segment
/// had an escape to decode).
pub struct NormalizedPath<'a> {
    pub segments: Vec<Cow<'a, str>>,
    /// A segment decoded to `.`/`..`, or contained an encoded `/` or `\`, or a NUL:
    /// only tail routes (whose handlers check their own paths) may see such a path.
    pub suspicious: bool,
}

impl<'a> NormalizedPath<'a> {
    pub fn parse(raw: &'a str) -> Self {
        let path = raw.split(['?', '#']).next().unwrap_or("");
        let mut suspicious = false;
        let segments = path
            .split('/')
            .filter(|s| !s.is_empty())
            .map(|s| {
                let d = percent_decode(s);
                if d == "." || d == ".." || d.contains(['/', '\\', '\0']) {
                    suspicious = true;
                }
                d
            })
            .collect();
        NormalizedPath {
            segments,
            suspicious,
        }
    }
}

/// One query parameter, percent-decoded with `+` as a space (the first, if repeated).
pub fn query_param(query: Option<&str>, name: &str) -> Option<String> {
    query?.split('&').find_map(|pair| {
        let (k, v) = pair.split_once('=').unwrap_or((pair, ""));
        (k == name).then(|| percent_decode(&v.replace('+', " ")).into_owned())
    })
}

/// Decode `%XX` escapes; a malformed escape is kept literally.
pub fn percent_decode(s: &str) -> Cow<'_, str> {
    if !s.contains('%') {
        return Cow::Borrowed(s);
    }
    let b = s.as_bytes();
    let mut out = Vec::with_capacity(b.len());
    let mut i = 0;
    while i < b.len() {
        if b[i] == b'%' && i + 2 < b.len() {
            let hex = |c: u8| (c as char).to_digit(16);
            if let (Some(h), Some(l)) = (hex(b[i + 1]), hex(b[i + 2])) {
                out.push((h * 16 + l) as u8);
                i += 3;
                continue;
            }
        }
        out.push(b[i]);
        i += 1;
    }
    Cow::Owned(String::from_utf8_lossy(&out).into_owned())
}

pub enum Match<'a> {
    Found {
        route: &'a Arc<Route>,
        /// Values of the route's `{param}`s in path order; a tail is the rest joined by `/`.
        params: Vec<String>,
    },
    /// The path exists but not for this method; the routes that do exist at that path.
    MethodNotAllowed {
        routes: Vec<&'a Arc<Route>>,
    },
    NotFound,
}

pub struct Matcher {
    root: Node,
    routes: Vec<Arc<Route>>,
}

/// One segment of a compiled pattern.
#[derive(Debug, PartialEq, Eq, Hash, Clone)]
pub enum Seg {
    Lit(String),
    Param(String),
    Tail(String),
}

/// Parse `/v1/x/{id}/{*rest}` into segments, or say why it is not a valid pattern.
pub fn parse_pattern(path: &str) -> Result<Vec<Seg>, String> {
    if !path.starts_with('/') {
        return Err("path must start with '/'".into());
    }
    if path.contains(['?', '#', '%']) {
        return Err("path must not contain '?', '#' or '%'".into());
    }
    let raw: Vec<&str> = path[1..].split('/').collect();
    let mut segs = Vec::new();
    let mut names = Vec::new();
    for (i, s) in raw.iter().enumerate() {
        if s.is_empty() {
            return Err("path has an empty segment".into());
        }
        let seg = if let Some(inner) = s.strip_prefix('{').and_then(|r| r.strip_suffix('}')) {
            if let Some(tail) = inner.strip_prefix('*') {
                if i != raw.len() - 1 {
                    return Err(format!("tail '{{*{tail}}}' must be the last segment"));
                }
                Seg::Tail(tail.to_string())
            } else {
                Seg::Param(inner.to_string())
            }
        } else if s.contains(['{', '}']) {
            return Err(format!("segment '{s}' mixes braces with text"));
        } else {
            Seg::Lit(s.to_string())
        };
        if let Seg::Param(n) | Seg::Tail(n) = &seg {
            if n.is_empty() || !n.chars().all(|c| c.is_ascii_alphanumeric() || c == '_') {
                return Err(format!("parameter name '{n}' must be [A-Za-z0-9_]+"));
            }
            if names.contains(n) {
                return Err(format!("parameter '{n}' appears twice"));
            }
            names.push(n.clone());
        }
        segs.push(seg);
    }
    Ok(segs)
}

/// The shape used for overlap detection: parameter names do not matter.
fn shape(segs: &[Seg]) -> String {
    segs.iter()
        .map(|s| match s {
            Seg::Lit(l) => l.as_str(),
            Seg::Param(_) => "{}",
            Seg::Tail(_) => "{*}",
        })
        .collect::<Vec<_>>()
        .join("/")
}

impl Matcher {
    /// Compile routes; returns the overlaps found as `(route index, other route index, method)`.
    pub fn build(routes: Vec<Arc<Route>>) -> Result<Self, Vec<(usize, usize, HttpMethod)>> {
        let mut root = Node::default();
        // A WebSocket upgrade (`None`) is told apart from a plain GET by the matcher, so a
        // page and a channel may share a path.
        let mut seen: HashMap<(String, Option<HttpMethod>), usize> = HashMap::default();
        let mut overlaps = Vec::new();
        for (idx, route) in routes.iter().enumerate() {
            let sh = shape(&route.segments);
            let mut keys: Vec<Option<HttpMethod>> =
                route.methods.iter().copied().map(Some).collect();
            if route.websocket {
                keys.push(None);
            }
            for k in keys {
                if let Some(&other) = seen.get(&(sh.clone(), k)) {
                    overlaps.push((idx, other, k.unwrap_or(HttpMethod::GET)));
                } else {
                    seen.insert((sh.clone(), k), idx);
                }
            }
            let mut node = &mut root;
            let mut is_tail = false;
            for seg in &route.segments {
                match seg {
                    Seg::Lit(l) => node = node.literal.entry(l.clone()).or_default(),
                    Seg::Param(_) => node = node.param.get_or_insert_with(Default::default),
                    Seg::Tail(_) => is_tail = true,
                }
            }
            if is_tail {
                node.tail.push(idx);
            } else {
                node.endpoints.push(idx);
            }
        }
        if overlaps.is_empty() {
            Ok(Matcher { root, routes })
        } else {
            Err(overlaps)
        }
    }

    pub fn routes(&self) -> &[Arc<Route>] {
        &self.routes
    }

    /// The envelope of the surface an unmatched path belongs to: that of the routes
    /// sharing the longest literal prefix with it (at least two segments), when they
    /// all answer in one envelope (`/v1/auth/nope` like the console, `/v1/admin/nope`
    /// like admin); `None` (chain REST) when they differ, as under `/v1/eth/`.
    pub fn envelope_near(&self, path: &NormalizedPath) -> Option<crate::errors::Envelope> {
        let shared = |r: &Route| {
            r.segments
                .iter()
                .zip(&path.segments)
                .take_while(|(seg, got)| matches!(seg, Seg::Lit(l) if l == got.as_ref()))
                .count()
        };
        let longest = self.routes.iter().map(|r| shared(r)).max()?;
        if longest < 2 {
            return None;
        }
        let mut nearest = self
            .routes
            .iter()
            .filter(|r| shared(r) == longest)
            .map(|r| r.envelope);
        let first = nearest.next()?;
        nearest.all(|e| e == first).then_some(first)
    }

    /// Classify a request. `upgrade` is true for a WebSocket upgrade request.
    pub fn find(&self, method: &str, path: &NormalizedPath, upgrade: bool) -> Match<'_> {
        let mut params = Vec::new();
        let Some(candidates) = walk(&self.root, &path.segments, 0, &mut params) else {
            return Match::NotFound;
        };
        let method = HttpMethod::parse(method);
        let admits = |r: &Arc<Route>| {
            method.is_some_and(|m| r.methods.contains(&m))
                || (upgrade && r.websocket && method == Some(HttpMethod::GET))
        };
        let routes = || candidates.iter().map(|&i| &self.routes[i]);
        // An upgrade goes to the WebSocket route of the path when there is one.
        let ws = (upgrade && method == Some(HttpMethod::GET))
            .then(|| routes().find(|r| r.websocket))
            .flatten();
        match ws.or_else(|| routes().find(|r| admits(r))) {
            Some(route) => Match::Found { route, params },
            None => Match::MethodNotAllowed {
                routes: candidates.iter().map(|&i| &self.routes[i]).collect(),
            },
        }
    }
}

/// Depth-first walk honouring precedence; returns the route indices at the first node
/// that consumes the whole path.
fn walk<'n>(
    node: &'n Node,
    segs: &[Cow<'_, str>],
    i: usize,
    params: &mut Vec<String>,
) -> Option<&'n Vec<usize>> {
    if i == segs.len() {
        if !node.endpoints.is_empty() {
            return Some(&node.endpoints);
        }
        // A tail may be empty only if nothing more specific ends here.
        if !node.tail.is_empty() {
            params.push(String::new());
            return Some(&node.tail);
        }
        return None;
    }
    if let Some(next) = node.literal.get(segs[i].as_ref()) {
        if let Some(found) = walk(next, segs, i + 1, params) {
            return Some(found);
        }
    }
    if let Some(next) = &node.param {
        params.push(segs[i].clone().into_owned());
        if let Some(found) = walk(next, segs, i + 1, params) {
            return Some(found);
        }
        params.pop();
    }
    if !node.tail.is_empty() {
        params.push(segs[i..].join("/"));
        return Some(&node.tail);
    }
    None
}

impl Route {
    /// Methods including the implicit GET of a WebSocket route.
    pub fn all_methods(&self) -> Vec<HttpMethod> {
        let mut m = self.methods.clone();
        if self.websocket && !m.contains(&HttpMethod::GET) {
            m.push(HttpMethod::GET);
        }
        m
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn decodes_and_flags_traversal() {
        let p = NormalizedPath::parse("/a//b/%2e%2e/c?x=1");
        assert_eq!(p.segments, vec!["a", "b", "..", "c"]);
        assert!(p.suspicious);
        let p = NormalizedPath::parse("/a/b%2Fc");
        assert!(p.suspicious);
        let p = NormalizedPath::parse("/v1/eth/wallet/0xab/balance");
        assert!(!p.suspicious);
        assert_eq!(percent_decode("%zz%4"), "%zz%4");
    }

    #[test]
    fn patterns_are_checked() {
        assert!(parse_pattern("v1/x").is_err());
        assert!(parse_pattern("/v1//x").is_err());
        assert!(parse_pattern("/v1/{*a}/b").is_err());
        assert!(parse_pattern("/v1/{a}/{a}").is_err());
        assert!(parse_pattern("/v1/x{a}").is_err());
        assert_eq!(
            parse_pattern("/v1/{a}/{*b}").unwrap(),
            vec![
                Seg::Lit("v1".into()),
                Seg::Param("a".into()),
                Seg::Tail("b".into())
            ]
        );
    }
}

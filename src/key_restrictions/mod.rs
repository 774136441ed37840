//! What a key's owner narrowed it to: the browser origins, client addresses and chains
//! it answers, the JSON-RPC methods and contracts it may call, a rate below the plan's,
//! and an expiry. Stored with the key as JSON (`api_keys.restrictions`), compiled once
//! when the key is read into the key cache, and checked on every way in from that
//! compiled form: the guard checks the request (`request`), the gateway each call of a
//! body, batch or WebSocket message (`call`), the senders each transaction (`transaction`).

mod rules;
mod targets;
#[cfg(test)]
mod tests;

use crate::errors::ApiError;
use crate::net_policy::Cidr;
use rules::{method_matches, method_rule, origin_matches, origin_rule, MethodRule, OriginRule};
use serde::{Deserialize, Serialize};
use serde_json::Value;
use std::net::IpAddr;
use targets::{address, targets, Targets};

/// Most origins, address ranges or methods in one list. The bounds keep the largest
/// restrictions within a console body (16 KiB).
pub const MAX_ENTRIES: usize = 20;
/// Most JSON-RPC method rules.
pub const MAX_METHODS: usize = 30;
/// Most contracts one key may be narrowed to.
pub const MAX_CONTRACTS: usize = 100;
/// The chains a key may be narrowed to; each route belongs to one (`chain_of_route`).
pub const CHAINS: &[&str] = &["eth", "polygon", "sol", "base"];

/// The restrictions as the API takes and shows them, and as they are stored. Empty
/// lists and absent values restrict nothing. Read from a JSON object only (see the
/// `Deserialize` impl below).
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields, remote = "Self")]
pub struct RestrictionsDoc {
    /// `https://app.example.com` (scheme, host, port if not the default) or
    /// `https://*.example.com` (any subdomain, not the apex).
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub allowed_origins: Vec<String>,
    /// Client addresses or ranges: `203.0.113.7`, `203.0.113.0/24`, `2001:db8::/32`.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub allowed_ips: Vec<String>,
    /// Of [`CHAINS`].
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub allowed_chains: Vec<String>,
    /// JSON-RPC methods by name, or a namespace as `eth_*`.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub allowed_methods: Vec<String>,
    /// EVM contract addresses (0x + 40 hex digits).
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub allowed_contracts: Vec<String>,
    /// Requests (JSON-RPC calls) per second for this key alone, under the plan's.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub max_rps: Option<f64>,
    /// RFC 3339; from then on the key answers 401 `key_expired`.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub expires_at: Option<String>,
    /// The level every JSON-RPC answer to this key must reach (`self` or `quorum`), as
    /// if each request sent `X-Chainedge-Require-Verified`.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub require_verified: Option<String>,
}

/// serde would also read a struct from a JSON array, field by field in order (`[[]]`
/// as empty `allowed_origins`): restrictions are an object or refused.
impl<'de> Deserialize<'de> for RestrictionsDoc {
    fn deserialize<D: serde::Deserializer<'de>>(d: D) -> Result<Self, D::Error> {
        struct ObjectOnly;
        impl<'de> serde::de::Visitor<'de> for ObjectOnly {
            type Value = RestrictionsDoc;
            fn expecting(&self, f: &mut std::fmt::Formatter) -> std::fmt::Result {
                f.write_str("an object of restrictions")
            }
            fn visit_map<A: serde::de::MapAccess<'de>>(
                self,
                map: A,
            ) -> Result<Self::Value, A::Error> {
                RestrictionsDoc::deserialize(serde::de::value::MapAccessDeserializer::new(map))
            }
        }
        d.deserialize_map(ObjectOnly)
    }
}

impl Serialize for RestrictionsDoc {
    fn serialize<S: serde::Serializer>(&self, s: S) -> Result<S::Ok, S::Error> {
        RestrictionsDoc::serialize(self, s)
    }
}

impl RestrictionsDoc {
    pub fn is_empty(&self) -> bool {
        *self == RestrictionsDoc::default()
    }

    /// What an owner asked for, checked and normalised, as it is stored. An expiry
    /// already past at `now` is refused: it would end the key at once (revoke it instead).
    pub fn checked(&self, now: i64) -> Result<RestrictionsDoc, String> {
        match Restrictions::compile(self)? {
            Some(r) if r.expires_at.is_some_and(|at| at <= now) => {
                Err("expires_at is in the past".into())
            }
            Some(r) => Ok(r.doc),
            None => Ok(RestrictionsDoc::default()),
        }
    }
}

/// The restrictions compiled for checking.
#[derive(Debug, Clone, PartialEq)]
pub struct Restrictions {
    doc: RestrictionsDoc,
    origins: Vec<OriginRule>,
    ips: Vec<Cidr>,
    chains: Vec<&'static str>,
    methods: Vec<MethodRule>,
    contracts: Vec<[u8; 20]>,
    pub max_rps: Option<f64>,
    pub expires_at: Option<i64>,
    /// The level every answer must reach (`self`, `quorum`), by the name
    /// `X-Chainedge-Require-Verified` takes.
    pub require_verified: Option<&'static str>,
}

/// `expires_at`: Unix seconds, and the time as shown (RFC 3339, whole seconds).
fn expiry(at: &str) -> Result<(i64, String), String> {
    let secs = humantime::parse_rfc3339_weak(at)
        .ok()
        .and_then(|t| t.duration_since(std::time::UNIX_EPOCH).ok())
        .map(|d| d.as_secs() as i64)
        .ok_or("expires_at is an RFC 3339 time")?;
    let shown = humantime::format_rfc3339_seconds(
        std::time::UNIX_EPOCH + std::time::Duration::from_secs(secs.max(0) as u64),
    );
    Ok((secs, shown.to_string()))
}

/// `require_verified`: `self`, `quorum`, `proof` or `root`; `none` (or absent) is no level.
fn level(named: Option<&str>) -> Result<Option<&'static str>, String> {
    match named.map(str::trim) {
        None | Some("none") => Ok(None),
        Some("self") => Ok(Some("self")),
        Some("quorum") => Ok(Some("quorum")),
        Some("proof") => Ok(Some("proof")),
        Some("root") => Ok(Some("root")),
        Some(other) => Err(format!(
            "require_verified: '{other}' is not a level (self, quorum, proof or root)"
        )),
    }
}

/// A list's error ("allowed_origins: ...") naming the entry ("allowed_origins[2]: ...").
fn at_entry(error: String, index: usize) -> String {
    match error.split_once(": ") {
        Some((list, why)) => format!("{list}[{index}]: {why}"),
        None => error,
    }
}

/// The refusal of a restricted key, naming the restriction.
fn refused(restriction: &'static str, message: String) -> ApiError {
    ApiError::new(403, "key_restricted", message).with_field("restriction", restriction)
}

/// Each list of a restrictions document within its bound.
fn check_bounds(doc: &RestrictionsDoc) -> Result<(), String> {
    let bounded = |name: &str, n: usize, max: usize| {
        if n > max {
            Err(format!("{name} holds at most {max} entries"))
        } else {
            Ok(())
        }
    };
    bounded("allowed_origins", doc.allowed_origins.len(), MAX_ENTRIES)?;
    bounded("allowed_ips", doc.allowed_ips.len(), MAX_ENTRIES)?;
    bounded("allowed_chains", doc.allowed_chains.len(), CHAINS.len())?;
    bounded("allowed_methods", doc.allowed_methods.len(), MAX_METHODS)?;
    bounded(
        "allowed_contracts",
        doc.allowed_contracts.len(),
        MAX_CONTRACTS,
    )
}

impl Restrictions {
    /// Check and compile what an owner asked for; the error says which entry is wrong.
    /// `Ok(None)`: nothing is restricted.
    pub fn compile(doc: &RestrictionsDoc) -> Result<Option<Restrictions>, String> {
        check_bounds(doc)?;
        let mut out = Restrictions {
            doc: RestrictionsDoc::default(),
            origins: Vec::new(),
            ips: Vec::new(),
            chains: Vec::new(),
            methods: Vec::new(),
            contracts: Vec::new(),
            max_rps: None,
            expires_at: None,
            require_verified: None,
        };
        let mut shown = RestrictionsDoc::default();
        for (i, o) in doc.allowed_origins.iter().enumerate() {
            let (rule, text) = origin_rule(o).map_err(|e| at_entry(e, i))?;
            if !out.origins.contains(&rule) {
                out.origins.push(rule);
                shown.allowed_origins.push(text);
            }
        }
        for (i, ip) in doc.allowed_ips.iter().enumerate() {
            let cidr = Cidr::parse(ip)
                .filter(|_| ip.len() <= 45)
                .ok_or_else(|| format!("allowed_ips[{i}]: '{ip}' is not an address or a range"))?;
            if !out.ips.contains(&cidr) {
                out.ips.push(cidr);
                shown.allowed_ips.push(ip.trim().to_ascii_lowercase());
            }
        }
        for (i, c) in doc.allowed_chains.iter().enumerate() {
            let chain = CHAINS.iter().find(|k| **k == c.as_str()).ok_or_else(|| {
                format!(
                    "allowed_chains[{i}]: '{c}' is not one of {}",
                    CHAINS.join(", ")
                )
            })?;
            if !out.chains.contains(chain) {
                out.chains.push(chain);
                shown.allowed_chains.push(chain.to_string());
            }
        }
        for (i, m) in doc.allowed_methods.iter().enumerate() {
            let rule = method_rule(m).map_err(|e| at_entry(e, i))?;
            if !out.methods.contains(&rule) {
                out.methods.push(rule);
                shown.allowed_methods.push(m.clone());
            }
        }
        for (i, c) in doc.allowed_contracts.iter().enumerate() {
            let a = address(c).ok_or_else(|| {
                format!("allowed_contracts[{i}]: '{c}' is not an address (0x + 40 hex digits)")
            })?;
            if !out.contracts.contains(&a) {
                out.contracts.push(a);
                shown
                    .allowed_contracts
                    .push(format!("0x{}", hex::encode(a)));
            }
        }
        if let Some(rps) = doc.max_rps {
            if !rps.is_finite() || !(0.01..=1_000_000.0).contains(&rps) {
                return Err("max_rps is a number from 0.01 to 1000000".into());
            }
            out.max_rps = Some(rps);
            shown.max_rps = Some(rps);
        }
        if let Some(at) = &doc.expires_at {
            let (secs, text) = expiry(at)?;
            (out.expires_at, shown.expires_at) = (Some(secs), Some(text));
        }
        out.require_verified = level(doc.require_verified.as_deref())?;
        shown.require_verified = out.require_verified.map(str::to_string);
        if shown.is_empty() {
            return Ok(None);
        }
        out.doc = shown;
        Ok(Some(out))
    }

    /// The restrictions as the API shows them (normalised: lower case, no repeats).
    pub fn doc(&self) -> &RestrictionsDoc {
        &self.doc
    }

    /// The request as a whole: the browser's `Origin`, the client's address, the chain
    /// of the route (`None`: a route of no chain, such as the tenant's `/ws/txs`).
    pub fn request(
        &self,
        origin: Option<&str>,
        client: Option<IpAddr>,
        chain: Option<&str>,
    ) -> Result<(), ApiError> {
        if !self.origins.is_empty() {
            let Some(origin) = origin else {
                return Err(refused(
                    "allowed_origins",
                    "this key answers browsers of its allowed origins only; the request has no Origin".into(),
                ));
            };
            if !self.origins.iter().any(|r| origin_matches(r, origin)) {
                return Err(refused(
                    "allowed_origins",
                    format!("origin {origin} is not among this key's allowed origins"),
                ));
            }
        }
        if !self.ips.is_empty() && !client.is_some_and(|ip| self.ips.iter().any(|c| c.contains(ip)))
        {
            return Err(refused(
                "allowed_ips",
                format!(
                    "client address {} is not among this key's allowed addresses",
                    client.map_or("unknown".into(), |c| c.to_string())
                ),
            ));
        }
        if let (false, Some(chain)) = (self.chains.is_empty(), chain) {
            if !self.chains.contains(&chain) {
                return Err(refused(
                    "allowed_chains",
                    format!("this key is not allowed on {chain}"),
                ));
            }
        }
        Ok(())
    }

    /// A JSON-RPC method by name (the REST senders count as the method they send by).
    pub fn method(&self, method: &str) -> Result<(), ApiError> {
        if !self.methods.is_empty() && !self.methods.iter().any(|r| method_matches(r, method)) {
            return Err(refused(
                "allowed_methods",
                format!("{method} is not among this key's allowed methods"),
            ));
        }
        Ok(())
    }

    /// One JSON-RPC call: its method, and the contracts it reaches.
    pub fn call(&self, method: &str, params: Option<&Value>) -> Result<(), ApiError> {
        self.method(method)?;
        if self.contracts.is_empty() {
            return Ok(());
        }
        match targets(method, params) {
            Targets::None => Ok(()),
            Targets::Some(list) => match list.iter().find(|a| !self.contracts.contains(a)) {
                Some(a) => Err(refused(
                    "allowed_contracts",
                    format!(
                        "0x{} is not among this key's allowed contracts",
                        hex::encode(a)
                    ),
                )),
                None => Ok(()),
            },
            Targets::Unchecked(why) => Err(refused(
                "allowed_contracts",
                format!("{method}: {why}; this key may reach its allowed contracts only"),
            )),
        }
    }

    /// A signed transaction a sender is asked to send: `to` is its recipient (`None`:
    /// it creates a contract).
    pub fn transaction(&self, to: Option<[u8; 20]>) -> Result<(), ApiError> {
        if self.contracts.is_empty() {
            return Ok(());
        }
        match to {
            Some(a) if self.contracts.contains(&a) => Ok(()),
            Some(a) => Err(refused(
                "allowed_contracts",
                format!(
                    "0x{} is not among this key's allowed contracts",
                    hex::encode(a)
                ),
            )),
            None => Err(refused(
                "allowed_contracts",
                "a contract creation reaches no allowed contract".into(),
            )),
        }
    }
}

/// The chain a route serves, by its name (`eth.wallet.balance`, `streams.sol.watchlist`):
/// the first part, or for streams the second; MEV-Share and beacon events are Ethereum's.
/// `None` for routes of no one chain (the tenant's transaction channel).
pub fn chain_of_route(name: &str) -> Option<&'static str> {
    let mut parts = name.split('.');
    let first = parts.next()?;
    let chain = match first {
        "streams" => match parts.next()? {
            "mev_share" | "beacon_events" => "eth",
            other => other,
        },
        other => other,
    };
    CHAINS.iter().find(|c| **c == chain).copied()
}

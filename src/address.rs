//! Node addresses: a parsed `http(s)://host:port/path` (or `ws(s)://`) URL and the peer
//! Pingora connects to. A leaf: configuration checks, pools and the sign-in client use it.

use crate::net_policy::Cidr;
use pingora_core::upstreams::peer::HttpPeer;
use std::net::{IpAddr, ToSocketAddrs};
use std::time::Duration;

/// Where a host's `url_key` (a provider key, from a secret reference) goes in its URLs.
pub const URL_KEY_PLACE: &str = "{key}";

/// A parsed `http(s)://host:port/path` upstream address.
#[derive(Clone)]
pub struct HostAddr {
    pub tls: bool,
    pub host: String,
    pub port: u16,
    /// The path requests go to; holds the provider key when the URL had `{key}`.
    pub path: String,
    /// The `Host` header value, made once (every request to the node sends it).
    authority: String,
    /// The path as configured (`{key}` where the key goes): what may be shown.
    shown_path: String,
}

/// Never prints the provider key a path may hold.
impl std::fmt::Debug for HostAddr {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("HostAddr")
            .field("tls", &self.tls)
            .field("host", &self.host)
            .field("port", &self.port)
            .field("path", &self.shown_path)
            .finish()
    }
}

impl HostAddr {
    /// A WebSocket endpoint: `ws://` and `wss://` are the upgrade's `http://` / `https://`.
    pub fn parse_ws(url: &str) -> Result<Self, String> {
        let http = if let Some(r) = url.strip_prefix("wss://") {
            format!("https://{r}")
        } else if let Some(r) = url.strip_prefix("ws://") {
            format!("http://{r}")
        } else {
            url.to_string()
        };
        HostAddr::parse(&http)
    }

    pub fn parse(url: &str) -> Result<Self, String> {
        let (tls, rest) = if let Some(r) = url.strip_prefix("https://") {
            (true, r)
        } else if let Some(r) = url.strip_prefix("http://") {
            (false, r)
        } else {
            return Err(format!("'{url}' must start with http:// or https://"));
        };
        let (authority, path) = match rest.find('/') {
            Some(i) => (&rest[..i], &rest[i..]),
            None => (rest, "/"),
        };
        // These errors never repeat the URL: what they refuse may be a secret.
        if authority.contains('@') {
            return Err(
                "credentials in URLs are refused; use headers with secret references".into(),
            );
        }
        if path.contains('?') {
            return Err(
                "query strings are refused (no keys in URLs): use headers, or {key} in the path with url_key"
                    .into(),
            );
        }
        if let Some(seg) = path.split('/').find(|s| looks_like_key(s)) {
            // The error never repeats the key itself.
            let shown = format!("{}…", &seg[..4]);
            return Err(format!(
                "the path segment '{shown}' looks like a provider key; keys are never written in URLs: put {{key}} in its place and url_key: <secret reference> (env:, file: or cred:)"
            ));
        }
        let (host, port) = match authority.rsplit_once(':') {
            Some((h, p)) if !h.ends_with(']') || h.starts_with('[') => {
                let port = p
                    .parse::<u16>()
                    .map_err(|_| format!("'{url}': bad port '{p}'"))?;
                (
                    h.trim_start_matches('[').trim_end_matches(']').to_string(),
                    port,
                )
            }
            _ => (authority.to_string(), if tls { 443 } else { 80 }),
        };
        if host.is_empty() {
            return Err(format!("'{url}': missing host"));
        }
        let default = if tls { 443 } else { 80 };
        let authority = if port == default {
            host.clone()
        } else if host.contains(':') {
            format!("[{host}]:{port}")
        } else {
            format!("{host}:{port}")
        };
        Ok(HostAddr {
            tls,
            host,
            port,
            path: path.to_string(),
            authority,
            shown_path: path.to_string(),
        })
    }

    /// The provider key in the place of `{key}` (checked at load to be one plain path
    /// segment).
    pub fn with_key(mut self, key: Option<&str>) -> Self {
        if let Some(key) = key {
            self.path = self.shown_path.replace(URL_KEY_PLACE, key);
        }
        self
    }

    /// `Host` header value.
    pub fn authority(&self) -> &str {
        &self.authority
    }

    pub fn peer(&self, sni: Option<&str>) -> Result<HttpPeer, String> {
        let addr = (self.host.as_str(), self.port)
            .to_socket_addrs()
            .map_err(|e| format!("cannot resolve {}: {e}", self.host))?
            .next()
            .ok_or_else(|| format!("{} resolves to no address", self.host))?;
        let mut peer = HttpPeer::new(addr, self.tls, sni.unwrap_or(&self.host).to_string());
        peer.options.connection_timeout = Some(Duration::from_secs(2));
        peer.options.idle_timeout = Some(Duration::from_secs(60));
        Ok(peer)
    }
}

/// A path segment that looks like a provider's key (Infura's 32 hex digits, Alchemy's
/// 32 letters and digits, QuickNode's 40-hex token): 20 or more characters of letters,
/// digits, `-` and `_` where letters and digits alternate at least 4 times, as random
/// text does. Names people write (`v3`, `eth-mainnet`, `archive-2024`) do not.
fn looks_like_key(seg: &str) -> bool {
    let b = seg.as_bytes();
    let alternations = b
        .windows(2)
        .filter(|w| {
            (w[0].is_ascii_digit() && w[1].is_ascii_alphabetic())
                || (w[0].is_ascii_alphabetic() && w[1].is_ascii_digit())
        })
        .count();
    b.len() >= 20
        && b.iter()
            .all(|c| c.is_ascii_alphanumeric() || *c == b'-' || *c == b'_')
        && alternations >= 4
}

/// The address of a peer the lean client serves: plain HTTP over TCP (not TLS, not a
/// Unix socket).
pub fn plain_inet(peer: &HttpPeer) -> Option<std::net::SocketAddr> {
    use pingora_core::upstreams::peer::Peer;
    (!peer.tls())
        .then(|| peer.address().as_inet().copied())
        .flatten()
}

/// The name a client is counted under by per-client bounds: an IPv4 address as it is, an
/// IPv6 address by its /64 (one subscriber's usual allocation, so rotating through it
/// gains nothing).
pub fn client_bucket(ip: Option<IpAddr>) -> String {
    match ip {
        None => "unknown".into(),
        Some(IpAddr::V4(v4)) => v4.to_string(),
        Some(IpAddr::V6(v6)) => match v6.to_ipv4_mapped() {
            Some(v4) => v4.to_string(),
            None => {
                let s = v6.segments();
                format!("{:x}:{:x}:{:x}:{:x}::/64", s[0], s[1], s[2], s[3])
            }
        },
    }
}

/// Addresses whose forwarding headers are believed (`console.trusted_proxies`): single
/// addresses or CIDR ranges (`10.0.0.0/8`, `fd00::/8`).
#[derive(Debug, Clone, Default)]
pub struct TrustedProxies {
    ranges: Vec<Cidr>,
}

impl TrustedProxies {
    /// Parse the configured entries; the first one that is neither an address nor a
    /// range is the error.
    pub fn parse<S: AsRef<str>>(entries: &[S]) -> Result<TrustedProxies, String> {
        let ranges = entries
            .iter()
            .map(|e| {
                let e = e.as_ref().trim();
                Cidr::parse(e).ok_or_else(|| {
                    format!(
                        "'{e}' is not an IP address or CIDR range (prefix 0-32, or 0-128 for IPv6)"
                    )
                })
            })
            .collect::<Result<_, _>>()?;
        Ok(TrustedProxies { ranges })
    }

    pub fn contains(&self, ip: IpAddr) -> bool {
        self.ranges.iter().any(|r| r.contains(ip))
    }

    /// The client behind `peer`: when `peer` is trusted, the right-most address of
    /// `X-Forwarded-For` that is not itself a trusted proxy (the left part of the chain
    /// is whatever the client chose to send); otherwise `peer`. An entry written as
    /// `ip:port` or `[v6]:port` is read for its address; one that cannot be read at all
    /// (`unknown`, a name) makes the client [`UNKNOWN_CLIENT`], never the proxy: a
    /// proxy on loopback must not lend its clients loopback's trust.
    pub fn client(&self, peer: IpAddr, forwarded_for: Option<&str>) -> IpAddr {
        if !self.contains(peer) {
            return peer;
        }
        let Some(chain) = forwarded_for else {
            return peer;
        };
        let mut client = peer;
        for hop in chain.rsplit(',') {
            let Some(ip) = forwarded_address(hop.trim()) else {
                return UNKNOWN_CLIENT;
            };
            client = ip;
            if !self.contains(ip) {
                break;
            }
        }
        client
    }
}

/// The client a trusted proxy named in a way that cannot be read: no loopback, no
/// private range, never admin; such clients share one rate-limit bucket.
pub const UNKNOWN_CLIENT: IpAddr = IpAddr::V4(std::net::Ipv4Addr::UNSPECIFIED);

/// One `X-Forwarded-For` entry's address: `ip`, `ip:port`, `[v6]` or `[v6]:port`.
fn forwarded_address(entry: &str) -> Option<IpAddr> {
    if let Ok(ip) = entry.parse::<IpAddr>() {
        return Some(ip);
    }
    if let Ok(sock) = entry.parse::<std::net::SocketAddr>() {
        return Some(sock.ip());
    }
    entry
        .strip_prefix('[')
        .and_then(|e| e.strip_suffix(']'))
        .and_then(|e| e.parse::<std::net::Ipv6Addr>().ok())
        .map(IpAddr::V6)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn keys_are_never_written_in_urls() {
        for url in [
            "https://mainnet.infura.io/v3/9aa3d95b3bc440fa88ea12eaa4456161",
            "https://eth-mainnet.g.alchemy.com/v2/Zq3xK9pLmN2vB7cR4tY8wE1uI6oP0aSd",
            "https://x.quiknode.pro/0123456789abcdef0123456789abcdef01234567/",
        ] {
            let e = HostAddr::parse(url).unwrap_err();
            assert!(e.contains("looks like a provider key"), "{e}");
            assert!(!e.contains(&url[url.len() - 12..url.len() - 2]), "{e}");
        }
        for url in [
            "https://u:secretpass@node:8545/",
            "https://node/rpc?apikey=secretpass",
        ] {
            assert!(!HostAddr::parse(url).unwrap_err().contains("secretpass"));
        }
        for url in [
            "https://eth-mainnet.g.alchemy.com/v2/{key}",
            "https://api.mainnet-beta.solana.com/",
            "https://node/ext/bc/C/rpc",
            "https://node/eth-mainnet-archive-2024",
        ] {
            assert!(HostAddr::parse(url).is_ok(), "{url}");
        }
        let a = HostAddr::parse("https://eth-mainnet.g.alchemy.com/v2/{key}")
            .unwrap()
            .with_key(Some("Zq3xK9pLmN2vB7cR4tY8wE1uI6oP0aSd"));
        assert_eq!(a.path, "/v2/Zq3xK9pLmN2vB7cR4tY8wE1uI6oP0aSd");
        let shown = format!("{a:?}");
        assert!(
            shown.contains("/v2/{key}") && !shown.contains("Zq3x"),
            "{shown}"
        );
    }
}

#[cfg(test)]
mod trusted_tests {
    use super::TrustedProxies;

    #[test]
    fn ranges_and_the_real_client() {
        let t = TrustedProxies::parse(&["10.0.0.0/8", "192.168.1.7", "fd00::/8"]).unwrap();
        assert!(t.contains("10.20.30.40".parse().unwrap()));
        assert!(t.contains("::ffff:10.1.2.3".parse().unwrap()));
        assert!(t.contains("192.168.1.7".parse().unwrap()));
        assert!(!t.contains("192.168.1.8".parse().unwrap()));
        assert!(t.contains("fd12::1".parse().unwrap()));
        assert!(!t.contains("fe80::1".parse().unwrap()));
        let lb = "10.0.0.5".parse().unwrap();
        // The client's own claim on the left is ignored; the last untrusted hop counts.
        assert_eq!(
            t.client(lb, Some("6.6.6.6, 203.0.113.9, 10.0.0.4")),
            "203.0.113.9".parse::<std::net::IpAddr>().unwrap()
        );
        assert_eq!(t.client(lb, None), lb);
        // From an untrusted peer the header means nothing.
        let peer = "198.51.100.1".parse().unwrap();
        assert_eq!(t.client(peer, Some("203.0.113.9")), peer);
        assert!(TrustedProxies::parse(&["10.0.0.0/33"]).is_err());
        assert!(TrustedProxies::parse(&["proxy.local"]).is_err());
    }

    /// A proxy on loopback, trusted, writing entries the edge cannot read as an address:
    /// the client is unknown, never the proxy (which would be loopback, hence admin).
    #[test]
    fn an_unreadable_client_is_unknown_never_the_proxy() {
        use super::UNKNOWN_CLIENT;
        use std::net::IpAddr;
        let t = TrustedProxies::parse(&["127.0.0.1"]).unwrap();
        let lo: IpAddr = "127.0.0.1".parse().unwrap();
        let ip = |s: &str| s.parse::<IpAddr>().unwrap();
        assert_eq!(t.client(lo, Some("203.0.113.9:51234")), ip("203.0.113.9"));
        assert_eq!(t.client(lo, Some("[2001:db8::7]:443")), ip("2001:db8::7"));
        assert_eq!(t.client(lo, Some("[2001:db8::7]")), ip("2001:db8::7"));
        for unreadable in ["unknown", "_hidden", "proxy.local", "1.2.3", "", "[::1"] {
            let client = t.client(lo, Some(unreadable));
            assert_eq!(client, UNKNOWN_CLIENT, "{unreadable:?}");
            assert!(!client.is_loopback());
        }
        // Behind readable hops, the first unreadable one still ends it as unknown.
        assert_eq!(t.client(lo, Some("203.0.113.9, unknown")), UNKNOWN_CLIENT);
    }
}

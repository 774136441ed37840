//! Node addresses: a parsed `http(s)://host:port/path` (or `ws(s)://`) URL and the peer
//! Pingora connects to. A leaf: configuration checks, pools and the sign-in client use it.

use pingora_core::upstreams::peer::HttpPeer;
use std::net::ToSocketAddrs;
use std::time::Duration;

/// A parsed `http(s)://host:port/path` upstream address.
#[derive(Debug, Clone)]
pub struct HostAddr {
    pub tls: bool,
    pub host: String,
    pub port: u16,
    pub path: String,
    /// The `Host` header value, made once (every request to the node sends it).
    authority: String,
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
        if authority.contains('@') {
            return Err(format!(
                "'{url}': credentials in URLs are refused; use headers with secret references"
            ));
        }
        if path.contains('?') {
            return Err(format!(
                "'{url}': query strings are refused (no keys in URLs)"
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
        })
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

/// The address of a peer the lean client serves: plain HTTP over TCP (not TLS, not a
/// Unix socket).
pub fn plain_inet(peer: &HttpPeer) -> Option<std::net::SocketAddr> {
    use pingora_core::upstreams::peer::Peer;
    (!peer.tls())
        .then(|| peer.address().as_inet().copied())
        .flatten()
}

//! Webhook deliveries (Solana watchlist push, transaction status hooks): HTTPS only, to
//! public addresses only (unless an operator allows a range), signed, retried with
//! backoff; the caller dead-letters what failed every attempt.
//!
//! **Where a callback may point.** The URL must be `https://` with a host and no user
//! information. Its name is resolved for every attempt and every address checked
//! (`net_policy`); the connection goes to a checked address (the TLS name still the
//! URL's host), so a DNS answer that changes after the check cannot redirect it inside.
//! Redirects are never followed: a 3xx is a failed attempt.
//!
//! **Signing.** Each entry (a watchlist entry, a transaction hook) has its own secret,
//! derived from its push's master secret (`solana.watchlist.signing_secret`,
//! `tx_tracking.signing_secret`), the push's domain and the entry id (nothing secret is
//! stored), given to the tenant when the entry is created. Every delivery carries `X-Chainedge-Timestamp` (Unix seconds)
//! and `X-Chainedge-Signature: v1=<hex HMAC-SHA256(entry secret, "<timestamp>.<body>")>`;
//! a receiver recomputes it and refuses old timestamps.

use crate::config::secrets::Secret;
use crate::config::WebhookConf;
use crate::net_policy::{self, Cidr};
use crate::upstream::{Call, UpstreamClient};
use bytes::Bytes;
use hmac::{Hmac, Mac};
use pingora_core::upstreams::peer::HttpPeer;
use sha2::Sha256;
use std::net::{IpAddr, SocketAddr};
use std::time::Duration;

/// Largest answer read from a receiver (only its status matters).
const MAX_ANSWER: usize = 64 * 1024;
/// How long resolving a callback's name may take.
const RESOLVE_TIMEOUT: Duration = Duration::from_secs(3);

/// A callback URL taken apart: the host (a name or an address), the port, the path.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Target {
    pub host: String,
    pub port: u16,
    pub path: String,
}

/// Check a callback URL's form (not yet where it resolves).
pub fn parse(url: &str) -> Result<Target, String> {
    if url.len() > 2048 {
        return Err("the callback URL is longer than 2048 characters".into());
    }
    let uri: http::Uri = url
        .parse()
        .map_err(|_| "the callback is not a URL".to_string())?;
    if uri.scheme_str() != Some("https") {
        return Err("webhook callbacks must be https:// URLs".into());
    }
    let authority = uri
        .authority()
        .ok_or_else(|| "the callback URL has no host".to_string())?;
    if authority.as_str().contains('@') {
        return Err("the callback URL must not carry user information".into());
    }
    let host = authority
        .host()
        .trim_start_matches('[')
        .trim_end_matches(']')
        .to_ascii_lowercase();
    if host.is_empty() {
        return Err("the callback URL has no host".into());
    }
    Ok(Target {
        host,
        port: authority.port_u16().unwrap_or(443),
        path: uri
            .path_and_query()
            .map(|p| p.as_str().to_string())
            .unwrap_or_else(|| "/".into()),
    })
}

/// The addresses `target` may be reached at now, every one checked.
pub async fn resolve(target: &Target, allow: &[Cidr]) -> Result<Vec<SocketAddr>, String> {
    let addrs: Vec<SocketAddr> = match target.host.parse::<IpAddr>() {
        Ok(ip) => vec![SocketAddr::new(ip, target.port)],
        Err(_) => tokio::time::timeout(
            RESOLVE_TIMEOUT,
            tokio::net::lookup_host((target.host.as_str(), target.port)),
        )
        .await
        .map_err(|_| format!("resolving {} timed out", target.host))?
        .map_err(|e| format!("{} does not resolve: {e}", target.host))?
        .collect(),
    };
    let ips: Vec<IpAddr> = addrs.iter().map(SocketAddr::ip).collect();
    net_policy::allowed(&ips, allow).map_err(|why| format!("{} resolves to {why}", target.host))?;
    Ok(addrs)
}

/// Whether a tenant's callback URL may be stored: its form, and where it resolves now
/// (checked again at every delivery).
pub async fn check_callback(url: &str, allow: &[Cidr]) -> Result<(), String> {
    resolve(&parse(url)?, allow).await.map(drop)
}

/// Whose entries a secret signs for: one push's entries never share another's secrets.
pub const SOL_WATCHLIST: &str = "chainedge/sol-watchlist/";
pub const TX_HOOKS: &str = "chainedge/tx-hooks/";

/// An entry's signing secret (hex), derived from the master secret, the push's domain
/// and the entry id.
pub fn entry_secret(master: &Secret, domain: &str, entry_id: &str) -> String {
    let mut mac = Hmac::<Sha256>::new_from_slice(master.expose().as_bytes())
        .expect("HMAC takes any key length");
    mac.update(domain.as_bytes());
    mac.update(entry_id.as_bytes());
    hex::encode(mac.finalize().into_bytes())
}

/// `v1=<hex>` over `"<timestamp>.<body>"` with the entry's secret.
pub fn signature(entry_secret: &str, timestamp: i64, body: &[u8]) -> String {
    let mut mac =
        Hmac::<Sha256>::new_from_slice(entry_secret.as_bytes()).expect("HMAC takes any key length");
    mac.update(timestamp.to_string().as_bytes());
    mac.update(b".");
    mac.update(body);
    format!("v1={}", hex::encode(mac.finalize().into_bytes()))
}

/// The client webhooks go out on (its own TLS trust when `ca_file` is set).
pub struct Sender {
    client: UpstreamClient,
    allow: Vec<Cidr>,
    timeout: Duration,
    attempts: u32,
    backoff: Duration,
}

impl Sender {
    pub fn new(conf: &WebhookConf) -> Sender {
        Sender {
            client: UpstreamClient::with_ca_file(
                conf.ca_file
                    .as_ref()
                    .map(|p| p.to_string_lossy().into_owned()),
            ),
            allow: conf
                .allow_private
                .iter()
                .filter_map(|c| Cidr::parse(c))
                .collect(),
            timeout: Duration::from_millis(conf.timeout_ms.max(100)),
            attempts: conf.max_attempts.max(1),
            backoff: Duration::from_millis(conf.backoff_ms),
        }
    }

    /// Every attempt of one delivery, signed with `entry_secret`, the wait doubling
    /// between attempts: the attempts it took, or `Err` with the attempts made and the
    /// last failure when none was answered 2xx.
    pub async fn deliver(
        &self,
        url: &str,
        body: &Bytes,
        entry_secret: &str,
        delivery_id: &str,
    ) -> Result<u32, (u32, String)> {
        let mut wait = self.backoff;
        let mut last = String::new();
        for n in 1..=self.attempts {
            match self.once(url, body, entry_secret, delivery_id, n).await {
                Ok(()) => return Ok(n),
                Err(e) => last = e,
            }
            if n < self.attempts {
                tokio::time::sleep(wait).await;
                wait = wait.saturating_mul(2);
            }
        }
        Err((self.attempts, last))
    }

    /// One signed attempt (number `n` of its delivery): a test, a retry by hand, or one
    /// of `deliver`'s.
    pub async fn once(
        &self,
        url: &str,
        body: &Bytes,
        entry_secret: &str,
        delivery_id: &str,
        n: u32,
    ) -> Result<(), String> {
        let ts = crate::clock::now();
        let header = |name: &str, value: &str| (name.to_string(), Secret::not_secret(value));
        let headers = [
            header("X-Chainedge-Signature", &signature(entry_secret, ts, body)),
            header("X-Chainedge-Timestamp", &ts.to_string()),
            header("X-Chainedge-Delivery", delivery_id),
            header("X-Chainedge-Attempt", &n.to_string()),
        ];
        self.attempt(url, body, &headers, delivery_id).await
    }

    pub fn allow(&self) -> &[Cidr] {
        &self.allow
    }

    /// One attempt: a 2xx answer is delivered; anything else says why not.
    pub async fn attempt(
        &self,
        url: &str,
        body: &Bytes,
        headers: &[(String, Secret)],
        delivery_id: &str,
    ) -> Result<(), String> {
        let target = parse(url)?;
        let addrs = resolve(&target, &self.allow).await?;
        let authority = if target.port == 443 {
            target.host.clone()
        } else if target.host.contains(':') {
            format!("[{}]:{}", target.host, target.port)
        } else {
            format!("{}:{}", target.host, target.port)
        };
        let mut last = String::new();
        for addr in addrs {
            let peer = HttpPeer::new(addr, true, target.host.clone());
            let call = Call {
                peer: &peer,
                authority: &authority,
                method: "POST",
                path: &target.path,
                headers,
                body: Some(body),
                content_type: Some("application/json"),
                request_id: delivery_id,
            };
            match self.client.send(call, self.timeout, MAX_ANSWER).await {
                Ok(r) if (200..300).contains(&r.status) => return Ok(()),
                Ok(r) if (300..400).contains(&r.status) => {
                    return Err(format!("HTTP {} (redirects are not followed)", r.status))
                }
                Ok(r) => return Err(format!("HTTP {}", r.status)),
                Err(e) => last = format!("{addr}: {e}"),
            }
        }
        Err(last)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn callback_urls_are_https_with_a_host_and_no_user() {
        let t = parse("https://hooks.example.com/a/b?x=1").unwrap();
        assert_eq!(
            (t.host.as_str(), t.port, t.path.as_str()),
            ("hooks.example.com", 443, "/a/b?x=1")
        );
        assert_eq!(parse("https://[::1]:8443").unwrap().host, "::1");
        assert_eq!(parse("https://Example.COM").unwrap().path, "/");
        for bad in [
            "http://example.com/",
            "ftp://example.com/",
            "https://user:pw@example.com/",
            "https://@example.com/",
            "example.com",
            "/relative",
            "",
        ] {
            assert!(parse(bad).is_err(), "{bad}");
        }
    }

    #[tokio::test]
    async fn names_and_literals_resolving_inside_are_refused() {
        for url in [
            "https://127.0.0.1/",
            "https://10.0.0.8/",
            "https://169.254.169.254/latest/meta-data",
            "https://[::1]/",
            "https://[::ffff:127.0.0.1]/",
            "https://localhost/",
        ] {
            let t = parse(url).unwrap();
            let e = resolve(&t, &[]).await.unwrap_err();
            assert!(e.contains("address") || e.contains("resolve"), "{url}: {e}");
        }
        let lo = [
            Cidr::parse("127.0.0.0/8").unwrap(),
            Cidr::parse("::1").unwrap(),
        ];
        assert!(resolve(&parse("https://localhost:9/").unwrap(), &lo)
            .await
            .is_ok());
    }

    #[test]
    fn signatures_cover_the_timestamp_and_the_body() {
        let master = Secret::not_secret(&"k".repeat(32));
        let a = entry_secret(&master, SOL_WATCHLIST, "entry-a");
        assert_ne!(a, entry_secret(&master, SOL_WATCHLIST, "entry-b"));
        assert_ne!(a, entry_secret(&master, TX_HOOKS, "entry-a"));
        assert_eq!(a.len(), 64);
        let s = signature(&a, 1700000000, b"{}");
        assert!(s.starts_with("v1="));
        assert_ne!(s, signature(&a, 1700000001, b"{}"));
        assert_ne!(s, signature(&a, 1700000000, b"{ }"));
    }
}

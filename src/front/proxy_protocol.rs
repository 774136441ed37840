//! The PROXY protocol (HAProxy's, v1 text and v2 binary) on the listeners configured
//! for it (`listen.proxy_protocol`). An L4 proxy in front (haproxy `send-proxy` or
//! `send-proxy-v2`, nginx `proxy_protocol on` in a `stream` block) writes the client's
//! address before the first byte of HTTP or TLS; the edge then judges that client, not
//! the proxy: the loopback-origin admin rule, key restrictions by address, the
//! per-client connection cap, logs.
//!
//! Such a listener takes nothing else: a connection whose first bytes are not a complete
//! header within `HEADER_TIMEOUT` and `MAX_HEADER` bytes is closed unanswered (the
//! protocol forbids guessing). A header that names no client (v1 `UNKNOWN`, v2 `LOCAL`
//! as haproxy's own health checks send, or a Unix socket) leaves the client unknown
//! (`0.0.0.0`), never the proxy's own address. Parsing is the `ppp` crate's.

use pingora_core::protocols::l4::socket::SocketAddr as PingoraAddr;
use pingora_core::protocols::l4::stream::Stream as L4Stream;
use pingora_core::protocols::{GetSocketDigest, SocketDigest};
use ppp::{v1, v2, HeaderResult, PartialResult};
use std::collections::HashSet;
use std::net::{IpAddr, Ipv4Addr, SocketAddr};
use std::os::fd::AsRawFd;
use std::time::Duration;
use tokio::io::{AsyncRead, AsyncReadExt};

/// Largest header taken: v1 is at most 107 bytes; v2's TLVs as haproxy and nginx send
/// them (ALPN, authority, unique id, SSL details) fit well within this.
pub const MAX_HEADER: usize = 4096;
/// The whole header must arrive within this of the accept.
pub const HEADER_TIMEOUT: Duration = Duration::from_secs(5);

/// The client a header names: `None` when it names none (`UNKNOWN`, `LOCAL`, Unix).
pub type Client = Option<SocketAddr>;

/// The address a connection whose header names no client is judged by.
pub const UNKNOWN_CLIENT: SocketAddr = SocketAddr::new(IpAddr::V4(Ipv4Addr::UNSPECIFIED), 0);

/// What the bytes read so far hold.
#[derive(Debug, PartialEq)]
pub enum Parsed {
    /// A complete header of `len` bytes naming `client`.
    Header { client: Client, len: usize },
    /// A header may still be completed by more bytes.
    Partial,
    /// Not a header, or one this edge does not take.
    Invalid(&'static str),
}

/// Read `buf` (the connection's first bytes) as a PROXY header.
pub fn parse(buf: &[u8]) -> Parsed {
    if buf.len() > MAX_HEADER {
        return Parsed::Invalid("header too long");
    }
    let read = HeaderResult::parse(buf);
    if read.is_incomplete() {
        // A v2 header announces its length up front: refuse a long one at once.
        if buf.len() >= 16 && buf.starts_with(b"\r\n\r\n\0\r\nQUIT\n") {
            let announced = 16 + u16::from_be_bytes([buf[14], buf[15]]) as usize;
            if announced > MAX_HEADER {
                return Parsed::Invalid("header too long");
            }
        }
        return Parsed::Partial;
    }
    match read {
        HeaderResult::V1(Ok(h)) => Parsed::Header {
            len: h.header.len(),
            client: match h.addresses {
                v1::Addresses::Tcp4(a) => {
                    Some(SocketAddr::new(a.source_address.into(), a.source_port))
                }
                v1::Addresses::Tcp6(a) => {
                    Some(SocketAddr::new(a.source_address.into(), a.source_port))
                }
                v1::Addresses::Unknown => None,
            },
        },
        HeaderResult::V2(Ok(h)) => Parsed::Header {
            len: h.len(),
            client: match (h.command, h.addresses) {
                (v2::Command::Local, _) => None,
                (_, v2::Addresses::IPv4(a)) => {
                    Some(SocketAddr::new(a.source_address.into(), a.source_port))
                }
                (_, v2::Addresses::IPv6(a)) => {
                    Some(SocketAddr::new(a.source_address.into(), a.source_port))
                }
                (_, v2::Addresses::Unix(_) | v2::Addresses::Unspecified) => None,
            },
        },
        HeaderResult::V1(Err(_)) | HeaderResult::V2(Err(_)) => {
            Parsed::Invalid("not a PROXY header")
        }
    }
}

/// Read the header from `io`: the client it names and the bytes read past it (the
/// start of the HTTP or TLS stream), or why the connection is to be closed.
pub async fn read_header<S: AsyncRead + Unpin>(
    io: &mut S,
) -> Result<(Client, Vec<u8>), &'static str> {
    let mut buf = Vec::with_capacity(256);
    let read = async {
        loop {
            let mut chunk = [0u8; 512];
            let n = io.read(&mut chunk).await.map_err(|_| "read failed")?;
            if n == 0 {
                return Err("closed before a header");
            }
            buf.extend_from_slice(&chunk[..n]);
            match parse(&buf) {
                Parsed::Header { client, len } => return Ok((client, buf.split_off(len))),
                Parsed::Partial => continue,
                Parsed::Invalid(why) => return Err(why),
            }
        }
    };
    tokio::time::timeout(HEADER_TIMEOUT, read)
        .await
        .unwrap_or(Err("no header in time"))
}

/// A socket digest of `fd` whose peer is `client` (or the unknown client).
pub fn digest_for(fd: std::os::fd::RawFd, client: Client) -> SocketDigest {
    let digest = SocketDigest::from_raw_fd(fd);
    let peer = PingoraAddr::Inet(client.unwrap_or(UNKNOWN_CLIENT));
    let _ = digest.peer_addr.set(Some(peer));
    digest
}

/// Reads the header of connections to proxied TLS listeners before their handshake
/// (Pingora's pre-TLS hook); other TLS listeners pass untouched.
pub struct BeforeTls {
    pub listeners: HashSet<SocketAddr>,
}

#[async_trait::async_trait]
impl pingora_core::listeners::PreTlsProcess for BeforeTls {
    async fn process(&self, stream: &mut L4Stream) -> pingora_error::Result<()> {
        let local = stream
            .get_socket_digest()
            .and_then(|d| d.local_addr().and_then(|a| a.as_inet()).copied());
        if !local.is_some_and(|l| self.listeners.contains(&l)) {
            return Ok(());
        }
        match read_header(stream).await {
            Ok((client, rest)) => {
                stream.rewind(&rest);
                let fd = stream.as_raw_fd();
                stream.set_socket_digest(digest_for(fd, client));
                Ok(())
            }
            Err(why) => {
                crate::observe::metrics::connection_refused("proxy_protocol");
                Err(pingora_error::Error::explain(
                    pingora_error::ErrorType::ConnectError,
                    format!("PROXY protocol: {why}"),
                ))
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn v2(command: u8, family: u8, addresses: &[u8]) -> Vec<u8> {
        let mut h = b"\r\n\r\n\0\r\nQUIT\n".to_vec();
        h.push(0x20 | command);
        h.push(family);
        h.extend_from_slice(&(addresses.len() as u16).to_be_bytes());
        h.extend_from_slice(addresses);
        h
    }

    #[test]
    fn both_versions_name_the_client_and_stop_at_the_header() {
        let text = b"PROXY TCP4 203.0.113.7 127.0.0.1 51000 8080\r\nGET / HTTP/1.1\r\n";
        let client: SocketAddr = "203.0.113.7:51000".parse().unwrap();
        assert_eq!(
            parse(text),
            Parsed::Header {
                client: Some(client),
                len: 45
            }
        );
        let six = b"PROXY TCP6 2001:db8::1 ::1 443 8080\r\n";
        let Parsed::Header { client: six, .. } = parse(six) else {
            panic!()
        };
        assert_eq!(six, Some("[2001:db8::1]:443".parse().unwrap()));
        // v2, PROXY over TCP/IPv4: source 203.0.113.7:51000.
        let mut addrs = vec![203, 0, 113, 7, 127, 0, 0, 1];
        addrs.extend_from_slice(&51000u16.to_be_bytes());
        addrs.extend_from_slice(&8080u16.to_be_bytes());
        let mut bin = v2(1, 0x11, &addrs);
        let len = bin.len();
        bin.extend_from_slice(b"GET /");
        assert_eq!(
            parse(&bin),
            Parsed::Header {
                client: Some(client),
                len
            }
        );
    }

    #[test]
    fn a_header_naming_no_client_leaves_it_unknown() {
        assert_eq!(
            parse(b"PROXY UNKNOWN\r\n"),
            Parsed::Header {
                client: None,
                len: 15
            }
        );
        let local = v2(0, 0x00, &[]);
        assert_eq!(
            parse(&local),
            Parsed::Header {
                client: None,
                len: 16
            }
        );
    }

    #[test]
    fn anything_else_is_partial_for_a_while_then_refused() {
        assert_eq!(parse(b"PROXY TCP4 203.0"), Parsed::Partial);
        assert_eq!(parse(b"\r\n\r\n\0\r\n"), Parsed::Partial);
        assert!(matches!(
            parse(b"GET / HTTP/1.1\r\nHost: x\r\n\r\n"),
            Parsed::Invalid(_)
        ));
        assert!(matches!(
            parse(b"\x16\x03\x01\x02\x00\x01\x00\x01\xfc\x03\x03"),
            Parsed::Invalid(_) | Parsed::Partial
        ));
        assert!(matches!(
            parse(b"PROXY TCP4 999.0.0.1 127.0.0.1 1 2\r\n"),
            Parsed::Invalid(_)
        ));
        // A v2 header announcing more than MAX_HEADER is refused before it arrives.
        let mut long = v2(1, 0x11, &[]);
        long[14..16].copy_from_slice(&u16::MAX.to_be_bytes());
        assert!(matches!(parse(&long), Parsed::Invalid(_)));
        // Bytes without a line end stop being a possible v1 header at 107 bytes.
        let run = vec![b'P'; 200];
        assert!(matches!(parse(&run), Parsed::Invalid(_)));
    }

    #[tokio::test]
    async fn the_bytes_past_the_header_are_kept() {
        let mut wire: &[u8] =
            b"PROXY TCP4 203.0.113.7 127.0.0.1 51000 8080\r\nGET / HTTP/1.1\r\n\r\n";
        let (client, rest) = read_header(&mut wire).await.unwrap();
        assert_eq!(client, Some("203.0.113.7:51000".parse().unwrap()));
        assert_eq!(rest, b"GET / HTTP/1.1\r\n\r\n");
        let mut plain: &[u8] = b"GET / HTTP/1.1\r\n\r\n";
        assert!(read_header(&mut plain).await.is_err());
    }
}

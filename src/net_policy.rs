//! Where the edge may connect on a caller's behalf (watchlist webhooks): public
//! addresses only, unless an operator allows a range. Checked on the addresses a name
//! resolves to at connect time, and the connection made to the address checked, so a
//! DNS answer that changes between the check and the connect (a rebind) cannot reach
//! the inside.

use ipnet::IpNet;
use std::net::{IpAddr, Ipv4Addr, Ipv6Addr};

/// An address range, `a.b.c.d/n` or `x:y::/n` (a bare address is a /32 or /128),
/// matched with IPv4-mapped IPv6 addresses as the IPv4 address they carry.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Cidr(IpNet);

impl Cidr {
    pub fn parse(text: &str) -> Option<Cidr> {
        let text = text.trim();
        let net = match text.parse::<IpAddr>() {
            Ok(addr) => IpNet::from(addr),
            Err(_) => text.parse::<IpNet>().ok()?,
        };
        Some(Cidr(net))
    }

    pub fn contains(&self, ip: IpAddr) -> bool {
        self.0.contains(&canonical(ip))
    }
}

/// IPv4-mapped IPv6 (`::ffff:a.b.c.d`) is the IPv4 address it carries.
pub fn canonical(ip: IpAddr) -> IpAddr {
    match ip {
        IpAddr::V6(v6) => v6.to_ipv4_mapped().map_or(ip, IpAddr::V4),
        v4 => v4,
    }
}

/// Why an address is not a public one, or `None` when it is.
pub fn non_public(ip: IpAddr) -> Option<&'static str> {
    match canonical(ip) {
        IpAddr::V4(a) => v4_class(a),
        IpAddr::V6(a) => v6_class(a),
    }
}

fn v4_class(a: Ipv4Addr) -> Option<&'static str> {
    let o = a.octets();
    if a.is_loopback() {
        Some("loopback")
    } else if a.is_private() {
        Some("private")
    } else if a.is_link_local() {
        Some("link-local")
    } else if a.is_unspecified() || o[0] == 0 {
        Some("unspecified")
    } else if a.is_broadcast() || a.is_multicast() || o[0] >= 240 {
        Some("multicast or reserved")
    } else if o[0] == 100 && (64..128).contains(&o[1]) {
        Some("shared address space (CGNAT)")
    } else if o[0] == 198 && (o[1] == 18 || o[1] == 19) {
        Some("benchmarking")
    } else if a.is_documentation() || (o[0] == 192 && o[1] == 0 && o[2] == 0) {
        Some("documentation or protocol assignment")
    } else {
        None
    }
}

fn v6_class(a: Ipv6Addr) -> Option<&'static str> {
    let s = a.segments();
    if a.is_loopback() {
        Some("loopback")
    } else if a.is_unspecified() {
        Some("unspecified")
    } else if a.is_multicast() {
        Some("multicast")
    } else if s[0] & 0xffc0 == 0xfe80 {
        Some("link-local")
    } else if s[0] & 0xfe00 == 0xfc00 {
        Some("unique local (private)")
    } else if s[..6] == [0; 6] {
        // `::a.b.c.d`, deprecated (RFC 4291 §2.5.5.1): never a public callback, and
        // stacks disagree on whether it reaches the IPv4 address it spells.
        Some("IPv4-compatible (deprecated)")
    } else if s[0] == 0x2001 && s[1] == 0x0db8 {
        Some("documentation")
    } else if s[0] == 0x0064 && s[1] == 0xff9b {
        // NAT64 carries an IPv4 address; judge that one.
        let v4 = Ipv4Addr::new((s[6] >> 8) as u8, s[6] as u8, (s[7] >> 8) as u8, s[7] as u8);
        v4_class(v4)
    } else if s[0] == 0x2002 {
        // 6to4 embeds an IPv4 address in the prefix.
        let v4 = Ipv4Addr::new((s[1] >> 8) as u8, s[1] as u8, (s[2] >> 8) as u8, s[2] as u8);
        v4_class(v4)
    } else {
        None
    }
}

/// The addresses a callback may be connected to: every one of `addrs` must be public or
/// in an allowed range; one that is not refuses them all (a name that resolves to both
/// an outside and an inside address is refused).
pub fn allowed(addrs: &[IpAddr], allow: &[Cidr]) -> Result<(), String> {
    if addrs.is_empty() {
        return Err("the name has no address".into());
    }
    for ip in addrs {
        if let Some(why) = non_public(*ip) {
            if !allow.iter().any(|c| c.contains(*ip)) {
                // The address itself is not echoed: what an inside name resolves to is
                // the operator's to know, not the caller's.
                return Err(format!("a {why} address"));
            }
        }
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    fn ip(s: &str) -> IpAddr {
        s.parse().unwrap()
    }

    #[test]
    fn inside_addresses_are_refused_in_every_spelling() {
        for inside in [
            "127.0.0.1",
            "127.8.9.10",
            "10.1.2.3",
            "172.16.0.1",
            "172.31.255.255",
            "192.168.1.1",
            "169.254.169.254",
            "0.0.0.0",
            "100.64.0.1",
            "255.255.255.255",
            "224.0.0.1",
            "::1",
            "::",
            "fe80::1",
            "fd00::1",
            "fc00::1",
            "::ffff:127.0.0.1",
            "::127.0.0.1",
            "::8.8.8.8",
            "::ffff:10.0.0.1",
            "::ffff:169.254.169.254",
            "64:ff9b::a9fe:a9fe",
            "2002:7f00:1::",
        ] {
            assert!(non_public(ip(inside)).is_some(), "{inside}");
            assert!(allowed(&[ip(inside)], &[]).is_err(), "{inside}");
        }
        for outside in [
            "1.1.1.1",
            "8.8.8.8",
            "172.32.0.1",
            "2606:4700::1111",
            "::ffff:8.8.8.8",
        ] {
            assert_eq!(non_public(ip(outside)), None, "{outside}");
        }
        // One inside address among outside ones refuses the name.
        assert!(allowed(&[ip("8.8.8.8"), ip("10.0.0.1")], &[]).is_err());
        assert!(allowed(&[], &[]).is_err());
    }

    #[test]
    fn an_operator_allows_ranges() {
        let lo = Cidr::parse("127.0.0.0/8").unwrap();
        let v6 = Cidr::parse("::1").unwrap();
        assert!(allowed(&[ip("127.0.0.1"), ip("::1")], &[lo, v6]).is_ok());
        assert!(allowed(&[ip("::ffff:127.0.0.2")], &[lo]).is_ok());
        assert!(allowed(&[ip("10.0.0.1")], &[lo, v6]).is_err());
        assert!(Cidr::parse("10.0.0.0/8")
            .unwrap()
            .contains(ip("10.200.1.1")));
        assert!(!Cidr::parse("10.0.0.0/8").unwrap().contains(ip("11.0.0.1")));
        assert!(Cidr::parse("0.0.0.0/0").unwrap().contains(ip("10.0.0.1")));
        for bad in [
            "10.0.0.0/33",
            "10.0.0/8",
            "x",
            "::1/129",
            "1.2.3.4/",
            "1.2.3.4/-1",
        ] {
            assert!(Cidr::parse(bad).is_none(), "{bad}");
        }
    }
}

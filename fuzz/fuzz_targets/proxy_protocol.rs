//! A PROXY protocol header (v1 or v2) on arbitrary first bytes of a connection: never
//! panics, a header found is within the bytes and the bound, and it reads the same
//! from its own bytes alone (what follows it never changes it).
#![no_main]

use chainedge::parsers::{parse_proxy_header, ProxyHeader};
use libfuzzer_sys::fuzz_target;

fuzz_target!(|data: &[u8]| {
    if let ProxyHeader::Header { client, len } = parse_proxy_header(data) {
        assert!(len <= data.len() && len <= 4096, "{len} of {}", data.len());
        assert_eq!(
            parse_proxy_header(&data[..len]),
            ProxyHeader::Header { client, len },
            "{data:?}"
        );
    }
});

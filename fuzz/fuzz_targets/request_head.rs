//! A client's request head as the lean front reads it: never panics; every range it
//! keeps lies inside the head; a head served lean has exactly one Host, a digits-only
//! Content-Length at most once and no Transfer-Encoding.
#![no_main]

use bytes::BytesMut;
use chainedge::parsers::{Head, Parsed};
use libfuzzer_sys::fuzz_target;

fuzz_target!(|data: &[u8]| {
    let Parsed::Complete(mut head) = Head::parse(data) else {
        return;
    };
    assert!(head.len <= data.len());
    let mut buf = BytesMut::from(data);
    head.take_from(&mut buf);
    let _ = (head.method(), head.path(), head.query());
    let lines: Vec<(String, Vec<u8>)> = head
        .header_lines()
        .map(|(n, v)| (n.to_ascii_lowercase(), v.to_vec()))
        .collect();
    if head.refusal.is_none() && !head.needs_pingora {
        let count = |name: &str| lines.iter().filter(|(n, _)| n == name).count();
        assert_eq!(count("host"), 1);
        assert_eq!(count("transfer-encoding"), 0);
        assert!(count("content-length") <= 1);
        if let Some((_, v)) = lines.iter().find(|(n, _)| n == "content-length") {
            assert!(v.iter().all(u8::is_ascii_digit), "{v:?}");
            assert_eq!(std::str::from_utf8(v).unwrap().parse::<usize>().ok(), Some(head.content_length));
        }
    }
});

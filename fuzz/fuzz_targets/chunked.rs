//! The chunked decoder a node's answer goes through: never panics, and the same bytes give
//! the same verdict, end and data however they are split across reads.
#![no_main]

use chainedge::parsers::{ChunkedScanner, Scan};
use libfuzzer_sys::fuzz_target;

/// (error, where the body ends, data) for `parts` fed in order.
fn scan(parts: &[&[u8]]) -> (bool, Option<usize>, Vec<u8>) {
    let mut s = ChunkedScanner::default();
    let mut data = Vec::new();
    let mut offset = 0;
    for p in parts {
        match s.feed(p, |d| data.extend_from_slice(d)) {
            Err(_) => return (true, None, data),
            Ok(Scan::Done(n)) => {
                assert!(n <= p.len());
                return (false, Some(offset + n), data);
            }
            Ok(Scan::More) => offset += p.len(),
        }
    }
    (false, None, data)
}

fuzz_target!(|input: &[u8]| {
    let Some((&cut, body)) = input.split_first() else {
        return;
    };
    let whole = scan(&[body]);
    let at = (cut as usize * body.len()) / 255;
    let (a, b) = body.split_at(at);
    let split = scan(&[a, b]);
    assert_eq!(whole.0, split.0, "verdict depends on the split at {at}");
    if !whole.0 {
        assert_eq!(whole.1, split.1, "end depends on the split at {at}");
        assert_eq!(whole.2, split.2, "data depends on the split at {at}");
    }
});

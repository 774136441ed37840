//! A node's response head as the lean upstream client reads it: never panics, a complete
//! head is never longer than the input, and a body length is only ever taken from a
//! well-formed, unambiguous Content-Length.
#![no_main]

use chainedge::parsers::{parse_head, Framing};
use libfuzzer_sys::fuzz_target;

fuzz_target!(|data: &[u8]| {
    if let Ok(Some((status, head_len, framing, _close))) = parse_head(data) {
        assert!(head_len <= data.len());
        assert!((100..1000).contains(&status), "{status}");
        if let Framing::Length(n) = framing {
            let head = String::from_utf8_lossy(&data[..head_len]).to_ascii_lowercase();
            assert!(head.contains("content-length"), "{n} from {head:?}");
        }
    }
});

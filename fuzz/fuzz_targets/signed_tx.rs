//! Signed transactions as the senders receive them (hex of a legacy RLP list or an
//! EIP-2718 envelope): decoding never panics, and what decodes has a hash and a signer
//! and decodes the same again. The input bytes are the transaction; the target writes
//! them as the 0x-hex a client sends.
#![no_main]

use chainedge::parsers::decode_signed_tx;
use libfuzzer_sys::fuzz_target;

fuzz_target!(|bytes: &[u8]| {
    let raw = format!("0x{}", hex::encode(bytes));
    if let Ok(tx) = decode_signed_tx(&raw) {
        assert_eq!(tx.hash.len(), 66);
        assert_eq!(tx.from.len(), 42);
        assert!(tx.tx_type <= 4);
        assert_eq!(decode_signed_tx(&raw), Ok(tx));
    }
    // The text form is untrusted too: odd lengths, no prefix, non-hex digits.
    if let Ok(text) = std::str::from_utf8(bytes) {
        let _ = decode_signed_tx(text);
    }
});

//! Solana wire transactions as the senders receive them (after base64/base58): decoding
//! and verifying never panics, and what is accepted has its signatures, its fee payer
//! and exactly the bytes it came from, and is accepted again.
#![no_main]

use chainedge::parsers::decode_sol_tx;
use libfuzzer_sys::fuzz_target;

fuzz_target!(|bytes: &[u8]| {
    if let Ok(tx) = decode_sol_tx(bytes.to_vec()) {
        assert!(!tx.signatures.is_empty());
        assert_eq!(tx.signature, tx.signatures[0]);
        assert!(!tx.fee_payer.is_empty());
        assert_eq!(tx.wire, bytes);
        assert_eq!(decode_sol_tx(bytes.to_vec()).map(|t| t.signatures), Ok(tx.signatures));
    }
});

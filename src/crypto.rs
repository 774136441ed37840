//! Secret handling shared by keys, sessions and sign-in codes: a leaf with no imports
//! from the rest of the crate.

use sha2::{Digest, Sha256};
use subtle::ConstantTimeEq;

/// Constant-time equality of two secrets (length may leak, content does not).
pub fn secret_eq(a: &[u8], b: &[u8]) -> bool {
    a.len() == b.len() && bool::from(a.ct_eq(b))
}

/// How a secret (API key, session token, sign-in code) is kept at rest.
pub fn sha256(secret: &str) -> [u8; 32] {
    Sha256::digest(secret.as_bytes()).into()
}

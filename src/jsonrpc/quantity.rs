//! JSON-RPC quantities and bodies read without building a value: `0x`-hex numbers of
//! 64 and 256 bits, and the number of calls in a batch.

use alloy_primitives::U256;

/// A JSON-RPC quantity (`0x`-hex, at most 64 bits) as a number.
pub fn quantity(hex: &str) -> Option<u64> {
    let digits = hex.strip_prefix("0x")?;
    if digits.is_empty() || digits.len() > 16 {
        return None;
    }
    u64::from_str_radix(digits, 16).ok()
}

/// A JSON-RPC quantity of up to 256 bits as an exact decimal string.
pub fn u256_decimal(hex: &str) -> Option<String> {
    let digits = hex.strip_prefix("0x")?;
    if digits.is_empty() || digits.len() > 64 || !digits.bytes().all(|b| b.is_ascii_hexdigit()) {
        return None;
    }
    U256::from_str_radix(digits, 16).ok().map(|v| v.to_string())
}

/// Number of calls in a JSON-RPC batch body (1 for a single call or bad JSON, which the
/// gateway then refuses).
pub fn batch_len(body: &[u8]) -> u32 {
    if body.iter().find(|b| !b.is_ascii_whitespace()) != Some(&b'[') {
        return 1;
    }
    serde_json::from_slice::<Vec<serde::de::IgnoredAny>>(body)
        .map(|v| v.len().clamp(1, u32::MAX as usize) as u32)
        .unwrap_or(1)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn u256_to_decimal_is_exact() {
        assert_eq!(u256_decimal("0x0").as_deref(), Some("0"));
        assert_eq!(
            u256_decimal("0xde0b6b3a7640000").as_deref(),
            Some("1000000000000000000")
        );
        assert_eq!(
            u256_decimal(&format!("0x{}", "f".repeat(64))).as_deref(),
            Some("115792089237316195423570985008687907853269984665640564039457584007913129639935")
        );
        assert_eq!(
            u256_decimal("0x10000000000000000").as_deref(),
            Some("18446744073709551616")
        );
        assert_eq!(u256_decimal("0x"), None);
        assert_eq!(u256_decimal("12"), None);
        assert_eq!(u256_decimal("0x+1"), None);
        assert_eq!(u256_decimal(&format!("0x1{}", "0".repeat(64))), None);
    }

    #[test]
    fn quantities_of_64_bits() {
        assert_eq!(quantity("0x10"), Some(16));
        assert_eq!(quantity(&format!("0x{}", "f".repeat(16))), Some(u64::MAX));
        for bad in ["0x", "10", "0x1ffffffffffffffff", "0x-1", "0xzz"] {
            assert_eq!(quantity(bad), None, "{bad}");
        }
    }

    #[test]
    fn batch_lengths() {
        assert_eq!(batch_len(br#" [{"a":1},{"b":2}]"#), 2);
        assert_eq!(batch_len(br#"{"a":1}"#), 1);
        assert_eq!(batch_len(b"[1,"), 1);
    }
}

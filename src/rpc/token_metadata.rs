//! A token's metadata as its contract answers it (`name()`, `symbol()`, `decimals()`),
//! read through the gateway: for the indexer and for the tokens endpoint alike.

use crate::pools::Pool;
use crate::rpc::Gateway;
use crate::store::index::TokenMeta;
use serde_json::json;

fn hex_bytes(hex: &str) -> Option<Vec<u8>> {
    hex::decode(hex.strip_prefix("0x")?).ok()
}

/// `name()`, `symbol()`, `decimals()` of a token, each as the contract answers it:
/// a string, a `bytes32`, or nothing (reverted, empty, not a contract). `None` only
/// when the node itself could not be asked.
pub async fn token_metadata(
    gateway: &Gateway,
    pool: &Pool,
    token: &str,
    rid: &str,
) -> Option<TokenMeta> {
    // Selectors: name() 0x06fdde03, symbol() 0x95d89b41, decimals() 0x313ce567.
    let mut meta = TokenMeta::default();
    for (selector, slot) in [("0x06fdde03", 0), ("0x95d89b41", 1), ("0x313ce567", 2)] {
        let call = json!([{"to": token, "data": selector}, "latest"]);
        // A revert is the contract's answer ("no such field"), not a node failure.
        let answer = match gateway.read_call(pool, "eth_call", call, rid).await {
            Ok((v, _)) => v.as_str().and_then(hex_bytes),
            Err(e) if e.message.contains("revert") || e.message.contains("execution") => None,
            Err(_) => return None,
        };
        let Some(bytes) = answer else { continue };
        match slot {
            0 => meta.name = abi_text(&bytes),
            1 => meta.symbol = abi_text(&bytes),
            _ => {
                meta.decimals =
                    (bytes.len() == 32 && bytes[..31].iter().all(|&b| b == 0)).then(|| bytes[31])
            }
        }
    }
    Some(meta)
}

/// An ABI `string` answer, or a `bytes32` one (NUL-padded), as text; bounded to 64 chars.
fn abi_text(bytes: &[u8]) -> Option<String> {
    let raw: &[u8] = if bytes.len() == 32 {
        let end = bytes.iter().position(|&b| b == 0).unwrap_or(32);
        &bytes[..end]
    } else {
        let offset =
            usize::try_from(u64::from_be_bytes(bytes.get(24..32)?.try_into().ok()?)).ok()?;
        let len_word = bytes.get(offset..offset.checked_add(32)?)?;
        let len = usize::try_from(u64::from_be_bytes(len_word[24..32].try_into().ok()?)).ok()?;
        let start = offset + 32;
        bytes.get(start..start.checked_add(len)?)?
    };
    let text: String = String::from_utf8_lossy(raw)
        .chars()
        .filter(|c| !c.is_control())
        .take(64)
        .collect();
    (!text.is_empty()).then_some(text)
}

#[cfg(test)]
mod tests {
    use super::abi_text;

    #[test]
    fn metadata_strings_and_bytes32() {
        let mut s = vec![0u8; 96];
        s[31] = 32;
        s[63] = 3;
        s[64..67].copy_from_slice(b"USD");
        assert_eq!(abi_text(&s).as_deref(), Some("USD"));
        let mut b32 = [0u8; 32];
        b32[..3].copy_from_slice(b"ODD");
        assert_eq!(abi_text(&b32).as_deref(), Some("ODD"));
        assert_eq!(abi_text(&[0u8; 32]), None);
        let mut lying = vec![0u8; 64];
        lying[31] = 32;
        lying[56..64].copy_from_slice(&u64::MAX.to_be_bytes());
        assert_eq!(abi_text(&lying), None);
    }
}

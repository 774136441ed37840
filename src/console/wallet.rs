//! Wallet sign-in: an EIP-4361 ("Sign-In with Ethereum") message with a single-use nonce,
//! domain and expiry, signed with `personal_sign` (secp256k1, recovered here), or the
//! same message shape for Solana signed with ed25519.

use k256::ecdsa::{RecoveryId, Signature, VerifyingKey};
use sha3::{Digest, Keccak256};

#[derive(Debug, Clone, Copy, PartialEq)]
pub enum Chain {
    Evm,
    Solana,
}

impl Chain {
    pub fn parse(s: &str) -> Option<Chain> {
        match s {
            "evm" => Some(Chain::Evm),
            "solana" => Some(Chain::Solana),
            _ => None,
        }
    }
    pub fn as_str(self) -> &'static str {
        match self {
            Chain::Evm => "evm",
            Chain::Solana => "solana",
        }
    }
}

/// A wallet address in canonical form: EVM as EIP-55 checksum, Solana as base58 of 32 bytes.
pub fn canonical_address(chain: Chain, address: &str) -> Option<String> {
    match chain {
        Chain::Evm => {
            let hex_part = address.strip_prefix("0x")?;
            if hex_part.len() != 40 || !hex_part.chars().all(|c| c.is_ascii_hexdigit()) {
                return None;
            }
            Some(eip55(&hex_part.to_ascii_lowercase()))
        }
        Chain::Solana => {
            let bytes = bs58::decode(address).into_vec().ok()?;
            (bytes.len() == 32).then(|| bs58::encode(bytes).into_string())
        }
    }
}

/// EIP-55 mixed-case checksum of a lower-case 40-hex-digit address.
pub fn eip55(lower_hex: &str) -> String {
    let hash = Keccak256::digest(lower_hex.as_bytes());
    let mut out = String::from("0x");
    for (i, c) in lower_hex.chars().enumerate() {
        let nibble = (hash[i / 2] >> (if i % 2 == 0 { 4 } else { 0 })) & 0xf;
        out.push(if nibble >= 8 {
            c.to_ascii_uppercase()
        } else {
            c
        });
    }
    out
}

/// The sign-in message (EIP-4361 layout; Solana uses the same fields).
pub fn message(
    chain: Chain,
    domain: &str,
    uri: &str,
    address: &str,
    nonce: &str,
    issued_at: &str,
    expires_at: &str,
) -> String {
    let (account, chain_id) = match chain {
        Chain::Evm => ("Ethereum", "1"),
        Chain::Solana => ("Solana", "mainnet"),
    };
    format!(
        "{domain} wants you to sign in with your {account} account:\n{address}\n\n\
         Sign in to the chainedge console.\n\n\
         URI: {uri}\nVersion: 1\nChain ID: {chain_id}\nNonce: {nonce}\n\
         Issued At: {issued_at}\nExpiration Time: {expires_at}"
    )
}

/// The `Nonce:` field of a sign-in message.
pub fn nonce_of(message: &str) -> Option<&str> {
    message
        .lines()
        .find_map(|l| l.strip_prefix("Nonce: "))
        .map(str::trim)
        .filter(|n| !n.is_empty() && n.len() <= 64)
}

/// The EVM address (EIP-55) that produced a `personal_sign` signature over `message`.
pub fn recover_evm(message: &str, signature_hex: &str) -> Option<String> {
    let sig = hex::decode(signature_hex.strip_prefix("0x").unwrap_or(signature_hex)).ok()?;
    if sig.len() != 65 {
        return None;
    }
    let v = match sig[64] {
        27 | 28 => sig[64] - 27,
        0 | 1 => sig[64],
        _ => return None,
    };
    let mut signature = Signature::from_slice(&sig[..64]).ok()?;
    let mut recid = RecoveryId::from_byte(v)?;
    // Wallets may send high-s signatures; normalising s flips the recovery parity.
    if let Some(normalized) = signature.normalize_s() {
        signature = normalized;
        recid = RecoveryId::new(!recid.is_y_odd(), recid.is_x_reduced());
    }
    let prefixed = format!("\x19Ethereum Signed Message:\n{}{message}", message.len());
    let digest = Keccak256::digest(prefixed.as_bytes());
    let key = VerifyingKey::recover_from_prehash(&digest, &signature, recid).ok()?;
    let point = key.to_encoded_point(false);
    let hash = Keccak256::digest(&point.as_bytes()[1..]);
    Some(eip55(&hex::encode(&hash[12..])))
}

/// Verify an ed25519 signature (base58, base64 or hex) of `message` by a base58 public key.
pub fn verify_solana(message: &str, address: &str, signature: &str) -> bool {
    use base64::Engine;
    let Some(key) = bs58::decode(address)
        .into_vec()
        .ok()
        .and_then(|b| <[u8; 32]>::try_from(b).ok())
        .and_then(|b| ed25519_dalek::VerifyingKey::from_bytes(&b).ok())
    else {
        return false;
    };
    let sig_bytes = bs58::decode(signature)
        .into_vec()
        .ok()
        .filter(|b| b.len() == 64)
        .or_else(|| {
            base64::engine::general_purpose::STANDARD
                .decode(signature)
                .ok()
                .filter(|b| b.len() == 64)
        })
        .or_else(|| {
            hex::decode(signature.trim_start_matches("0x"))
                .ok()
                .filter(|b| b.len() == 64)
        });
    let Some(sig) = sig_bytes.and_then(|b| ed25519_dalek::Signature::from_slice(&b).ok()) else {
        return false;
    };
    key.verify_strict(message.as_bytes(), &sig).is_ok()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn eip55_reference_vectors() {
        // From EIP-55.
        for a in [
            "0x5aAeb6053F3E94C9b9A09f33669435E7Ef1BeAed",
            "0xfB6916095ca1df60bB79Ce92cE3Ea74c37c5d359",
            "0xdbF03B407c01E7cD3CBea99509d93f8DDDC8C6FB",
        ] {
            assert_eq!(
                canonical_address(Chain::Evm, &a.to_lowercase()).as_deref(),
                Some(a)
            );
        }
        assert!(canonical_address(Chain::Evm, "0x1234").is_none());
    }

    #[test]
    fn recovers_a_personal_sign_signature() {
        use k256::ecdsa::SigningKey;
        let sk = SigningKey::from_slice(&[7u8; 32]).unwrap();
        let point = sk.verifying_key().to_encoded_point(false);
        let expected = eip55(&hex::encode(
            &Keccak256::digest(&point.as_bytes()[1..])[12..],
        ));
        let msg = message(
            Chain::Evm,
            "example.com",
            "https://example.com",
            &expected,
            "abc12345",
            "t0",
            "t1",
        );
        let prefixed = format!("\x19Ethereum Signed Message:\n{}{msg}", msg.len());
        let (sig, recid) = sk
            .sign_prehash_recoverable(&Keccak256::digest(prefixed.as_bytes()))
            .unwrap();
        let mut bytes = sig.to_bytes().to_vec();
        bytes.push(27 + recid.to_byte());
        assert_eq!(
            recover_evm(&msg, &hex::encode(&bytes)).as_deref(),
            Some(expected.as_str())
        );
        // Another message does not recover to the same address.
        assert_ne!(
            recover_evm("other", &hex::encode(&bytes)).as_deref(),
            Some(expected.as_str())
        );
        assert_eq!(nonce_of(&msg), Some("abc12345"));
    }

    #[test]
    fn verifies_ed25519() {
        use ed25519_dalek::Signer;
        let sk = ed25519_dalek::SigningKey::from_bytes(&[9u8; 32]);
        let addr = bs58::encode(sk.verifying_key().to_bytes()).into_string();
        let sig = sk.sign(b"hello");
        let b58 = bs58::encode(sig.to_bytes()).into_string();
        assert!(verify_solana("hello", &addr, &b58));
        assert!(!verify_solana("hullo", &addr, &b58));
        assert!(!verify_solana("hello", "notbase58!", &b58));
    }
}

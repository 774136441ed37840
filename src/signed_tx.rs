//! Signed transactions as senders receive them: 0x-hex of a legacy RLP list or an
//! EIP-2718 typed envelope (2930, 1559, 4844 with or without its blob sidecar, 7702),
//! decoded by alloy and its signer recovered. A sender refuses what does not decode
//! before any node sees it, and keys its de-duplication by the hash computed here.

use alloy_consensus::transaction::SignerRecoverable;
use alloy_consensus::{Transaction, TxEnvelope, Typed2718};
use alloy_eips::eip2718::Decodable2718;
use sha3::{Digest, Keccak256};

/// Largest raw transaction accepted (hex digits excluded): a blob transaction with six
/// blobs and its sidecar is about 790 KiB; anything larger is not a transaction.
pub const MAX_RAW_BYTES: usize = 1024 * 1024;

/// What a sender needs to know about a signed transaction.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct SignedTx {
    /// 0x-prefixed keccak256 of the canonical encoding (what nodes call its hash).
    pub hash: String,
    /// 0x-prefixed lower-case address recovered from the signature.
    pub from: String,
    pub nonce: u64,
    /// `None` for a pre-EIP-155 legacy transaction (valid on any chain).
    pub chain_id: Option<u64>,
    /// The EIP-2718 type: 0 legacy, 1, 2, 3, 4.
    pub tx_type: u8,
    /// The recipient; `None` for a contract creation.
    pub to: Option<[u8; 20]>,
}

/// Decode a 0x-hex signed transaction. The error says what is wrong in words a client
/// can act on.
pub fn decode(raw: &str) -> Result<SignedTx, String> {
    let hex_digits = raw
        .strip_prefix("0x")
        .ok_or("raw_tx must be 0x-prefixed hex")?;
    if hex_digits.is_empty() || hex_digits.len() % 2 != 0 {
        return Err("raw_tx must be 0x-prefixed hex with an even number of digits".into());
    }
    if hex_digits.len() / 2 > MAX_RAW_BYTES {
        return Err(format!("raw_tx is over {MAX_RAW_BYTES} bytes"));
    }
    let bytes = hex::decode(hex_digits).map_err(|_| "raw_tx must be 0x-prefixed hex")?;
    let tx = TxEnvelope::decode_2718_exact(&bytes)
        .map_err(|e| format!("raw_tx is not a signed transaction: {e}"))?;
    let from = tx
        .recover_signer()
        .map_err(|_| "raw_tx has a signature from which no signer can be recovered")?;
    Ok(SignedTx {
        hash: format!("{:#x}", tx.tx_hash()),
        from: format!("{from:#x}"),
        nonce: tx.nonce(),
        chain_id: tx.chain_id(),
        tx_type: tx.ty(),
        to: tx.to().map(|a| a.0 .0),
    })
}

/// keccak256 of the raw transaction bytes: its hash.
pub fn tx_hash(raw: &str) -> Option<String> {
    let bytes = hex::decode(raw.strip_prefix("0x")?).ok()?;
    if bytes.is_empty() {
        return None;
    }
    Some(format!("0x{}", hex::encode(Keccak256::digest(&bytes))))
}

#[cfg(test)]
mod tests {
    use super::*;

    /// (name, raw, hash, nonce, chain id, type).
    type Vector = (
        &'static str,
        &'static str,
        &'static str,
        u64,
        Option<u64>,
        u8,
    );

    /// Signed by eth-account 0.14 with anvil's first key, to 0x7099…79c8, 1 wei.
    const SIGNED: &[Vector] = &[
        ("eip155", "0xf86580843b9aca008252089470997970c51812dc3a010c7d01b50e0d17dc79c80180820136a0eb523d1bfce22aa412992e1434767c75341b00862ead712a2559182be473e1f7a00ae69701e3ef96954d0565ab21757e392d750e47e67cb4cbdd128ce65cdad0e4", "0xe935f0b9e9fdf6668185feb68f1cb7cb4bff91d732c88ff9d89a389ee407f856", 0, Some(137), 0),
        ("pre-155", "0xf86301843b9aca008252089470997970c51812dc3a010c7d01b50e0d17dc79c801801ba08e7debfffadfcd769327436018d8b0b2b762bc5ad8036c4eed9f42b6205e1bf1a0632ec6a3660f4fdb93b25e119bafefb869126c1b1ad241ebacd92ab3343f2444", "0x30971e825fdd0eb69795a22d8edb012889b619499eba1b84251b970d0a6115ca", 1, None, 0),
        ("2930", "0x01f866818902843b9aca008252089470997970c51812dc3a010c7d01b50e0d17dc79c80180c001a09e5938fd68b48926045961e1c1fa48ed82f1d927fd9d18b3c57e8a698377bb6ba07888dcd0435a3a3cdc3713aa4d32a639e8ddce8c66c9a74e7ab15b5e89e22f04", "0xe096181fd4f1ea87c8b531e988d0f6e44f9be63513014364cfe2d4afcc7ab996", 2, Some(137), 1),
        ("1559", "0x02f86b818903843b9aca0084773594008252089470997970c51812dc3a010c7d01b50e0d17dc79c80180c001a09eab01e4c96cd3d89037e2c8f5fcfd52d3b2e4614209eba4735d5d142d2724f8a02fa182ed1afd259667f3ed4efc2d3aa10b517e55bb89a992fed84f7b8087f249", "0xd93efd94452503d5a7846cf9801a9dd00755d8deef990f4f75c8e4bd29792533", 3, Some(137), 2),
        ("7702", "0x04f8cb818904843b9aca008477359400830186a09470997970c51812dc3a010c7d01b50e0d17dc79c88080c0f85df85b81899470997970c51812dc3a010c7d01b50e0d17dc79c80580a0f7e0dbe8968e9d997370f8bc9e81538fa794159b933dc73ec1dfe2379c0e84f4a04782128238f1cabbeb149ebbab67212cde53c3a5b162c6674be25f402ed6862f80a03392811fdb97b3c76d47480a39f52517aa935eec57ff1e6ddf49ff390c8b2614a00a06d724fc9f0d954dcc85acf7eeda632af470533ac236ba78b3bf14b4eeebcc", "0x15987672cc136e8370e7cb1da384691136195f51ee2d9d74267a449a02ab1137", 4, Some(137), 4),
    ];
    const SIGNER: &str = "0xf39fd6e51aad88f6f4ce6ab8827279cfffb92266";

    #[test]
    fn decodes_every_envelope_and_recovers_its_signer() {
        for (name, raw, hash, nonce, chain_id, tx_type) in SIGNED {
            let tx = decode(raw).unwrap_or_else(|e| panic!("{name}: {e}"));
            assert_eq!(tx.hash, *hash, "{name}");
            assert_eq!(tx.from, SIGNER, "{name}");
            assert_eq!(
                (tx.nonce, tx.chain_id, tx.tx_type),
                (*nonce, *chain_id, *tx_type)
            );
            // The hash is what `tx_hash` (keccak of the bytes) says for these encodings.
            assert_eq!(tx_hash(raw).as_deref(), Some(*hash), "{name}");
        }
    }

    #[test]
    fn refuses_what_is_not_a_signed_transaction() {
        let (_, legacy, ..) = SIGNED[0];
        for bad in [
            "",
            "0x",
            "0x0",
            "02f8",
            "0xzz",
            "0x00f8abababababababababab",
            "0x02aa0000000000000000000000",
            "0xc0",
            "0x02c0",
        ] {
            assert!(decode(bad).is_err(), "{bad}");
        }
        // Trailing bytes after a transaction are not the transaction.
        assert!(decode(&format!("{legacy}00")).is_err());
        // A signature with r = 0 recovers no signer.
        let zero_r = legacy.replace(
            "a0eb523d1bfce22aa412992e1434767c75341b00862ead712a2559182be473e1f7",
            "a00000000000000000000000000000000000000000000000000000000000000000",
        );
        assert!(decode(&zero_r).is_err());
        // One flipped byte in the value changes the signer, not the validity: the
        // node decides the account has no funds, so that is not caught here.
        assert!(decode(&legacy.replacen("0180820136", "0280820136", 1)).is_ok());
    }
}

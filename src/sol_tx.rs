//! Solana wire transactions, checked before any node sees them: decoded with the SDK's own
//! types (legacy, v0 and v1 messages), nothing left over, within the packet size, and
//! every required signature verified against its signer (so an unsigned or tampered
//! transaction is the caller's error, not a node's).

use solana_transaction::versioned::VersionedTransaction;

/// A transaction travels in one packet (Solana's `PACKET_DATA_SIZE`).
pub const MAX_WIRE_BYTES: usize = 1232;
/// Longest text accepted for one transaction: base58 of a full packet is ~1,684 chars,
/// base64 1,644.
const MAX_TEXT: usize = 1700;

/// How a transaction is written in a request: `base64` (recommended) or `base58` (the
/// JSON-RPC default, deprecated by Agave).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Encoding {
    Base64,
    Base58,
}

impl Encoding {
    pub fn parse(raw: Option<&str>) -> Result<Encoding, String> {
        match raw {
            None | Some("base64") => Ok(Encoding::Base64),
            Some("base58") => Ok(Encoding::Base58),
            Some(other) => Err(format!(
                "encoding must be base64 or base58 (got '{}')",
                other.chars().take(20).collect::<String>()
            )),
        }
    }
}

/// A decoded, verified transaction.
#[derive(Debug, Clone)]
pub struct SolTx {
    /// The transaction's id: its first signature, base58.
    pub signature: String,
    /// Every signature, base58, in order.
    pub signatures: Vec<String>,
    /// The account paying the fee (the first signer), base58.
    pub fee_payer: String,
    /// `legacy`, `0` or `1`.
    pub version: &'static str,
    /// The blockhash it was signed against, base58: it expires with it.
    pub recent_blockhash: String,
    /// The transaction as it goes on the wire.
    pub wire: Vec<u8>,
}

/// Decode `text` as one signed transaction. The error says what is wrong, for a 400.
pub fn decode(text: &str, encoding: Encoding) -> Result<SolTx, String> {
    if text.is_empty() {
        return Err("the transaction is empty".into());
    }
    if text.len() > MAX_TEXT {
        return Err(format!(
            "the transaction is longer than a packet ({} bytes at most)",
            MAX_WIRE_BYTES
        ));
    }
    let wire = match encoding {
        Encoding::Base64 => {
            use base64::Engine;
            base64::engine::general_purpose::STANDARD
                .decode(text)
                .map_err(|_| "the transaction is not valid base64".to_string())?
        }
        Encoding::Base58 => bs58::decode(text)
            .into_vec()
            .map_err(|_| "the transaction is not valid base58".to_string())?,
    };
    decode_wire(wire)
}

/// Decode and verify a transaction's wire bytes.
pub fn decode_wire(wire: Vec<u8>) -> Result<SolTx, String> {
    if wire.len() > MAX_WIRE_BYTES {
        return Err(format!(
            "the transaction is {} bytes; a packet holds {MAX_WIRE_BYTES}",
            wire.len()
        ));
    }
    let tx: VersionedTransaction =
        wincode::deserialize_exact(&wire).map_err(|e| format!("not a Solana transaction ({e})"))?;
    if tx.signatures.is_empty() {
        return Err("the transaction has no signatures".into());
    }
    tx.verify_and_hash_message().map_err(|e| match e {
        solana_transaction::TransactionError::SignatureFailure => {
            "a signature does not verify against its signer (unsigned or altered)".to_string()
        }
        solana_transaction::TransactionError::SanitizeFailure => {
            "the transaction is malformed (signatures and signers do not match)".to_string()
        }
        other => format!("the transaction does not verify: {other}"),
    })?;
    let signatures: Vec<String> = tx.signatures.iter().map(|s| s.to_string()).collect();
    let keys = tx.message.static_account_keys();
    let fee_payer = keys
        .first()
        .map(|k| k.to_string())
        .ok_or("the transaction names no accounts")?;
    let version = match tx.version() {
        solana_transaction::versioned::TransactionVersion::Legacy(_) => "legacy",
        solana_transaction::versioned::TransactionVersion::Number(0) => "0",
        solana_transaction::versioned::TransactionVersion::Number(_) => "1",
    };
    let recent_blockhash = tx.message.recent_blockhash().to_string();
    Ok(SolTx {
        signature: signatures[0].clone(),
        signatures,
        fee_payer,
        version,
        recent_blockhash,
        wire,
    })
}

/// A base58 account address: 32 to 44 characters decoding to 32 bytes.
pub fn is_address(text: &str) -> bool {
    (32..=44).contains(&text.len())
        && bs58::decode(text)
            .into_vec()
            .is_ok_and(|bytes| bytes.len() == 32)
}

/// A base58 transaction signature: 64 bytes.
pub fn is_signature(text: &str) -> bool {
    (64..=88).contains(&text.len())
        && bs58::decode(text)
            .into_vec()
            .is_ok_and(|bytes| bytes.len() == 64)
}

#[cfg(test)]
mod tests {
    use super::*;

    /// A transfer signed by solders (tests/py/sol_client.py `transfer`).
    const TRANSFER: &str = "AYFIqh6I1ohvAYScz5g1y664JSFTS7VtrkhPHBesOfUBUCRDS2TmQOspk6hmNYa2gJsoUMQzBYc2M8zCbWO/fgEBAAEDszLqI2Nyl0k8hDtnVOVaTRI6yhaZ1Q+NpFX0tPeNpGYAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAQAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAruutSnlvzC4V3ExgYbRe2bNz8mrfx5jKfS2MxYGCcY4BAgIAAQwCAAAA6AMAAAAAAAA=";

    #[test]
    fn a_signed_transfer_decodes_with_its_signature_and_payer() {
        let tx = decode(TRANSFER, Encoding::Base64).unwrap();
        assert_eq!(tx.signatures.len(), 1);
        assert_eq!(tx.fee_payer, "D4X1QezQxtPSmdoCVbH8AM8xLJpweaSD2TiFFJSuB7XK");
        assert_eq!(tx.version, "legacy");
        assert!(is_signature(&tx.signature));
        // The same bytes in base58.
        let b58 = bs58::encode(&tx.wire).into_string();
        assert_eq!(
            decode(&b58, Encoding::Base58).unwrap().signature,
            tx.signature
        );
    }

    #[test]
    fn altered_truncated_padded_or_unsigned_transactions_are_refused() {
        use base64::Engine;
        let wire = base64::engine::general_purpose::STANDARD
            .decode(TRANSFER)
            .unwrap();
        let mut altered = wire.clone();
        altered[5] ^= 0xff;
        assert!(decode_wire(altered).unwrap_err().contains("signature"));
        let mut amount = wire.clone();
        let last = amount.len() - 1;
        amount[last - 7] ^= 1; // the lamports, inside the signed message
        assert!(decode_wire(amount).unwrap_err().contains("signature"));
        assert!(decode_wire(wire[..wire.len() - 1].to_vec()).is_err());
        let mut padded = wire.clone();
        padded.push(0);
        assert!(decode_wire(padded).is_err());
        let mut unsigned = wire.clone();
        unsigned[1..65].fill(0);
        assert!(decode_wire(unsigned).is_err());
        assert!(decode_wire(vec![0; 2000]).unwrap_err().contains("packet"));
        assert!(decode_wire(Vec::new()).is_err());
        assert!(decode("!!!", Encoding::Base64).is_err());
        assert!(decode("0OIl", Encoding::Base58).is_err());
        assert!(decode("", Encoding::Base64).is_err());
    }

    #[test]
    fn addresses_are_32_bytes_of_base58() {
        assert!(is_address("D4X1QezQxtPSmdoCVbH8AM8xLJpweaSD2TiFFJSuB7XK"));
        assert!(is_address("11111111111111111111111111111111"));
        assert!(!is_address("1111111111111111111111111111111"));
        assert!(!is_address("D4X1QezQxtPSmdoCVbH8AM8xLJpweaSD2TiFFJSuB7X0"));
        assert!(!is_address("0x4X1QezQxtPSmdoCVbH8AM8xLJpweaSD2TiFFJSuB7XK"));
        assert!(!is_address(""));
    }
}

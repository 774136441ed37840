//! The light-client containers of the consensus specs (Deneb and later: Electra and Fulu
//! keep Deneb's headers), read from beacon-APIs JSON (numbers as decimal strings, bytes
//! as 0x hex) and hashed as SSZ by sigp's `tree_hash`.

use alloy_primitives::{Address, Bytes, FixedBytes, B256, U256};
use serde::{Deserialize, Deserializer};
use tree_hash::{merkle_root, mix_in_length, Hash256, PackedEncoding, TreeHash, TreeHashType};
use tree_hash_derive::TreeHash;

pub type Pubkey = FixedBytes<48>;
pub type Signature = FixedBytes<96>;

/// `BeaconBlockHeader`: what sync committees sign and finality points at.
#[derive(Debug, Clone, PartialEq, Eq, Deserialize, TreeHash)]
pub struct BeaconBlockHeader {
    #[serde(deserialize_with = "decimal")]
    pub slot: u64,
    #[serde(deserialize_with = "decimal")]
    pub proposer_index: u64,
    pub parent_root: B256,
    pub state_root: B256,
    pub body_root: B256,
}

/// `ExecutionPayloadHeader` (Deneb): the execution block a beacon block carries.
#[derive(Debug, Clone, PartialEq, Eq, Deserialize, TreeHash)]
pub struct ExecutionPayloadHeader {
    pub parent_hash: B256,
    pub fee_recipient: Address,
    pub state_root: B256,
    pub receipts_root: B256,
    pub logs_bloom: FixedBytes<256>,
    pub prev_randao: B256,
    #[serde(deserialize_with = "decimal")]
    pub block_number: u64,
    #[serde(deserialize_with = "decimal")]
    pub gas_limit: u64,
    #[serde(deserialize_with = "decimal")]
    pub gas_used: u64,
    #[serde(deserialize_with = "decimal")]
    pub timestamp: u64,
    pub extra_data: ExtraData,
    #[serde(deserialize_with = "decimal_u256")]
    pub base_fee_per_gas: U256,
    pub block_hash: B256,
    pub transactions_root: B256,
    pub withdrawals_root: B256,
    #[serde(deserialize_with = "decimal")]
    pub blob_gas_used: u64,
    #[serde(deserialize_with = "decimal")]
    pub excess_blob_gas: u64,
}

/// `LightClientHeader` (Capella and later): a beacon header, its execution payload's
/// header, and the branch from that to the beacon block's body root.
#[derive(Debug, Clone, PartialEq, Eq, Deserialize)]
pub struct LightClientHeader {
    pub beacon: BeaconBlockHeader,
    pub execution: ExecutionPayloadHeader,
    pub execution_branch: Vec<B256>,
}

#[derive(Debug, Clone, PartialEq, Eq, Deserialize)]
pub struct SyncCommittee {
    pub pubkeys: Vec<Pubkey>,
    pub aggregate_pubkey: Pubkey,
}

#[derive(Debug, Clone, PartialEq, Eq, Deserialize)]
pub struct SyncAggregate {
    /// `Bitvector[SYNC_COMMITTEE_SIZE]`, bit i of byte i / 8 for member i.
    pub sync_committee_bits: Bytes,
    pub sync_committee_signature: Signature,
}

impl SyncAggregate {
    /// Whether member `i` signed.
    pub fn signed(&self, i: usize) -> bool {
        self.sync_committee_bits
            .get(i / 8)
            .is_some_and(|byte| byte >> (i % 8) & 1 == 1)
    }

    pub fn participants(&self) -> usize {
        self.sync_committee_bits
            .iter()
            .map(|b| b.count_ones() as usize)
            .sum()
    }
}

#[derive(Debug, Clone, PartialEq, Eq, Deserialize)]
pub struct Bootstrap {
    pub header: LightClientHeader,
    pub current_sync_committee: SyncCommittee,
    pub current_sync_committee_branch: Vec<B256>,
}

/// A `LightClientUpdate`; finality and optimistic updates are read into it with the
/// parts they lack left empty, as the sync protocol does.
#[derive(Debug, Clone, PartialEq, Eq, Deserialize)]
pub struct Update {
    pub attested_header: LightClientHeader,
    #[serde(default)]
    pub next_sync_committee: Option<SyncCommittee>,
    #[serde(default)]
    pub next_sync_committee_branch: Vec<B256>,
    #[serde(default)]
    pub finalized_header: Option<LightClientHeader>,
    #[serde(default)]
    pub finality_branch: Vec<B256>,
    pub sync_aggregate: SyncAggregate,
    #[serde(deserialize_with = "decimal")]
    pub signature_slot: u64,
}

impl Update {
    /// A sync-committee update carries a next committee and its branch (not all zeros).
    pub fn carries_committee(&self) -> bool {
        self.next_sync_committee.is_some()
            && self.next_sync_committee_branch.iter().any(|b| !b.is_zero())
    }

    /// A finality update carries a finalized header and its branch (not all zeros).
    pub fn carries_finality(&self) -> bool {
        self.finalized_header.is_some() && self.finality_branch.iter().any(|b| !b.is_zero())
    }
}

/// beacon-APIs' `{version, data}` around each light-client object.
#[derive(Debug, Deserialize)]
pub struct Versioned<T> {
    /// The fork the object is of; its layout is told by its slot instead.
    #[allow(dead_code)]
    pub version: String,
    pub data: T,
}

/// `ByteList[MAX_EXTRA_DATA_BYTES]` (32): its bytes merkleized, mixed with its length.
#[derive(Debug, Clone, PartialEq, Eq, Default, Deserialize)]
#[serde(transparent)]
pub struct ExtraData(pub Bytes);

impl TreeHash for ExtraData {
    fn tree_hash_type() -> TreeHashType {
        TreeHashType::List
    }

    fn tree_hash_packed_encoding(&self) -> PackedEncoding {
        unreachable!("a list is never packed")
    }

    fn tree_hash_packing_factor() -> usize {
        unreachable!("a list is never packed")
    }

    fn tree_hash_root(&self) -> Hash256 {
        // 32 bytes at most: one chunk.
        mix_in_length(&merkle_root(&self.0, 1), self.0.len())
    }
}

impl SyncCommittee {
    /// `hash_tree_root(SyncCommittee)`: the pubkeys' vector root beside the aggregate's.
    pub fn root(&self) -> Hash256 {
        let leaves: Vec<u8> = self
            .pubkeys
            .iter()
            .flat_map(|p| p.tree_hash_root().0)
            .collect();
        let pubkeys = merkle_root(&leaves, self.pubkeys.len());
        let aggregate = self.aggregate_pubkey.tree_hash_root();
        let mut both = [0u8; 64];
        both[..32].copy_from_slice(pubkeys.as_slice());
        both[32..].copy_from_slice(aggregate.as_slice());
        merkle_root(&both, 2)
    }
}

fn decimal<'de, D: Deserializer<'de>>(d: D) -> Result<u64, D::Error> {
    let s = String::deserialize(d)?;
    s.parse()
        .map_err(|_| serde::de::Error::custom(format!("{s:?} is not a decimal uint64")))
}

fn decimal_u256<'de, D: Deserializer<'de>>(d: D) -> Result<U256, D::Error> {
    let s = String::deserialize(d)?;
    U256::from_str_radix(&s, 10)
        .map_err(|_| serde::de::Error::custom(format!("{s:?} is not a decimal uint256")))
}

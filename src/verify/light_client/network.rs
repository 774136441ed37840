//! A beacon chain's constants as its light client needs them: the preset's sizes, the
//! fork schedule (which version signs at an epoch, which state layout holds), genesis,
//! and the signing domain of sync committees.

use alloy_primitives::B256;
use sha2::{Digest, Sha256};

/// The preset's sizes (consensus-specs `presets/{mainnet,minimal}`).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Preset {
    pub sync_committee_size: usize,
    pub slots_per_epoch: u64,
    pub epochs_per_sync_committee_period: u64,
}

pub const MAINNET_PRESET: Preset = Preset {
    sync_committee_size: 512,
    slots_per_epoch: 32,
    epochs_per_sync_committee_period: 256,
};

pub const MINIMAL_PRESET: Preset = Preset {
    sync_committee_size: 32,
    slots_per_epoch: 8,
    epochs_per_sync_committee_period: 8,
};

/// One fork: its version signs from `epoch` on.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Fork {
    pub name: &'static str,
    pub epoch: u64,
    pub version: [u8; 4],
}

/// The forks a light client follows: Deneb's headers (Deneb, Electra, Fulu); Electra
/// moved the state fields the branches lead to.
pub const FORK_NAMES: [&str; 3] = ["deneb", "electra", "fulu"];

#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Network {
    pub name: String,
    pub preset: Preset,
    pub genesis_time: u64,
    pub seconds_per_slot: u64,
    pub genesis_validators_root: B256,
    /// Oldest first; each a name of `FORK_NAMES`, epochs ascending.
    pub forks: Vec<Fork>,
}

const DOMAIN_SYNC_COMMITTEE: [u8; 4] = [7, 0, 0, 0];

impl Network {
    /// Ethereum mainnet (consensus-specs `configs/mainnet.yaml`).
    pub fn mainnet() -> Network {
        let fork = |name, epoch, v| Fork {
            name,
            epoch,
            version: [v, 0, 0, 0],
        };
        Network {
            name: "mainnet".into(),
            preset: MAINNET_PRESET,
            genesis_time: 1_606_824_023,
            seconds_per_slot: 12,
            genesis_validators_root:
                "0x4b363db94e286120d76eb905340fdd4e54bfe9f06bf33ff6cf5ad27f511bfe95"
                    .parse()
                    .expect("a root"),
            forks: vec![
                fork("deneb", 269_568, 4),
                fork("electra", 364_032, 5),
                fork("fulu", 411_392, 6),
            ],
        }
    }

    pub fn epoch(&self, slot: u64) -> u64 {
        slot / self.preset.slots_per_epoch
    }

    pub fn period(&self, slot: u64) -> u64 {
        self.epoch(slot) / self.preset.epochs_per_sync_committee_period
    }

    /// The fork in force at `slot`, if it is one this light client follows.
    pub fn fork_at(&self, slot: u64) -> Option<&Fork> {
        let epoch = self.epoch(slot);
        self.forks.iter().rev().find(|f| f.epoch <= epoch)
    }

    /// Whether the state at `slot` has Electra's layout (deeper branches).
    pub fn electra_layout(&self, slot: u64) -> bool {
        self.fork_at(slot).is_some_and(|f| f.name != "deneb")
    }

    /// The slot the wall clock is in (0 before genesis).
    pub fn slot_at(&self, unix_seconds: u64) -> u64 {
        unix_seconds.saturating_sub(self.genesis_time) / self.seconds_per_slot.max(1)
    }

    pub fn slot_start(&self, slot: u64) -> u64 {
        self.genesis_time
            .saturating_add(slot.saturating_mul(self.seconds_per_slot))
    }

    /// `compute_domain(DOMAIN_SYNC_COMMITTEE, fork_version, genesis_validators_root)`.
    pub fn sync_committee_domain(&self, version: [u8; 4]) -> B256 {
        let mut fork_data = [0u8; 64];
        fork_data[..4].copy_from_slice(&version);
        fork_data[32..].copy_from_slice(self.genesis_validators_root.as_slice());
        let fork_data_root = Sha256::digest(fork_data);
        let mut domain = [0u8; 32];
        domain[..4].copy_from_slice(&DOMAIN_SYNC_COMMITTEE);
        domain[4..].copy_from_slice(&fork_data_root[..28]);
        B256::from(domain)
    }
}

/// `compute_signing_root`: the object's root beside its domain.
pub fn signing_root(object_root: B256, domain: B256) -> B256 {
    let mut data = [0u8; 64];
    data[..32].copy_from_slice(object_root.as_slice());
    data[32..].copy_from_slice(domain.as_slice());
    B256::from_slice(&Sha256::digest(data))
}

/// `is_valid_merkle_branch` for a generalized index (`is_valid_normalized_merkle_branch`
/// with the branch exactly as deep as the index).
pub fn branch_leads_to(leaf: B256, branch: &[B256], gindex: u64, root: B256) -> bool {
    let depth = 63 - gindex.leading_zeros() as usize;
    if branch.len() != depth {
        return false;
    }
    let index = gindex - (1 << depth);
    let mut value = leaf;
    for (i, sibling) in branch.iter().enumerate() {
        let mut pair = [0u8; 64];
        if index >> i & 1 == 1 {
            pair[..32].copy_from_slice(sibling.as_slice());
            pair[32..].copy_from_slice(value.as_slice());
        } else {
            pair[..32].copy_from_slice(value.as_slice());
            pair[32..].copy_from_slice(sibling.as_slice());
        }
        value = B256::from_slice(&Sha256::digest(pair));
    }
    value == root
}

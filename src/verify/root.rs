//! Blocks the edge trusts: the anchors answers are proven against. With a beacon light
//! client configured, a block is anchored when a sync committee signed it, or it leads
//! by parent hashes to one that was; otherwise (or past the client's head) when a strict
//! majority of the hosts asked give the same self-consistent header for it (its hash
//! recomputed from its fields). docs/verification.md#proofs says which answers say which.

use super::block::HeaderFacts;
use alloy_primitives::B256;
use std::fmt;

/// How a block's hash came to be trusted.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub enum RootSource {
    /// `agree` of the `asked` hosts gave the same checked header.
    #[default]
    Majority,
    /// Signed by two thirds of a beacon sync committee the edge's light client trusts
    /// (or linked by parent hashes to a block that was).
    LightClient,
}

/// A block the edge trusts and what its header commits to.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Anchor {
    pub header: HeaderFacts,
    pub by: RootSource,
    /// Of the hosts asked, how many gave this header.
    pub agree: u8,
    pub asked: u8,
}

impl Anchor {
    pub fn note(&self) -> AnchorNote {
        AnchorNote {
            number: self.header.number,
            hash: self.header.hash,
            by: self.by,
            agree: self.agree,
            asked: self.asked,
        }
    }
}

/// Which trusted block an answer was proven against, as `x-chainedge-anchor` says it:
/// `block=0x1b4; hash=0x…; by=majority-2/3`.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub struct AnchorNote {
    pub number: u64,
    pub hash: B256,
    pub by: RootSource,
    pub agree: u8,
    pub asked: u8,
}

impl fmt::Display for AnchorNote {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let by = match self.by {
            RootSource::Majority => format!("majority-{}/{}", self.agree, self.asked),
            RootSource::LightClient => "light-client".to_string(),
        };
        write!(f, "block=0x{:x}; hash={}; by={by}", self.number, self.hash)
    }
}

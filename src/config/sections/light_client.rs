//! `rpc.verify.root.light_client`: the beacon light client that roots proven answers
//! (docs/verification.md#light-client).

use crate::verify::light_client::network::{
    Fork, Network, FORK_NAMES, MAINNET_PRESET, MINIMAL_PRESET,
};
use serde::Deserialize;
use std::collections::BTreeMap;

#[derive(Debug, Clone, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct LightClientConf {
    /// The execution pool whose answers are proven against it.
    pub pool: String,
    /// The beacon pool bootstraps and updates are asked of.
    pub beacon: String,
    /// A finalized beacon block root the operator trusts (from a source other than the
    /// fleet: a checkpoint-sync provider, an explorer, another client).
    pub checkpoint: String,
    /// A checkpoint older than this is refused (weak subjectivity: 14 days by default).
    #[serde(default = "d_max_checkpoint_age")]
    pub max_checkpoint_age_secs: u64,
    /// A signed head older than this many slots no longer anchors (the majority does,
    /// and says so): a beacon pool that stopped answering must not pin `latest` to an
    /// old block. 32 slots: 6.4 minutes on mainnet.
    #[serde(default = "d_max_head_age_slots")]
    pub max_head_age_slots: u64,
    /// `mainnet`, or a chain of its own (`{preset, genesis_time, ...}`).
    #[serde(default)]
    pub network: NetworkConf,
    /// How often the beacon pool is asked for updates (default: half a slot).
    #[serde(default)]
    pub poll_ms: Option<u64>,
}

#[derive(Debug, Clone, Deserialize, Default)]
#[serde(untagged)]
pub enum NetworkConf {
    #[default]
    Mainnet,
    Named(String),
    Custom(CustomNetwork),
}

/// A chain the edge has no constants for (a testnet, a devnet, the demo's).
#[derive(Debug, Clone, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct CustomNetwork {
    pub name: String,
    /// `mainnet` (512 members, 32-slot epochs) or `minimal` (32, 8).
    pub preset: String,
    pub genesis_time: u64,
    pub seconds_per_slot: u64,
    pub genesis_validators_root: String,
    /// Fork name (`deneb`, `electra`, `fulu`) to its epoch and version (`0x05000000`).
    pub forks: BTreeMap<String, ForkConf>,
}

#[derive(Debug, Clone, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct ForkConf {
    pub epoch: u64,
    pub version: String,
}

fn d_max_head_age_slots() -> u64 {
    32
}

fn d_max_checkpoint_age() -> u64 {
    14 * 86_400
}

impl NetworkConf {
    /// The network's constants, or what is wrong with them.
    pub fn network(&self) -> Result<Network, String> {
        let custom = match self {
            NetworkConf::Mainnet => return Ok(Network::mainnet()),
            NetworkConf::Named(name) if name == "mainnet" => return Ok(Network::mainnet()),
            NetworkConf::Named(other) => {
                return Err(format!(
                    "no constants for network '{other}': give it as {{preset, genesis_time, ...}}"
                ))
            }
            NetworkConf::Custom(custom) => custom,
        };
        let preset = match custom.preset.as_str() {
            "mainnet" => MAINNET_PRESET,
            "minimal" => MINIMAL_PRESET,
            other => return Err(format!("preset '{other}': mainnet or minimal")),
        };
        let mut forks = Vec::new();
        for name in FORK_NAMES {
            let Some(fork) = custom.forks.get(name) else {
                continue;
            };
            let version = parse_version(&fork.version).ok_or_else(|| {
                format!(
                    "fork {name}: version '{}' is not 4 bytes of hex",
                    fork.version
                )
            })?;
            forks.push(Fork {
                name,
                epoch: fork.epoch,
                version,
            });
        }
        if let Some(unknown) = custom
            .forks
            .keys()
            .find(|k| !FORK_NAMES.contains(&k.as_str()))
        {
            return Err(format!(
                "fork '{unknown}': a light client follows {FORK_NAMES:?}"
            ));
        }
        if forks.is_empty() || forks.windows(2).any(|w| w[0].epoch > w[1].epoch) {
            return Err("forks: at least deneb, epochs in fork order".into());
        }
        Ok(Network {
            name: custom.name.clone(),
            preset,
            genesis_time: custom.genesis_time,
            seconds_per_slot: custom.seconds_per_slot.max(1),
            genesis_validators_root: custom
                .genesis_validators_root
                .parse()
                .map_err(|_| "genesis_validators_root: not a 32-byte root".to_string())?,
            forks,
        })
    }
}

fn parse_version(hex: &str) -> Option<[u8; 4]> {
    let bytes = alloy_primitives::hex::decode(hex).ok()?;
    bytes.try_into().ok()
}

impl LightClientConf {
    /// What is wrong with it, each said once: unknown pools, a checkpoint that is not a
    /// root, a network without constants.
    pub fn problems(&self, pools: &BTreeMap<String, super::PoolConf>) -> Vec<String> {
        let mut found = Vec::new();
        for (what, pool) in [("pool", &self.pool), ("beacon", &self.beacon)] {
            if !pools.contains_key(pool) {
                found.push(format!("{what}: unknown pool '{pool}'"));
            }
        }
        if self.checkpoint.parse::<alloy_primitives::B256>().is_err() {
            found.push("checkpoint: a beacon block root (0x and 64 hex digits)".into());
        }
        if let Err(why) = self.network.network() {
            found.push(format!("network: {why}"));
        }
        found
    }
}

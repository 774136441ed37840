//! Solana epoch stake snapshots, captured in the background from the `sol_rpc` pool into
//! the store (`store::sol_stake`), behind `/v1/sol/snapshot/stake/*`.
//!
//! **What is captured.** Once per epoch, as soon as the edge sees it begin: the vote
//! accounts (`getVoteAccounts`, current and delinquent), then for each, in address order,
//! the stake accounts delegated to it (`getProgramAccounts` on the Stake program with
//! `dataSize: 200` and a `memcmp` of the vote account at offset 124: the query providers
//! allow, where an unfiltered scan of the Stake program is refused), decoded as
//! `StakeStateV2` by the Stake program's own types. A stake account is recorded with its
//! delegated lamports, activation epoch and deactivation epoch (none until it starts to
//! unstake). Stake delegated to a vote account that no longer exists is not listed by
//! `getVoteAccounts` and so not captured.
//!
//! **Crash safety.** Each vote account's rows commit together with the capture's cursor
//! (the last vote account done): after a kill, the capture resumes after that vote
//! account. A capture left unfinished when its epoch has passed is dropped (the chain has
//! moved on) and the current epoch is captured instead. An epoch is served once complete.

use crate::capture::{Health, Producer};
use crate::config::StakeSnapshotsConf;
use crate::pools::Pools;
use crate::rpc::Gateway;
use crate::store::sol_stake::StakeRow;
use crate::store::Store;
use async_trait::async_trait;
use base64::Engine;
use borsh::BorshDeserialize;
use pingora_core::server::ShutdownWatch;
use serde_json::{json, Value};
use solana_stake_interface::state::StakeStateV2;
use std::sync::Arc;
use std::time::Duration;

/// The pool read.
pub const POOL: &str = "sol_rpc";
pub const STAKE_PROGRAM: &str = "Stake11111111111111111111111111111111111111";
/// A stake account's data size, and where the delegated vote account sits in it.
const STAKE_ACCOUNT_SIZE: usize = 200;
const VOTER_OFFSET: usize = 124;
/// A capture's calls are tagged with this request id in node logs.
const REQUEST_ID: &str = "sol-stake-snapshot";

pub struct Capture {
    pub conf: StakeSnapshotsConf,
    pub pools: Arc<Pools>,
    pub gateway: Arc<Gateway>,
    pub store: Store,
}

/// A stake account's data as the snapshot keeps it: `None` for accounts that are not
/// delegated (uninitialized, initialized only, the rewards pool) or not to `voter`.
pub fn decode_stake(pubkey: &str, data: &[u8], voter: &str, epoch: i64) -> Option<StakeRow> {
    let state = StakeStateV2::deserialize(&mut &data[..]).ok()?;
    let StakeStateV2::Stake(_, stake, _) = state else {
        return None;
    };
    let d = stake.delegation;
    if d.voter_pubkey.to_string() != voter {
        return None;
    }
    // u64::MAX marks bootstrap stake (active since genesis) and "not deactivating".
    let activation = if d.activation_epoch == u64::MAX {
        0
    } else {
        i64::try_from(d.activation_epoch).ok()?
    };
    let deactivation = match d.deactivation_epoch {
        u64::MAX => None,
        e => Some(i64::try_from(e).ok()?),
    };
    Some(StakeRow {
        epoch,
        pubkey: pubkey.to_string(),
        voter: voter.to_string(),
        stake: i64::try_from(d.stake).ok()?,
        activation_epoch: activation,
        deactivation_epoch: deactivation,
    })
}

impl Capture {
    /// One pass: capture the current epoch if it is not complete yet.
    async fn pass(&self) -> Result<(), String> {
        let pool = self.pools.get(POOL).ok_or("no sol_rpc pool")?;
        let (info, _) = self
            .gateway
            .read_call(
                pool,
                "getEpochInfo",
                json!([{"commitment": "finalized"}]),
                REQUEST_ID,
            )
            .await
            .map_err(|e| e.message)?;
        let (Some(epoch), Some(slot)) = (info["epoch"].as_i64(), info["absoluteSlot"].as_i64())
        else {
            return Err("getEpochInfo: not in Solana's shape".into());
        };
        let mut resume_after = String::new();
        if let Some(newest) = self
            .store
            .newest_stake_capture()
            .await
            .map_err(|e| e.to_string())?
        {
            if newest.epoch == epoch && newest.completed_at.is_some() {
                return Ok(());
            }
            if newest.epoch == epoch {
                resume_after = newest.last_voter;
            } else if newest.completed_at.is_none() {
                log::info!(
                    "stake snapshot: epoch {} was not finished before epoch {epoch}; dropped",
                    newest.epoch
                );
                self.store
                    .drop_stake_epoch(newest.epoch)
                    .await
                    .map_err(|e| e.to_string())?;
            }
            if newest.epoch > epoch {
                // A node behind the one that started it: wait for the pool to catch up.
                return Ok(());
            }
        }
        self.store
            .begin_stake_capture(epoch, slot, crate::clock::now())
            .await
            .map_err(|e| e.to_string())?;
        let (votes, _) = self
            .gateway
            .read_call(
                pool,
                "getVoteAccounts",
                json!([{"commitment": "finalized"}]),
                REQUEST_ID,
            )
            .await
            .map_err(|e| e.message)?;
        let mut voters: Vec<String> = ["current", "delinquent"]
            .iter()
            .flat_map(|k| votes[*k].as_array().cloned().unwrap_or_default())
            .filter_map(|v| v["votePubkey"].as_str().map(str::to_string))
            .filter(|v| crate::sol_tx::is_address(v))
            .collect();
        voters.sort();
        voters.dedup();
        for voter in voters.iter().filter(|v| **v > resume_after) {
            let rows = self.delegated_to(pool, voter, epoch).await?;
            self.store
                .record_stake_voter(epoch, voter, &rows)
                .await
                .map_err(|e| e.to_string())?;
        }
        self.store
            .complete_stake_capture(epoch, crate::clock::now())
            .await
            .map_err(|e| e.to_string())?;
        let pruned = self
            .store
            .prune_stake_epochs(self.conf.keep_epochs as i64)
            .await
            .map_err(|e| e.to_string())?;
        log::info!(
            "stake snapshot: epoch {epoch} captured ({} vote accounts; {pruned} old epochs pruned)",
            voters.len()
        );
        Ok(())
    }

    /// The stake accounts delegated to `voter` now.
    async fn delegated_to(
        &self,
        pool: &crate::pools::Pool,
        voter: &str,
        epoch: i64,
    ) -> Result<Vec<StakeRow>, String> {
        let (accounts, _) = self
            .gateway
            .read_call(
                pool,
                "getProgramAccounts",
                json!([STAKE_PROGRAM, {
                    "encoding": "base64",
                    "commitment": "finalized",
                    "filters": [
                        {"dataSize": STAKE_ACCOUNT_SIZE},
                        {"memcmp": {"offset": VOTER_OFFSET, "bytes": voter}},
                    ],
                }]),
                REQUEST_ID,
            )
            .await
            .map_err(|e| e.message)?;
        let list = accounts
            .as_array()
            .ok_or("getProgramAccounts: not a list of accounts")?;
        let mut rows = Vec::with_capacity(list.len());
        for a in list {
            let (Some(pubkey), Some(data)) = (
                a["pubkey"].as_str(),
                a["account"]["data"].get(0).and_then(Value::as_str),
            ) else {
                return Err("getProgramAccounts: an account not in Solana's shape".into());
            };
            let Ok(bytes) = base64::engine::general_purpose::STANDARD.decode(data) else {
                return Err(format!("getProgramAccounts: {pubkey}'s data is not base64"));
            };
            rows.extend(decode_stake(pubkey, &bytes, voter, epoch));
        }
        Ok(rows)
    }
}

#[async_trait]
impl Producer for Capture {
    fn name(&self) -> String {
        "sol/stake".into()
    }

    async fn run(&self, health: &Health, mut shutdown: ShutdownWatch) {
        let mut tick = tokio::time::interval(Duration::from_millis(self.conf.poll_ms.max(100)));
        tick.set_missed_tick_behavior(tokio::time::MissedTickBehavior::Delay);
        loop {
            tokio::select! {
                _ = tick.tick() => {}
                _ = shutdown.changed() => return,
            }
            // A capture in progress stops at shutdown between two vote accounts; what it
            // committed stays, and the next start resumes after it.
            tokio::select! {
                r = self.pass() => health.round(r),
                _ = shutdown.changed() => return,
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// A stake account delegated by the Stake program (LiteSVM, tests/py/sol_client.py):
    /// 10 SOL less rent to vote account `B46K…`, activated in epoch 0, not deactivating.
    const DELEGATED: &str = "AgAAAIDVIgAAAAAAhMHw0D1AjsqplpLxMO7nBKu9G0ZkF9Ii0xNu6eu435OEwfDQPUCOyqmWkvEw7ucEq70bRmQX0iLTE27p67jfkwAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAJVfoO9RcpvBM6Fb+Y1ea3jcEJoFLX7xitfdHKbwbhONgKIeywIAAAAAAAAAAAAAAP//////////AAAAAAAA0D8AAAAAAAAAAAAAAAA=";

    #[test]
    fn a_delegated_stake_account_decodes_and_others_do_not() {
        let data = base64::engine::general_purpose::STANDARD
            .decode(DELEGATED)
            .unwrap();
        let voter = bs58::encode(&data[124..156]).into_string();
        let row = decode_stake("S", &data, &voter, 7).unwrap();
        assert_eq!(row.voter, voter);
        assert_eq!(row.stake, 11_997_717_120);
        assert_eq!((row.activation_epoch, row.deactivation_epoch), (0, None));
        assert_eq!(row.epoch, 7);
        // Another voter, an initialized-only account, garbage.
        assert!(decode_stake("S", &data, "11111111111111111111111111111111", 7).is_none());
        let mut initialized = data.clone();
        initialized[0] = 1;
        assert!(decode_stake("S", &initialized, &voter, 7).is_none());
        assert!(decode_stake("S", &data[..50], &voter, 7).is_none());
        assert!(decode_stake("S", &[], &voter, 7).is_none());
    }
}

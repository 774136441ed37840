//! Solana epoch stake snapshots (`src/capture/sol/stake.rs` captures them): per epoch, every
//! stake account delegated to a vote account, written vote account by vote account. Each
//! vote account's rows commit with the epoch's cursor (the last vote account done), so a
//! capture killed at any point resumes after the last vote account it finished, with no
//! gap and no duplicate. An epoch is readable once complete.

use super::sql::{params, Row, StoreError, Value};
use super::Store;

/// One stake account in one epoch's snapshot.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct StakeRow {
    pub epoch: i64,
    pub pubkey: String,
    pub voter: String,
    /// Delegated lamports.
    pub stake: i64,
    pub activation_epoch: i64,
    /// None while the stake has not started to deactivate.
    pub deactivation_epoch: Option<i64>,
}

/// A snapshot's progress: where a capture stands, or a complete epoch's facts.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct EpochCapture {
    pub epoch: i64,
    /// The slot the capture started at.
    pub slot: i64,
    pub started_at: i64,
    /// The last vote account whose stake accounts are stored ("" before the first).
    pub last_voter: String,
    pub completed_at: Option<i64>,
    /// Stake accounts in the snapshot (set when complete).
    pub accounts: i64,
}

const ROW_COLUMNS: &str = "epoch, pubkey, voter, stake, activation_epoch, deactivation_epoch";

fn stake_row(r: &Row) -> Result<StakeRow, StoreError> {
    Ok(StakeRow {
        epoch: r.int(0)?,
        pubkey: r.text(1)?,
        voter: r.text(2)?,
        stake: r.int(3)?,
        activation_epoch: r.int(4)?,
        deactivation_epoch: r.opt_int(5)?,
    })
}

fn capture(r: &Row) -> Result<EpochCapture, StoreError> {
    Ok(EpochCapture {
        epoch: r.int(0)?,
        slot: r.int(1)?,
        started_at: r.int(2)?,
        last_voter: r.text(3)?,
        completed_at: r.opt_int(4)?,
        accounts: r.int(5)?,
    })
}

const CAPTURE_COLUMNS: &str = "epoch, slot, started_at, last_voter, completed_at, accounts";

impl Store {
    /// The newest capture, complete or not.
    pub async fn newest_stake_capture(&self) -> Result<Option<EpochCapture>, StoreError> {
        let rows = self
            .db
            .query(
                &format!(
                    "SELECT {CAPTURE_COLUMNS} FROM sol_stake_epochs ORDER BY epoch DESC LIMIT 1"
                ),
                vec![],
            )
            .await?;
        rows.first().map(capture).transpose()
    }

    /// A complete epoch (`None`: the newest complete one).
    pub async fn stake_epoch(
        &self,
        epoch: Option<i64>,
    ) -> Result<Option<EpochCapture>, StoreError> {
        let rows = self
            .db
            .query(
                &format!(
                    "SELECT {CAPTURE_COLUMNS} FROM sol_stake_epochs \
                     WHERE completed_at IS NOT NULL AND ($1 < 0 OR epoch = $1) \
                     ORDER BY epoch DESC LIMIT 1"
                ),
                params![epoch.unwrap_or(-1)],
            )
            .await?;
        rows.first().map(capture).transpose()
    }

    /// Start capturing `epoch` (nothing if it was started already, by this instance or
    /// another).
    pub async fn begin_stake_capture(
        &self,
        epoch: i64,
        slot: i64,
        now: i64,
    ) -> Result<(), StoreError> {
        self.db
            .execute(
                "INSERT INTO sol_stake_epochs (epoch, slot, started_at, last_voter, accounts) \
                 VALUES ($1, $2, $3, '', 0) ON CONFLICT (epoch) DO NOTHING",
                params![epoch, slot, now],
            )
            .await?;
        Ok(())
    }

    /// One vote account's stake accounts and the cursor moved past it, in one transaction.
    pub async fn record_stake_voter(
        &self,
        epoch: i64,
        voter: &str,
        rows: &[StakeRow],
    ) -> Result<(), StoreError> {
        let mut tx = self.db.begin().await?;
        if !rows.is_empty() {
            let values = rows
                .iter()
                .map(|r| {
                    params![
                        epoch,
                        &r.pubkey,
                        &r.voter,
                        r.stake,
                        r.activation_epoch,
                        r.deactivation_epoch
                    ]
                })
                .collect();
            tx.execute_many(
                &format!(
                    "INSERT INTO sol_stake_accounts ({ROW_COLUMNS}) VALUES ($1, $2, $3, $4, $5, $6) \
                     ON CONFLICT (epoch, pubkey) DO NOTHING"
                ),
                values,
            )
            .await?;
        }
        tx.execute(
            "UPDATE sol_stake_epochs SET last_voter = $2 \
             WHERE epoch = $1 AND completed_at IS NULL",
            params![epoch, voter],
        )
        .await?;
        tx.commit().await
    }

    /// Mark `epoch` complete, with its account count.
    pub async fn complete_stake_capture(&self, epoch: i64, now: i64) -> Result<(), StoreError> {
        let mut tx = self.db.begin().await?;
        let count = tx
            .query(
                "SELECT COUNT(*) FROM sol_stake_accounts WHERE epoch = $1",
                params![epoch],
            )
            .await?
            .first()
            .map(|r| r.int(0))
            .transpose()?
            .unwrap_or(0);
        tx.execute(
            "UPDATE sol_stake_epochs SET completed_at = $2, accounts = $3 \
             WHERE epoch = $1 AND completed_at IS NULL",
            params![epoch, now, count],
        )
        .await?;
        tx.commit().await
    }

    /// Drop an epoch's capture and rows (an unfinished capture of an epoch that has
    /// passed: the chain has moved on, so it cannot be finished as that epoch).
    pub async fn drop_stake_epoch(&self, epoch: i64) -> Result<(), StoreError> {
        let mut tx = self.db.begin().await?;
        tx.execute(
            "DELETE FROM sol_stake_accounts WHERE epoch = $1",
            params![epoch],
        )
        .await?;
        tx.execute(
            "DELETE FROM sol_stake_epochs WHERE epoch = $1",
            params![epoch],
        )
        .await?;
        tx.commit().await
    }

    /// Keep the newest `keep` complete epochs: epochs dropped.
    pub async fn prune_stake_epochs(&self, keep: i64) -> Result<u64, StoreError> {
        let rows = self
            .db
            .query(
                "SELECT epoch FROM sol_stake_epochs WHERE completed_at IS NOT NULL \
                 ORDER BY epoch DESC LIMIT 1 OFFSET $1",
                params![keep.max(1) - 1],
            )
            .await?;
        let Some(oldest_kept) = rows.first().map(|r| r.int(0)).transpose()? else {
            return Ok(0);
        };
        let mut tx = self.db.begin().await?;
        tx.execute(
            "DELETE FROM sol_stake_accounts WHERE epoch < $1",
            params![oldest_kept],
        )
        .await?;
        let n = tx
            .execute(
                "DELETE FROM sol_stake_epochs WHERE epoch < $1",
                params![oldest_kept],
            )
            .await?;
        tx.commit().await?;
        Ok(n)
    }

    /// A page of one epoch's snapshot, by vote account then stake account.
    pub async fn stake_page(
        &self,
        epoch: i64,
        limit: i64,
        offset: i64,
    ) -> Result<Vec<StakeRow>, StoreError> {
        let rows = self
            .db
            .query(
                &format!(
                    "SELECT {ROW_COLUMNS} FROM sol_stake_accounts WHERE epoch = $1 \
                     ORDER BY voter, pubkey LIMIT $2 OFFSET $3"
                ),
                params![epoch, limit, offset],
            )
            .await?;
        rows.iter().map(stake_row).collect()
    }

    /// Stake accounts delegated to `voter` in any complete snapshot, each as of the newest
    /// snapshot that has it delegated there, by stake account; and how many there are.
    pub async fn stake_by_voter(
        &self,
        voter: &str,
        limit: i64,
        offset: i64,
    ) -> Result<(Vec<StakeRow>, i64), StoreError> {
        let complete = "SELECT epoch FROM sol_stake_epochs WHERE completed_at IS NOT NULL";
        let rows = self
            .db
            .query(
                &format!(
                    "SELECT {cols} FROM sol_stake_accounts a \
                     WHERE a.voter = $1 AND a.epoch IN ({complete}) \
                     AND a.epoch = (SELECT MAX(b.epoch) FROM sol_stake_accounts b \
                                    WHERE b.pubkey = a.pubkey AND b.voter = $1 \
                                    AND b.epoch IN ({complete})) \
                     ORDER BY a.pubkey LIMIT $2 OFFSET $3",
                    cols = "a.epoch, a.pubkey, a.voter, a.stake, a.activation_epoch, a.deactivation_epoch"
                ),
                params![voter, limit, offset],
            )
            .await?;
        let total = self
            .db
            .query(
                &format!(
                    "SELECT COUNT(DISTINCT pubkey) FROM sol_stake_accounts \
                     WHERE voter = $1 AND epoch IN ({complete})"
                ),
                params![voter],
            )
            .await?
            .first()
            .map(|r| r.int(0))
            .transpose()?
            .unwrap_or(0);
        Ok((rows.iter().map(stake_row).collect::<Result<_, _>>()?, total))
    }

    /// One stake account across complete snapshots, newest first, at most `limit`.
    pub async fn stake_history(
        &self,
        pubkey: &str,
        limit: i64,
    ) -> Result<Vec<StakeRow>, StoreError> {
        let rows = self
            .db
            .query(
                &format!(
                    "SELECT {ROW_COLUMNS} FROM sol_stake_accounts WHERE pubkey = $1 \
                     AND epoch IN (SELECT epoch FROM sol_stake_epochs WHERE completed_at IS NOT NULL) \
                     ORDER BY epoch DESC LIMIT $2"
                ),
                vec![Value::from(pubkey), Value::Int(limit)],
            )
            .await?;
        rows.iter().map(stake_row).collect()
    }
}

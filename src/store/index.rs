//! The chain index's tables: a cursor per chain (the last committed block), the recent
//! blocks' hashes, one row per (wallet, transfer), token metadata.
//!
//! A batch of blocks is committed with its cursor in one transaction, and only if the
//! cursor is still where the indexer left it: so rows and cursor never disagree (SIGKILL
//! at any point resumes from the cursor, no gap, no duplicate), no reader sees half a
//! block, and two instances indexing one shared store cannot both commit a step.

use super::sql::{params, query_opt, Row, StoreError, Tx, Value};
use super::{index_nfts, now, Store};

/// The last block committed for a chain.
#[derive(Debug, Clone, PartialEq)]
pub struct IndexCursor {
    pub number: u64,
    pub hash: String,
}

/// One indexed block: its identity and the transfers found in it.
#[derive(Debug, Clone)]
pub struct IndexedBlock {
    pub number: u64,
    pub hash: String,
    pub parent_hash: String,
    pub timestamp: u64,
    pub transfers: Vec<Transfer>,
}

/// What moved, between whom: native value, ERC-20, ERC-721 or ERC-1155.
#[derive(Debug, Clone, PartialEq)]
pub struct Transfer {
    pub tx_index: u64,
    /// The log's index in the block; -1 for a transaction's own value.
    pub log_index: i64,
    /// Position within an ERC-1155 `TransferBatch` (else 0).
    pub seq: u64,
    pub kind: &'static str,
    /// The token contract, lowercase; "" for native value.
    pub token: String,
    pub from: String,
    pub to: String,
    /// Decimal, for NFTs.
    pub token_id: Option<String>,
    /// Decimal; 1 for ERC-721.
    pub amount: String,
    pub tx_hash: String,
}

/// A token's metadata as its contract answered (each part absent when it did not).
#[derive(Debug, Clone, Default, PartialEq)]
pub struct TokenMeta {
    pub name: Option<String>,
    pub symbol: Option<String>,
    pub decimals: Option<u8>,
}

/// A block number or position as the store's integer.
pub(super) fn int(n: u64) -> Value {
    Value::Int(n as i64)
}

impl Store {
    pub async fn index_cursor(&self, chain: &str) -> Result<Option<IndexCursor>, StoreError> {
        let row = self
            .query_opt(
                "SELECT number, hash FROM index_cursor WHERE chain = $1",
                params![chain],
            )
            .await?;
        row.map(|r| cursor_of(&r)).transpose()
    }

    /// Commit `blocks` (consecutive, the first on top of `expect`) with the new cursor, in
    /// one transaction; block hashes below `keep_from` are pruned. `Conflict` when the
    /// cursor moved since `expect` was read (another instance, or a rollback).
    pub async fn commit_blocks(
        &self,
        chain: &str,
        expect: Option<&IndexCursor>,
        blocks: &[IndexedBlock],
        keep_from: u64,
    ) -> Result<(), StoreError> {
        let Some(last) = blocks.last() else {
            return Ok(());
        };
        let mut tx = self.db.begin().await?;
        let holdings_current = cursor_unmoved(&mut *tx, chain, expect).await?;
        // Holdings left behind (committed by an instance that did not keep them) are
        // built whole first, from the moves before these blocks.
        if !holdings_current {
            index_nfts::rebuild_chain(&mut *tx, chain).await?;
        }
        let block_rows = blocks
            .iter()
            .map(|b| params![chain, int(b.number), &b.hash, &b.parent_hash])
            .collect();
        tx.insert_rows(
            "INSERT INTO index_blocks (chain, number, hash, parent_hash)",
            block_rows,
        )
        .await?;
        let mut transfer_rows = Vec::new();
        let mut nft_moves = Vec::new();
        for b in blocks {
            for t in &b.transfers {
                // One row per wallet taking part; a transfer to oneself is one row.
                let sides: &[(&str, &str, &str)] = if t.from == t.to {
                    &[(&t.from, "self", &t.to)]
                } else {
                    &[(&t.from, "out", &t.to), (&t.to, "in", &t.from)]
                };
                for (address, direction, counterparty) in sides {
                    if index_nfts::is_nft(t.kind) {
                        nft_moves.push(index_nfts::WalletMove {
                            position: (b.number, t.tx_index, t.log_index, t.seq),
                            address,
                            direction,
                            kind: t.kind,
                            token: &t.token,
                            token_id: t.token_id.as_deref().unwrap_or_default(),
                            amount: &t.amount,
                        });
                    }
                    transfer_rows.push(params![
                        chain,
                        *address,
                        int(b.number),
                        int(t.tx_index),
                        t.log_index,
                        int(t.seq),
                        *direction,
                        t.kind,
                        &t.token,
                        *counterparty,
                        t.token_id.clone(),
                        &t.amount,
                        &t.tx_hash,
                        int(b.timestamp),
                    ]);
                }
            }
        }
        tx.insert_rows(
            "INSERT INTO wallet_transfers (chain, address, block, tx_index, log_index, seq, \
             direction, kind, token, counterparty, token_id, amount, tx_hash, ts)",
            transfer_rows,
        )
        .await?;
        index_nfts::apply_moves(&mut *tx, chain, nft_moves).await?;
        let set = if expect.is_some() {
            "UPDATE index_cursor SET number = $2, hash = $3, updated_at = $4, \
             nft_holdings_hash = $3, nft_state_hash = $3 WHERE chain = $1"
        } else {
            "INSERT INTO index_cursor \
             (chain, number, hash, updated_at, nft_holdings_hash, nft_state_hash) \
             VALUES ($1, $2, $3, $4, $3, $3)"
        };
        tx.execute(set, params![chain, int(last.number), &last.hash, now()])
            .await?;
        tx.execute(
            "DELETE FROM index_blocks WHERE chain = $1 AND number < $2",
            params![chain, int(keep_from)],
        )
        .await?;
        tx.commit().await
    }

    /// The kept block hashes in `[from, to]`, newest first.
    pub async fn indexed_blocks(
        &self,
        chain: &str,
        from: u64,
        to: u64,
    ) -> Result<Vec<(u64, String, String)>, StoreError> {
        let rows = self
            .db
            .query(
                "SELECT number, hash, parent_hash FROM index_blocks \
                 WHERE chain = $1 AND number >= $2 AND number <= $3 ORDER BY number DESC",
                params![chain, int(from), int(to)],
            )
            .await?;
        rows.iter()
            .map(|r| Ok((r.int(0)? as u64, r.text(1)?, r.text(2)?)))
            .collect()
    }

    /// Undo every block above `to` in one transaction (a reorg): their transfers, their
    /// hashes, balance anchors read on them, and the cursor back to `to`. `Conflict` when
    /// the cursor moved from `expect`.
    pub async fn roll_back_index(
        &self,
        chain: &str,
        expect: &IndexCursor,
        to: &IndexCursor,
    ) -> Result<(), StoreError> {
        let mut tx = self.db.begin().await?;
        // Current holdings are worked out again for the addresses the orphaned moves
        // touched; holdings already behind stay so (built whole later).
        let current = cursor_unmoved(&mut *tx, chain, Some(expect)).await?;
        let touched = match current {
            true => index_nfts::addresses_moved_above(&mut *tx, chain, to.number).await?,
            false => Vec::new(),
        };
        tx.execute(
            "DELETE FROM wallet_transfers WHERE chain = $1 AND block > $2",
            params![chain, int(to.number)],
        )
        .await?;
        index_nfts::refold_addresses(&mut *tx, chain, &touched).await?;
        tx.execute(
            "DELETE FROM index_blocks WHERE chain = $1 AND number > $2",
            params![chain, int(to.number)],
        )
        .await?;
        // Balances read on the orphaned branch (`store/index_balances.rs`).
        tx.execute(
            "DELETE FROM token_balance_anchors WHERE chain = $1 AND block > $2",
            params![chain, int(to.number)],
        )
        .await?;
        let set = match current {
            true => {
                "UPDATE index_cursor SET number = $2, hash = $3, updated_at = $4, \
                     nft_holdings_hash = $3, nft_state_hash = $3 WHERE chain = $1"
            }
            false => {
                "UPDATE index_cursor SET number = $2, hash = $3, updated_at = $4 WHERE chain = $1"
            }
        };
        tx.execute(set, params![chain, int(to.number), &to.hash, now()])
            .await?;
        tx.commit().await
    }

    /// Metadata already fetched, by token.
    pub async fn token_meta(
        &self,
        chain: &str,
        tokens: &[String],
    ) -> Result<std::collections::HashMap<String, TokenMeta>, StoreError> {
        let mut out = std::collections::HashMap::new();
        let mut unique: Vec<&String> = tokens.iter().collect();
        unique.sort();
        unique.dedup();
        // One query per 100 tokens: `address IN ($2, $3, …)`.
        for chunk in unique.chunks(100) {
            let marks: Vec<String> = (0..chunk.len()).map(|i| format!("${}", i + 2)).collect();
            let mut args = params![chain];
            args.extend(chunk.iter().map(|t| Value::from(*t)));
            let rows = self
                .db
                .query(
                    &format!(
                        "SELECT address, name, symbol, decimals FROM tokens \
                         WHERE chain = $1 AND address IN ({})",
                        marks.join(", ")
                    ),
                    args,
                )
                .await?;
            for r in rows {
                let meta = TokenMeta {
                    name: r.opt_text(1)?,
                    symbol: r.opt_text(2)?,
                    decimals: r.opt_int(3)?.and_then(|d| u8::try_from(d).ok()),
                };
                out.insert(r.text(0)?, meta);
            }
        }
        Ok(out)
    }

    /// Remember a token's metadata (fetched once; a second writer's copy is the same).
    pub async fn put_token_meta(
        &self,
        chain: &str,
        token: &str,
        meta: &TokenMeta,
    ) -> Result<(), StoreError> {
        let exists = self
            .query_opt(
                "SELECT 1 FROM tokens WHERE chain = $1 AND address = $2",
                params![chain, token],
            )
            .await?
            .is_some();
        if exists {
            return Ok(());
        }
        let r = self
            .db
            .execute(
                "INSERT INTO tokens (chain, address, name, symbol, decimals, fetched_at) \
                 VALUES ($1, $2, $3, $4, $5, $6)",
                params![
                    chain,
                    token,
                    meta.name.clone(),
                    meta.symbol.clone(),
                    meta.decimals.map(i64::from),
                    now()
                ],
            )
            .await;
        match r {
            Err(e) if e.kind == super::sql::ErrorKind::Conflict => Ok(()),
            other => other.map(|_| ()),
        }
    }
}

/// Within a transaction: `Conflict` unless the chain's cursor is still `expect`; else
/// whether the NFT holdings are current at it (`store/index_nfts.rs`; a chain with no
/// cursor yet has none to be behind), read from the same row.
async fn cursor_unmoved(
    tx: &mut dyn Tx,
    chain: &str,
    expect: Option<&IndexCursor>,
) -> Result<bool, StoreError> {
    let row = query_opt(
        tx,
        "SELECT number, hash, nft_state_hash FROM index_cursor WHERE chain = $1",
        params![chain],
    )
    .await?;
    let now = row.as_ref().map(cursor_of).transpose()?;
    if now.as_ref() != expect {
        return Err(StoreError::conflict("the index cursor moved"));
    }
    match (row, now) {
        (Some(r), Some(now)) => Ok(r.opt_text(2)?.as_deref() == Some(now.hash.as_str())),
        _ => Ok(true),
    }
}

fn cursor_of(r: &Row) -> Result<IndexCursor, StoreError> {
    Ok(IndexCursor {
        number: r.int(0)? as u64,
        hash: r.text(1)?,
    })
}

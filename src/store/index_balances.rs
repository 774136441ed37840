//! ERC-20 balances from the chain index, without a node call per request.
//!
//! An anchor is an address's exact balance of one token, read from the node by
//! `balanceOf` at an indexed block (`null` when the contract did not answer). A later
//! balance is the anchor plus the indexed transfers of that token after its block: the
//! index starts anywhere in a chain's life, so what came before it is only known from
//! the node, once. Anchors are index data: a reorg below one deletes it with the
//! orphaned transfers (`Store::roll_back_index`), and one is only written while its
//! block is still the index's (`put_balance_anchors`).

use super::index::{IndexCursor, TokenMeta};
use super::sql::{params, query_opt, Row, StoreError};
use super::Store;

/// Most transfers after the anchors read for one address; past it, the address's
/// anchored tokens that moved are read from the node again.
pub const MAX_MOVES: usize = 5_000;

/// A wallet's ERC-20s as the index knows them, all read in one snapshot.
#[derive(Debug)]
pub struct WalletErc20s {
    /// The index's block and hash when read.
    pub indexed: IndexCursor,
    /// By token address, at most the `limit` asked for.
    pub tokens: Vec<Erc20Holding>,
    /// More than `MAX_MOVES` transfers followed the anchors: the moves are incomplete.
    pub moves_cut: bool,
}

/// One token an address has sent or received.
#[derive(Debug)]
pub struct Erc20Holding {
    pub token: String,
    /// `None` when the token's metadata has not been fetched yet.
    pub meta: Option<TokenMeta>,
    pub anchor: Option<BalanceAnchor>,
    /// The address's transfers of the token after the anchor's block (all of them ≤ the
    /// index's block).
    pub moves: Vec<Move>,
}

/// A balance read from the node at an indexed block.
#[derive(Debug, Clone, PartialEq)]
pub struct BalanceAnchor {
    pub block: u64,
    /// Decimal; `None` when the contract did not answer `balanceOf`.
    pub balance: Option<String>,
}

/// One transfer's effect on the address: `In` adds, `Out` takes, `SelfTransfer` neither.
#[derive(Debug, Clone, PartialEq)]
pub enum Move {
    In(String),
    Out(String),
    SelfTransfer,
}

// One statement (one snapshot): part 0 the cursor, part 1 each token (≤ $3) with its
// anchor and metadata, part 2 each transfer after an anchor (≤ $4).
//
// Both parts read by key, whatever the wallet's history: the tokens one seek each on the
// ERC-20 index (`held` steps from one token to the next, a loose index scan), and the
// transfers after each anchor a range from its block (`CROSS JOIN`, anchors first, keeps
// SQLite from walking every transfer of the address to find them; PostgreSQL plans it as
// any join). `store/migrations.rs` tests the plans.
// A wallet with 100,000 ERC-20 transfers read them all here, ~60 ms a page on SQLite.
pub(super) const WALLET_ERC20S: &str = "\
WITH RECURSIVE held(token, n) AS ( \
  SELECT token, CAST(1 AS BIGINT) FROM (SELECT token FROM wallet_transfers \
    WHERE chain = $1 AND address = $2 AND kind = 'erc20' ORDER BY token LIMIT 1) f \
  UNION ALL \
  SELECT (SELECT w.token FROM wallet_transfers w \
          WHERE w.chain = $1 AND w.address = $2 AND w.kind = 'erc20' AND w.token > held.token \
          ORDER BY w.token LIMIT 1), held.n + 1 \
    FROM held WHERE held.token IS NOT NULL AND held.n < $3) \
SELECT 0, c.number, CAST(NULL AS BIGINT), CAST(NULL AS BIGINT), c.hash, \
       CAST(NULL AS TEXT), CAST(NULL AS TEXT), CAST(NULL AS TEXT) \
  FROM index_cursor c WHERE c.chain = $1 \
UNION ALL \
SELECT 1, a.block, t.decimals, t.fetched_at, g.token, a.balance, t.name, t.symbol \
  FROM (SELECT token FROM held WHERE token IS NOT NULL) g \
  LEFT JOIN token_balance_anchors a ON a.chain = $1 AND a.address = $2 AND a.token = g.token \
  LEFT JOIN tokens t ON t.chain = $1 AND t.address = g.token \
UNION ALL \
SELECT 2, m.block, CAST(NULL AS BIGINT), CAST(NULL AS BIGINT), m.token, m.direction, \
       m.amount, CAST(NULL AS TEXT) \
  FROM (SELECT w.block, w.token, w.direction, w.amount \
        FROM token_balance_anchors a CROSS JOIN wallet_transfers w \
        WHERE a.chain = $1 AND a.address = $2 AND w.chain = a.chain \
         AND w.address = a.address AND w.kind = 'erc20' AND w.token = a.token \
         AND w.block > a.block \
        LIMIT $4) m";

impl Store {
    /// The ERC-20s `address` has sent or received (at most `limit`, by token address),
    /// each with its anchor and the transfers after it, and the index's block. `None`
    /// when the index has not committed a block yet.
    pub async fn wallet_erc20s(
        &self,
        chain: &str,
        address: &str,
        limit: usize,
    ) -> Result<Option<WalletErc20s>, StoreError> {
        let rows = self
            .db
            .query(
                WALLET_ERC20S,
                params![chain, address, limit as i64, (MAX_MOVES + 1) as i64],
            )
            .await?;
        read_erc20s(&rows)
    }

    /// Remember balances read from the node at `at`, unless `at` is no longer the index's
    /// block at that height (a reorg since): an anchor is only ever on the indexed chain.
    /// An anchor already at a later block is kept. Whether they were written.
    pub async fn put_balance_anchors(
        &self,
        chain: &str,
        address: &str,
        at: &IndexCursor,
        balances: &[(String, Option<String>)],
    ) -> Result<bool, StoreError> {
        if balances.is_empty() {
            return Ok(true);
        }
        // SQLite's writer and PostgreSQL's serializable isolation both make the check and
        // the write one step against a concurrent rollback.
        let mut tx = self.db.begin().await?;
        let indexed = query_opt(
            &mut *tx,
            "SELECT 1 FROM index_blocks WHERE chain = $1 AND number = $2 AND hash = $3",
            params![chain, at.number as i64, &at.hash],
        )
        .await?
        .is_some();
        if !indexed {
            return Ok(false);
        }
        let rows = balances
            .iter()
            .map(|(token, balance)| {
                params![chain, address, token, at.number as i64, balance.clone()]
            })
            .collect();
        tx.execute_many(
            "INSERT INTO token_balance_anchors (chain, address, token, block, balance) \
             VALUES ($1, $2, $3, $4, $5) \
             ON CONFLICT (chain, address, token) DO UPDATE \
             SET block = excluded.block, balance = excluded.balance \
             WHERE token_balance_anchors.block < excluded.block",
            rows,
        )
        .await?;
        tx.commit().await?;
        Ok(true)
    }
}

fn read_erc20s(rows: &[Row]) -> Result<Option<WalletErc20s>, StoreError> {
    let mut indexed = None;
    let mut tokens: Vec<Erc20Holding> = Vec::new();
    let mut moves: Vec<(String, Move)> = Vec::new();
    for r in rows {
        match r.int(0)? {
            0 => {
                indexed = Some(IndexCursor {
                    number: r.int(1)? as u64,
                    hash: r.text(4)?,
                })
            }
            1 => tokens.push(Erc20Holding {
                token: r.text(4)?,
                meta: (!r.is_null(3)?).then(|| token_meta(r)).transpose()?,
                anchor: r
                    .opt_int(1)?
                    .map(|block| -> Result<_, StoreError> {
                        Ok(BalanceAnchor {
                            block: block as u64,
                            balance: r.opt_text(5)?,
                        })
                    })
                    .transpose()?,
                moves: Vec::new(),
            }),
            _ => {
                let amount = r.text(6)?;
                let m = match r.text(5)?.as_str() {
                    "in" => Move::In(amount),
                    "out" => Move::Out(amount),
                    _ => Move::SelfTransfer,
                };
                moves.push((r.text(4)?, m));
            }
        }
    }
    let Some(indexed) = indexed else {
        return Ok(None);
    };
    tokens.sort_by(|a, b| a.token.cmp(&b.token));
    let moves_cut = moves.len() > MAX_MOVES;
    moves.truncate(MAX_MOVES);
    for (token, m) in moves {
        if let Ok(i) = tokens.binary_search_by(|t| t.token.as_str().cmp(&token)) {
            tokens[i].moves.push(m);
        }
    }
    Ok(Some(WalletErc20s {
        indexed,
        tokens,
        moves_cut,
    }))
}

fn token_meta(r: &Row) -> Result<TokenMeta, StoreError> {
    Ok(TokenMeta {
        name: r.opt_text(6)?,
        symbol: r.opt_text(7)?,
        decimals: r.opt_int(2)?.and_then(|d| u8::try_from(d).ok()),
    })
}

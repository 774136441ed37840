//! What each wallet holds of each NFT (ERC-721, ERC-1155), kept beside the moves it comes
//! from, so an NFT page reads its own rows by key whatever the wallet's history (it used
//! to read and fold every NFT move of the address: an NFT trader's page cost followed its
//! whole history, and past 100,000 moves the holdings were wrong).
//!
//! Holdings, and how many each wallet has (`nft_holding_counts`, a page's `total`), are
//! written in the transaction that commits their moves (`apply_moves`), worked out again
//! for the addresses a reorg touched (`refold_addresses`), and built whole for a chain
//! whose holdings are behind its cursor (`rebuild_chain`): a store indexed before the
//! tables existed, or blocks committed by an instance that did not keep them.
//! `index_cursor.nft_state_hash` says where both are current: the cursor's block hash
//! when they are (a hash, not a number: blocks rolled back and committed again by an
//! instance that does not keep them leave the number where it was). `nft_holdings_hash`
//! is still written beside it for instances from before the counts, which read it.

use super::sql::{insert_chunks, params, Row, StoreError, Tx, Value};
use std::collections::{BTreeMap, BTreeSet};

/// The rule every holding follows, move by move (the one the NFT page has always
/// applied): an ERC-721 token is held (1) after it comes in and not after it goes out;
/// an ERC-1155 amount adds what comes in and takes what goes out, never below zero (the
/// index may start after a mint) and saturating at `u128::MAX` (an amount too large to
/// read counts as that). A transfer to oneself changes nothing.
pub fn held_after(before: u128, kind: &str, direction: &str, amount: &str) -> u128 {
    let amount: u128 = amount.parse().unwrap_or(u128::MAX);
    match (kind, direction) {
        ("erc721", "in") => 1,
        ("erc721", "out") => 0,
        (_, "in") => before.saturating_add(amount),
        (_, "out") => before.saturating_sub(amount),
        _ => before,
    }
}

pub fn is_nft(kind: &str) -> bool {
    matches!(kind, "erc721" | "erc1155")
}

/// A holding's place within a chain: address, token, token id.
type Key = (String, String, String);

/// Holdings being worked out from moves, each from its state before them (its kind is
/// the first move's).
#[derive(Default)]
struct Fold(BTreeMap<Key, (String, u128)>);

impl Fold {
    fn apply(&mut self, key: Key, kind: &str, direction: &str, amount: &str) {
        let held = self.0.entry(key).or_insert_with(|| (kind.to_string(), 0));
        held.1 = held_after(held.1, kind, direction, amount);
    }

    /// Rows for `nft_holdings` of what is held (a holding at zero has no row).
    fn rows(&self, chain: &str) -> Vec<Vec<Value>> {
        self.0
            .iter()
            .filter(|(_, (_, amount))| *amount > 0)
            .map(|((address, token, id), (kind, amount))| {
                params![
                    chain,
                    address,
                    token,
                    id_len(id),
                    id,
                    kind,
                    amount.to_string()
                ]
            })
            .collect()
    }
}

const INSERT: &str =
    "INSERT INTO nft_holdings (chain, address, token, id_len, token_id, kind, amount)";

/// A token id's length in digits: (length, id) orders decimal ids as numbers.
fn id_len(id: &str) -> i64 {
    id.len() as i64
}

/// The holdings of `keys` keys: `$1` the chain, then address, token, id length and id of
/// each. Each key a seek of the primary key (`(…) IN (VALUES …)` would read every holding
/// of the chain on SQLite).
pub(super) fn lookup_sql(keys: usize) -> String {
    let values: Vec<String> = (0..keys)
        .map(|i| {
            let at = 4 * i + 2;
            let (token, len, id) = (at + 1, at + 2, at + 3);
            format!("(${at}, ${token}, CAST(${len} AS BIGINT), ${id})")
        })
        .collect();
    format!(
        "SELECT h.address, h.token, h.token_id, h.kind, h.amount \
         FROM (VALUES {}) v CROSS JOIN nft_holdings h \
         WHERE h.chain = $1 AND h.address = v.column1 AND h.token = v.column2 \
         AND h.id_len = v.column3 AND h.token_id = v.column4",
        values.join(", ")
    )
}

/// One wallet's side of an NFT transfer being committed.
pub(super) struct WalletMove<'a> {
    /// (block, transaction, log, position in a batch): the order moves apply in.
    pub position: (u64, u64, i64, u64),
    pub address: &'a str,
    /// `in`, `out` or `self`.
    pub direction: &'a str,
    pub kind: &'a str,
    pub token: &'a str,
    pub token_id: &'a str,
    pub amount: &'a str,
}

/// Within a commit's transaction: the holdings after `moves`, from the holdings before
/// them (read for the keys the moves touch, and written back).
pub(super) async fn apply_moves(
    tx: &mut dyn Tx,
    chain: &str,
    mut moves: Vec<WalletMove<'_>>,
) -> Result<(), StoreError> {
    if moves.is_empty() {
        return Ok(());
    }
    moves.sort_by_key(|m| m.position);
    let key = |m: &WalletMove| {
        (
            m.address.to_string(),
            m.token.to_string(),
            m.token_id.to_string(),
        )
    };
    let touched: BTreeSet<Key> = moves.iter().map(key).collect();
    let touched: Vec<Key> = touched.into_iter().collect();
    let mut fold = Fold::default();
    // Each address's change in holdings: one less for a touched key held before (it has
    // a row), one more for each held after.
    let mut change: BTreeMap<String, i64> = BTreeMap::new();
    // In `insert_chunks`' sizes (powers of two, at most 128 keys): a few statements per
    // connection, kept in its statement cache, whatever the batches' sizes.
    let mut rest = &touched[..];
    for n in insert_chunks(touched.len()) {
        let (chunk, next) = rest.split_at(n);
        rest = next;
        let mut args = params![chain];
        for (address, token, id) in chunk {
            args.extend(params![address, token, id_len(id), id]);
        }
        let sql = lookup_sql(chunk.len());
        for mut r in tx.query(&sql, args).await? {
            let amount = r.text(4)?.parse().unwrap_or(u128::MAX);
            let key = (r.take_text(0)?, r.take_text(1)?, r.take_text(2)?);
            *change.entry(key.0.clone()).or_default() -= 1;
            fold.0.insert(key, (r.take_text(3)?, amount));
        }
    }
    for m in &moves {
        fold.apply(key(m), m.kind, m.direction, m.amount);
    }
    let gone = touched
        .iter()
        .map(|(address, token, id)| params![chain, address, token, id_len(id), id])
        .collect();
    tx.execute_many(
        "DELETE FROM nft_holdings WHERE chain = $1 AND address = $2 AND token = $3 \
         AND id_len = $4 AND token_id = $5",
        gone,
    )
    .await?;
    tx.insert_rows(INSERT, fold.rows(chain)).await?;
    for ((address, _, _), _) in fold.0.iter().filter(|(_, (_, amount))| *amount > 0) {
        *change.entry(address.clone()).or_default() += 1;
    }
    count_changes(tx, chain, change).await
}

/// Add each address's change to its count of holdings; a count down to zero goes.
async fn count_changes(
    tx: &mut dyn Tx,
    chain: &str,
    change: BTreeMap<String, i64>,
) -> Result<(), StoreError> {
    let changed: Vec<(String, i64)> = change.into_iter().filter(|(_, by)| *by != 0).collect();
    let add = changed
        .iter()
        .map(|(address, by)| params![chain, address, *by])
        .collect();
    tx.execute_many(
        "INSERT INTO nft_holding_counts (chain, address, holdings) VALUES ($1, $2, $3) \
         ON CONFLICT (chain, address) DO UPDATE \
         SET holdings = nft_holding_counts.holdings + excluded.holdings",
        add,
    )
    .await?;
    let emptied = changed
        .iter()
        .filter(|(_, by)| *by < 0)
        .map(|(address, _)| params![chain, address])
        .collect();
    tx.execute_many(
        "DELETE FROM nft_holding_counts WHERE chain = $1 AND address = $2 AND holdings <= 0",
        emptied,
    )
    .await?;
    Ok(())
}

/// Count `address`'s holdings (every address's of the chain with `None`) from the rows.
async fn recount(tx: &mut dyn Tx, chain: &str, address: Option<&str>) -> Result<(), StoreError> {
    let (only, args) = match address {
        Some(a) => (" AND address = $2", params![chain, a]),
        None => ("", params![chain]),
    };
    tx.execute(
        &format!("DELETE FROM nft_holding_counts WHERE chain = $1{only}"),
        args.clone(),
    )
    .await?;
    tx.execute(
        &format!(
            "INSERT INTO nft_holding_counts (chain, address, holdings) \
             SELECT chain, address, COUNT(*) FROM nft_holdings WHERE chain = $1{only} \
             GROUP BY chain, address"
        ),
        args,
    )
    .await?;
    Ok(())
}

/// Within a rollback's transaction, before the orphaned moves go: the addresses whose NFT
/// holdings they touched (`refold_addresses` once they are gone).
pub(super) async fn addresses_moved_above(
    tx: &mut dyn Tx,
    chain: &str,
    block: u64,
) -> Result<Vec<String>, StoreError> {
    let rows = tx
        .query(
            "SELECT DISTINCT address FROM wallet_transfers \
             WHERE chain = $1 AND block > $2 AND kind IN ('erc721', 'erc1155')",
            params![chain, block as i64],
        )
        .await?;
    rows.iter().map(|r| r.text(0)).collect()
}

/// The NFT moves a rebuild reads per statement.
const REFOLD_CHUNK: i64 = 10_000;

/// Work `addresses`' holdings out again from all their NFT moves (after a reorg).
pub(super) async fn refold_addresses(
    tx: &mut dyn Tx,
    chain: &str,
    addresses: &[String],
) -> Result<(), StoreError> {
    for address in addresses {
        tx.execute(
            "DELETE FROM nft_holdings WHERE chain = $1 AND address = $2",
            params![chain, address],
        )
        .await?;
        refold(tx, chain, Some(address)).await?;
        recount(tx, chain, Some(address)).await?;
    }
    Ok(())
}

/// Within a transaction that found `chain`'s holdings behind its cursor: build them and
/// their counts whole from the chain's NFT moves, and mark them current.
pub(super) async fn rebuild_chain(tx: &mut dyn Tx, chain: &str) -> Result<(), StoreError> {
    tx.execute("DELETE FROM nft_holdings WHERE chain = $1", params![chain])
        .await?;
    refold(tx, chain, None).await?;
    recount(tx, chain, None).await?;
    tx.execute(
        "UPDATE index_cursor SET nft_holdings_hash = hash, nft_state_hash = hash \
         WHERE chain = $1",
        params![chain],
    )
    .await?;
    Ok(())
}

/// Whether `chain`'s holdings are behind its cursor (`None`: no cursor yet); at open
/// (a commit or rollback reads it with the cursor it checks, `index.rs`).
pub(super) async fn behind(tx: &mut dyn Tx, chain: &str) -> Result<Option<bool>, StoreError> {
    let rows = tx
        .query(
            "SELECT hash, nft_state_hash FROM index_cursor WHERE chain = $1",
            params![chain],
        )
        .await?;
    rows.first()
        .map(|r| Ok(r.opt_text(1)? != Some(r.text(0)?)))
        .transpose()
}

/// Fold the NFT moves of one address (or of the whole chain) into holdings rows, a chunk
/// of moves at a time in (address, position) order: an address's holdings are written
/// once its last move has been read.
async fn refold(tx: &mut dyn Tx, chain: &str, address: Option<&str>) -> Result<(), StoreError> {
    const COLUMNS: &str = "SELECT address, block, tx_index, log_index, seq, kind, token, \
                           token_id, direction, amount FROM wallet_transfers \
                           WHERE chain = $1 AND kind IN ('erc721', 'erc1155')";
    const ORDER: &str = "ORDER BY address, block, tx_index, log_index, seq LIMIT $2";
    let mut after: Option<Vec<Value>> = None;
    let mut fold = Fold::default();
    loop {
        let mut args = params![chain, REFOLD_CHUNK];
        let mut sql = COLUMNS.to_string();
        if let Some(address) = address {
            args.push(address.into());
            sql += " AND address = $3";
        }
        if let Some(last) = &after {
            let n = args.len();
            sql += &format!(
                " AND (address, block, tx_index, log_index, seq) > (${}, ${}, ${}, ${}, ${})",
                n + 1,
                n + 2,
                n + 3,
                n + 4,
                n + 5
            );
            args.extend(last.iter().cloned());
        }
        sql = format!("{sql} {ORDER}");
        let rows = tx.query(&sql, args).await?;
        let Some(last) = rows.last() else { break };
        after = Some(last.0[..5].to_vec());
        let full = rows.len() as i64 == REFOLD_CHUNK;
        let last_address = last.text(0)?;
        for r in &rows {
            fold_row(&mut fold, r)?;
        }
        // What is complete (every address but the last, or all at the end) is written.
        let keep = if full {
            fold.0
                .split_off(&(last_address, String::new(), String::new()))
        } else {
            BTreeMap::new()
        };
        tx.insert_rows(INSERT, fold.rows(chain)).await?;
        fold.0 = keep;
        if !full {
            break;
        }
    }
    Ok(())
}

fn fold_row(fold: &mut Fold, r: &Row) -> Result<(), StoreError> {
    let key = (r.text(0)?, r.text(6)?, r.opt_text(7)?.unwrap_or_default());
    fold.apply(key, &r.text(5)?, &r.text(8)?, &r.text(9)?);
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_holding_follows_its_moves() {
        let mut n = 0;
        for (kind, direction, amount, held) in [
            ("erc721", "in", "1", 1),
            ("erc721", "self", "1", 1),
            ("erc721", "out", "1", 0),
            ("erc1155", "out", "5", 0),
            ("erc1155", "in", "7", 7),
            ("erc1155", "out", "3", 4),
            (
                "erc1155",
                "in",
                "999999999999999999999999999999999999999999",
                u128::MAX,
            ),
            ("erc1155", "in", "1", u128::MAX),
        ] {
            n = held_after(n, kind, direction, amount);
            assert_eq!(n, held, "{kind} {direction} {amount}");
        }
    }
}

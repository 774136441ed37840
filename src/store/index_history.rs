//! An address's history from the chain index, one page at a time, newest first: read by
//! key in one statement (one snapshot) with the index's block and each transfer's token
//! metadata, and handed row by row to a sink where it is read (`HistorySink`), so a page
//! can be written out without copying its rows first.

use super::index::{int, TokenMeta};
use super::sql::{params, Cells, StoreError, Visit};
use super::Store;

/// A position in an address's history, newest first: rows strictly older come next.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Position {
    pub block: u64,
    pub tx_index: u64,
    pub log_index: i64,
    pub seq: u64,
}

/// One row of an address's history.
#[derive(Debug, Clone)]
pub struct HistoryRow {
    pub position: Position,
    pub direction: String,
    pub kind: String,
    pub token: String,
    pub counterparty: String,
    pub token_id: Option<String>,
    pub amount: String,
    pub tx_hash: String,
    pub timestamp: i64,
}

/// One page of a wallet's history (`Store::wallet_history`): the index's block when it
/// was read, and each row with its token's metadata (empty when not fetched yet).
pub struct HistoryPage {
    pub indexed_block: u64,
    pub items: Vec<(HistoryRow, TokenMeta)>,
}

/// One history row as read, borrowed from the store's row, with its token's metadata.
pub struct HistoryRef<'a> {
    pub position: Position,
    pub direction: &'a str,
    pub kind: &'a str,
    /// "" for native value.
    pub token: &'a str,
    pub counterparty: &'a str,
    pub token_id: Option<&'a str>,
    pub amount: &'a str,
    pub tx_hash: &'a str,
    pub timestamp: i64,
    pub name: Option<&'a str>,
    pub symbol: Option<&'a str>,
    pub decimals: Option<u8>,
}

/// Where a page's rows go as they are read (`Store::wallet_history_into`): on SQLite, on
/// the reader's thread.
pub trait HistorySink: Send + 'static {
    fn row(&mut self, r: HistoryRef<'_>);
}

impl HistorySink for Vec<(HistoryRow, TokenMeta)> {
    fn row(&mut self, r: HistoryRef<'_>) {
        let row = HistoryRow {
            position: r.position,
            direction: r.direction.into(),
            kind: r.kind.into(),
            token: r.token.into(),
            counterparty: r.counterparty.into(),
            token_id: r.token_id.map(Into::into),
            amount: r.amount.into(),
            tx_hash: r.tx_hash.into(),
            timestamp: r.timestamp,
        };
        let meta = TokenMeta {
            name: r.name.map(Into::into),
            symbol: r.symbol.map(Into::into),
            decimals: r.decimals,
        };
        self.push((row, meta));
    }
}

impl Store {
    /// One page of an address's history, newest first (at most `limit` rows, strictly
    /// older than `before`), each row handed to `sink` as read, with the index's block:
    /// one statement (one snapshot, one trip to the store; an empty page takes a second),
    /// the history route's whole store cost. `None` when the index has not committed a
    /// block yet.
    pub async fn wallet_history_into<S: HistorySink>(
        &self,
        chain: &str,
        address: &str,
        before: Option<Position>,
        limit: usize,
        sink: S,
    ) -> Result<Option<(u64, S)>, StoreError> {
        let args = || {
            let mut args = params![chain, address, int(limit as u64)];
            if let Some(p) = before {
                args.extend([
                    int(p.block),
                    int(p.tx_index),
                    p.log_index.into(),
                    int(p.seq),
                ]);
            }
            args
        };
        // A page with items is read by itself, in primary-key order with the index's
        // block beside each row: one statement, one snapshot, no sort. Only an empty page
        // needs the statement led by the cursor's row (which comes back on its own).
        let (with_items, led) = match before {
            None => (HISTORY_PAGE, HISTORY_PAGE_LED),
            Some(_) => (HISTORY_PAGE_BEFORE, HISTORY_PAGE_LED_BEFORE),
        };
        let read = PageVisit {
            block: None,
            rows: 0,
            sink,
        };
        let mut read = self.visit(with_items, args(), read).await?;
        if read.rows == 0 {
            read = self.visit(led, args(), read).await?;
        }
        Ok(read.block.map(|block| (block, read.sink)))
    }

    /// `wallet_history_into`, the rows copied out.
    pub async fn wallet_history(
        &self,
        chain: &str,
        address: &str,
        before: Option<Position>,
        limit: usize,
    ) -> Result<Option<HistoryPage>, StoreError> {
        let page = self
            .wallet_history_into(chain, address, before, limit, Vec::new())
            .await?;
        Ok(page.map(|(indexed_block, items)| HistoryPage {
            indexed_block,
            items,
        }))
    }
}

/// A history statement's rows into a sink: the index's block (column 0; NULL before the
/// index's first commit) and each row that carries a transfer (column 1 not NULL: the
/// statement led by the cursor has one row without when the page is empty).
struct PageVisit<S> {
    block: Option<u64>,
    rows: usize,
    sink: S,
}

impl<S: HistorySink> Visit for PageVisit<S> {
    fn row(&mut self, c: &dyn Cells) -> Result<(), StoreError> {
        self.rows += 1;
        let Some(block) = c.int(0)? else {
            return Ok(());
        };
        self.block = Some(block as u64);
        let Some(at_block) = c.int(1)? else {
            return Ok(());
        };
        self.sink.row(HistoryRef {
            position: Position {
                block: at_block as u64,
                tx_index: c.int_of(2)? as u64,
                log_index: c.int_of(3)?,
                seq: c.int_of(4)? as u64,
            },
            direction: c.text_of(5)?,
            kind: c.text_of(6)?,
            token: c.text_of(7)?,
            counterparty: c.text_of(8)?,
            token_id: c.text(9)?,
            amount: c.text_of(10)?,
            tx_hash: c.text_of(11)?,
            timestamp: c.int_of(12)?,
            name: c.text(13)?,
            symbol: c.text(14)?,
            decimals: c.int(15)?.and_then(|d| u8::try_from(d).ok()),
        });
        Ok(())
    }
}

/// A page of an address's history (`wallet_history`): `$1` chain, `$2` address, `$3`
/// the page's size, then (the `_BEFORE` forms) the position the page starts below in
/// `$4`..`$7`. Columns: the index's block, the transfer, its token's metadata.
macro_rules! history_sql {
    (page $($before:literal)?) => {
        concat!(
            "SELECT (SELECT number FROM index_cursor WHERE chain = $1), \
             w.block, w.tx_index, w.log_index, w.seq, w.direction, w.kind, w.token, \
             w.counterparty, w.token_id, w.amount, w.tx_hash, w.ts, t.name, t.symbol, t.decimals \
             FROM wallet_transfers w \
             LEFT JOIN tokens t ON t.chain = w.chain AND t.address = w.token \
             WHERE w.chain = $1 AND w.address = $2 ",
            $($before,)?
            " ORDER BY w.block DESC, w.tx_index DESC, w.log_index DESC, w.seq DESC LIMIT $3"
        )
    };
    (led $($before:literal)?) => {
        concat!(
            "SELECT c.number, w.block, w.tx_index, w.log_index, w.seq, w.direction, \
             w.kind, w.token, w.counterparty, w.token_id, w.amount, w.tx_hash, w.ts, \
             t.name, t.symbol, t.decimals \
             FROM index_cursor c \
             LEFT JOIN (SELECT w.* FROM wallet_transfers w WHERE w.chain = $1 AND w.address = $2 ",
            $($before,)?
            " ORDER BY w.block DESC, w.tx_index DESC, w.log_index DESC, w.seq DESC LIMIT $3) w \
             ON TRUE \
             LEFT JOIN tokens t ON t.chain = c.chain AND t.address = w.token \
             WHERE c.chain = $1 \
             ORDER BY w.block DESC, w.tx_index DESC, w.log_index DESC, w.seq DESC"
        )
    };
}
pub(super) const HISTORY_PAGE: &str = history_sql!(page);
const HISTORY_PAGE_BEFORE: &str =
    history_sql!(page "AND (w.block, w.tx_index, w.log_index, w.seq) < ($4, $5, $6, $7)");
const HISTORY_PAGE_LED: &str = history_sql!(led);
const HISTORY_PAGE_LED_BEFORE: &str =
    history_sql!(led "AND (w.block, w.tx_index, w.log_index, w.seq) < ($4, $5, $6, $7)");

//! Reading a wallet's NFT holdings a page at a time (the rows `index_nfts` keeps), each
//! holding handed to a sink as the store reads it; a chain whose holdings are behind its
//! cursor is built whole first.

use super::index_nfts::{behind, rebuild_chain};
use super::sql::{params, Cells, StoreError, Visit};
use super::Store;

/// One page of a wallet's NFT holdings (`Store::wallet_nfts`).
pub struct NftPage {
    pub indexed_block: u64,
    /// Holdings in all (every page's).
    pub total: u64,
    pub items: Vec<NftHolding>,
}

/// What an address holds of one token id, with its token's name and symbol when fetched.
pub struct NftHolding {
    pub kind: String,
    pub token: String,
    pub token_id: String,
    /// Decimal, above zero.
    pub amount: String,
    pub name: Option<String>,
    pub symbol: Option<String>,
}

/// A page of holdings: `$1` chain, `$2` address, `$3` limit, `$4` offset. Columns: the
/// index's block, the holdings in all, then each holding in (token, token id as a number)
/// order with its token's name and symbol.
pub(super) const PAGE: &str = "SELECT (SELECT number FROM index_cursor WHERE chain = $1), \
     (SELECT holdings FROM nft_holding_counts WHERE chain = $1 AND address = $2), \
     h.kind, h.token, h.token_id, h.amount, t.name, t.symbol \
     FROM nft_holdings h LEFT JOIN tokens t ON t.chain = h.chain AND t.address = h.token \
     WHERE h.chain = $1 AND h.address = $2 \
     ORDER BY h.token, h.id_len, h.token_id LIMIT $3 OFFSET $4";
/// The index's block and the holdings in all, for a page with no item.
const PAGE_EMPTY: &str = "SELECT number, \
     (SELECT holdings FROM nft_holding_counts WHERE chain = $1 AND address = $2) \
     FROM index_cursor WHERE chain = $1";

/// One holding as read, borrowed from the store's row.
pub struct HoldingRef<'a> {
    pub kind: &'a str,
    pub token: &'a str,
    pub token_id: &'a str,
    /// Decimal, above zero.
    pub amount: &'a str,
    pub name: Option<&'a str>,
    pub symbol: Option<&'a str>,
}

/// Where a page's holdings go as they are read (`Store::wallet_nfts_into`): on SQLite, on
/// the reader's thread, so a page can be written out without copying its rows first.
pub trait HoldingSink: Send + 'static {
    fn holding(&mut self, h: HoldingRef<'_>);
}

impl HoldingSink for Vec<NftHolding> {
    fn holding(&mut self, h: HoldingRef<'_>) {
        self.push(NftHolding {
            kind: h.kind.into(),
            token: h.token.into(),
            token_id: h.token_id.into(),
            amount: h.amount.into(),
            name: h.name.map(Into::into),
            symbol: h.symbol.map(Into::into),
        });
    }
}

/// The index's block and the holdings in all, beside a page.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct NftPageHead {
    pub indexed_block: u64,
    pub total: u64,
}

/// `PAGE`'s rows into a sink.
struct PageVisit<S> {
    head: Option<NftPageHead>,
    rows: usize,
    sink: S,
}

impl<S: HoldingSink> Visit for PageVisit<S> {
    fn row(&mut self, c: &dyn Cells) -> Result<(), StoreError> {
        self.rows += 1;
        // No block: the index has not committed one yet.
        let Some(block) = c.int(0)? else {
            return Ok(());
        };
        // No count: nothing held (a count down to zero has no row).
        self.head = Some(NftPageHead {
            indexed_block: block as u64,
            total: c.int(1)?.unwrap_or(0) as u64,
        });
        self.sink.holding(HoldingRef {
            kind: c.text_of(2)?,
            token: c.text_of(3)?,
            token_id: c.text_of(4)?,
            amount: c.text_of(5)?,
            name: c.text(6)?,
            symbol: c.text(7)?,
        });
        Ok(())
    }
}

impl Store {
    /// One page of an address's NFT holdings, each handed to `sink` as read, with the
    /// index's block and the holdings in all, read by key (one statement; a page with no
    /// item takes a second). `None` when the index has not committed a block yet.
    pub async fn wallet_nfts_into<S: HoldingSink>(
        &self,
        chain: &str,
        address: &str,
        limit: usize,
        offset: usize,
        sink: S,
    ) -> Result<Option<(NftPageHead, S)>, StoreError> {
        let args = params![chain, address, limit as i64, offset as i64];
        let read = PageVisit {
            head: None,
            rows: 0,
            sink,
        };
        let read = self.visit(PAGE, args, read).await?;
        if read.rows > 0 {
            return Ok(read.head.map(|head| (head, read.sink)));
        }
        let rows = self.db.query(PAGE_EMPTY, params![chain, address]).await?;
        let Some(r) = rows.first() else {
            return Ok(None);
        };
        let head = NftPageHead {
            indexed_block: r.int(0)? as u64,
            total: r.opt_int(1)?.unwrap_or(0) as u64,
        };
        Ok(Some((head, read.sink)))
    }

    /// `wallet_nfts_into`, the holdings copied out.
    pub async fn wallet_nfts(
        &self,
        chain: &str,
        address: &str,
        limit: usize,
        offset: usize,
    ) -> Result<Option<NftPage>, StoreError> {
        let page = self
            .wallet_nfts_into(chain, address, limit, offset, Vec::new())
            .await?;
        Ok(page.map(|(head, items)| NftPage {
            indexed_block: head.indexed_block,
            total: head.total,
            items,
        }))
    }

    /// Bring every chain's NFT holdings up to its cursor where they are behind (at open:
    /// a store indexed before the table existed), each chain in one transaction. A
    /// conflict (PostgreSQL: another instance building them, or its indexer committing,
    /// at the same time) leaves the chain to whoever won.
    pub(super) async fn catch_up_nft_holdings(&self) -> Result<(), StoreError> {
        let rows = self
            .db
            .query(
                "SELECT chain FROM index_cursor \
                 WHERE nft_state_hash IS NULL OR nft_state_hash <> hash",
                Vec::new(),
            )
            .await?;
        for r in rows {
            let chain = r.text(0)?;
            match self.rebuild_if_behind(&chain).await {
                // Another instance built them meanwhile, or its indexer committed (then
                // its commit built them).
                Err(e) if e.kind == super::sql::ErrorKind::Conflict => {}
                other => other?,
            }
        }
        Ok(())
    }

    async fn rebuild_if_behind(&self, chain: &str) -> Result<(), StoreError> {
        let mut tx = self.raw.begin().await?;
        if behind(&mut *tx, chain).await? == Some(true) {
            rebuild_chain(&mut *tx, chain).await?;
            tx.commit().await?;
        }
        Ok(())
    }
}

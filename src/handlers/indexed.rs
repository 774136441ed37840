//! Wallet endpoints answered from the chain index (`src/capture/index/`): history, ERC-20
//! balances and NFT holdings, for `eth` and `polygon`.
//!
//! - History: newest first, `limit` (1–200, default 50) and an opaque `cursor` naming the
//!   last row returned, so a page never shifts when new blocks arrive.
//! - Tokens (`indexed_tokens.rs`): every ERC-20 the address has sent or received, its
//!   metadata, and its exact balance at the indexed block (so balances and index agree).
//! - NFTs: ERC-721 and ERC-1155 holdings from the address's transfers since the index's
//!   start block (kept as the index commits, `store/index_nfts.rs`), `limit` (1–200,
//!   default 50) / `offset` paging with the total.

use super::wallet::address;
use super::Request;
use crate::errors::ApiError;
use crate::pools::Pool;
use crate::reply::Reply;
use crate::rpc::Gateway;
use crate::store::index_history::{HistoryRef, HistorySink, Position};
use crate::store::nft_pages::{HoldingRef, HoldingSink};
use crate::store::Store;
use base64::Engine;
use serde::Serialize;
use serde_json::Value;
use sha2::Digest;
use std::io::Write;

pub const DEFAULT_LIMIT: usize = 50;
pub const MAX_LIMIT: usize = 200;
/// Deepest NFT `offset`.
pub const MAX_OFFSET: usize = 10_000;
/// Most ERC-20 tokens listed for one address.
pub const MAX_TOKENS: usize = 500;

/// What the handlers need: the chain's name in the index, its pool, the store.
pub const HANDLERS: &[super::Handler] = &[
    super::Handler::new("eth_wallet_history", |s, r| {
        Box::pin(page(s, "eth", Page::History, r))
    })
    .pool("eth_el"),
    super::Handler::new("eth_wallet_nfts", |s, r| {
        Box::pin(page(s, "eth", Page::Nfts, r))
    })
    .pool("eth_el"),
    super::Handler::new("polygon_wallet_history", |s, r| {
        Box::pin(page(s, "polygon", Page::History, r))
    })
    .pool("polygon_bor"),
    super::Handler::new("polygon_wallet_nfts", |s, r| {
        Box::pin(page(s, "polygon", Page::Nfts, r))
    })
    .pool("polygon_bor"),
];

/// Which wallet page a route answers (tokens: `indexed_tokens.rs`).
#[derive(Clone, Copy)]
enum Page {
    History,
    Nfts,
}

/// A wallet route answered from the chain index (503 when the chain is not indexed).
async fn page(
    s: &super::Services<'_>,
    chain: &str,
    page: Page,
    req: &Request<'_>,
) -> Result<Reply, ApiError> {
    let ix = Indexed::for_chain(s, chain)?;
    match page {
        Page::History => history(&ix, req).await,
        Page::Nfts => nfts(&ix, req).await,
    }
}

pub struct Indexed<'a> {
    pub chain: &'a str,
    /// `index.<chain>.balance_refresh_blocks`: the oldest token balance anchor used.
    pub balance_refresh_blocks: u64,
    pub pool: &'a Pool,
    pub gateway: &'a Gateway,
    pub store: &'a Store,
}

impl<'a> Indexed<'a> {
    /// The chain's index as a wallet route reads it (503 when the chain is not indexed).
    pub(super) fn for_chain(s: &'a super::Services<'a>, chain: &'a str) -> Result<Self, ApiError> {
        let Some(conf) = s.config.app.index.get(chain) else {
            return Err(ApiError::new(
                503,
                "index_not_configured",
                format!("the {chain} chain is not indexed here (config `index.{chain}`)"),
            ));
        };
        Ok(Indexed {
            chain,
            balance_refresh_blocks: conf.balance_refresh_blocks,
            pool: s.pool()?,
            gateway: s.gateway,
            store: s.store(),
        })
    }
}

pub(super) fn store_error(e: crate::store::sql::StoreError) -> ApiError {
    log::error!("index read: {e}");
    ApiError::internal("index store")
}

fn bounded(req: &Request<'_>, name: &str, default: usize, max: usize) -> Result<usize, ApiError> {
    let Some(raw) = req.query_param(name) else {
        return Ok(default);
    };
    match raw.parse::<usize>() {
        Ok(n) if n <= max && (name == "offset" || n >= 1) => Ok(n),
        _ => Err(ApiError::invalid_params(format!(
            "{name} must be an integer from {} to {max}",
            if name == "offset" { 0 } else { 1 }
        ))),
    }
}

/// The address parameter, validated, and its form in the index (lowercase).
pub(super) fn wallet(req: &Request<'_>) -> Result<(String, String), ApiError> {
    let given = address(req.params.first().map(String::as_str).unwrap_or(""))?;
    Ok((given.to_string(), given.to_ascii_lowercase()))
}

pub(super) fn index_not_ready(chain: &str) -> ApiError {
    ApiError::new(
        503,
        "index_not_ready",
        format!("the {chain} index has not committed a block yet"),
    )
}

/// `GET …/history`: one page, newest first, each item written as JSON as the store reads
/// it.
pub async fn history(ix: &Indexed<'_>, req: &Request<'_>) -> Result<Reply, ApiError> {
    let (given, addr) = wallet(req)?;
    let limit = bounded(req, "limit", DEFAULT_LIMIT, MAX_LIMIT)?;
    let before = req
        .query_param("cursor")
        .map(|c| decode_cursor(&c))
        .transpose()?;
    // One more than asked: whether a next page exists.
    let items = HistoryJson {
        limit,
        ..Default::default()
    };
    let (indexed_block, items) = ix
        .store
        .wallet_history_into(ix.chain, &addr, before, limit + 1, items)
        .await
        .map_err(store_error)?
        .ok_or_else(|| index_not_ready(ix.chain))?;
    let next_cursor = items.last.filter(|_| items.more).map(encode_cursor);
    // The fields in order, as a `Serialize` struct of them would write them.
    let mut body = Vec::with_capacity(items.json.len() + 256);
    let written = (|| {
        body.extend_from_slice(br#"{"address":"#);
        serde_json::to_writer(&mut body, &given)?;
        body.extend_from_slice(br#","chain":"#);
        serde_json::to_writer(&mut body, ix.chain)?;
        write!(body, r#","indexed_block":{indexed_block},"items":["#)?;
        body.extend_from_slice(&items.json);
        body.extend_from_slice(br#"],"next_cursor":"#);
        serde_json::to_writer(&mut body, &next_cursor)?;
        body.push(b'}');
        Ok::<_, std::io::Error>(())
    })();
    written.map_err(|_| ApiError::internal("history page"))?;
    Ok(Reply::json(200, body))
}

/// A history page's items, written as JSON (comma-separated) as the store reads them: at
/// most `limit`, a row past it only says there is a next page.
#[derive(Default)]
struct HistoryJson {
    limit: usize,
    items: usize,
    json: Vec<u8>,
    /// The last item's position (the next page's cursor).
    last: Option<Position>,
    more: bool,
}

impl HistorySink for HistoryJson {
    fn row(&mut self, r: HistoryRef<'_>) {
        if self.items == self.limit {
            self.more = true;
            return;
        }
        if self.items > 0 {
            self.json.push(b',');
        }
        self.items += 1;
        self.last = Some(r.position);
        let item = HistoryItem {
            amount: r.amount,
            block: r.position.block,
            counterparty: r.counterparty,
            decimals: r.decimals,
            direction: r.direction,
            kind: r.kind,
            log_index: (r.position.log_index >= 0).then_some(r.position.log_index),
            symbol: r.symbol,
            timestamp: r.timestamp,
            token: (!r.token.is_empty()).then_some(r.token),
            token_id: r.token_id,
            tx_hash: r.tx_hash,
            tx_index: r.position.tx_index,
        };
        // Into a `Vec`, a struct of strings and numbers cannot fail to be written.
        let _ = serde_json::to_writer(&mut self.json, &item);
    }
}

/// One history item. Fields in the order the answers have always had them (sorted).
#[derive(Serialize)]
struct HistoryItem<'a> {
    amount: &'a str,
    block: u64,
    counterparty: &'a str,
    decimals: Option<u8>,
    direction: &'a str,
    kind: &'a str,
    log_index: Option<i64>,
    symbol: Option<&'a str>,
    timestamp: i64,
    token: Option<&'a str>,
    token_id: Option<&'a str>,
    tx_hash: &'a str,
    tx_index: u64,
}

/// `GET …/nfts`: what the address holds, one page, read by key from the holdings the
/// index keeps (`store/index_nfts.rs`), each item written as JSON as the store reads it.
pub async fn nfts(ix: &Indexed<'_>, req: &Request<'_>) -> Result<Reply, ApiError> {
    let (given, addr) = wallet(req)?;
    let limit = bounded(req, "limit", DEFAULT_LIMIT, MAX_LIMIT)?;
    let offset = bounded(req, "offset", 0, MAX_OFFSET)?;
    let (head, items) = ix
        .store
        .wallet_nfts_into(ix.chain, &addr, limit, offset, ItemsJson::default())
        .await
        .map_err(store_error)?
        .ok_or_else(|| index_not_ready(ix.chain))?;
    // The fields in order, as a `Serialize` struct of them would write them.
    let mut body = Vec::with_capacity(items.0.len() + 256);
    let text = |body: &mut Vec<u8>, s: &str| serde_json::to_writer(body, s);
    let written = (|| {
        body.extend_from_slice(br#"{"address":"#);
        text(&mut body, &given)?;
        write!(body, r#","block":{},"chain":"#, head.indexed_block)?;
        text(&mut body, ix.chain)?;
        body.extend_from_slice(br#","items":["#);
        body.extend_from_slice(&items.0);
        write!(
            body,
            r#"],"limit":{limit},"offset":{offset},"total":{}}}"#,
            head.total
        )
    })();
    written.map_err(|_| ApiError::internal("nft page"))?;
    Ok(Reply::json(200, body))
}

/// An NFT page's items, written as JSON (comma-separated) as the store reads them.
#[derive(Default)]
struct ItemsJson(Vec<u8>);

impl HoldingSink for ItemsJson {
    fn holding(&mut self, h: HoldingRef<'_>) {
        if !self.0.is_empty() {
            self.0.push(b',');
        }
        let item = NftItem {
            amount: h.amount,
            kind: h.kind,
            name: h.name,
            symbol: h.symbol,
            token: h.token,
            token_id: h.token_id,
        };
        // Into a `Vec`, a struct of strings cannot fail to be written.
        let _ = serde_json::to_writer(&mut self.0, &item);
    }
}

/// One NFT page item (fields sorted, as they have always been).
#[derive(Serialize)]
struct NftItem<'a> {
    /// Decimal text (amounts exceed what JSON numbers carry exactly).
    amount: &'a str,
    kind: &'a str,
    name: Option<&'a str>,
    symbol: Option<&'a str>,
    token: &'a str,
    token_id: &'a str,
}

pub(super) fn json_reply(v: Value) -> Reply {
    Reply::json(200, v.to_string())
}

/// `v1.<block>.<tx>.<log>.<seq>` with a checksum, base64url: opaque to callers, and a
/// mangled one is refused rather than read as some other position.
pub fn encode_cursor(p: Position) -> String {
    let body = format!("v1.{}.{}.{}.{}", p.block, p.tx_index, p.log_index, p.seq);
    let check = &hex::encode(sha2::Sha256::digest(body.as_bytes()))[..8];
    base64::engine::general_purpose::URL_SAFE_NO_PAD.encode(format!("{body}.{check}"))
}

pub fn decode_cursor(raw: &str) -> Result<Position, ApiError> {
    let bad = || ApiError::invalid_params("cursor is not one this endpoint issued");
    if raw.len() > 128 {
        return Err(bad());
    }
    let text = base64::engine::general_purpose::URL_SAFE_NO_PAD
        .decode(raw)
        .ok()
        .and_then(|b| String::from_utf8(b).ok())
        .ok_or_else(bad)?;
    let (body, check) = text.rsplit_once('.').ok_or_else(bad)?;
    if hex::encode(sha2::Sha256::digest(body.as_bytes()))[..8] != *check {
        return Err(bad());
    }
    let parts: Vec<&str> = body.split('.').collect();
    let [version, block, tx, log, seq] = parts[..] else {
        return Err(bad());
    };
    if version != "v1" {
        return Err(bad());
    }
    Ok(Position {
        block: block.parse().map_err(|_| bad())?,
        tx_index: tx.parse().map_err(|_| bad())?,
        log_index: log.parse().map_err(|_| bad())?,
        seq: seq.parse().map_err(|_| bad())?,
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn cursors_round_trip_and_refuse_tampering() {
        let p = Position {
            block: 123,
            tx_index: 4,
            log_index: -1,
            seq: 0,
        };
        let c = encode_cursor(p);
        assert_eq!(decode_cursor(&c).unwrap(), p);
        let forged =
            base64::engine::general_purpose::URL_SAFE_NO_PAD.encode("v1.9.4.-1.0.00000000");
        for bad in [
            forged.as_str(),
            "",
            "!!",
            &c[..c.len() - 1],
            &"A".repeat(200),
        ] {
            assert!(decode_cursor(bad).is_err(), "{bad}");
        }
    }
}

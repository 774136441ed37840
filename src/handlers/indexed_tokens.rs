//! `GET …/wallet/…/tokens`: every ERC-20 an address has sent or received, with its
//! metadata and its exact balance at the indexed block, answered from the index.
//!
//! A balance is read from the node once (`balanceOf` at the indexed block, kept as an
//! anchor: `store/index_balances.rs`) and then follows the address's indexed transfers.
//! The node is asked again only for a token with no anchor, an anchor older than
//! `index.<chain>.balance_refresh_blocks` (tokens whose balances change without a
//! `Transfer` event, such as rebasing ones, are set right then), more transfers since
//! than `MAX_MOVES_PER_TOKEN`, or transfers that do not add up to a balance.

use super::indexed::{index_not_ready, json_reply, store_error, wallet, Indexed, MAX_TOKENS};
use super::Request;
use crate::errors::ApiError;
use crate::reply::Reply;
use crate::store::index::TokenMeta;
use crate::store::index_balances::{Erc20Holding, Move};
use alloy_primitives::U256;
use serde_json::{json, Value};

/// Transfers after an anchor read from the index for one token; past it the node is asked
/// and the anchor moves up.
pub const MAX_MOVES_PER_TOKEN: usize = 256;

/// The two tokens routes, each on its chain's index and pool.
pub const HANDLERS: &[super::Handler] = &[
    super::Handler::new("eth_wallet_tokens", |s, r| Box::pin(route(s, "eth", r))).pool("eth_el"),
    super::Handler::new("polygon_wallet_tokens", |s, r| {
        Box::pin(route(s, "polygon", r))
    })
    .pool("polygon_bor"),
];

async fn route(s: &super::Services<'_>, chain: &str, req: &Request<'_>) -> Result<Reply, ApiError> {
    tokens(&Indexed::for_chain(s, chain)?, req).await
}

async fn tokens(ix: &Indexed<'_>, req: &Request<'_>) -> Result<Reply, ApiError> {
    let (given, addr) = wallet(req)?;
    let view = ix
        .store
        .wallet_erc20s(ix.chain, &addr, MAX_TOKENS)
        .await
        .map_err(store_error)?
        .ok_or_else(|| index_not_ready(ix.chain))?;
    let block = view.indexed.number;
    let mut balances: Vec<Option<Option<String>>> = view
        .tokens
        .iter()
        .map(|h| balance_from_index(h, block, ix.balance_refresh_blocks, view.moves_cut))
        .collect();

    let ask: Vec<&str> = view
        .tokens
        .iter()
        .zip(&balances)
        .filter(|(_, b)| b.is_none())
        .map(|(h, _)| h.token.as_str())
        .collect();
    let mut upstream = None;
    if !ask.is_empty() {
        let (read, host) = balances_from_node(ix, &addr, block, &ask, req.request_id).await?;
        upstream = host;
        // Kept for the next request; a store that cannot take them now costs a node call then.
        if let Err(e) = ix
            .store
            .put_balance_anchors(ix.chain, &addr, &view.indexed, &read)
            .await
        {
            log::warn!("keeping balance anchors: {e}");
        }
        let mut read = read.into_iter();
        for slot in balances.iter_mut().filter(|b| b.is_none()) {
            *slot = read.next().map(|(_, balance)| balance);
        }
    }

    let mut items = Vec::with_capacity(view.tokens.len());
    for (h, balance) in view.tokens.iter().zip(balances) {
        let meta = match &h.meta {
            Some(m) => m.clone(),
            None => fetch_meta(ix, &h.token, req.request_id).await,
        };
        items.push(json!({
            "token": h.token,
            "name": meta.name,
            "symbol": meta.symbol,
            "decimals": meta.decimals,
            // Null when the contract does not answer balanceOf.
            "balance": balance.flatten(),
        }));
    }
    Ok(json_reply(json!({
        "address": given,
        "chain": ix.chain,
        "block": block,
        "tokens": items,
    }))
    .served_by(upstream))
}

/// The balance at `block` from the token's anchor and the transfers after it:
/// `Some(balance)` (itself `None` when the contract did not answer `balanceOf`), or
/// `None` when the node must be asked.
fn balance_from_index(
    h: &Erc20Holding,
    block: u64,
    refresh_blocks: u64,
    moves_cut: bool,
) -> Option<Option<String>> {
    let anchor = h.anchor.as_ref()?;
    let stale = block.saturating_sub(anchor.block) > refresh_blocks;
    let moves_unknown = moves_cut && !h.moves.is_empty();
    if stale || moves_unknown || h.moves.len() > MAX_MOVES_PER_TOKEN {
        return None;
    }
    let Some(balance) = &anchor.balance else {
        return Some(None);
    };
    let amount = |a: &str| U256::from_str_radix(a, 10).ok();
    let mut held = amount(balance)?;
    let mut sent = U256::ZERO;
    for m in &h.moves {
        match m {
            Move::In(a) => held = held.checked_add(amount(a)?)?,
            Move::Out(a) => sent = sent.checked_add(amount(a)?)?,
            Move::SelfTransfer => {}
        }
    }
    // More sent than held: the token's balances do not follow its events; ask the node.
    Some(Some(held.checked_sub(sent)?.to_string()))
}

/// `balanceOf(address)` of each token at `block`, 100 calls per batch: (token, balance),
/// in order, and the host that answered.
async fn balances_from_node(
    ix: &Indexed<'_>,
    addr: &str,
    block: u64,
    tokens: &[&str],
    request_id: &str,
) -> Result<(Vec<(String, Option<String>)>, Option<String>), ApiError> {
    // balanceOf(address): 0x70a08231 and the address as one word.
    let data = format!("0x70a08231{:0>64}", &addr[2..]);
    let at = format!("0x{block:x}");
    let mut read = Vec::with_capacity(tokens.len());
    let mut upstream = None;
    for chunk in tokens.chunks(100) {
        let calls: Vec<(&str, Value)> = chunk
            .iter()
            .map(|t| ("eth_call", json!([{"to": t, "data": data}, at])))
            .collect();
        let (answers, host) = ix
            .gateway
            .read_batch_each(ix.pool, &calls, request_id)
            .await?;
        upstream = host;
        read.extend(chunk.iter().zip(answers).map(|(t, a)| {
            let balance = a
                .ok()
                .and_then(|v| v.as_str().map(str::to_string))
                .and_then(|h| crate::jsonrpc::quantity::u256_decimal(&h));
            (t.to_string(), balance)
        }));
    }
    Ok((read, upstream))
}

/// Metadata the indexer could not fetch yet: fetched now, kept for next time.
async fn fetch_meta(ix: &Indexed<'_>, token: &str, request_id: &str) -> TokenMeta {
    let token = token.to_string();
    match crate::rpc::token_metadata::token_metadata(ix.gateway, ix.pool, &token, request_id).await
    {
        Some(m) => {
            let _ = ix.store.put_token_meta(ix.chain, &token, &m).await;
            m
        }
        None => TokenMeta::default(),
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::store::index_balances::BalanceAnchor;

    fn holding(anchor: Option<(u64, Option<&str>)>, moves: Vec<Move>) -> Erc20Holding {
        Erc20Holding {
            token: "0xt".into(),
            meta: None,
            anchor: anchor.map(|(block, b)| BalanceAnchor {
                block,
                balance: b.map(str::to_string),
            }),
            moves,
        }
    }

    #[test]
    fn a_balance_is_its_anchor_and_the_transfers_after_it() {
        let big = "115792089237316195423570985008687907853269984665640564039457584007913129639935";
        let h = holding(
            Some((10, Some("100"))),
            vec![
                Move::Out("30".into()),
                Move::In("5".into()),
                Move::SelfTransfer,
            ],
        );
        assert_eq!(
            balance_from_index(&h, 20, 100, false),
            Some(Some("75".into()))
        );
        // No anchor, an old one, moves cut off, too many moves: the node is asked.
        assert_eq!(
            balance_from_index(&holding(None, vec![]), 20, 100, false),
            None
        );
        assert_eq!(balance_from_index(&h, 111, 100, false), None);
        assert_eq!(balance_from_index(&h, 20, 100, true), None);
        let busy = holding(
            Some((10, Some("0"))),
            vec![Move::In("1".into()); MAX_MOVES_PER_TOKEN + 1],
        );
        assert_eq!(balance_from_index(&busy, 20, 100, false), None);
        // A cut that took none of this token's moves leaves it answerable.
        let quiet = holding(Some((10, Some("7"))), vec![]);
        assert_eq!(
            balance_from_index(&quiet, 20, 100, true),
            Some(Some("7".into()))
        );
        // More sent than held, past u256, or an unreadable amount: the node is asked.
        let under = holding(Some((10, Some("1"))), vec![Move::Out("2".into())]);
        assert_eq!(balance_from_index(&under, 20, 100, false), None);
        let over = holding(Some((10, Some(big))), vec![Move::In("1".into())]);
        assert_eq!(balance_from_index(&over, 20, 100, false), None);
        let bad = holding(Some((10, Some("1"))), vec![Move::In("x".into())]);
        assert_eq!(balance_from_index(&bad, 20, 100, false), None);
        // A contract that did not answer balanceOf at the anchor still does not.
        let silent = holding(Some((10, None)), vec![Move::In("1".into())]);
        assert_eq!(balance_from_index(&silent, 20, 100, false), Some(None));
    }
}

//! One store test suite, run against both implementations: SQLite (a temporary file) and
//! PostgreSQL (a server this test starts, `common::PgServer`). Every repository call, the
//! transactions' guarantees under concurrency, and the migrations run twice.

use chainedge::store::capacity::{HostMinute, SeriesPoint};
use chainedge::store::console::{
    Challenge, ChallengeBounds, CodeBounds, CodeCheck, GuessGuard, Identity, Issued,
    MAX_KEYS_PER_USER,
};
use chainedge::store::mev_cache::Sample;
use chainedge::store::sol_stake::StakeRow;
use chainedge::store::sol_watchlist::{DeadLetter, Letters, WatchEntry, DEAD_LETTERS_KEPT};
use chainedge::store::sql::Dialect;
use chainedge::store::tx_push::TxHook;
use chainedge::store::txs::{NewTx, TxChange, FINAL, INCLUDED, PENDING, REPLACED};
use chainedge::store::usage::{Counts, ExportQuery, Grain, UsageRow};
use chainedge::store::{sha256, Store, Target};
use common::*;
use std::sync::Arc;

async fn suite(target: Target, dialect: Dialect) {
    let store = Store::open(&target).await.expect("open");
    assert_eq!(store.dialect(), dialect);
    // Opening again (a restart, a second instance) finds the schema current.
    let again = Store::open(&target).await.expect("reopen");
    drop(again);
    keys(&store).await;
    users_and_sessions(&store).await;
    default_and_user_keys(&store).await;
    codes_and_challenges(&store).await;
    concurrency(&store).await;
    capacity_series(&store).await;
    stake_snapshots(&store).await;
    watchlists(&store).await;
    mev_cache_samples(&store).await;
    key_usage(&store).await;
    followed_txs(&store).await;
    request_logs(&store).await;
    wallet_history_pages(&store).await;
    many_rows_in_one_commit(&store).await;
    balance_anchors(&store).await;
    nft_holdings(&store).await;
}

/// Blocks 1..=`blocks`, each with `per_block` native transfers: `transfer(block, i)`
/// gives (from, to, n), the amount being `n` and the transaction hash `n`'s.
fn native_blocks(
    blocks: u64,
    per_block: u64,
    transfer: impl Fn(u64, u64) -> (String, String, u64),
) -> Vec<chainedge::store::index::IndexedBlock> {
    use chainedge::store::index::{IndexedBlock, Transfer};
    (1..=blocks)
        .map(|n| IndexedBlock {
            number: n,
            hash: format!("0x{n:064x}"),
            parent_hash: format!("0x{:064x}", n - 1),
            timestamp: 1_700_000_000 + n,
            transfers: (0..per_block)
                .map(|i| {
                    let (from, to, id) = transfer(n, i);
                    Transfer {
                        tx_index: i,
                        log_index: -1,
                        seq: 0,
                        kind: "native",
                        token: String::new(),
                        from,
                        to,
                        token_id: None,
                        amount: id.to_string(),
                        tx_hash: format!("0x{id:064x}"),
                    }
                })
                .collect(),
        })
        .collect()
}

/// A commit of more rows than one statement carries (`Tx::insert_rows`: 128 at most,
/// then smaller chunks): every row lands once, in its place, with its own values.
async fn many_rows_in_one_commit(store: &Store) {
    let alice = "0x00000000000000000000000000000000000a11ce";
    let to = |i: u64| format!("0x{:040x}", 0xb000 + i);
    let blocks = native_blocks(3, 101, |n, i| (alice.into(), to(i), n * 1000 + i));
    // 3 block rows and 606 wallet rows (each transfer on both sides).
    store.commit_blocks("bulk", None, &blocks, 0).await.unwrap();
    let page = store
        .wallet_history("bulk", alice, None, 400)
        .await
        .unwrap()
        .unwrap();
    let amounts: Vec<String> = page.items.iter().map(|(r, _)| r.amount.clone()).collect();
    let expected: Vec<String> = (1..=3u64)
        .rev()
        .flat_map(|n| (0..101u64).rev().map(move |i| format!("{}", n * 1000 + i)))
        .collect();
    assert_eq!((page.indexed_block, amounts), (3, expected));
    for i in [0, 77, 100] {
        let theirs = store
            .wallet_history("bulk", &to(i), None, 10)
            .await
            .unwrap()
            .unwrap();
        let sides: Vec<_> = theirs
            .items
            .iter()
            .map(|(r, _)| {
                (
                    r.direction.as_str(),
                    r.counterparty.as_str(),
                    r.amount.clone(),
                )
            })
            .collect();
        let expected: Vec<_> = (1..=3u64)
            .rev()
            .map(|n| ("in", alice, format!("{}", n * 1000 + i)))
            .collect();
        assert_eq!(sides, expected);
    }
}

/// A wallet's history comes in pages, newest first, each with the index's block: a page
/// below a position holds only older rows, and a wallet with no transfers (or a page past
/// its oldest) still says which block the index has reached.
async fn wallet_history_pages(store: &Store) {
    use chainedge::store::index_history::Position;
    let (alice, bob) = (
        "0x00000000000000000000000000000000000a11ce",
        "0x0000000000000000000000000000000000000b0b",
    );
    assert!(store
        .wallet_history("hist", alice, None, 10)
        .await
        .unwrap()
        .is_none());
    let blocks = native_blocks(3, 2, |n, i| (alice.into(), bob.into(), n * 10 + i));
    store.commit_blocks("hist", None, &blocks, 0).await.unwrap();
    let first = store
        .wallet_history("hist", alice, None, 4)
        .await
        .unwrap()
        .unwrap();
    assert_eq!(first.indexed_block, 3);
    let amounts = |p: &chainedge::store::index_history::HistoryPage| {
        p.items
            .iter()
            .map(|(r, _)| r.amount.clone())
            .collect::<Vec<_>>()
    };
    assert_eq!(amounts(&first), ["31", "30", "21", "20"]);
    assert!(first
        .items
        .iter()
        .all(|(r, _)| r.direction == "out" && r.counterparty == bob));
    let last: Position = first.items.last().unwrap().0.position;
    let second = store
        .wallet_history("hist", alice, Some(last), 4)
        .await
        .unwrap()
        .unwrap();
    assert_eq!(
        (second.indexed_block, amounts(&second)),
        (3, vec!["11".to_string(), "10".into()])
    );
    let oldest = second.items.last().unwrap().0.position;
    let past = store
        .wallet_history("hist", alice, Some(oldest), 4)
        .await
        .unwrap()
        .unwrap();
    assert_eq!((past.indexed_block, past.items.len()), (3, 0));
    let stranger = "0x000000000000000000000000000000000000dead";
    let none = store
        .wallet_history("hist", stranger, None, 4)
        .await
        .unwrap()
        .unwrap();
    assert_eq!((none.indexed_block, none.items.len()), (3, 0));
    // Bob's side of the same transfers.
    let bobs = store
        .wallet_history("hist", bob, None, 1)
        .await
        .unwrap()
        .unwrap();
    assert_eq!(bobs.items[0].0.direction, "in");
}

/// Token balance anchors: written only on a block the index still has, never moved back,
/// read with the transfers after them, and gone with a reorg below them.
async fn balance_anchors(store: &Store) {
    use chainedge::store::index::{IndexCursor, IndexedBlock, Transfer};
    use chainedge::store::index_balances::{BalanceAnchor, Move};
    let (alice, token) = ("0xa11ce", "0x70c0");
    let hash = |n: u64| format!("0x{n:064x}");
    let blocks: Vec<IndexedBlock> = [("in", "100"), ("out", "30"), ("in", "5")]
        .iter()
        .zip(1u64..)
        .map(|((dir, amount), n)| IndexedBlock {
            number: n,
            hash: hash(n),
            parent_hash: hash(n - 1),
            timestamp: n,
            transfers: vec![Transfer {
                tx_index: 0,
                log_index: 0,
                seq: 0,
                kind: "erc20",
                token: token.into(),
                from: if *dir == "in" {
                    "0xb0b".into()
                } else {
                    alice.into()
                },
                to: if *dir == "in" {
                    alice.into()
                } else {
                    "0xb0b".into()
                },
                token_id: None,
                amount: amount.to_string(),
                tx_hash: hash(100 + n),
            }],
        })
        .collect();
    store.commit_blocks("bal", None, &blocks, 0).await.unwrap();
    let read = || async {
        let w = store
            .wallet_erc20s("bal", alice, 10)
            .await
            .unwrap()
            .unwrap();
        assert_eq!((w.indexed.number, w.tokens.len()), (3, 1));
        let t = &w.tokens[0];
        assert_eq!(t.token, token);
        (t.anchor.clone(), t.moves.clone())
    };
    assert_eq!(read().await, (None, vec![]));
    let at = |n: u64, h: String| IndexCursor { number: n, hash: h };
    let seventy = [(token.to_string(), Some("70".to_string()))];
    assert!(store
        .put_balance_anchors("bal", alice, &at(2, hash(2)), &seventy)
        .await
        .unwrap());
    let anchor = |block, b: &str| {
        Some(BalanceAnchor {
            block,
            balance: Some(b.into()),
        })
    };
    assert_eq!(read().await, (anchor(2, "70"), vec![Move::In("5".into())]));
    // Not the index's block 3 (another branch's), nor an older one than kept: unchanged.
    let other = [(token.to_string(), Some("1".to_string()))];
    assert!(!store
        .put_balance_anchors("bal", alice, &at(3, hash(33)), &other)
        .await
        .unwrap());
    assert!(store
        .put_balance_anchors("bal", alice, &at(1, hash(1)), &other)
        .await
        .unwrap());
    assert_eq!(read().await.0, anchor(2, "70"));
    // A reorg to block 1 takes the anchor read at block 2 with it.
    store
        .roll_back_index("bal", &at(3, hash(3)), &at(1, hash(1)))
        .await
        .unwrap();
    let w = store
        .wallet_erc20s("bal", alice, 10)
        .await
        .unwrap()
        .unwrap();
    assert_eq!(w.indexed.number, 1);
    assert_eq!(
        (w.tokens[0].anchor.clone(), w.tokens[0].moves.len()),
        (None, 0)
    );
}

/// NFT holdings kept with their moves: each commit's moves change them from what was
/// held before (more keys than one lookup carries, too), a page reads them by key with
/// the total, and a reorg works the touched addresses out again from the moves left.
async fn nft_holdings(store: &Store) {
    use chainedge::store::index::{IndexCursor, IndexedBlock, Transfer};
    let (alice, bob, carol) = ("0xa11ce", "0xb0b", "0xca401");
    let (art, game) = ("0x0a47", "0x6a3e");
    let hash = |n: u64, branch: u64| format!("0x{branch:x}{n:063x}");
    let nft =
        |i: u64, kind: &'static str, token: &str, from: &str, to: &str, id: u64, n: u64| Transfer {
            tx_index: i,
            log_index: i as i64,
            seq: 0,
            kind,
            token: token.into(),
            from: from.into(),
            to: to.into(),
            token_id: Some(id.to_string()),
            amount: n.to_string(),
            tx_hash: format!("0x{i:064x}"),
        };
    let block = |n: u64, branch: u64, transfers| IndexedBlock {
        number: n,
        hash: hash(n, branch),
        parent_hash: hash(n - 1, if n == 3 { branch } else { 0 }),
        timestamp: n,
        transfers,
    };
    let zero = "0x0000000000000000000000000000000000000000";
    // Block 1: art #1 and #10 minted to alice, 5 of game #2 to her, 150 art ids to carol.
    let mut first = vec![
        nft(0, "erc721", art, zero, alice, 10, 1),
        nft(1, "erc721", art, zero, alice, 1, 1),
        nft(2, "erc1155", game, zero, alice, 2, 5),
    ];
    first.extend((0..150).map(|i| nft(3 + i, "erc721", art, zero, carol, 100 + i, 1)));
    // Block 2: alice sends art #1 to bob and to herself #10; carol sends 149 ids back.
    let mut second = vec![
        nft(0, "erc721", art, alice, bob, 1, 1),
        nft(1, "erc721", art, alice, alice, 10, 1),
    ];
    second.extend((0..149).map(|i| nft(2 + i, "erc721", art, carol, zero, 100 + i, 1)));
    // Block 3: 2 of game #2 from alice to bob.
    let third = vec![nft(0, "erc1155", game, alice, bob, 2, 2)];
    let blocks = [block(1, 0, first), block(2, 0, second), block(3, 0, third)];
    store
        .commit_blocks("nft", None, &blocks[..2], 0)
        .await
        .unwrap();
    let at = |n: u64, branch: u64| IndexCursor {
        number: n,
        hash: hash(n, branch),
    };
    store
        .commit_blocks("nft", Some(&at(2, 0)), &blocks[2..], 0)
        .await
        .unwrap();
    let held = |address: &'static str, limit: usize, offset: usize| async move {
        let page = store
            .wallet_nfts("nft", address, limit, offset)
            .await
            .unwrap()
            .unwrap();
        let items: Vec<String> = page
            .items
            .iter()
            .map(|h| format!("{} {} #{} x{}", h.kind, h.token, h.token_id, h.amount))
            .collect();
        (page.indexed_block, page.total, items)
    };
    // Tokens in order, ids as numbers: art #10 (sent to herself: still hers), then game.
    assert_eq!(
        held(alice, 10, 0).await,
        (
            3,
            2,
            vec![
                format!("erc721 {art} #10 x1"),
                format!("erc1155 {game} #2 x3")
            ]
        )
    );
    assert_eq!(
        held(bob, 10, 0).await,
        (
            3,
            2,
            vec![
                format!("erc721 {art} #1 x1"),
                format!("erc1155 {game} #2 x2")
            ]
        )
    );
    assert_eq!(
        held(carol, 10, 0).await,
        (3, 1, vec![format!("erc721 {art} #249 x1")])
    );
    // A page past the end, and an address with nothing: the block and the total.
    assert_eq!(held(alice, 10, 2).await, (3, 2, vec![]));
    assert_eq!(held("0xdead", 10, 0).await, (3, 0, vec![]));
    assert_eq!(held(alice, 1, 1).await.2, [format!("erc1155 {game} #2 x3")]);
    // The 149 ids carol sent back are the zero address's (kept counts, not a page's rows).
    assert_eq!(held(zero, 1, 0).await.1, 149);
    // A reorg to block 2 gives alice her 5 back and takes bob's 2; block 3 of another
    // branch then sends 9 to carol: she gets 9, alice is left with none (never below 0).
    store
        .roll_back_index("nft", &at(3, 0), &at(2, 0))
        .await
        .unwrap();
    assert_eq!(
        held(alice, 10, 0).await,
        (
            2,
            2,
            vec![
                format!("erc721 {art} #10 x1"),
                format!("erc1155 {game} #2 x5")
            ]
        )
    );
    assert_eq!(
        held(bob, 10, 0).await,
        (2, 1, vec![format!("erc721 {art} #1 x1")])
    );
    let other = block(3, 1, vec![nft(0, "erc1155", game, alice, carol, 2, 9)]);
    store
        .commit_blocks("nft", Some(&at(2, 0)), &[other], 0)
        .await
        .unwrap();
    assert_eq!(
        held(alice, 10, 0).await,
        (3, 1, vec![format!("erc721 {art} #10 x1")])
    );
    assert_eq!(
        held(carol, 10, 0).await,
        (
            3,
            2,
            vec![
                format!("erc721 {art} #249 x1"),
                format!("erc1155 {game} #2 x9")
            ]
        )
    );
    assert_eq!(held(bob, 10, 0).await.1, 1);
}

/// Each key's request log keeps its newest entries, in order, cut on every write; keys
/// do not see each other's.
async fn request_logs(store: &Store) {
    use chainedge::store::requests::RequestRow;
    let row = |key: &str, at_us: i64, error: Option<&str>| RequestRow {
        key_id: key.into(),
        tenant_id: "t".into(),
        at_us,
        route: "eth.rpc".into(),
        method: "eth_call".into(),
        status: if error.is_some() { 403 } else { 200 },
        error: error.map(str::to_string),
        latency_us: 1500,
        upstream: Some("el-1".into()),
    };
    let first: Vec<RequestRow> = (1..=4).map(|at| row("log-a", at, None)).collect();
    store.add_requests(&first, 3, &[]).await.unwrap();
    store
        .add_requests(
            &[
                row("log-a", 5, Some("key_restricted")),
                row("log-b", 1, None),
            ],
            3,
            &[],
        )
        .await
        .unwrap();
    let a = store.key_requests("log-a", 10).await.unwrap();
    assert_eq!(a.iter().map(|r| r.at_us).collect::<Vec<_>>(), [5, 4, 3]);
    assert_eq!(a[0], row("log-a", 5, Some("key_restricted")));
    assert_eq!(store.key_requests("log-a", 2).await.unwrap().len(), 2);
    assert_eq!(
        store.key_requests("log-b", 10).await.unwrap(),
        [row("log-b", 1, None)]
    );
    assert!(store.key_requests("log-c", 10).await.unwrap().is_empty());
    method_breakdown(store).await;
}

/// The per-method breakdown adds up across writes, per key, chain and method, and is read
/// per tenant (and key) over whole slots, busiest first.
async fn method_breakdown(store: &Store) {
    use chainedge::store::method_usage::{Group, MethodCounts, BUCKETS};
    let group = |key: &str, tenant: &str, slot: i64, method: &str| Group {
        key_id: key.into(),
        tenant_id: tenant.into(),
        slot,
        chain: "eth".into(),
        method: method.into(),
    };
    let counts = |calls: i64, errors: i64, bucket: usize| {
        let mut buckets = [0; BUCKETS];
        buckets[bucket] = calls;
        MethodCounts {
            calls,
            errors,
            latency_us: calls * 1000,
            buckets,
        }
    };
    for _ in 0..2 {
        let groups = [
            (group("mk-a", "mt", 600, "eth_call"), counts(3, 1, 0)),
            (group("mk-a", "mt", 1200, "eth_call"), counts(1, 0, 5)),
            (group("mk-a", "mt", 600, "eth_getLogs"), counts(1, 0, 9)),
            (group("mk-b", "other", 600, "eth_call"), counts(50, 0, 0)),
        ];
        store.add_requests(&[], 3, &groups).await.unwrap();
    }
    let rows = store.method_usage("mt", None, 0, 1800, 10).await.unwrap();
    assert_eq!(rows.len(), 2, "{rows:?}");
    assert_eq!(
        (
            rows[0].method.as_str(),
            rows[0].counts.calls,
            rows[0].counts.errors
        ),
        ("eth_call", 8, 2)
    );
    assert_eq!(rows[0].counts.buckets[0..6], [6, 0, 0, 0, 0, 2]);
    assert_eq!(rows[0].counts.latency_us, 8000);
    assert_eq!(rows[1].counts.quantile_ms(0.5), Some(1000));
    let one_slot = store
        .method_usage("mt", Some("mk-a"), 1200, 1800, 10)
        .await
        .unwrap();
    assert_eq!(one_slot.len(), 1);
    assert_eq!(one_slot[0].counts.calls, 2);
    assert!(store
        .method_usage("mt", Some("mk-b"), 0, 1800, 10)
        .await
        .unwrap()
        .is_empty());
    // Over time: per slot, then per hour (both slots in the hour from 0), each summed
    // over chains and methods; another tenant's never in it.
    let slots = store
        .method_usage_series("mt", None, 0, 1800, 600)
        .await
        .unwrap();
    let per_slot: Vec<_> = slots
        .iter()
        .map(|(at, c)| (*at, c.calls, c.errors))
        .collect();
    assert_eq!(per_slot, [(600, 8, 2), (1200, 2, 0)]);
    assert_eq!(slots[0].1.buckets[9], 2, "eth_getLogs' bucket");
    let hourly = store
        .method_usage_series("mt", Some("mk-a"), 0, 7200, 3600)
        .await
        .unwrap();
    assert_eq!(hourly.len(), 1);
    assert_eq!((hourly[0].0, hourly[0].1.calls), (0, 10));
    assert!(store
        .method_usage_series("mt", None, 0, 1800, 0)
        .await
        .is_err());
    assert_eq!(store.prune_method_usage(1200).await.unwrap(), 3);
}

/// Followed transactions: one row per chain, hash and tenant; a resend changes nothing;
/// each tenant keeps its newest rows; a change moves every tenant's row of a hash; only
/// settled ones are pruned.
async fn followed_txs(store: &Store) {
    let tx = |hash: &str, tenant: &str, nonce: i64, at: i64| NewTx {
        chain: "eth".into(),
        hash: hash.into(),
        tenant_id: tenant.into(),
        key_id: format!("k-{tenant}"),
        sender: "0xs".into(),
        nonce,
        recent_blockhash: (tenant == "t2").then(|| "Bh".to_string()),
        route: if tenant == "t2" { "private" } else { "public" }.into(),
        raw: "0x01".into(),
        submitted_at: at,
    };
    store
        .track_txs(
            &[
                tx("0xa", "t1", 0, 100),
                tx("0xa", "t2", 0, 100),
                tx("0xb", "t1", 0, 101),
            ],
            10,
        )
        .await
        .unwrap();
    // Sent again: nothing changes.
    store
        .track_txs(&[tx("0xa", "t1", 0, 500)], 10)
        .await
        .unwrap();
    let a = store.tracked_tx("eth", "0xa", "t1").await.unwrap().unwrap();
    assert_eq!(
        (a.status.as_str(), a.submitted_at, a.resends),
        (PENDING, 100, 0)
    );
    let a2 = store.tracked_tx("eth", "0xa", "t2").await.unwrap().unwrap();
    assert_eq!(
        (a.recent_blockhash, a2.recent_blockhash.as_deref()),
        (None, Some("Bh"))
    );
    assert_eq!((a.route.as_str(), a2.route.as_str()), ("public", "private"));
    assert!(store
        .tracked_tx("eth", "0xa", "t3")
        .await
        .unwrap()
        .is_none());
    assert!(store
        .tracked_tx("polygon", "0xa", "t1")
        .await
        .unwrap()
        .is_none());
    // One row per hash among the open ones, whoever sent it.
    let open: Vec<String> = store
        .open_txs("eth", 10)
        .await
        .unwrap()
        .into_iter()
        .map(|t| t.hash)
        .collect();
    assert_eq!(open, ["0xa", "0xb"]);
    assert_eq!(
        store.same_nonce("eth", "0xs", 0, "0xa").await.unwrap(),
        ["0xb"]
    );
    let included = TxChange {
        status: INCLUDED.into(),
        block_number: Some(7),
        block_hash: Some("0xh".into()),
        tx_index: Some(0),
        included_at: Some(102),
        ..TxChange::default()
    };
    store
        .update_tx("eth", "0xb", &included, 103, Some(r#"{"n":1}"#))
        .await
        .unwrap();
    let replaced = TxChange {
        status: REPLACED.into(),
        replaced_by: Some("0xb".into()),
        ..TxChange::default()
    };
    store
        .update_tx("eth", "0xa", &replaced, 104, Some(r#"{"n":2}"#))
        .await
        .unwrap();
    for tenant in ["t1", "t2"] {
        let a = store
            .tracked_tx("eth", "0xa", tenant)
            .await
            .unwrap()
            .unwrap();
        assert_eq!(
            (a.status.as_str(), a.replaced_by.as_deref(), a.updated_at),
            (REPLACED, Some("0xb"), 104)
        );
    }
    let b = store.tracked_tx("eth", "0xb", "t1").await.unwrap().unwrap();
    assert_eq!(
        (b.block_number, b.block_hash.as_deref(), b.included_at),
        (Some(7), Some("0xh"), Some(102))
    );
    assert_eq!(store.open_txs("eth", 10).await.unwrap().len(), 1);
    // Settled and old: pruned; open: kept whatever its age.
    store
        .update_tx(
            "eth",
            "0xb",
            &TxChange {
                status: FINAL.into(),
                ..included
            },
            105,
            None,
        )
        .await
        .unwrap();
    store
        .track_txs(&[tx("0xc", "t1", 1, 50)], 10)
        .await
        .unwrap();
    // Each change of a status went on every owner's push, in order.
    let events = store.tx_events_after(0, 10).await.unwrap();
    let seen: Vec<(i64, &str, &str, &str, &str)> = events
        .iter()
        .map(|e| {
            (
                e.id,
                e.tenant_id.as_str(),
                e.key_id.as_str(),
                e.hash.as_str(),
                e.body.as_str(),
            )
        })
        .collect();
    assert_eq!(
        seen,
        [
            (1, "t1", "k-t1", "0xb", r#"{"n":1}"#),
            (2, "t1", "k-t1", "0xa", r#"{"n":2}"#),
            (3, "t2", "k-t2", "0xa", r#"{"n":2}"#)
        ]
    );
    assert_eq!(events[1].status, REPLACED);
    assert_eq!(store.tx_events_after(1, 1).await.unwrap()[0].id, 2);
    let t2: Vec<i64> = store
        .tenant_tx_events_after("t2", 0, 10)
        .await
        .unwrap()
        .iter()
        .map(|e| e.id)
        .collect();
    assert_eq!(t2, [3]);
    assert_eq!(store.last_tx_event().await.unwrap(), 3);
    assert_eq!(store.push_cursor("hooks").await.unwrap(), None);
    for at in [2, 3] {
        store.set_push_cursor("hooks", at).await.unwrap();
        assert_eq!(store.push_cursor("hooks").await.unwrap(), Some(at));
    }
    assert_eq!(store.prune_txs(1000).await.unwrap(), 3);
    // The newest change outlives the retention: ids never start over.
    assert_eq!(store.last_tx_event().await.unwrap(), 3);
    assert_eq!(store.tx_events_after(0, 10).await.unwrap().len(), 1);
    assert!(store
        .tracked_tx("eth", "0xc", "t1")
        .await
        .unwrap()
        .is_some());
    // A tenant keeps its newest rows.
    let many: Vec<NewTx> = (0..5)
        .map(|i| tx(&format!("0xd{i}"), "t4", i, 200 + i))
        .collect();
    store.track_txs(&many, 3).await.unwrap();
    for (i, kept) in [(0, false), (1, false), (2, true), (4, true)] {
        let row = store
            .tracked_tx("eth", &format!("0xd{i}"), "t4")
            .await
            .unwrap();
        assert_eq!(row.is_some(), kept, "0xd{i}");
    }
}

/// Per-key usage: minutes and their hours written together, added to on conflict
/// (another flush, another instance), summed per step, exported per key with filters,
/// each grain pruned on its own.
async fn key_usage(store: &Store) {
    let c = |calls, units, errors, limited| Counts {
        calls,
        compute_units: units,
        errors,
        rate_limited: limited,
    };
    let row = |key: &str, tenant: &str, minute: i64, counts: Counts| UsageRow {
        key_id: key.into(),
        tenant_id: tenant.into(),
        minute,
        counts,
    };
    const H: i64 = 3600;
    let export = |grain, step, tenant, key, limit| ExportQuery {
        grain,
        from: 0,
        to: 24 * H,
        step,
        tenant,
        key,
        limit,
    };
    store
        .record_usage(&[
            row("k1", "t1", 10 * H, c(3, 30, 0, 0)),
            row("k1", "t1", 10 * H + 60, c(2, 20, 1, 0)),
            row("k1", "t1", 11 * H, c(1, 10, 0, 1)),
            row("k2", "t2", 10 * H, c(5, 50, 0, 0)),
        ])
        .await
        .unwrap();
    // The same minute again adds up.
    store
        .record_usage(&[row("k1", "t1", 10 * H, c(1, 26, 1, 0))])
        .await
        .unwrap();
    assert_eq!(
        store
            .key_usage("k1", Grain::Minute, 0, 24 * H, 60)
            .await
            .unwrap(),
        vec![
            (10 * H, c(4, 56, 1, 0)),
            (10 * H + 60, c(2, 20, 1, 0)),
            (11 * H, c(1, 10, 0, 1))
        ]
    );
    assert_eq!(
        store
            .key_usage("k1", Grain::Hour, 0, 24 * H, 86_400)
            .await
            .unwrap(),
        vec![(0, c(7, 86, 2, 1))]
    );
    // Half-open ranges: the 11:00 hour is outside [0, 11:00).
    assert_eq!(
        store
            .key_usage("k1", Grain::Hour, 0, 11 * H, H)
            .await
            .unwrap(),
        vec![(10 * H, c(6, 76, 2, 0))]
    );
    let all = store
        .usage_export(&export(Grain::Hour, H, None, None, 100))
        .await
        .unwrap();
    assert_eq!(
        all.iter()
            .map(|r| (
                r.start,
                r.key_id.as_str(),
                r.tenant_id.as_str(),
                r.counts.calls
            ))
            .collect::<Vec<_>>(),
        vec![
            (10 * H, "k1", "t1", 6),
            (10 * H, "k2", "t2", 5),
            (11 * H, "k1", "t1", 1)
        ]
    );
    let t2 = store
        .usage_export(&export(Grain::Minute, 60, Some("t2"), None, 100))
        .await
        .unwrap();
    assert_eq!(t2.len(), 1);
    assert_eq!(t2[0].counts, c(5, 50, 0, 0));
    let limited = store
        .usage_export(&export(Grain::Minute, 60, None, Some("k1"), 2))
        .await
        .unwrap();
    assert_eq!(limited.len(), 2);
    // Minutes before 11:00 and hours before 10:00 go: 3 minute rows, no hour row.
    assert_eq!(store.prune_usage(11 * H, 10 * H).await.unwrap(), 3);
    assert_eq!(
        store
            .key_usage("k1", Grain::Minute, 0, 24 * H, 60)
            .await
            .unwrap()
            .len(),
        1
    );
    assert_eq!(
        store
            .key_usage("k1", Grain::Hour, 0, 24 * H, H)
            .await
            .unwrap()
            .len(),
        2
    );
}

/// MEV-cache samples: sums per host over a window, a host's series in a half-open
/// range, a sample written twice kept once, pruning.
async fn mev_cache_samples(store: &Store) {
    let s = |host: &str, at: i64, total: i64, inc: i64| Sample {
        host: host.into(),
        at,
        hits_total: total,
        increase: inc,
        interval_ms: 1000,
    };
    store
        .record_mev_cache(&[
            s("a", 1000, 10, 10),
            s("a", 2000, 30, 20),
            s("b", 2000, 5, 5),
        ])
        .await
        .unwrap();
    store
        .record_mev_cache(&[s("a", 2000, 30, 20)])
        .await
        .unwrap();
    let mut hits = store.mev_cache_hits_since(0).await.unwrap();
    hits.sort_by(|x, y| x.host.cmp(&y.host));
    assert_eq!(
        (
            hits[0].increase,
            hits[0].covered_ms,
            hits[0].samples,
            hits[0].last_at
        ),
        (30, 2000, 2, 2000)
    );
    assert_eq!(hits[1].increase, 5);
    assert_eq!(
        store
            .mev_cache_hits_since(1500)
            .await
            .unwrap()
            .iter()
            .map(|h| h.increase)
            .sum::<i64>(),
        25
    );
    let series = store.mev_cache_series("a", 0, 2000, 10).await.unwrap();
    assert_eq!(series.len(), 1, "half-open range");
    assert_eq!(store.prune_mev_cache(1500).await.unwrap(), 1);
}

/// Watchlists: the per-tenant bound holds under concurrent creates; a tenant reads and
/// deletes only its own entries; dead letters are kept to the newest per entry and go
/// with their entry.
async fn watchlists(store: &Store) {
    let entry = |id: &str, tenant: &str| WatchEntry {
        id: id.into(),
        tenant_id: tenant.into(),
        pubkey: "9xQeWvG816bUx9EPjHmaT23yvVM2ZWbrrpZb9PusVFin".into(),
        commitment: "confirmed".into(),
        callback_type: "ws".into(),
        callback_url: "c".into(),
        created_at: 100,
    };
    let mut racers = Vec::new();
    for i in 0..8 {
        let store = store.clone();
        racers.push(tokio::spawn(async move {
            let mut e = entry(&format!("w{i}"), "tenant-w");
            e.created_at = 100 + i;
            loop {
                match store.add_watch_entry(&e, 3).await {
                    Ok(added) => return added,
                    // PostgreSQL's serializable transactions: a conflict is retried.
                    Err(_) => tokio::task::yield_now().await,
                }
            }
        }));
    }
    let mut added = 0;
    for r in racers {
        added += r.await.unwrap() as usize;
    }
    assert_eq!(added, 3, "the bound holds under concurrent creates");
    let mine = store.watch_entries("tenant-w").await.unwrap();
    assert_eq!(mine.len(), 3);
    let id = mine[0].id.clone();
    assert!(store.watch_entry("tenant-x", &id).await.unwrap().is_none());
    assert!(!store.delete_watch_entry("tenant-x", &id).await.unwrap());
    assert!(store.watch_entry("tenant-w", &id).await.unwrap().is_some());
    for i in 0..(DEAD_LETTERS_KEPT + 5) {
        store
            .add_dead_letter(
                Letters::SolWatchlist,
                &DeadLetter {
                    id: format!("d{i:04}"),
                    entry_id: id.clone(),
                    tenant_id: "tenant-w".into(),
                    payload: "{}".into(),
                    attempts: 5,
                    last_error: "HTTP 500".into(),
                    created_at: i,
                },
            )
            .await
            .unwrap();
    }
    let letters = store
        .dead_letters(Letters::SolWatchlist, &id)
        .await
        .unwrap();
    assert_eq!(letters.len() as i64, DEAD_LETTERS_KEPT);
    assert_eq!(
        letters[0].id,
        format!("d{:04}", DEAD_LETTERS_KEPT + 4),
        "newest first"
    );
    assert!(store.delete_watch_entry("tenant-w", &id).await.unwrap());
    assert!(store
        .dead_letters(Letters::SolWatchlist, &id)
        .await
        .unwrap()
        .is_empty());
    assert_eq!(store.all_watch_entries().await.unwrap().len(), 2);

    // Transaction hooks: bounded per tenant, each tenant's own, their dead letters apart
    // from the watchlist's and gone with them.
    let hook = |id: &str, tenant: &str, at: i64| TxHook {
        id: id.into(),
        tenant_id: tenant.into(),
        callback_url: format!("https://example.com/{id}"),
        created_at: at,
    };
    assert!(store.add_tx_hook(&hook("h2", "t-h", 2), 2).await.unwrap());
    assert!(store.add_tx_hook(&hook("h1", "t-h", 1), 2).await.unwrap());
    assert!(!store.add_tx_hook(&hook("h3", "t-h", 3), 2).await.unwrap());
    assert!(store
        .add_tx_hook(&hook("h4", "t-other", 4), 2)
        .await
        .unwrap());
    let ids: Vec<String> = store
        .tx_hooks("t-h")
        .await
        .unwrap()
        .into_iter()
        .map(|h| h.id)
        .collect();
    assert_eq!(ids, ["h1", "h2"]);
    assert!(store.tx_hook("t-other", "h1").await.unwrap().is_none());
    assert_eq!(
        store.tx_hook("t-h", "h1").await.unwrap(),
        Some(hook("h1", "t-h", 1))
    );
    let letter = DeadLetter {
        id: "tx-1-h1".into(),
        entry_id: "h1".into(),
        tenant_id: "t-h".into(),
        payload: "{}".into(),
        attempts: 2,
        last_error: "HTTP 500".into(),
        created_at: 9,
    };
    store
        .add_dead_letter(Letters::TxHooks, &letter)
        .await
        .unwrap();
    let kept = store.dead_letters(Letters::TxHooks, "h1").await.unwrap();
    assert_eq!(kept, std::slice::from_ref(&letter));
    assert!(store
        .dead_letters(Letters::SolWatchlist, "h1")
        .await
        .unwrap()
        .is_empty());
    // A retry that failed counts its attempt; one that delivered takes the letter; a
    // second retry of a taken letter changes nothing.
    let mut again = letter.clone();
    (again.attempts, again.last_error) = (3, "HTTP 503".into());
    let of = Letters::TxHooks;
    assert!(store.retried_dead_letter(of, &again, false).await.unwrap());
    assert_eq!(
        store.dead_letter(of, "h1", "tx-1-h1").await.unwrap(),
        Some(again.clone())
    );
    assert!(store.retried_dead_letter(of, &again, true).await.unwrap());
    assert!(!store.retried_dead_letter(of, &again, true).await.unwrap());
    assert_eq!(store.dead_letter(of, "h1", "tx-1-h1").await.unwrap(), None);
    store.add_dead_letter(of, &letter).await.unwrap();

    // The delivery log: a repeat of a delivery replaces its row, each push's apart, the
    // newest DELIVERIES_KEPT per entry, newest first.
    use chainedge::store::deliveries::{Delivery, DELIVERIES_KEPT};
    let delivery = |n: i64, delivered: bool| Delivery {
        delivery_id: format!("d{n:04}"),
        at_ms: 1_000 + n,
        delivered,
        attempts: 1,
        error: if delivered {
            String::new()
        } else {
            "HTTP 500".into()
        },
    };
    store
        .record_delivery(of, "h1", &delivery(0, false))
        .await
        .unwrap();
    store
        .record_delivery(of, "h1", &delivery(0, true))
        .await
        .unwrap();
    assert_eq!(
        store.deliveries(of, "h1").await.unwrap(),
        [delivery(0, true)]
    );
    assert!(store
        .deliveries(Letters::SolWatchlist, "h1")
        .await
        .unwrap()
        .is_empty());
    for n in 1..=DELIVERIES_KEPT + 2 {
        store
            .record_delivery(of, "h1", &delivery(n, n % 2 == 0))
            .await
            .unwrap();
    }
    let kept = store.deliveries(of, "h1").await.unwrap();
    assert_eq!(kept.len() as i64, DELIVERIES_KEPT);
    assert_eq!(kept[0], delivery(DELIVERIES_KEPT + 2, true), "newest first");
    assert_eq!(
        kept.last().unwrap().delivery_id,
        "d0003",
        "the oldest dropped"
    );

    assert!(!store.delete_tx_hook("t-other", "h1").await.unwrap());
    assert!(store.delete_tx_hook("t-h", "h1").await.unwrap());
    assert!(store
        .dead_letters(Letters::TxHooks, "h1")
        .await
        .unwrap()
        .is_empty());
    assert!(
        store.deliveries(of, "h1").await.unwrap().is_empty(),
        "the log goes with its hook"
    );
}

/// Stake snapshots: a capture killed between vote accounts resumes after the last one
/// committed with no duplicate; only complete epochs are read; an unfinished epoch is
/// dropped whole; by-voter pages span epochs (each account once, as of its newest
/// epoch); pruning keeps the newest epochs.
async fn stake_snapshots(store: &Store) {
    let row = |epoch: i64, pubkey: &str, voter: &str, stake: i64, deact: Option<i64>| StakeRow {
        epoch,
        pubkey: pubkey.into(),
        voter: voter.into(),
        stake,
        activation_epoch: 1,
        deactivation_epoch: deact,
    };
    store.begin_stake_capture(10, 4000, 100).await.unwrap();
    store
        .record_stake_voter(
            10,
            "VoterA",
            &[
                row(10, "s1", "VoterA", 5, None),
                row(10, "s2", "VoterA", 6, None),
            ],
        )
        .await
        .unwrap();
    // Killed here: the cursor says where to resume, and nothing is readable yet.
    let c = store.newest_stake_capture().await.unwrap().unwrap();
    assert_eq!(
        (c.epoch, c.last_voter.as_str(), c.completed_at),
        (10, "VoterA", None)
    );
    assert!(store.stake_epoch(None).await.unwrap().is_none());
    // Resumed (a second start beginning the same epoch changes nothing); a vote account
    // done twice (two instances) stores its rows once.
    store.begin_stake_capture(10, 4100, 200).await.unwrap();
    store
        .record_stake_voter(10, "VoterA", &[row(10, "s1", "VoterA", 5, None)])
        .await
        .unwrap();
    store
        .record_stake_voter(10, "VoterB", &[row(10, "s3", "VoterB", 7, None)])
        .await
        .unwrap();
    store.complete_stake_capture(10, 300).await.unwrap();
    let e = store.stake_epoch(None).await.unwrap().unwrap();
    assert_eq!(
        (e.epoch, e.slot, e.accounts, e.completed_at),
        (10, 4000, 3, Some(300))
    );
    let page = store.stake_page(10, 10, 0).await.unwrap();
    let keys: Vec<&str> = page.iter().map(|r| r.pubkey.as_str()).collect();
    assert_eq!(keys, ["s1", "s2", "s3"]);
    assert_eq!(store.stake_page(10, 1, 1).await.unwrap()[0].pubkey, "s2");

    // Epoch 11 started and never finished, then epoch 12 came: 11 is dropped whole.
    store.begin_stake_capture(11, 4400, 400).await.unwrap();
    store
        .record_stake_voter(11, "VoterA", &[row(11, "s1", "VoterA", 5, None)])
        .await
        .unwrap();
    store.drop_stake_epoch(11).await.unwrap();
    assert_eq!(
        store.newest_stake_capture().await.unwrap().unwrap().epoch,
        10
    );
    assert!(store.stake_epoch(Some(11)).await.unwrap().is_none());

    // Epoch 12: s1 unstaking, s2 moved to VoterB, s4 new on VoterA.
    store.begin_stake_capture(12, 4800, 500).await.unwrap();
    store
        .record_stake_voter(
            12,
            "VoterA",
            &[
                row(12, "s1", "VoterA", 5, Some(12)),
                row(12, "s4", "VoterA", 9, None),
            ],
        )
        .await
        .unwrap();
    store
        .record_stake_voter(
            12,
            "VoterB",
            &[
                row(12, "s2", "VoterB", 6, None),
                row(12, "s3", "VoterB", 7, None),
            ],
        )
        .await
        .unwrap();
    store.complete_stake_capture(12, 600).await.unwrap();
    assert_eq!(store.stake_epoch(None).await.unwrap().unwrap().epoch, 12);
    assert_eq!(
        store.stake_epoch(Some(10)).await.unwrap().unwrap().accounts,
        3
    );
    let (a, total) = store.stake_by_voter("VoterA", 10, 0).await.unwrap();
    assert_eq!(total, 3, "s1, s2 (in epoch 10) and s4");
    let got: Vec<(&str, i64, Option<i64>)> = a
        .iter()
        .map(|r| (r.pubkey.as_str(), r.epoch, r.deactivation_epoch))
        .collect();
    assert_eq!(
        got,
        [("s1", 12, Some(12)), ("s2", 10, None), ("s4", 12, None)]
    );
    let (page2, _) = store.stake_by_voter("VoterA", 2, 2).await.unwrap();
    assert_eq!(page2.len(), 1);
    let h = store.stake_history("s2", 100).await.unwrap();
    let voters: Vec<(i64, &str)> = h.iter().map(|r| (r.epoch, r.voter.as_str())).collect();
    assert_eq!(voters, [(12, "VoterB"), (10, "VoterA")]);

    // Keep the newest epoch only.
    assert_eq!(store.prune_stake_epochs(1).await.unwrap(), 1);
    assert!(store.stake_epoch(Some(10)).await.unwrap().is_none());
    assert_eq!(store.stake_history("s2", 100).await.unwrap().len(), 1);
}

/// The capacity series: a minute written in parts adds its counts and keeps the larger
/// peak; the series sums hosts per minute, filters by client, reads a half-open range;
/// pruning drops old minutes.
async fn capacity_series(store: &Store) {
    let row = |minute: i64, host: &str, family: &str, peak: i64, requests: i64, failures: i64| {
        HostMinute {
            minute,
            host: host.into(),
            family: family.into(),
            peak_rps: peak,
            requests,
            failures,
        }
    };
    store
        .record_capacity(&[
            row(60, "cl-a", "cl-teku", 5, 100, 1),
            row(60, "cl-b", "cl-lighthouse", 7, 50, 0),
        ])
        .await
        .unwrap();
    // The same minute again (a later part of it, or another instance).
    store
        .record_capacity(&[
            row(60, "cl-a", "cl-teku", 3, 20, 2),
            row(120, "cl-a", "cl-teku", 9, 9, 0),
        ])
        .await
        .unwrap();
    let all = store.capacity_series(0, 180, None).await.unwrap();
    assert_eq!(
        all,
        vec![
            SeriesPoint {
                minute: 60,
                rps_ceiling: 12,
                hosts: 2,
                requests: 170,
                failures: 3
            },
            SeriesPoint {
                minute: 120,
                rps_ceiling: 9,
                hosts: 1,
                requests: 9,
                failures: 0
            },
        ]
    );
    let teku = store
        .capacity_series(0, 180, Some("cl-teku"))
        .await
        .unwrap();
    assert_eq!(
        teku.iter().map(|p| p.rps_ceiling).collect::<Vec<_>>(),
        vec![5, 9]
    );
    assert_eq!(store.capacity_series(60, 120, None).await.unwrap().len(), 1);
    assert_eq!(store.prune_capacity(120).await.unwrap(), 2);
    assert_eq!(store.capacity_series(0, 180, None).await.unwrap().len(), 1);
}

async fn keys(store: &Store) {
    let t = store.create_tenant("acme", "pro").await.unwrap();
    assert!(store.tenant_exists(&t).await.unwrap());
    assert!(!store.tenant_exists("no-such-tenant").await.unwrap());
    let (id, raw) = store
        .create_key(
            &t,
            None,
            "k",
            &["rpc:read".into()],
            false,
            &Default::default(),
        )
        .await
        .unwrap();
    assert!(raw.starts_with("ce_") && raw.len() == 46);
    let rec = store.lookup_key(&sha256(&raw)).await.unwrap().unwrap();
    assert_eq!(
        (rec.plan.as_str(), rec.revoked, rec.scopes.clone()),
        ("pro", false, vec!["rpc:read".to_string()])
    );
    assert!(store.set_plan(&t, "scale").await.unwrap());
    assert!(store
        .set_features(&t, &["archive".to_string()])
        .await
        .unwrap());
    store
        .set_billing(&t, Some(Some(100)), Some(None))
        .await
        .unwrap();
    let rec = store.lookup_key(&sha256(&raw)).await.unwrap().unwrap();
    assert_eq!(rec.plan, "scale");
    assert_eq!(rec.features, vec!["archive".to_string()]);
    assert_eq!(
        (rec.trial_ends_at, rec.subscription_ends_at),
        (Some(100), None)
    );
    // Listed in the order made, even within one second.
    let (id2, _) = store
        .create_key(&t, None, "k2", &[], false, &Default::default())
        .await
        .unwrap();
    let (id3, _) = store
        .create_key(&t, None, "k3", &[], false, &Default::default())
        .await
        .unwrap();
    let listed: Vec<String> = store
        .list_keys(&t)
        .await
        .unwrap()
        .into_iter()
        .map(|k| k.id)
        .collect();
    assert_eq!(listed, vec![id.clone(), id2, id3]);
    assert_eq!(store.revoke_key(&id).await.unwrap(), Some(sha256(&raw)));
    assert!(
        store
            .lookup_key(&sha256(&raw))
            .await
            .unwrap()
            .unwrap()
            .revoked
    );
    assert!(store
        .lookup_key(&sha256("ce_nope"))
        .await
        .unwrap()
        .is_none());
    assert_eq!(store.revoke_key("no-such-key").await.unwrap(), None);

    // The operator's view: counts of users and active keys, filtered by plan, bounded.
    let other = store.create_tenant("other", "free").await.unwrap();
    let info = store.tenant(&t).await.unwrap().unwrap();
    assert_eq!(
        (
            info.name.as_str(),
            info.plan.as_str(),
            info.user_count,
            info.active_key_count
        ),
        ("acme", "scale", 0, 2)
    );
    assert_eq!(info.features, vec!["archive".to_string()]);
    assert_eq!(info.trial_ends_at, Some(100));
    assert!(store.tenant("no-such-tenant").await.unwrap().is_none());
    let on = |plan: Option<&'static str>, limit: i64| async move {
        let listed = store.list_tenants(plan, limit).await.unwrap();
        listed.into_iter().map(|t| t.id).collect::<Vec<_>>()
    };
    assert_eq!(on(Some("scale"), 10).await, vec![t.clone()]);
    assert_eq!(on(Some("free"), 10).await, vec![other.clone()]);
    // Oldest first; two made in the same second are in id order.
    let made = |id: &str| {
        let id = id.to_string();
        async move { (store.tenant(&id).await.unwrap().unwrap().created_at, id) }
    };
    let mut both = vec![made(&t).await, made(&other).await];
    both.sort();
    let both: Vec<String> = both.into_iter().map(|(_, id)| id).collect();
    assert_eq!(on(None, 10).await, both);
    assert_eq!(on(None, 1).await, vec![both[0].clone()]);
}

async fn users_and_sessions(store: &Store) {
    let email = Identity::Email("a@example.com".into());
    let u = store.user_for(&email, "free").await.unwrap();
    assert_eq!(store.user_for(&email, "free").await.unwrap(), u, "one user");
    let row = store.user(&u).await.unwrap().unwrap();
    assert_eq!(row.email.as_deref(), Some("a@example.com"));
    // Google with the same verified email is the same person.
    let google = Identity::Google {
        sub: "g-1".into(),
        email: Some("a@example.com".into()),
        name: Some("A".into()),
        picture: None,
    };
    assert_eq!(store.user_for(&google, "free").await.unwrap(), u);
    assert_eq!(
        store
            .user(&u)
            .await
            .unwrap()
            .unwrap()
            .display_name
            .as_deref(),
        Some("A")
    );
    // A new Google user whose email another account holds keeps no email.
    let other = Identity::Google {
        sub: "g-2".into(),
        email: Some("a@example.com".into()),
        name: None,
        picture: None,
    };
    let u2 = store.user_for(&other, "free").await.unwrap();
    assert_ne!(u2, u);
    assert_eq!(store.user(&u2).await.unwrap().unwrap().email, None);
    assert!(store.user("nobody").await.unwrap().is_none());

    let token = sha256("session-token");
    store
        .create_session(&token, &u, "email", 1000)
        .await
        .unwrap();
    let s = store.session(&token).await.unwrap().unwrap();
    assert_eq!(
        (s.user_id.as_str(), s.expires_at, s.revoked),
        (u.as_str(), 1000, false)
    );
    assert!(store.extend_session(&token, 2000).await.unwrap());
    assert_eq!(
        store.session(&token).await.unwrap().unwrap().expires_at,
        2000
    );
    store.revoke_session(&token).await.unwrap();
    assert!(store.session(&token).await.unwrap().unwrap().revoked);
    assert!(!store.extend_session(&token, 3000).await.unwrap());
    assert!(store.session(&sha256("other")).await.unwrap().is_none());
}

async fn default_and_user_keys(store: &Store) {
    let u = store
        .user_for(&Identity::WalletEvm("0xabc".into()), "free")
        .await
        .unwrap();
    let user = store.user(&u).await.unwrap().unwrap();
    let scopes = vec!["rpc:read".to_string()];
    let bootstrap = || async { store.bootstrap_default_key(&user, &scopes).await.unwrap() };
    let (k, raw) = bootstrap().await.unwrap();
    assert!(k.is_default && raw.is_some());
    let (k2, raw2) = bootstrap().await.unwrap();
    assert_eq!((k2.id.as_str(), raw2), (k.id.as_str(), None));
    // Rotating the default: its replacement is the default, no second key is made.
    let t = user.tenant_id.as_str();
    let (rotated, _, old) = store.rotate_user_key(t, &u, &k.id).await.unwrap().unwrap();
    assert_eq!(old, sha256(raw.as_deref().unwrap()));
    assert!(rotated.is_default);
    let (k3, raw3) = bootstrap().await.unwrap();
    assert_eq!((k3.id.as_str(), raw3), (rotated.id.as_str(), None));
    // The per-user cap.
    let active = store.tenant_keys(t).await.unwrap().len() as i64;
    for i in active..MAX_KEYS_PER_USER {
        assert!(store
            .create_user_key(t, &u, &format!("k{i}"), &scopes, &Default::default())
            .await
            .unwrap()
            .is_some());
    }
    assert!(store
        .create_user_key(t, &u, "one too many", &scopes, &Default::default())
        .await
        .unwrap()
        .is_none());
    let keys = store.tenant_keys(t).await.unwrap();
    assert_eq!(keys.len() as i64, MAX_KEYS_PER_USER);
    // Rotating the default a hundred times keeps the count.
    let mut default = k3.id.clone();
    for _ in 0..100 {
        default = store
            .rotate_user_key(t, &u, &default)
            .await
            .unwrap()
            .unwrap()
            .0
            .id;
    }
    assert_eq!(
        store.tenant_keys(t).await.unwrap().len() as i64,
        MAX_KEYS_PER_USER
    );
    // Without a default, a full user gets none made until a key goes.
    assert!(store
        .revoke_user_key(t, &u, &default)
        .await
        .unwrap()
        .is_some());
    assert!(store
        .create_user_key(t, &u, "in its place", &scopes, &Default::default())
        .await
        .unwrap()
        .is_some());
    assert!(bootstrap().await.is_none());
    let keys = store.tenant_keys(t).await.unwrap();
    assert_eq!(keys.len() as i64, MAX_KEYS_PER_USER);
    let hash = store.revoke_user_key(t, &u, &keys[0].id).await.unwrap();
    assert!(hash.is_some());
    assert_eq!(
        store.revoke_user_key(t, &u, &keys[0].id).await.unwrap(),
        None
    );
    assert_eq!(
        store
            .revoke_user_key("another-tenant", &u, &keys[1].id)
            .await
            .unwrap(),
        None
    );
    assert!(store
        .rotate_user_key(t, &u, "no-such-key")
        .await
        .unwrap()
        .is_none());
    key_restrictions(store, &user, &keys[1].id).await;
    team(store, &user).await;
}

/// Membership: an owner invites, the code joins once, roles change but a team keeps an
/// owner, a member cannot leave its own tenant, a session switches only to a tenant its
/// user belongs to, and a removed member's session falls back home.
async fn team(store: &Store, owner: &chainedge::store::console::UserRow) {
    use chainedge::store::team::{Refused, Role};
    let t = owner.tenant_id.as_str();
    let m = store.member(&owner.id, None).await.unwrap().unwrap();
    assert_eq!((m.tenant_id.as_str(), m.role), (t, Role::Owner));
    let code = sha256("inv_code");
    let inv = store
        .invite(t, &owner.id, "dev@example.com", Role::Developer, &code, 600)
        .await
        .unwrap()
        .unwrap();
    assert_eq!(store.invites(t).await.unwrap().len(), 1);
    let dev = store
        .user_for(&Identity::Email("dev@example.com".into()), "free")
        .await
        .unwrap();
    assert_eq!(
        store
            .join(&dev, &sha256("wrong"))
            .await
            .unwrap()
            .unwrap_err(),
        Refused::NotFound
    );
    let joined = store.join(&dev, &code).await.unwrap().unwrap();
    assert_eq!(
        (joined.tenant_id.as_str(), joined.role),
        (t, Role::Developer)
    );
    assert_eq!(
        store.join(&dev, &code).await.unwrap().unwrap_err(),
        Refused::NotFound
    );
    assert!(store.invites(t).await.unwrap().is_empty(), "{inv:?} used");
    assert_eq!(
        store
            .invite(
                t,
                &owner.id,
                "dev@example.com",
                Role::Viewer,
                &sha256("x"),
                600
            )
            .await
            .unwrap()
            .unwrap_err(),
        Refused::AlreadyMember
    );
    // The session acts where its user belongs, and nowhere else.
    let session = sha256("dev-session");
    store
        .create_session(&session, &dev, "email", unix_now() + 600)
        .await
        .unwrap();
    assert!(
        !store.switch_tenant(&session, &owner.id, t).await.unwrap(),
        "not its session"
    );
    assert!(store.switch_tenant(&session, &dev, t).await.unwrap());
    let in_team = store.member(&dev, Some(t)).await.unwrap().unwrap();
    assert_eq!((in_team.role, in_team.at_home()), (Role::Developer, false));
    let mine = store.memberships(&dev).await.unwrap();
    assert_eq!(mine.len(), 2);
    assert!(
        mine[0].tenant_id != t && mine[1].tenant_id == t,
        "home first"
    );
    // Roles: the last owner stays one; nobody leaves home.
    assert_eq!(
        store
            .set_role(t, &owner.id, &owner.id, Role::Viewer)
            .await
            .unwrap()
            .unwrap_err(),
        Refused::LastOwner
    );
    store
        .set_role(t, &owner.id, &dev, Role::Viewer)
        .await
        .unwrap()
        .unwrap();
    assert_eq!(
        store.member(&dev, Some(t)).await.unwrap().unwrap().role,
        Role::Viewer
    );
    assert_eq!(
        store
            .remove_member(t, &owner.id, &owner.id)
            .await
            .unwrap()
            .unwrap_err(),
        Refused::HomeTenant
    );
    store
        .remove_member(t, &owner.id, &dev)
        .await
        .unwrap()
        .unwrap();
    let back = store.member(&dev, Some(t)).await.unwrap().unwrap();
    assert!(
        back.at_home() && back.role == Role::Owner,
        "removed: acts at home"
    );
    let actions: Vec<String> = store
        .audit_log(t, 50, None)
        .await
        .unwrap()
        .into_iter()
        .map(|e| e.action)
        .collect();
    for a in [
        "member.invite",
        "member.join",
        "member.role",
        "member.remove",
    ] {
        assert!(actions.contains(&a.to_string()), "{a} audited: {actions:?}");
    }
}

/// Restrictions are stored with the key, read into its record, kept by a rotation and
/// replaced whole by an update of their owner only.
async fn key_restrictions(store: &Store, user: &chainedge::store::console::UserRow, id: &str) {
    use chainedge::store::RestrictionsDoc;
    let narrow: RestrictionsDoc = serde_json::from_value(serde_json::json!({
        "allowed_ips": ["10.0.0.0/8"], "allowed_methods": ["eth_call"], "max_rps": 5.0
    }))
    .unwrap();
    assert!(store
        .update_user_key("another-tenant", &user.id, id, None, Some(&narrow))
        .await
        .unwrap()
        .is_none());
    let (k, hash) = store
        .update_user_key(&user.tenant_id, &user.id, id, Some("narrow"), Some(&narrow))
        .await
        .unwrap()
        .unwrap();
    assert_eq!((k.name.as_str(), &k.restrictions), ("narrow", &narrow));
    let rec = store.lookup_key(&hash).await.unwrap().unwrap();
    let r = rec.restrictions.expect("compiled restrictions");
    assert_eq!((r.doc(), r.max_rps), (&narrow, Some(5.0)));
    let (rotated, _, _) = store
        .rotate_user_key(&user.tenant_id, &user.id, id)
        .await
        .unwrap()
        .unwrap();
    assert_eq!(rotated.restrictions, narrow);
    let (lifted, hash) = store
        .update_user_key(
            &user.tenant_id,
            &user.id,
            &rotated.id,
            None,
            Some(&RestrictionsDoc::default()),
        )
        .await
        .unwrap()
        .unwrap();
    assert!(lifted.restrictions.is_empty());
    assert_eq!(lifted.name, "narrow");
    assert!(store
        .lookup_key(&hash)
        .await
        .unwrap()
        .unwrap()
        .restrictions
        .is_none());
}

async fn codes_and_challenges(store: &Store) {
    let code = sha256("123456");
    let bounds = CodeBounds {
        window: 900,
        per_address: 2,
        per_client: 3,
    };
    let guard = GuessGuard {
        max_attempts: 3,
        lockout_secs: 1,
        max_lockout_secs: 4,
        forget_after: 86400,
    };
    let (a, b) = ("10.0.0.1", "2001:db8::/64");
    assert_eq!(
        store
            .store_code("c@example.com", a, &code, 600, &bounds)
            .await
            .unwrap(),
        Issued::Stored
    );
    assert_eq!(
        store
            .check_code("c@example.com", a, &sha256("000000"), &guard)
            .await
            .unwrap(),
        CodeCheck::Wrong
    );
    assert_eq!(
        store
            .check_code("c@example.com", a, &code, &guard)
            .await
            .unwrap(),
        CodeCheck::Ok
    );
    assert_eq!(
        store
            .check_code("c@example.com", a, &code, &guard)
            .await
            .unwrap(),
        CodeCheck::NoCode,
        "a code is used once"
    );
    // The latest code counts; a refused code is not stored (the mailed one still works
    // for the owner); every third wrong guess locks the address out.
    store
        .store_code("d@example.com", a, &sha256("1"), 600, &bounds)
        .await
        .unwrap();
    for (want, c) in [
        (Issued::Stored, &code),
        (Issued::TooManyForAddress, &sha256("2")),
    ] {
        assert_eq!(
            store
                .store_code("d@example.com", a, c, 600, &bounds)
                .await
                .unwrap(),
            want
        );
    }
    for want in [CodeCheck::Wrong, CodeCheck::Wrong, CodeCheck::LockedOut(1)] {
        assert_eq!(
            store
                .check_code("d@example.com", a, &sha256("x"), &guard)
                .await
                .unwrap(),
            want
        );
    }
    assert_eq!(
        store
            .check_code("d@example.com", a, &code, &guard)
            .await
            .unwrap(),
        CodeCheck::LockedOut(1),
        "locked out: even the right code is not tried"
    );
    // ... from that client only: another is not locked out (the code itself has had its
    // three wrong guesses, so it is spent for everyone).
    assert_eq!(
        store
            .check_code("d@example.com", b, &code, &guard)
            .await
            .unwrap(),
        CodeCheck::TooManyAttempts
    );
    // The client asked for three codes: its fourth is refused, another client's is not.
    assert_eq!(
        store
            .store_code("e@example.com", a, &code, -1, &bounds)
            .await
            .unwrap(),
        Issued::TooManyForClient
    );
    store
        .store_code("e@example.com", b, &code, -1, &bounds)
        .await
        .unwrap();
    assert_eq!(
        store
            .check_code("e@example.com", a, &code, &guard)
            .await
            .unwrap(),
        CodeCheck::Expired
    );
    // A new code after a lock-out does not reset the budget: the next lock-out doubles.
    let roomy = CodeBounds {
        per_address: 5,
        per_client: 100,
        ..bounds
    };
    let g = "g@example.com";
    store.store_code(g, b, &code, 600, &roomy).await.unwrap();
    for _ in 0..3 {
        store.check_code(g, b, &sha256("x"), &guard).await.unwrap();
    }
    tokio::time::sleep(std::time::Duration::from_millis(2100)).await;
    store.store_code(g, b, &code, 600, &roomy).await.unwrap();
    for want in [CodeCheck::Wrong, CodeCheck::Wrong, CodeCheck::LockedOut(2)] {
        assert_eq!(
            store.check_code(g, b, &sha256("y"), &guard).await.unwrap(),
            want
        );
    }
    assert_eq!(
        [3, 6, 9, 12, 4].map(|n| guard.lockout_after(n)),
        [Some(1), Some(2), Some(4), Some(4), None]
    );
    // Guesses spread over many clients: each client is locked out at its third, and the
    // whole address at the thirtieth wrong guess from any of them, its owner included.
    let spread = CodeBounds {
        per_address: 100,
        per_client: 100,
        ..bounds
    };
    let h = "h@example.com";
    for i in 0..10 {
        let stranger = format!("192.0.2.{i}");
        store
            .store_code(h, &stranger, &code, 600, &spread)
            .await
            .unwrap();
        for n in 0..3 {
            let r = store
                .check_code(h, &stranger, &sha256("z"), &guard)
                .await
                .unwrap();
            match (i, n) {
                (9, 2) => assert_eq!(r, CodeCheck::LockedOut(1), "the 30th"),
                (_, 2) => assert_eq!(r, CodeCheck::LockedOut(1), "a client's 3rd"),
                _ => assert_eq!(r, CodeCheck::Wrong),
            }
        }
    }
    store.store_code(h, b, &code, 600, &spread).await.unwrap();
    assert_eq!(
        store.check_code(h, b, &code, &guard).await.unwrap(),
        CodeCheck::LockedOut(1),
        "the address as a whole is locked out"
    );
    assert_eq!(
        [29, 30, 60].map(|n| guard.address_lockout_after(n)),
        [None, Some(1), Some(2)]
    );

    let c = Challenge {
        kind: "evm".into(),
        subject: "0xabc".into(),
        message: "sign this".into(),
        expires_at: unix_now() + 60,
    };
    let cb = ChallengeBounds {
        per_client: 2,
        per_subject: 1,
    };
    assert_eq!(
        store.store_challenge("nonce-1", a, &c, &cb).await.unwrap(),
        Issued::Stored
    );
    assert_eq!(
        store.store_challenge("nonce-2", a, &c, &cb).await.unwrap(),
        Issued::TooManyForAddress
    );
    let other = |s: &str| Challenge {
        subject: s.into(),
        ..c_clone(&c)
    };
    assert_eq!(
        store
            .store_challenge("nonce-3", a, &other("0xdef"), &cb)
            .await
            .unwrap(),
        Issued::Stored
    );
    assert_eq!(
        store
            .store_challenge("nonce-4", a, &other("0x123"), &cb)
            .await
            .unwrap(),
        Issued::TooManyForClient
    );
    assert!(
        store.take_challenge("nonce-2").await.unwrap().is_none(),
        "refused: not stored"
    );
    let taken = store.take_challenge("nonce-1").await.unwrap().unwrap();
    assert_eq!(
        (taken.kind.as_str(), taken.message.as_str()),
        ("evm", "sign this")
    );
    assert!(store.take_challenge("nonce-1").await.unwrap().is_none());
    assert!(store
        .take_challenge("nonce-unknown")
        .await
        .unwrap()
        .is_none());
    // A used challenge no longer counts against its client.
    assert_eq!(
        store
            .store_challenge("nonce-5", a, &other("0x123"), &cb)
            .await
            .unwrap(),
        Issued::Stored
    );
}

/// Now in Unix seconds, as the store stamps rows.
fn unix_now() -> i64 {
    std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .unwrap()
        .as_secs() as i64
}

fn c_clone(c: &Challenge) -> Challenge {
    Challenge {
        kind: c.kind.clone(),
        subject: c.subject.clone(),
        message: c.message.clone(),
        expires_at: c.expires_at,
    }
}

/// What the transactions promise when callers race: one user per identity, one default
/// key per user, a challenge taken once.
async fn concurrency(store: &Store) {
    const N: usize = 8;
    let store = Arc::new(store.clone());
    let id = Identity::Email("race@example.com".into());
    let users = futures_util::future::join_all((0..N).map(|_| {
        let store = store.clone();
        let id = id.clone();
        tokio::spawn(async move { store.user_for(&id, "free").await })
    }))
    .await;
    let users: Vec<String> = users.into_iter().map(|r| r.unwrap().unwrap()).collect();
    assert!(users.iter().all(|u| *u == users[0]), "{users:?}");

    let user = store.user(&users[0]).await.unwrap().unwrap();
    let defaults = futures_util::future::join_all((0..N).map(|_| {
        let store = store.clone();
        let user = user.clone();
        tokio::spawn(async move { store.bootstrap_default_key(&user, &[]).await })
    }))
    .await;
    let defaults: Vec<_> = defaults
        .into_iter()
        .map(|r| r.unwrap().unwrap().unwrap())
        .collect();
    assert_eq!(defaults.iter().filter(|(_, raw)| raw.is_some()).count(), 1);
    assert!(defaults.iter().all(|(k, _)| k.id == defaults[0].0.id));

    let c = Challenge {
        kind: "evm".into(),
        subject: "s".into(),
        message: "m".into(),
        expires_at: unix_now() + 60,
    };
    store
        .store_challenge(
            "race-nonce",
            "10.0.0.9",
            &c,
            &ChallengeBounds {
                per_client: 5,
                per_subject: 5,
            },
        )
        .await
        .unwrap();
    let takes = futures_util::future::join_all((0..N).map(|_| {
        let store = store.clone();
        tokio::spawn(async move { store.take_challenge("race-nonce").await })
    }))
    .await;
    let taken = takes
        .into_iter()
        .filter(|r| matches!(r, Ok(Ok(Some(_)))))
        .count();
    assert_eq!(taken, 1, "a challenge is taken once");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn the_store_suite_on_sqlite() {
    let dir = tempdir("store");
    suite(Target::Sqlite(dir.join("store.db")), Dialect::Sqlite).await;
    let _ = std::fs::remove_dir_all(dir);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn the_store_suite_on_postgres() {
    let pg = tokio::task::spawn_blocking(PgServer::start).await.unwrap();
    let url = pg.create_db();
    suite(Target::Postgres(url), Dialect::Postgres).await;
    // Two instances starting at once on an empty database: one migrates, both open.
    let url = pg.create_db();
    let target = Target::Postgres(url);
    let (a, b) = tokio::join!(Store::open(&target), Store::open(&target));
    a.unwrap();
    b.unwrap();
    tokio::task::spawn_blocking(move || drop(pg)).await.unwrap();
}

/// Reads outside a transaction share a few connections per thread (pipelined) instead
/// of taking a pooled one each: 200 reads at once from one thread open at most two more
/// backends (a pool would grow to its size). When the server ends those backends, the
/// next read still answers, on a connection opened again.
#[tokio::test]
async fn postgres_reads_share_a_few_connections_and_survive_their_end() {
    let pg = tokio::task::spawn_blocking(PgServer::start).await.unwrap();
    let store = Store::open(&Target::Postgres(pg.create_db()))
        .await
        .unwrap();
    let (admin, connection) = tokio_postgres::connect(&pg.url("postgres"), tokio_postgres::NoTls)
        .await
        .unwrap();
    tokio::spawn(connection);
    const EDGE: &str = "FROM pg_stat_activity WHERE application_name = 'chainedge'";
    let backends = || async {
        let row = admin
            .query_one(&format!("SELECT count(*) {EDGE}"), &[])
            .await
            .unwrap();
        row.get::<_, i64>(0)
    };
    let before = backends().await;
    let names: Vec<String> = (0..200).map(|i| format!("t{i}")).collect();
    let reads = names.iter().map(|name| store.tenant_exists(name));
    for read in futures_util::future::join_all(reads).await {
        assert!(!read.unwrap(), "no tenant was made");
    }
    let opened = backends().await - before;
    assert!(
        (1..=2).contains(&opened),
        "200 reads from one thread opened {opened} backends"
    );
    admin
        .execute(&format!("SELECT pg_terminate_backend(pid) {EDGE}"), &[])
        .await
        .unwrap();
    tokio::time::sleep(std::time::Duration::from_millis(200)).await;
    for _ in 0..3 {
        assert!(!store.tenant_exists("t").await.unwrap());
    }
    // A store dropped: its read connections close when the thread next reads another.
    let first_db = store_db(&admin).await;
    drop(store);
    let other = Store::open(&Target::Postgres(pg.create_db()))
        .await
        .unwrap();
    assert!(!other.tenant_exists("t").await.unwrap());
    let on_first = format!("SELECT count(*) {EDGE} AND datname = '{first_db}'");
    let mut left = -1;
    for _ in 0..50 {
        left = admin
            .query_one(&on_first, &[])
            .await
            .unwrap()
            .get::<_, i64>(0);
        if left == 0 {
            break;
        }
        tokio::time::sleep(std::time::Duration::from_millis(50)).await;
    }
    assert_eq!(left, 0, "a dropped store's connections stay open");
    drop(other);
    tokio::task::spawn_blocking(move || drop(pg)).await.unwrap();
}

/// The database the edge's connections are on (the one test database they use).
async fn store_db(admin: &tokio_postgres::Client) -> String {
    admin
        .query_one(
            "SELECT datname FROM pg_stat_activity WHERE application_name = 'chainedge' LIMIT 1",
            &[],
        )
        .await
        .unwrap()
        .get(0)
}

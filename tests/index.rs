//! The chain index on a real node (anvil): native, ERC-20, ERC-721 and ERC-1155
//! transfers from real contracts (tests/contracts) appear in history, token balances and
//! NFT holdings, from SQLite and from PostgreSQL; a reorg removes the orphaned branch;
//! SIGKILL mid-indexing resumes with no gap and no duplicate (on both stores); pages stay
//! stable as blocks arrive; bad parameters are refused before any work.

use common::evm::*;
use common::*;
use serde_json::{json, Value};
use std::time::{Duration, Instant};

#[test]
fn transfers_of_every_kind_in_history_tokens_and_nfts() {
    every_kind(None);
}

/// The same reads from a PostgreSQL store (its statements are its own: row values,
/// `LIMIT` parameters, the led forms of an empty page).
#[test]
fn transfers_of_every_kind_on_postgres() {
    let pg = PgServer::start();
    every_kind(Some(pg.create_db()));
}

fn every_kind(postgres: Option<String>) {
    let node = Anvil::start(1, &[]);
    let gw = indexed_gateway(
        &node,
        "    start_block: 0\n    poll_ms: 100\n    batch_blocks: 5\n",
        postgres,
    );
    let key = gw.key("basic", &[]);

    // Erc20("Test USD", "TUSD", 6): three head words (two offsets and the decimals),
    // then the two strings.
    let args = format!(
        "{}{}{}{}{}",
        word("96"),
        word("160"),
        word("6"),
        string_tail("Test USD"),
        string_tail("TUSD")
    );
    let usd = deploy(&node, "Erc20", &args);
    let odd = deploy(&node, "OddToken", "");
    let kittens = deploy(&node, "Erc721", "");
    let multi = deploy(&node, "Erc1155", "");
    call(&node, &usd, "mint(address,uint256)", &[DEV, "1000000"]);
    call(&node, &usd, "transfer(address,uint256)", &[ALICE, "250"]);
    send(&node, Some(ALICE), "0x", "0xde0b6b3a7640000");
    call(&node, &odd, "mint(address,uint256)", &[ALICE, "77"]);
    call(&node, &kittens, "mint(address,uint256)", &[ALICE, "7"]);
    call(&node, &kittens, "mint(address,uint256)", &[DEV, "8"]);
    call(
        &node,
        &kittens,
        "transferFrom(address,address,uint256)",
        &[DEV, ALICE, "8"],
    );
    call(
        &node,
        &multi,
        "mint(address,uint256,uint256)",
        &[ALICE, "1", "5"],
    );
    // mintBatch(ALICE, [2, 3], [10, 20]): the two arrays after three head words.
    let batch = format!(
        "0x{}{}{}{}{}{}{}{}{}{}",
        selector("mintBatch(address,uint256[],uint256[])"),
        word(ALICE),
        word("96"),
        word("192"),
        word("2"),
        word("2"),
        word("3"),
        word("2"),
        word("10"),
        word("20")
    );
    send(&node, Some(&multi), &batch, "0x0");
    wait_indexed(&gw, node.block_number());
    // Token metadata is fetched in the background after the block that first shows the
    // token is committed: the symbols are what this test reads, so wait for them.
    let until = Instant::now() + Duration::from_secs(15);
    while get(&gw, &key, &format!("/v1/eth/wallet/{ALICE}/tokens"))["tokens"]
        .as_array()
        .unwrap()
        .iter()
        .any(|t| t["symbol"].is_null())
    {
        assert!(Instant::now() < until, "token metadata not fetched in 15 s");
        std::thread::sleep(Duration::from_millis(50));
    }

    let history = all_history(&gw, &key, ALICE, 3);
    let kinds: Vec<(&str, &str, &str)> = history
        .iter()
        .map(|i| {
            (
                i["kind"].as_str().unwrap(),
                i["direction"].as_str().unwrap(),
                i["amount"].as_str().unwrap(),
            )
        })
        .collect();
    assert_eq!(
        kinds,
        vec![
            ("erc1155", "in", "20"),
            ("erc1155", "in", "10"),
            ("erc1155", "in", "5"),
            ("erc721", "in", "1"),
            ("erc721", "in", "1"),
            ("erc20", "in", "77"),
            ("native", "in", "1000000000000000000"),
            ("erc20", "in", "250"),
        ],
        "{history:?}"
    );
    let usd_row = &history[7];
    assert_eq!(
        (usd_row["token"].as_str(), usd_row["symbol"].as_str()),
        (Some(usd.as_str()), Some("TUSD"))
    );
    assert_eq!(
        (
            usd_row["decimals"].as_u64(),
            usd_row["counterparty"].as_str()
        ),
        (Some(6), Some(DEV))
    );

    let tokens = get(&gw, &key, &format!("/v1/eth/wallet/{ALICE}/tokens"));
    let mut list = tokens["tokens"].as_array().unwrap().clone();
    list.sort_by_key(|t| t["token"].as_str().unwrap().to_string());
    let mut want = vec![
        json!({"token": usd, "name": "Test USD", "symbol": "TUSD", "decimals": 6, "balance": "250"}),
        // Non-standard metadata: a bytes32 symbol, no name, a reverting decimals().
        json!({"token": odd, "name": null, "symbol": "ODD", "decimals": null, "balance": "77"}),
    ];
    want.sort_by_key(|t| t["token"].as_str().unwrap().to_string());
    assert_eq!(list, want);

    let nfts = get(&gw, &key, &format!("/v1/eth/wallet/{ALICE}/nfts?limit=3"));
    assert_eq!(nfts["total"], 5, "{nfts}");
    let page2 = get(
        &gw,
        &key,
        &format!("/v1/eth/wallet/{ALICE}/nfts?limit=3&offset=3"),
    );
    let held: Vec<(String, String, String)> = nfts["items"]
        .as_array()
        .unwrap()
        .iter()
        .chain(page2["items"].as_array().unwrap())
        .map(|i| {
            (
                i["token"].as_str().unwrap().to_string(),
                i["token_id"].as_str().unwrap().to_string(),
                i["amount"].as_str().unwrap().to_string(),
            )
        })
        .collect();
    let mut expect = vec![
        (kittens.clone(), "7".to_string(), "1".to_string()),
        (kittens.clone(), "8".into(), "1".into()),
        (multi.clone(), "1".into(), "5".into()),
        (multi.clone(), "2".into(), "10".into()),
        (multi.clone(), "3".into(), "20".into()),
    ];
    expect.sort();
    assert_eq!(held, expect);
    // DEV's kitten 8 went out: no longer held.
    let dev = get(&gw, &key, &format!("/v1/eth/wallet/{DEV}/nfts"));
    assert_eq!(dev["total"], 0, "{dev}");
    // An address no NFT ever reached: an empty page, still at the index's block.
    let none = get(
        &gw,
        &key,
        "/v1/eth/wallet/0x000000000000000000000000000000000000dEaD/nfts",
    );
    assert_eq!(none["total"], 0, "{none}");
    assert_eq!(none["block"], dev["block"], "{none}");

    // Paging stays stable while new blocks arrive: a page read after more transfers
    // continues exactly where the previous one stopped.
    let first = get(
        &gw,
        &key,
        &format!("/v1/eth/wallet/{ALICE}/history?limit=4"),
    );
    for _ in 0..3 {
        send(&node, Some(ALICE), "0x", "0x1");
    }
    wait_indexed(&gw, node.block_number());
    let cursor = first["next_cursor"].as_str().unwrap();
    let second = get(
        &gw,
        &key,
        &format!("/v1/eth/wallet/{ALICE}/history?limit=4&cursor={cursor}"),
    );
    // The transfers themselves: a token's name and symbol are fetched in the background
    // and may arrive between the reads.
    let transfer = |i: &Value| {
        let mut i = i.clone();
        if let Some(o) = i.as_object_mut() {
            o.remove("symbol");
            o.remove("decimals");
        }
        i
    };
    let pages: Vec<Value> = first["items"]
        .as_array()
        .unwrap()
        .iter()
        .chain(second["items"].as_array().unwrap())
        .map(transfer)
        .collect();
    let before: Vec<Value> = history.iter().map(transfer).collect();
    assert_eq!(
        pages, before,
        "two pages across new blocks = the history before them"
    );
    assert!(second["next_cursor"].is_null());

    // Bad parameters: 400 before any work.
    for path in [
        format!("/v1/eth/wallet/{ALICE}/history?limit=0"),
        format!("/v1/eth/wallet/{ALICE}/history?limit=201"),
        format!("/v1/eth/wallet/{ALICE}/history?cursor=bm9wZQ"),
        format!("/v1/eth/wallet/{ALICE}/nfts?offset=10001"),
        format!("/v1/eth/wallet/{ALICE}/nfts?limit=x"),
        "/v1/eth/wallet/0x123/tokens".to_string(),
    ] {
        let r = gw.get(&path, &[("x-token", &key)]);
        assert_eq!(r.status, 400, "{path}: {}", r.text());
        assert_eq!(r.json()["error"], "invalid_params");
    }
    // A chain that is not indexed says so.
    let r = gw.get(
        &format!("/v1/polygon/wallet/history/{ALICE}"),
        &[("x-token", &key)],
    );
    assert_eq!(r.status, 503, "{}", r.text());
}

#[test]
fn a_reorg_removes_the_orphaned_branch() {
    let node = Anvil::start(1, &[]);
    let gw = indexed_gateway(&node, "    start_block: 0\n    poll_ms: 100\n", None);
    let key = gw.key("basic", &[]);
    send(&node, Some(CAROL), "0x", "0x5");
    let fork = node.call("evm_snapshot", json!([]));
    // The branch that will be orphaned: a transfer to BOB and two more blocks.
    send(&node, Some(BOB), "0x", "0x7");
    node.mine(2);
    let orphan_tip = node.block_number();
    wait_indexed(&gw, orphan_tip);
    assert_eq!(all_history(&gw, &key, BOB, 50).len(), 1);

    // Back to the fork point; a longer branch without BOB and with CAROL again.
    assert_eq!(node.call("evm_revert", json!([fork])), true);
    send(&node, Some(CAROL), "0x", "0x6");
    node.mine(4);
    let tip = node.block_number();
    assert!(tip > orphan_tip);
    wait_indexed(&gw, tip);
    wait_reorg_counted(&gw);
    assert!(
        all_history(&gw, &key, BOB, 50).is_empty(),
        "the orphaned transfer is gone"
    );
    let carol: Vec<String> = all_history(&gw, &key, CAROL, 50)
        .iter()
        .map(|i| i["amount"].as_str().unwrap().to_string())
        .collect();
    assert_eq!(carol, vec!["6", "5"]);
    let depth = metric(&gw, "chainedge_index_rollback_depth").unwrap();
    assert!((1.0..=4.0).contains(&depth), "rolled back {depth} blocks");
    // Every block hash the index kept is the chain's.
    let history = all_history(&gw, &key, CAROL, 50);
    let block = history[0]["block"].as_u64().unwrap();
    let on_chain = node.call(
        "eth_getBlockByNumber",
        json!([format!("0x{block:x}"), true]),
    );
    assert_eq!(on_chain["transactions"][0]["hash"], history[0]["tx_hash"]);
}

/// A reorg while the backfill runs with batches fetched ahead (one block a batch, eight
/// ahead): whatever the timing, the index ends on the new branch alone, every transfer of
/// it once and in order, nothing of the orphaned one.
#[test]
fn a_reorg_under_batches_fetched_ahead_leaves_only_the_new_branch() {
    let node = Anvil::start(1, &[]);
    node.mine(20);
    let fork_at = node.block_number();
    let fork = node.call("evm_snapshot", json!([]));
    for i in 1..=200u64 {
        send(&node, Some(BOB), "0x", &format!("0x{i:x}"));
    }
    let gw = indexed_gateway(
        &node,
        "    start_block: 0\n    poll_ms: 100\n    batch_blocks: 1\n    fetch_ahead: 8\n    max_reorg_depth: 1000\n",
        None,
    );
    let key = gw.key("basic", &[]);
    // Mid-way through the branch about to be orphaned.
    wait_indexed(&gw, fork_at + 20);
    assert_eq!(node.call("evm_revert", json!([fork])), true);
    let mut sent = Vec::new();
    for i in 1..=210u64 {
        let receipt = send(&node, Some(CAROL), "0x", &format!("0x{i:x}"));
        sent.push(receipt["transactionHash"].as_str().unwrap().to_string());
    }
    wait_indexed(&gw, node.block_number());
    let until = Instant::now() + Duration::from_secs(20);
    while !all_history(&gw, &key, BOB, 200).is_empty() {
        assert!(
            Instant::now() < until,
            "the orphaned transfers are still there"
        );
        std::thread::sleep(Duration::from_millis(50));
    }
    let mut got: Vec<String> = all_history(&gw, &key, CAROL, 200)
        .iter()
        .map(|i| i["tx_hash"].as_str().unwrap().to_string())
        .collect();
    got.reverse();
    assert_eq!(got, sent, "the new branch, once, in order");
    assert!(metric(&gw, "chainedge_index_reorgs_total").unwrap_or(0.0) >= 1.0);
}

/// A reorg deeper than `max_reorg_depth`: logged, and the index goes back below the
/// oldest block hash it kept and follows the new branch from there (what lies deeper is
/// not checked, as documented), instead of stalling on a parent it cannot link.
#[test]
fn a_reorg_deeper_than_the_kept_hashes_is_followed_from_below_them() {
    let node = Anvil::start(1, &[]);
    node.mine(5);
    let fork = node.call("evm_snapshot", json!([]));
    for i in 1..=40u64 {
        send(&node, Some(BOB), "0x", &format!("0x{i:x}"));
    }
    let gw = indexed_gateway(
        &node,
        "    start_block: 0\n    poll_ms: 100\n    batch_blocks: 4\n    max_reorg_depth: 8\n",
        None,
    );
    let key = gw.key("basic", &[]);
    let orphan_tip = node.block_number();
    wait_indexed(&gw, orphan_tip);
    assert_eq!(node.call("evm_revert", json!([fork])), true);
    let mut sent = Vec::new();
    for i in 1..=50u64 {
        let receipt = send(&node, Some(CAROL), "0x", &format!("0x{i:x}"));
        sent.push(receipt["transactionHash"].as_str().unwrap().to_string());
    }
    wait_indexed(&gw, node.block_number());
    // Re-indexed from below the 8 kept hashes (9 blocks under the orphaned tip): the new
    // branch's transfers from there on, in order; the orphaned ones above it gone.
    let from = orphan_tip - 8;
    let until = Instant::now() + Duration::from_secs(20);
    loop {
        let bob = all_history(&gw, &key, BOB, 100);
        if bob.iter().all(|i| i["block"].as_u64().unwrap() < from) {
            break;
        }
        assert!(
            Instant::now() < until,
            "orphaned transfers above {from} remain"
        );
        std::thread::sleep(Duration::from_millis(50));
    }
    let mut carol: Vec<String> = all_history(&gw, &key, CAROL, 100)
        .iter()
        .map(|i| i["tx_hash"].as_str().unwrap().to_string())
        .collect();
    carol.reverse();
    let kept_from = sent.len() - carol.len();
    assert!(carol.len() >= 10, "only {} of the new branch", carol.len());
    assert_eq!(
        carol,
        sent[kept_from..],
        "the new branch above the re-index point, in order"
    );
}

/// A sparse chain: hundreds of empty blocks between transfers. The empty ones are
/// committed from their headers alone, every transfer is kept in order, and a reorg met
/// on a sparse stretch is rolled back as on a dense one.
#[test]
fn a_sparse_chain_is_read_from_headers_without_losing_a_transfer() {
    let node = Anvil::start(1, &[]);
    let mut sent = Vec::new();
    for i in 1..=4u64 {
        node.call("anvil_mine", json!(["0xc8"]));
        let receipt = send(&node, Some(ALICE), "0x", &format!("0x{i:x}"));
        sent.push(receipt["transactionHash"].as_str().unwrap().to_string());
    }
    node.call("anvil_mine", json!(["0x64"]));
    let gw = indexed_gateway(
        &node,
        "    start_block: 0\n    poll_ms: 100\n    batch_blocks: 10\n",
        None,
    );
    let key = gw.key("basic", &[]);
    wait_indexed(&gw, node.block_number());
    let got: Vec<String> = all_history(&gw, &key, ALICE, 50)
        .iter()
        .rev()
        .map(|i| i["tx_hash"].as_str().unwrap().to_string())
        .collect();
    assert_eq!(got, sent, "every transfer, once, in order");
    let from_headers = metric(&gw, "chainedge_index_header_only_blocks_total").unwrap();
    assert!(
        from_headers > 700.0,
        "{from_headers} blocks read from headers alone"
    );

    // A reorg on the sparse stretch: BOB's transfer is orphaned, CAROL's kept.
    let fork = node.call("evm_snapshot", json!([]));
    node.call("anvil_mine", json!(["0x14"]));
    send(&node, Some(BOB), "0x", "0x7");
    node.call("anvil_mine", json!(["0x5"]));
    wait_indexed(&gw, node.block_number());
    assert_eq!(all_history(&gw, &key, BOB, 50).len(), 1);
    assert_eq!(node.call("evm_revert", json!([fork])), true);
    node.call("anvil_mine", json!(["0x1e"]));
    send(&node, Some(CAROL), "0x", "0x9");
    node.call("anvil_mine", json!(["0x5"]));
    wait_indexed(&gw, node.block_number());
    let until = Instant::now() + Duration::from_secs(10);
    while !all_history(&gw, &key, BOB, 50).is_empty() {
        assert!(
            Instant::now() < until,
            "the orphaned transfer is still there"
        );
        std::thread::sleep(Duration::from_millis(50));
    }
    assert_eq!(all_history(&gw, &key, CAROL, 50).len(), 1);
}

fn sigkill_mid_indexing(postgres: Option<String>) {
    let node = Anvil::start(1, &[]);
    // 150 blocks, each with one transfer to ALICE (anvil mines one per transaction).
    let mut sent = Vec::new();
    for i in 1..=150u64 {
        let receipt = send(&node, Some(ALICE), "0x", &format!("0x{i:x}"));
        sent.push(receipt["transactionHash"].as_str().unwrap().to_string());
    }
    let head = node.block_number();
    let mut gw = indexed_gateway(
        &node,
        "    start_block: 0\n    poll_ms: 100\n    batch_blocks: 3\n",
        postgres,
    );
    let key = gw.key("basic", &[]);
    // Killed somewhere in the middle, twice.
    for at in [40, 90] {
        wait_indexed(&gw, at);
        let mut dead = gw.proc.take().unwrap();
        dead.signal("KILL");
        assert!(dead.exited_within(Duration::from_secs(5)));
        gw.proc = Some(gw.spawn(false));
        gw.wait_ready(Duration::from_secs(20));
    }
    wait_indexed(&gw, head);
    let history = all_history(&gw, &key, ALICE, 200);
    let mut got: Vec<String> = history
        .iter()
        .map(|i| i["tx_hash"].as_str().unwrap().to_string())
        .collect();
    got.reverse();
    assert_eq!(got.len(), 150, "no gap, no duplicate");
    assert_eq!(got, sent);
}

#[test]
fn sigkill_mid_indexing_resumes_without_gap_or_duplicate() {
    sigkill_mid_indexing(None);
}

#[test]
fn sigkill_mid_indexing_on_postgres() {
    let pg = PgServer::start();
    sigkill_mid_indexing(Some(pg.create_db()));
}

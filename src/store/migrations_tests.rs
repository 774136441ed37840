//! The migrations on a real SQLite file: a store written before a version keeps its rows
//! through it, and the wallet pages' statements read by key on the schema they build.

use super::migrations::MIGRATIONS;
use super::sql::{Backend, Value};
use super::sqlite::Sqlite;

/// A SQLite store in a directory of its own, closed and removed when dropped (by a failing
/// test too).
struct Scratch {
    store: Option<Sqlite>,
    dir: std::path::PathBuf,
}

impl Scratch {
    fn open() -> Scratch {
        let dir = std::env::temp_dir().join(format!("chainedge-migrate-{}", uuid::Uuid::new_v4()));
        let store = Sqlite::open(&dir.join("store.db")).unwrap();
        Scratch {
            store: Some(store),
            dir,
        }
    }

    /// Opened with every migration applied.
    async fn migrated() -> Scratch {
        let scratch = Scratch::open();
        scratch.migrate(MIGRATIONS).await.unwrap();
        scratch
    }
}

impl std::ops::Deref for Scratch {
    type Target = Sqlite;
    fn deref(&self) -> &Sqlite {
        self.store.as_ref().unwrap()
    }
}

impl Drop for Scratch {
    fn drop(&mut self) {
        self.store.take();
        let _ = std::fs::remove_dir_all(&self.dir);
    }
}

/// A store written before the index's tables moved into their keys' b-trees keeps
/// every row, and reads them back by key.
#[tokio::test]
async fn the_index_tables_keep_their_rows_when_rebuilt_by_key() {
    let store = Scratch::open();
    // Up to the version before the tables were rebuilt by key.
    let before = MIGRATIONS
        .iter()
        .position(|m| m.contains("wallet_transfers_by_key"))
        .unwrap();
    store.migrate(&MIGRATIONS[..before]).await.unwrap();
    let text = |s: &str| Value::Text(s.into());
    for seq in 0..3i64 {
        store
            .execute(
                "INSERT INTO wallet_transfers VALUES \
                 ('eth', '0xa', 7, 1, 2, $1, 'in', 'erc721', '0xt', '0xb', '9', '1', '0xh', 5)",
                vec![Value::Int(seq)],
            )
            .await
            .unwrap();
    }
    store
        .execute(
            "INSERT INTO tokens VALUES ('eth', '0xt', 'Kittens', 'CEK', NULL, 1)",
            vec![],
        )
        .await
        .unwrap();
    store
        .execute(
            "INSERT INTO token_balance_anchors VALUES ('eth', '0xa', '0xt', 7, $1)",
            vec![text("12")],
        )
        .await
        .unwrap();
    store.migrate(MIGRATIONS).await.unwrap();
    let rows = store
        .query(
            "SELECT w.seq, w.token_id, t.name, a.balance FROM wallet_transfers w \
             JOIN tokens t ON t.chain = w.chain AND t.address = w.token \
             JOIN token_balance_anchors a ON a.chain = w.chain AND a.address = w.address \
             WHERE w.chain = 'eth' AND w.address = '0xa' ORDER BY w.seq",
            vec![],
        )
        .await
        .unwrap();
    let got: Vec<(i64, String, String, String)> = rows
        .iter()
        .map(|r| {
            (
                r.int(0).unwrap(),
                r.text(1).unwrap(),
                r.text(2).unwrap(),
                r.text(3).unwrap(),
            )
        })
        .collect();
    let row = |seq| (seq, "9".into(), "Kittens".into(), "12".into());
    assert_eq!(got, vec![row(0), row(1), row(2)]);
    // Kept by key: the tables have no rowid any more, and the block index is back.
    for table in ["wallet_transfers", "tokens", "token_balance_anchors"] {
        let r = store
            .query(&format!("SELECT rowid FROM {table}"), vec![])
            .await;
        assert!(r.is_err(), "{table} still has a rowid");
    }
    let indexes = store
        .query(
            "SELECT name FROM sqlite_master WHERE type = 'index' AND name LIKE '%_block'",
            vec![],
        )
        .await
        .unwrap();
    assert_eq!(indexes.len(), 2);
    // The index pages' partial indexes came after.
    let partial = store
        .query(
            "SELECT name FROM sqlite_master WHERE type = 'index' \
             AND name IN ('wallet_transfers_nfts', 'wallet_transfers_erc20')",
            vec![],
        )
        .await
        .unwrap();
    assert_eq!(partial.len(), 2);
}

/// The wallet pages read by key, whatever the wallet's history: SQLite's plan for each
/// statement never walks all of an address's transfers (a wallet with 100,000 ERC-20
/// transfers paid 16-60 ms a page when they did) and never sorts.
#[tokio::test]
async fn the_wallet_pages_read_by_key() {
    use super::{index_balances, index_history, index_nfts, nft_pages};
    let store = Scratch::migrated().await;
    // chain, address, then the limits.
    let plan = |sql: String, limits: usize| {
        let store = &store;
        let mut args = vec![Value::Text("eth".into()), Value::Text("0xa".into())];
        args.extend((0..limits).map(|_| Value::Int(50)));
        async move {
            let rows = store
                .query(&format!("EXPLAIN QUERY PLAN {sql}"), args)
                .await
                .unwrap();
            rows.iter().map(|r| r.text(3).unwrap()).collect::<Vec<_>>()
        }
    };
    // Every transfer of the address in key order (or the whole table): the partial
    // indexes hold only the rows each page reads, and are read by seeks and ranges.
    let walks_the_address = |line: &String| {
        let transfers = line.starts_with("SEARCH w ")
            || line.starts_with("SEARCH wallet_transfers ")
            || line.starts_with("SCAN w")
            || line.starts_with("SCAN wallet_transfers");
        transfers
            && (line.starts_with("SCAN") || line.ends_with("PRIMARY KEY (chain=? AND address=?)"))
    };
    let nfts = plan(nft_pages::PAGE.into(), 2).await;
    assert!(
        nfts.iter()
            .any(|l| l.starts_with("SEARCH h USING PRIMARY KEY (chain=? AND address=?)")),
        "{nfts:?}"
    );
    // The total: the wallet's kept count, one seek (not a count of its holdings).
    assert!(
        nfts.iter()
            .any(|l| l == "SEARCH nft_holding_counts USING PRIMARY KEY (chain=? AND address=?)"),
        "{nfts:?}"
    );
    assert!(
        !nfts.iter().any(|l| l.contains("nft_holdings ")),
        "{nfts:?}"
    );
    // A commit's lookup of the holdings its moves touch: a seek per key.
    let lookup = plan(index_nfts::lookup_sql(2), 7).await;
    assert_eq!(
        lookup.last().map(String::as_str),
        Some("SEARCH h USING PRIMARY KEY (chain=? AND address=? AND token=? AND id_len=? AND token_id=?)"),
        "{lookup:?}"
    );
    let tokens = plan(index_balances::WALLET_ERC20S.into(), 2).await;
    assert!(
        tokens
            .iter()
            .any(|l| l.contains("wallet_transfers_erc20 (chain=? AND address=? AND token>?)")),
        "{tokens:?}"
    );
    let history = plan(index_history::HISTORY_PAGE.into(), 1).await;
    for (name, lines) in [("nfts", &nfts), ("tokens", &tokens), ("history", &history)] {
        assert!(
            !lines.iter().any(|l| l.contains("TEMP B-TREE")),
            "{name} sorts: {lines:?}"
        );
        if name != "history" {
            // History walks the address newest first, but stops at its page.
            assert!(!lines.iter().any(walks_the_address), "{name}: {lines:?}");
        }
    }
}

/// A store indexed up to block 9 (hash `0xc`) before holdings were kept, closed: NFT moves
/// of `0xa` inserted out of order, with an ERC-20 move that holds nothing.
async fn indexed_before_holdings() -> Scratch {
    let mut scratch = Scratch::open();
    let before = MIGRATIONS
        .iter()
        .position(|m| m.contains("CREATE TABLE nft_holdings"))
        .unwrap();
    scratch.migrate(&MIGRATIONS[..before]).await.unwrap();
    scratch
        .execute(
            "INSERT INTO index_cursor (chain, number, hash, updated_at) VALUES ('eth', 9, '0xc', 1)",
            vec![],
        )
        .await
        .unwrap();
    for (tx_index, (block, kind, direction, id, amount)) in [
        (8, "erc1155", "out", "2", "3"),
        (3, "erc721", "in", "10", "1"),
        (5, "erc20", "in", "", "4"),
        (3, "erc721", "in", "9", "1"),
        (4, "erc721", "out", "9", "1"),
        (2, "erc1155", "in", "2", "5"),
        (6, "erc721", "in", "7", "1"),
    ]
    .into_iter()
    .enumerate()
    {
        scratch
            .execute(
                "INSERT INTO wallet_transfers VALUES \
                 ('eth', '0xa', $1, $6, 0, 0, $2, $3, '0xt', '0xb', $4, $5, '0xh', 5)",
                vec![
                    Value::Int(block),
                    Value::Text(direction.into()),
                    Value::Text(kind.into()),
                    Value::Text(id.into()),
                    Value::Text(amount.into()),
                    Value::Int(tx_index as i64),
                ],
            )
            .await
            .unwrap();
    }
    scratch.store.take();
    scratch
}

impl Scratch {
    /// The file opened as the edge opens its store.
    async fn reopened(&self) -> super::Store {
        let path = super::Target::Sqlite(self.dir.join("store.db"));
        super::Store::open(&path).await.unwrap()
    }
}

/// A store indexed before holdings were kept has them built at its first open after:
/// from every NFT move, by the rule the page always applied, in token and id order.
#[tokio::test]
async fn holdings_are_built_for_a_store_indexed_before_them() {
    let scratch = indexed_before_holdings().await;
    let store = scratch.reopened().await;
    let page = store
        .wallet_nfts("eth", "0xa", 10, 0)
        .await
        .unwrap()
        .unwrap();
    let held: Vec<(&str, &str, &str)> = page
        .items
        .iter()
        .map(|h| (h.kind.as_str(), h.token_id.as_str(), h.amount.as_str()))
        .collect();
    assert_eq!(
        (page.indexed_block, page.total, held),
        (
            9,
            3,
            vec![
                ("erc1155", "2", "2"),
                ("erc721", "7", "1"),
                ("erc721", "10", "1")
            ]
        )
    );
    let rows = store
        .raw
        .query(
            "SELECT nft_holdings_hash, nft_state_hash FROM index_cursor",
            vec![],
        )
        .await
        .unwrap();
    assert_eq!(rows[0].text(0).unwrap(), "0xc");
    assert_eq!(rows[0].text(1).unwrap(), "0xc");
}

/// Commit block `number` (hash `hash`, on `parent` at `number - 1`) with an ERC-721
/// transfer of id `id` from `0xb` to `0xa`; then `0xa`'s NFT page: block, total, ids.
async fn commit_to_a(
    store: &super::Store,
    (number, hash, parent): (u64, &str, &str),
    id: &str,
) -> (u64, u64, Vec<String>) {
    let transfer = super::index::Transfer {
        tx_index: 0,
        log_index: 0,
        seq: 0,
        kind: "erc721",
        token: "0xt".into(),
        from: "0xb".into(),
        to: "0xa".into(),
        token_id: Some(id.into()),
        amount: "1".into(),
        tx_hash: "0xh".into(),
    };
    let cursor = super::index::IndexCursor {
        number: number - 1,
        hash: parent.into(),
    };
    let block = super::index::IndexedBlock {
        number,
        hash: hash.into(),
        parent_hash: parent.into(),
        timestamp: number,
        transfers: vec![transfer],
    };
    store
        .commit_blocks("eth", Some(&cursor), &[block], 0)
        .await
        .unwrap();
    let page = store
        .wallet_nfts("eth", "0xa", 10, 0)
        .await
        .unwrap()
        .unwrap();
    let ids = page.items.into_iter().map(|h| h.token_id).collect();
    (page.indexed_block, page.total, ids)
}

/// Blocks committed by an instance that keeps no holdings leave them behind its cursor:
/// the next commit builds them whole before adding its own moves.
#[tokio::test]
async fn holdings_left_behind_are_built_at_the_next_commit() {
    let scratch = indexed_before_holdings().await;
    let store = scratch.reopened().await;
    for sql in [
        "UPDATE index_cursor SET hash = '0xd'",
        "DELETE FROM nft_holdings",
    ] {
        store.raw.execute(sql, vec![]).await.unwrap();
    }
    let (block, _, ids) = commit_to_a(&store, (10, "0xe", "0xd"), "8").await;
    assert_eq!((block, ids), (10, strings(&["2", "7", "8", "10"])));
}

/// An instance from before the counts keeps holdings and `nft_holdings_hash`, not the
/// counts: after its commit, the next commit counts them again, so `total` stays right.
#[tokio::test]
async fn counts_left_behind_are_built_at_the_next_commit() {
    let scratch = indexed_before_holdings().await;
    let store = scratch.reopened().await;
    // The older instance's block 10: art #8 to 0xa, its holding, the cursor and
    // `nft_holdings_hash` moved; its count not.
    for sql in [
        "INSERT INTO wallet_transfers VALUES \
         ('eth', '0xa', 10, 0, 0, 0, 'in', 'erc721', '0xt', '0xb', '8', '1', '0xh', 10)",
        "INSERT INTO nft_holdings VALUES ('eth', '0xa', '0xt', 1, '8', 'erc721', '1')",
        "UPDATE index_cursor SET number = 10, hash = '0xd', nft_holdings_hash = '0xd'",
    ] {
        store.raw.execute(sql, vec![]).await.unwrap();
    }
    assert_eq!(
        commit_to_a(&store, (11, "0xe", "0xd"), "5").await,
        (11, 5, strings(&["2", "5", "7", "8", "10"]))
    );
}

fn strings(s: &[&str]) -> Vec<String> {
    s.iter().map(|s| s.to_string()).collect()
}

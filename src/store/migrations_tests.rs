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
    use super::{index, index_balances};
    let store = Scratch::migrated().await;
    // chain, address, then the limits.
    let plan = |sql: &'static str, limits: usize| {
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
    let nfts = plan(index::NFT_MOVES, 1).await;
    assert!(
        nfts.iter()
            .any(|l| l.contains("COVERING INDEX wallet_transfers_nfts")),
        "{nfts:?}"
    );
    let tokens = plan(index_balances::WALLET_ERC20S, 2).await;
    assert!(
        tokens
            .iter()
            .any(|l| l.contains("wallet_transfers_erc20 (chain=? AND address=? AND token>?)")),
        "{tokens:?}"
    );
    let history = plan(index::HISTORY_PAGE, 1).await;
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

/// The NFT page led by the cursor (read when the page comes back empty) reads the same
/// moves, in the same order and columns, as the page itself; with no move, the cursor.
#[tokio::test]
async fn the_nft_statements_agree() {
    use super::index::{NFT_MOVES, NFT_MOVES_LED};
    let store = Scratch::migrated().await;
    store
        .execute(
            "INSERT INTO index_cursor (chain, number, hash, updated_at) VALUES ('eth', 9, '0xc', 1)",
            vec![],
        )
        .await
        .unwrap();
    // Inserted out of order, with an ERC-20 move between that neither may read.
    for (block, kind, id) in [
        (8, "erc1155", "2"),
        (3, "erc721", "7"),
        (5, "erc20", ""),
        (3, "erc721", "1"),
    ] {
        store
            .execute(
                "INSERT INTO wallet_transfers VALUES \
                 ('eth', '0xa', $1, 0, $2, 0, 'in', $3, '0xt', '0xb', $4, '1', '0xh', 5)",
                vec![
                    Value::Int(block),
                    Value::Int(id.parse().unwrap_or(0)),
                    Value::Text(kind.into()),
                    Value::Text(id.into()),
                ],
            )
            .await
            .unwrap();
    }
    let read = |sql: &'static str, address: &'static str| {
        let store = &store;
        async move {
            let args = vec![
                Value::Text("eth".into()),
                Value::Text(address.into()),
                Value::Int(100),
            ];
            let rows = store.query(sql, args).await.unwrap();
            rows.into_iter()
                .map(|r| (0..8).map(|i| format!("{:?}", r.0[i])).collect::<Vec<_>>())
                .collect::<Vec<_>>()
        }
    };
    let page = read(NFT_MOVES, "0xa").await;
    let ids: Vec<&str> = page.iter().map(|r| r[3].as_str()).collect();
    assert_eq!(ids, [r#"Text("1")"#, r#"Text("7")"#, r#"Text("2")"#]);
    assert_eq!(read(NFT_MOVES_LED, "0xa").await, page);
    assert!(read(NFT_MOVES, "0xnone").await.is_empty());
    let led = read(NFT_MOVES_LED, "0xnone").await;
    assert_eq!(led.len(), 1);
    assert_eq!(led[0][0], "Int(9)");
    assert_eq!(led[0][1], "Null");
}

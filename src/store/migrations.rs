//! The schema, version by version: each version's SQL in its own file
//! (`migrations/vNN_<what it makes>.sql`), the list in order here with why each was made.

/// Schema versions, applied in order at open (SQLite tracks progress in `user_version`,
/// PostgreSQL in `schema_version`). Written in SQL both run; `Dialect::render` maps the
/// two type names PostgreSQL spells differently, and a version that begins with
/// `SQLITE_ONLY` is SQLite's alone (PostgreSQL counts it done). Append only: a version
/// once released is never edited: a new one is a new file at the end of the list.
pub(super) const MIGRATIONS: &[&str] = &[
    include_str!("migrations/v01_tenants.sql"),
    include_str!("migrations/v02_users.sql"),
    include_str!("migrations/v03_users.sql"),
    // Creation order within one second, without SQLite's `rowid` (rows from before this
    // version sort first, as `rowid` had them).
    include_str!("migrations/v04_api_keys.sql"),
    // The chain index (`src/capture/index/`, `store/index.rs`): the last committed block per chain,
    // the recent blocks' hashes (to find a reorg's common ancestor), one row per wallet
    // and transfer, and token metadata.
    include_str!("migrations/v05_index_cursor.sql"),
    // The consensus-layer capacity series (`src/capture/capacity.rs`, `store/capacity.rs`): per
    // minute and host, the most requests it served in one second, and the minute's totals.
    include_str!("migrations/v06_cl_capacity.sql"),
    // Solana epoch stake snapshots (`src/capture/sol/stake.rs`, `store/sol_stake.rs`): one row per
    // captured epoch (its cursor: the last vote account done, and when it was complete),
    // and the stake accounts delegated in that epoch.
    include_str!("migrations/v07_sol_stake_epochs.sql"),
    // Solana watchlists (`store/sol_watchlist.rs`): entries per tenant, and the deliveries
    // that failed every attempt (dead letters), readable by the entry's tenant.
    include_str!("migrations/v08_sol_watchlist.sql"),
    // Solana MEV-cache samples (`src/capture/sol/mev_cache.rs`, `store/mev_cache.rs`).
    include_str!("migrations/v09_sol_mev_cache_samples.sql"),
    // Per-key usage (`src/usage/`, `store/usage.rs`): counts per key and minute, and
    // the same rolled up per hour (written together, kept for different spans).
    include_str!("migrations/v10_key_usage_minutes.sql"),
    // Sign-in abuse bounds (`handlers/console/sign_in.rs`): codes and challenges remember the client
    // address that asked (outstanding ones are bounded per client), and each email
    // address keeps a budget of wrong guesses that a new code does not reset.
    include_str!("migrations/v11_login_codes.sql"),
    // Each instance's usage journal (`src/capture/usage/journal.rs`): the last batch whose counts
    // are in the usage rows, moved in the same transaction as the rows.
    include_str!("migrations/v12_usage_journals.sql"),
    // Transactions the edge follows until they settle (`src/capture/txs/`): one row per
    // chain, hash and the tenant that sent it.
    include_str!("migrations/v13_tracked_txs.sql"),
    // Pushes of followed transactions' status changes (`src/capture/txs/push.rs`): the
    // changes in order (ids given by the one follower writing them), the tenants'
    // webhooks and their dead letters, and the webhook dispatcher's cursor.
    include_str!("migrations/v14_tx_events.sql"),
    // Why a failed followed transaction reverted (`capture/txs/revert.rs`).
    include_str!("migrations/v15_tracked_txs.sql"),
    // A Solana transaction's recent blockhash (it expires with it); how a transaction
    // went out (`tracking::PUBLIC`, `PRIVATE`, `BUNDLE`).
    include_str!("migrations/v16_tracked_txs.sql"),
    // What a key's owner narrowed it to (`key_restrictions`), as JSON; NULL: nothing.
    include_str!("migrations/v17_api_keys.sql"),
    // Each key's request log (`store/requests.rs`): its newest requests, never bodies.
    include_str!("migrations/v18_key_requests.sql"),
    // Plan change requests (`store/plan_requests.rs`): each tenant's latest.
    include_str!("migrations/v19_plan_requests.sql"),
    // The audit log (`store/audit.rs`): changes to a tenant's keys and plan.
    include_str!("migrations/v20_audit_events.sql"),
    // Teams (`store/team.rs`): who belongs to which tenant with which role (every
    // existing user owns its own tenant), invitations by emailed code, and the tenant a
    // console session acts in (NULL: the user's own).
    include_str!("migrations/v21_members.sql"),
    // The per-method usage breakdown (`store/method_usage.rs`): calls, errors and a
    // latency histogram per key, ten-minute slot, chain and method.
    include_str!("migrations/v22_method_usage.sql"),
    // Token balance anchors (`store/index_balances.rs`): an address's exact ERC-20 balance
    // read from the node at an indexed block; later balances are that plus the indexed
    // transfers after it (a reorg below the block deletes the anchor).
    include_str!("migrations/v23_token_balance_anchors.sql"),
    // The index's read tables keep their rows in their primary key's b-tree (SQLite's
    // `WITHOUT ROWID`): a wallet page read its keys from one b-tree and then each row from
    // another by rowid, two searches per item (an NFT page 14% cheaper without). PostgreSQL
    // has no rowid tables: nothing to do there.
    include_str!("migrations/v24_wallet_transfers_by_key.sql"),
    // A wallet's NFT moves and its ERC-20 tokens by key, however many other transfers it
    // has (`store/index.rs`, `store/index_balances.rs`): both pages walked every transfer
    // of the address before (a wallet with 100,000 ERC-20 transfers: 16 ms an NFT page,
    // 60 ms a tokens page on SQLite). Partial: only the rows each reads. The NFT index
    // holds every column the page reads (no visit to the row).
    include_str!("migrations/v25_wallet_transfers_nfts.sql"),
    // What each wallet holds of each NFT, kept with its moves (`store/index_nfts.rs`): an
    // NFT page reads its own rows by key. (id_len, token_id) orders decimal ids as numbers.
    // Existing chains have no `nft_holdings_hash`: their holdings are built at the next
    // open (`Store::catch_up_nft_holdings`).
    include_str!("migrations/v26_nft_holdings.sql"),
    // How many holdings each wallet has, kept with them (`store/index_nfts.rs`): a page's
    // `total` was a count of the wallet's holdings on every page (a wallet holding
    // 100,000 NFTs paid for them all each time). `nft_state_hash` says where holdings
    // and counts are both current: an instance from before counts keeps holdings and
    // `nft_holdings_hash` but not counts, so its commits must leave them to be rebuilt.
    include_str!("migrations/v27_nft_holding_counts.sql"),
    // Invitation mails to one address are budgeted across teams (`store/team.rs`); the
    // audit log keeps renames apart from security events and budgets them (`audit.rs`).
    include_str!("migrations/v28_invites_by_email.sql"),
    // Wrong sign-in codes lock an address out per client (`store/sign_in.rs`): a
    // stranger's guesses no longer lock the address's owner out everywhere. A table of
    // its own, so an instance of the version before keeps writing `login_guards` during a
    // rolling upgrade.
    include_str!("migrations/v29_sign_in_guards.sql"),
    // The newest deliveries of each push entry, delivered or not, for the console and
    // the `.../deliveries` routes (`store/deliveries.rs`).
    include_str!("migrations/v30_push_deliveries.sql"),
];

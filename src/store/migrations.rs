//! The schema, version by version.

/// Schema versions, applied in order at open (SQLite tracks progress in `user_version`,
/// PostgreSQL in `schema_version`). Written in SQL both run; `Dialect::render` maps the
/// two type names PostgreSQL spells differently, and a version that begins with
/// `SQLITE_ONLY` is SQLite's alone (PostgreSQL counts it done). Append only: a version
/// once released is never edited.
pub(super) const MIGRATIONS: &[&str] = &[
    r#"
CREATE TABLE tenants (
    id TEXT PRIMARY KEY,
    name TEXT NOT NULL,
    plan TEXT NOT NULL,
    trial_ends_at INTEGER,
    subscription_ends_at INTEGER,
    features TEXT NOT NULL DEFAULT '[]',
    created_at INTEGER NOT NULL
);
CREATE TABLE users (
    id TEXT PRIMARY KEY,
    tenant_id TEXT NOT NULL REFERENCES tenants(id),
    email TEXT UNIQUE,
    display_name TEXT,
    avatar_url TEXT,
    created_at INTEGER NOT NULL,
    updated_at INTEGER NOT NULL
);
CREATE TABLE api_keys (
    id TEXT PRIMARY KEY,
    tenant_id TEXT NOT NULL REFERENCES tenants(id),
    user_id TEXT REFERENCES users(id),
    name TEXT NOT NULL,
    prefix TEXT NOT NULL,
    secret_sha256 BLOB NOT NULL UNIQUE,
    scopes TEXT NOT NULL DEFAULT '[]',
    is_default INTEGER NOT NULL DEFAULT 0,
    created_at INTEGER NOT NULL,
    revoked_at INTEGER
);
CREATE INDEX api_keys_tenant ON api_keys(tenant_id);
"#,
    r#"
ALTER TABLE users ADD COLUMN wallet_evm TEXT;
ALTER TABLE users ADD COLUMN wallet_solana TEXT;
CREATE UNIQUE INDEX users_wallet_evm ON users(wallet_evm) WHERE wallet_evm IS NOT NULL;
CREATE UNIQUE INDEX users_wallet_solana ON users(wallet_solana) WHERE wallet_solana IS NOT NULL;
CREATE INDEX api_keys_user ON api_keys(user_id);
-- At most one active default key per user, whatever races the application loses.
CREATE UNIQUE INDEX api_keys_one_default ON api_keys(user_id)
    WHERE is_default = 1 AND revoked_at IS NULL;
CREATE TABLE sessions (
    token_sha256 BLOB PRIMARY KEY,
    user_id TEXT NOT NULL REFERENCES users(id),
    provider TEXT NOT NULL,
    created_at INTEGER NOT NULL,
    expires_at INTEGER NOT NULL,
    revoked_at INTEGER
);
CREATE TABLE login_codes (
    id TEXT PRIMARY KEY,
    email TEXT NOT NULL,
    code_sha256 BLOB NOT NULL,
    created_at INTEGER NOT NULL,
    expires_at INTEGER NOT NULL,
    attempts INTEGER NOT NULL DEFAULT 0,
    used_at INTEGER
);
CREATE INDEX login_codes_email ON login_codes(email, created_at);
CREATE TABLE challenges (
    nonce TEXT PRIMARY KEY,
    kind TEXT NOT NULL,
    subject TEXT NOT NULL,
    message TEXT NOT NULL,
    created_at INTEGER NOT NULL,
    expires_at INTEGER NOT NULL,
    used_at INTEGER
);
"#,
    r#"
ALTER TABLE users ADD COLUMN google_sub TEXT;
CREATE UNIQUE INDEX users_google_sub ON users(google_sub) WHERE google_sub IS NOT NULL;
"#,
    // Creation order within one second, without SQLite's `rowid` (rows from before this
    // version sort first, as `rowid` had them).
    r#"
ALTER TABLE api_keys ADD COLUMN created_us INTEGER NOT NULL DEFAULT 0;
ALTER TABLE login_codes ADD COLUMN created_us INTEGER NOT NULL DEFAULT 0;
"#,
    // The chain index (`src/capture/index/`, `store/index.rs`): the last committed block per chain,
    // the recent blocks' hashes (to find a reorg's common ancestor), one row per wallet
    // and transfer, and token metadata.
    r#"
CREATE TABLE index_cursor (
    chain TEXT PRIMARY KEY,
    number INTEGER NOT NULL,
    hash TEXT NOT NULL,
    updated_at INTEGER NOT NULL
);
CREATE TABLE index_blocks (
    chain TEXT NOT NULL,
    number INTEGER NOT NULL,
    hash TEXT NOT NULL,
    parent_hash TEXT NOT NULL,
    PRIMARY KEY (chain, number)
);
CREATE TABLE wallet_transfers (
    chain TEXT NOT NULL,
    address TEXT NOT NULL,
    block INTEGER NOT NULL,
    tx_index INTEGER NOT NULL,
    log_index INTEGER NOT NULL,
    seq INTEGER NOT NULL,
    direction TEXT NOT NULL,
    kind TEXT NOT NULL,
    token TEXT NOT NULL,
    counterparty TEXT NOT NULL,
    token_id TEXT,
    amount TEXT NOT NULL,
    tx_hash TEXT NOT NULL,
    ts INTEGER NOT NULL,
    PRIMARY KEY (chain, address, block, tx_index, log_index, seq)
);
CREATE INDEX wallet_transfers_block ON wallet_transfers(chain, block);
CREATE TABLE tokens (
    chain TEXT NOT NULL,
    address TEXT NOT NULL,
    name TEXT,
    symbol TEXT,
    decimals INTEGER,
    fetched_at INTEGER NOT NULL,
    PRIMARY KEY (chain, address)
);
"#,
    // The consensus-layer capacity series (`src/capture/capacity.rs`, `store/capacity.rs`): per
    // minute and host, the most requests it served in one second, and the minute's totals.
    r#"
CREATE TABLE cl_capacity (
    minute INTEGER NOT NULL,
    host TEXT NOT NULL,
    family TEXT NOT NULL,
    peak_rps INTEGER NOT NULL,
    requests INTEGER NOT NULL,
    failures INTEGER NOT NULL,
    PRIMARY KEY (minute, host)
);
"#,
    // Solana epoch stake snapshots (`src/capture/sol/stake.rs`, `store/sol_stake.rs`): one row per
    // captured epoch (its cursor: the last vote account done, and when it was complete),
    // and the stake accounts delegated in that epoch.
    r#"
CREATE TABLE sol_stake_epochs (
    epoch INTEGER PRIMARY KEY,
    slot INTEGER NOT NULL,
    started_at INTEGER NOT NULL,
    last_voter TEXT NOT NULL,
    completed_at INTEGER,
    accounts INTEGER NOT NULL
);
CREATE TABLE sol_stake_accounts (
    epoch INTEGER NOT NULL,
    pubkey TEXT NOT NULL,
    voter TEXT NOT NULL,
    stake INTEGER NOT NULL,
    activation_epoch INTEGER NOT NULL,
    deactivation_epoch INTEGER,
    PRIMARY KEY (epoch, pubkey)
);
CREATE INDEX sol_stake_by_voter ON sol_stake_accounts(voter, pubkey, epoch);
CREATE INDEX sol_stake_by_pubkey ON sol_stake_accounts(pubkey, epoch);
"#,
    // Solana watchlists (`store/sol_watchlist.rs`): entries per tenant, and the deliveries
    // that failed every attempt (dead letters), readable by the entry's tenant.
    r#"
CREATE TABLE sol_watchlist (
    id TEXT PRIMARY KEY,
    tenant_id TEXT NOT NULL,
    pubkey TEXT NOT NULL,
    commitment TEXT NOT NULL,
    callback_type TEXT NOT NULL,
    callback_url TEXT NOT NULL,
    created_at INTEGER NOT NULL
);
CREATE INDEX sol_watchlist_by_tenant ON sol_watchlist(tenant_id, created_at);
CREATE TABLE sol_watchlist_dead_letters (
    id TEXT PRIMARY KEY,
    entry_id TEXT NOT NULL,
    tenant_id TEXT NOT NULL,
    payload TEXT NOT NULL,
    attempts INTEGER NOT NULL,
    last_error TEXT NOT NULL,
    created_at INTEGER NOT NULL
);
CREATE INDEX sol_dead_letters_by_entry ON sol_watchlist_dead_letters(entry_id, created_at);
"#,
    // Solana MEV-cache samples (`src/capture/sol/mev_cache.rs`, `store/mev_cache.rs`).
    r#"
CREATE TABLE sol_mev_cache_samples (
    host TEXT NOT NULL,
    at INTEGER NOT NULL,
    hits_total INTEGER NOT NULL,
    increase INTEGER NOT NULL,
    interval_ms INTEGER NOT NULL,
    PRIMARY KEY (host, at)
);
CREATE INDEX sol_mev_cache_by_time ON sol_mev_cache_samples(at);
"#,
    // Per-key usage (`src/usage/`, `store/usage.rs`): counts per key and minute, and
    // the same rolled up per hour (written together, kept for different spans).
    r#"
CREATE TABLE key_usage_minutes (
    key_id TEXT NOT NULL,
    minute INTEGER NOT NULL,
    tenant_id TEXT NOT NULL,
    calls INTEGER NOT NULL,
    compute_units INTEGER NOT NULL,
    errors INTEGER NOT NULL,
    rate_limited INTEGER NOT NULL,
    PRIMARY KEY (key_id, minute)
);
CREATE INDEX key_usage_minutes_by_time ON key_usage_minutes(minute);
CREATE TABLE key_usage_hours (
    key_id TEXT NOT NULL,
    hour INTEGER NOT NULL,
    tenant_id TEXT NOT NULL,
    calls INTEGER NOT NULL,
    compute_units INTEGER NOT NULL,
    errors INTEGER NOT NULL,
    rate_limited INTEGER NOT NULL,
    PRIMARY KEY (key_id, hour)
);
CREATE INDEX key_usage_hours_by_time ON key_usage_hours(hour);
CREATE INDEX key_usage_hours_by_tenant ON key_usage_hours(tenant_id, hour);
"#,
    // Sign-in abuse bounds (`handlers/console/sign_in.rs`): codes and challenges remember the client
    // address that asked (outstanding ones are bounded per client), and each email
    // address keeps a budget of wrong guesses that a new code does not reset.
    r#"
ALTER TABLE login_codes ADD COLUMN client TEXT NOT NULL DEFAULT '';
CREATE INDEX login_codes_client ON login_codes(client, created_at);
ALTER TABLE challenges ADD COLUMN client TEXT NOT NULL DEFAULT '';
CREATE INDEX challenges_client ON challenges(client, expires_at);
CREATE INDEX challenges_subject ON challenges(subject, expires_at);
CREATE TABLE login_guards (
    email TEXT PRIMARY KEY,
    failures INTEGER NOT NULL,
    last_failure INTEGER NOT NULL,
    locked_until INTEGER NOT NULL
);
-- Scopes are enforced from this version on: a key made without any (the CLI's old
-- default) keeps what it could do, reads and writes.
UPDATE api_keys SET scopes = '["rpc:read","rpc:write"]' WHERE scopes = '[]';
"#,
    // Each instance's usage journal (`src/capture/usage/journal.rs`): the last batch whose counts
    // are in the usage rows, moved in the same transaction as the rows.
    r#"
CREATE TABLE usage_journals (
    journal_id TEXT PRIMARY KEY,
    seq INTEGER NOT NULL,
    updated_at INTEGER NOT NULL
);
"#,
    // Transactions the edge follows until they settle (`src/capture/txs/`): one row per
    // chain, hash and the tenant that sent it.
    r#"
CREATE TABLE tracked_txs (
    chain TEXT NOT NULL,
    hash TEXT NOT NULL,
    tenant_id TEXT NOT NULL,
    key_id TEXT NOT NULL,
    sender TEXT NOT NULL,
    nonce INTEGER NOT NULL,
    raw TEXT NOT NULL,
    status TEXT NOT NULL,
    block_number INTEGER,
    block_hash TEXT,
    tx_index INTEGER,
    replaced_by TEXT,
    resends INTEGER NOT NULL,
    submitted_at INTEGER NOT NULL,
    updated_at INTEGER NOT NULL,
    missing_since INTEGER,
    included_at INTEGER,
    PRIMARY KEY (chain, hash, tenant_id)
);
CREATE INDEX tracked_txs_open ON tracked_txs(chain, status, updated_at);
CREATE INDEX tracked_txs_tenant ON tracked_txs(tenant_id, submitted_at);
CREATE INDEX tracked_txs_sender ON tracked_txs(chain, sender, nonce);
CREATE INDEX tracked_txs_key ON tracked_txs(key_id, submitted_at);
"#,
    // Pushes of followed transactions' status changes (`src/capture/txs/push.rs`): the
    // changes in order (ids given by the one follower writing them), the tenants'
    // webhooks and their dead letters, and the webhook dispatcher's cursor.
    r#"
CREATE TABLE tx_events (
    id INTEGER PRIMARY KEY,
    tenant_id TEXT NOT NULL,
    key_id TEXT NOT NULL,
    chain TEXT NOT NULL,
    hash TEXT NOT NULL,
    status TEXT NOT NULL,
    body TEXT NOT NULL,
    created_at INTEGER NOT NULL
);
CREATE INDEX tx_events_tenant ON tx_events(tenant_id, id);
CREATE INDEX tx_events_age ON tx_events(created_at);
CREATE TABLE tx_hooks (
    id TEXT PRIMARY KEY,
    tenant_id TEXT NOT NULL,
    callback_url TEXT NOT NULL,
    created_at INTEGER NOT NULL
);
CREATE INDEX tx_hooks_tenant ON tx_hooks(tenant_id, created_at);
CREATE TABLE tx_hook_dead_letters (
    id TEXT PRIMARY KEY,
    entry_id TEXT NOT NULL,
    tenant_id TEXT NOT NULL,
    payload TEXT NOT NULL,
    attempts INTEGER NOT NULL,
    last_error TEXT NOT NULL,
    created_at INTEGER NOT NULL
);
CREATE INDEX tx_hook_dead_letters_by_entry ON tx_hook_dead_letters(entry_id, created_at);
CREATE TABLE push_cursors (
    name TEXT PRIMARY KEY,
    last_id INTEGER NOT NULL
);
"#,
    // Why a failed followed transaction reverted (`capture/txs/revert.rs`).
    r#"
ALTER TABLE tracked_txs ADD COLUMN revert_reason TEXT;
"#,
    // A Solana transaction's recent blockhash (it expires with it); how a transaction
    // went out (`tracking::PUBLIC`, `PRIVATE`, `BUNDLE`).
    r#"
ALTER TABLE tracked_txs ADD COLUMN recent_blockhash TEXT;
ALTER TABLE tracked_txs ADD COLUMN route TEXT NOT NULL DEFAULT 'public';
"#,
    // What a key's owner narrowed it to (`key_restrictions`), as JSON; NULL: nothing.
    r#"
ALTER TABLE api_keys ADD COLUMN restrictions TEXT;
"#,
    // Each key's request log (`store/requests.rs`): its newest requests, never bodies.
    r#"
CREATE TABLE key_requests (
    key_id TEXT NOT NULL,
    tenant_id TEXT NOT NULL,
    at_us INTEGER NOT NULL,
    route TEXT NOT NULL,
    method TEXT NOT NULL,
    status INTEGER NOT NULL,
    error TEXT,
    latency_us INTEGER NOT NULL,
    upstream TEXT
);
CREATE INDEX key_requests_by_key ON key_requests(key_id, at_us);
"#,
    // Plan change requests (`store/plan_requests.rs`): each tenant's latest.
    r#"
CREATE TABLE plan_requests (
    tenant_id TEXT PRIMARY KEY,
    user_id TEXT NOT NULL,
    plan TEXT NOT NULL,
    from_plan TEXT NOT NULL,
    status TEXT NOT NULL,
    created_at INTEGER NOT NULL,
    decided_at INTEGER
);
"#,
    // The audit log (`store/audit.rs`): changes to a tenant's keys and plan.
    r#"
CREATE TABLE audit_events (
    tenant_id TEXT NOT NULL,
    at_us INTEGER NOT NULL,
    user_id TEXT,
    action TEXT NOT NULL,
    target TEXT NOT NULL,
    detail TEXT NOT NULL
);
CREATE INDEX audit_events_by_tenant ON audit_events(tenant_id, at_us);
"#,
    // Teams (`store/team.rs`): who belongs to which tenant with which role (every
    // existing user owns its own tenant), invitations by emailed code, and the tenant a
    // console session acts in (NULL: the user's own).
    r#"
CREATE TABLE members (
    tenant_id TEXT NOT NULL,
    user_id TEXT NOT NULL,
    role TEXT NOT NULL,
    created_at INTEGER NOT NULL,
    PRIMARY KEY (tenant_id, user_id)
);
CREATE INDEX members_by_user ON members(user_id);
INSERT INTO members (tenant_id, user_id, role, created_at)
    SELECT tenant_id, id, 'owner', created_at FROM users;
CREATE TABLE invites (
    id TEXT PRIMARY KEY,
    tenant_id TEXT NOT NULL,
    email TEXT NOT NULL,
    role TEXT NOT NULL,
    code_sha256 BLOB NOT NULL UNIQUE,
    invited_by TEXT NOT NULL,
    created_at INTEGER NOT NULL,
    expires_at INTEGER NOT NULL,
    accepted_by TEXT,
    accepted_at INTEGER,
    revoked_at INTEGER
);
CREATE INDEX invites_by_tenant ON invites(tenant_id, created_at);
ALTER TABLE sessions ADD COLUMN tenant_id TEXT;
"#,
    // The per-method usage breakdown (`store/method_usage.rs`): calls, errors and a
    // latency histogram per key, ten-minute slot, chain and method.
    r#"
CREATE TABLE method_usage (
    key_id TEXT NOT NULL,
    tenant_id TEXT NOT NULL,
    slot INTEGER NOT NULL,
    chain TEXT NOT NULL,
    method TEXT NOT NULL,
    calls INTEGER NOT NULL,
    errors INTEGER NOT NULL,
    latency_us INTEGER NOT NULL,
    b0 INTEGER NOT NULL DEFAULT 0,
    b1 INTEGER NOT NULL DEFAULT 0,
    b2 INTEGER NOT NULL DEFAULT 0,
    b3 INTEGER NOT NULL DEFAULT 0,
    b4 INTEGER NOT NULL DEFAULT 0,
    b5 INTEGER NOT NULL DEFAULT 0,
    b6 INTEGER NOT NULL DEFAULT 0,
    b7 INTEGER NOT NULL DEFAULT 0,
    b8 INTEGER NOT NULL DEFAULT 0,
    b9 INTEGER NOT NULL DEFAULT 0,
    b10 INTEGER NOT NULL DEFAULT 0,
    b11 INTEGER NOT NULL DEFAULT 0,
    PRIMARY KEY (key_id, slot, chain, method)
);
CREATE INDEX method_usage_by_tenant ON method_usage(tenant_id, slot);
CREATE INDEX method_usage_by_time ON method_usage(slot);
"#,
    // Token balance anchors (`store/index_balances.rs`): an address's exact ERC-20 balance
    // read from the node at an indexed block; later balances are that plus the indexed
    // transfers after it (a reorg below the block deletes the anchor).
    r#"
CREATE TABLE token_balance_anchors (
    chain TEXT NOT NULL,
    address TEXT NOT NULL,
    token TEXT NOT NULL,
    block INTEGER NOT NULL,
    balance TEXT,
    PRIMARY KEY (chain, address, token)
);
CREATE INDEX token_balance_anchors_block ON token_balance_anchors(chain, block);
"#,
    // The index's read tables keep their rows in their primary key's b-tree (SQLite's
    // `WITHOUT ROWID`): a wallet page read its keys from one b-tree and then each row from
    // another by rowid, two searches per item (an NFT page 14% cheaper without). PostgreSQL
    // has no rowid tables: nothing to do there.
    r#"-- sqlite only
CREATE TABLE wallet_transfers_by_key (
    chain TEXT NOT NULL,
    address TEXT NOT NULL,
    block INTEGER NOT NULL,
    tx_index INTEGER NOT NULL,
    log_index INTEGER NOT NULL,
    seq INTEGER NOT NULL,
    direction TEXT NOT NULL,
    kind TEXT NOT NULL,
    token TEXT NOT NULL,
    counterparty TEXT NOT NULL,
    token_id TEXT,
    amount TEXT NOT NULL,
    tx_hash TEXT NOT NULL,
    ts INTEGER NOT NULL,
    PRIMARY KEY (chain, address, block, tx_index, log_index, seq)
) WITHOUT ROWID;
INSERT INTO wallet_transfers_by_key SELECT chain, address, block, tx_index, log_index, seq,
    direction, kind, token, counterparty, token_id, amount, tx_hash, ts FROM wallet_transfers;
DROP TABLE wallet_transfers;
ALTER TABLE wallet_transfers_by_key RENAME TO wallet_transfers;
CREATE INDEX wallet_transfers_block ON wallet_transfers(chain, block);
CREATE TABLE tokens_by_key (
    chain TEXT NOT NULL,
    address TEXT NOT NULL,
    name TEXT,
    symbol TEXT,
    decimals INTEGER,
    fetched_at INTEGER NOT NULL,
    PRIMARY KEY (chain, address)
) WITHOUT ROWID;
INSERT INTO tokens_by_key SELECT chain, address, name, symbol, decimals, fetched_at FROM tokens;
DROP TABLE tokens;
ALTER TABLE tokens_by_key RENAME TO tokens;
CREATE TABLE token_balance_anchors_by_key (
    chain TEXT NOT NULL,
    address TEXT NOT NULL,
    token TEXT NOT NULL,
    block INTEGER NOT NULL,
    balance TEXT,
    PRIMARY KEY (chain, address, token)
) WITHOUT ROWID;
INSERT INTO token_balance_anchors_by_key SELECT chain, address, token, block, balance
    FROM token_balance_anchors;
DROP TABLE token_balance_anchors;
ALTER TABLE token_balance_anchors_by_key RENAME TO token_balance_anchors;
CREATE INDEX token_balance_anchors_block ON token_balance_anchors(chain, block);
"#,
    // A wallet's NFT moves and its ERC-20 tokens by key, however many other transfers it
    // has (`store/index.rs`, `store/index_balances.rs`): both pages walked every transfer
    // of the address before (a wallet with 100,000 ERC-20 transfers: 16 ms an NFT page,
    // 60 ms a tokens page on SQLite). Partial: only the rows each reads. The NFT index
    // holds every column the page reads (no visit to the row).
    r#"
CREATE INDEX wallet_transfers_nfts ON wallet_transfers
    (chain, address, block, tx_index, log_index, seq, kind, token, token_id, direction, amount)
    WHERE kind IN ('erc721', 'erc1155');
CREATE INDEX wallet_transfers_erc20 ON wallet_transfers (chain, address, token, block)
    WHERE kind = 'erc20';
"#,
    // What each wallet holds of each NFT, kept with its moves (`store/index_nfts.rs`): an
    // NFT page reads its own rows by key. (id_len, token_id) orders decimal ids as numbers.
    // Existing chains have no `nft_holdings_hash`: their holdings are built at the next
    // open (`Store::catch_up_nft_holdings`).
    r#"
CREATE TABLE nft_holdings (
    chain TEXT NOT NULL,
    address TEXT NOT NULL,
    token TEXT NOT NULL,
    id_len INTEGER NOT NULL,
    token_id TEXT NOT NULL,
    kind TEXT NOT NULL,
    amount TEXT NOT NULL,
    PRIMARY KEY (chain, address, token, id_len, token_id)
) WITHOUT ROWID;
ALTER TABLE index_cursor ADD COLUMN nft_holdings_hash TEXT;
"#,
    // How many holdings each wallet has, kept with them (`store/index_nfts.rs`): a page's
    // `total` was a count of the wallet's holdings on every page (a wallet holding
    // 100,000 NFTs paid for them all each time). `nft_state_hash` says where holdings
    // and counts are both current: an instance from before counts keeps holdings and
    // `nft_holdings_hash` but not counts, so its commits must leave them to be rebuilt.
    r#"
CREATE TABLE nft_holding_counts (
    chain TEXT NOT NULL,
    address TEXT NOT NULL,
    holdings INTEGER NOT NULL,
    PRIMARY KEY (chain, address)
) WITHOUT ROWID;
INSERT INTO nft_holding_counts (chain, address, holdings)
    SELECT chain, address, COUNT(*) FROM nft_holdings GROUP BY chain, address;
ALTER TABLE index_cursor ADD COLUMN nft_state_hash TEXT;
UPDATE index_cursor SET nft_state_hash = nft_holdings_hash;
"#,
    // Invitation mails to one address are budgeted across teams (`store/team.rs`); the
    // audit log keeps renames apart from security events and budgets them (`audit.rs`).
    r#"
CREATE INDEX invites_by_email ON invites(email, created_at);
CREATE INDEX audit_events_by_action ON audit_events(tenant_id, action, at_us);
"#,
    // Wrong sign-in codes lock an address out per client (`store/sign_in.rs`): a
    // stranger's guesses no longer lock the address's owner out everywhere. A table of
    // its own, so an instance of the version before keeps writing `login_guards` during a
    // rolling upgrade.
    r#"
CREATE TABLE sign_in_guards (
    email TEXT NOT NULL,
    client TEXT NOT NULL,
    failures INTEGER NOT NULL,
    last_failure INTEGER NOT NULL,
    locked_until INTEGER NOT NULL,
    PRIMARY KEY (email, client)
);
"#,
    // The newest deliveries of each push entry, delivered or not, for the console and
    // the `.../deliveries` routes (`store/deliveries.rs`).
    r#"
CREATE TABLE push_deliveries (
    push TEXT NOT NULL,
    entry_id TEXT NOT NULL,
    delivery_id TEXT NOT NULL,
    at_ms INTEGER NOT NULL,
    delivered INTEGER NOT NULL,
    attempts INTEGER NOT NULL,
    error TEXT NOT NULL,
    PRIMARY KEY (push, entry_id, delivery_id)
);
CREATE INDEX push_deliveries_by_entry ON push_deliveries(push, entry_id, at_ms);
"#,
];

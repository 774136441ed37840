
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

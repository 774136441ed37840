-- sqlite only
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


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

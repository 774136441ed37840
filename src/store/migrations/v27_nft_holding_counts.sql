
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


CREATE TABLE token_balance_anchors (
    chain TEXT NOT NULL,
    address TEXT NOT NULL,
    token TEXT NOT NULL,
    block INTEGER NOT NULL,
    balance TEXT,
    PRIMARY KEY (chain, address, token)
);
CREATE INDEX token_balance_anchors_block ON token_balance_anchors(chain, block);

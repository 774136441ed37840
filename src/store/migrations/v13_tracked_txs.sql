
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


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

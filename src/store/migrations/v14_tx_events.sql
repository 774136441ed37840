
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


CREATE TABLE usage_journals (
    journal_id TEXT PRIMARY KEY,
    seq INTEGER NOT NULL,
    updated_at INTEGER NOT NULL
);


ALTER TABLE tracked_txs ADD COLUMN recent_blockhash TEXT;
ALTER TABLE tracked_txs ADD COLUMN route TEXT NOT NULL DEFAULT 'public';

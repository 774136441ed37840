
ALTER TABLE tracked_txs ADD COLUMN revert_reason TEXT;


CREATE TABLE push_deliveries (
    push TEXT NOT NULL,
    entry_id TEXT NOT NULL,
    delivery_id TEXT NOT NULL,
    at_ms INTEGER NOT NULL,
    delivered INTEGER NOT NULL,
    attempts INTEGER NOT NULL,
    error TEXT NOT NULL,
    PRIMARY KEY (push, entry_id, delivery_id)
);
CREATE INDEX push_deliveries_by_entry ON push_deliveries(push, entry_id, at_ms);

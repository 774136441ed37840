
CREATE TABLE key_requests (
    key_id TEXT NOT NULL,
    tenant_id TEXT NOT NULL,
    at_us INTEGER NOT NULL,
    route TEXT NOT NULL,
    method TEXT NOT NULL,
    status INTEGER NOT NULL,
    error TEXT,
    latency_us INTEGER NOT NULL,
    upstream TEXT
);
CREATE INDEX key_requests_by_key ON key_requests(key_id, at_us);

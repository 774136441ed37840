
CREATE TABLE method_usage (
    key_id TEXT NOT NULL,
    tenant_id TEXT NOT NULL,
    slot INTEGER NOT NULL,
    chain TEXT NOT NULL,
    method TEXT NOT NULL,
    calls INTEGER NOT NULL,
    errors INTEGER NOT NULL,
    latency_us INTEGER NOT NULL,
    b0 INTEGER NOT NULL DEFAULT 0,
    b1 INTEGER NOT NULL DEFAULT 0,
    b2 INTEGER NOT NULL DEFAULT 0,
    b3 INTEGER NOT NULL DEFAULT 0,
    b4 INTEGER NOT NULL DEFAULT 0,
    b5 INTEGER NOT NULL DEFAULT 0,
    b6 INTEGER NOT NULL DEFAULT 0,
    b7 INTEGER NOT NULL DEFAULT 0,
    b8 INTEGER NOT NULL DEFAULT 0,
    b9 INTEGER NOT NULL DEFAULT 0,
    b10 INTEGER NOT NULL DEFAULT 0,
    b11 INTEGER NOT NULL DEFAULT 0,
    PRIMARY KEY (key_id, slot, chain, method)
);
CREATE INDEX method_usage_by_tenant ON method_usage(tenant_id, slot);
CREATE INDEX method_usage_by_time ON method_usage(slot);

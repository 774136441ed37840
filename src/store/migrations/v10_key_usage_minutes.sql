
CREATE TABLE key_usage_minutes (
    key_id TEXT NOT NULL,
    minute INTEGER NOT NULL,
    tenant_id TEXT NOT NULL,
    calls INTEGER NOT NULL,
    compute_units INTEGER NOT NULL,
    errors INTEGER NOT NULL,
    rate_limited INTEGER NOT NULL,
    PRIMARY KEY (key_id, minute)
);
CREATE INDEX key_usage_minutes_by_time ON key_usage_minutes(minute);
CREATE TABLE key_usage_hours (
    key_id TEXT NOT NULL,
    hour INTEGER NOT NULL,
    tenant_id TEXT NOT NULL,
    calls INTEGER NOT NULL,
    compute_units INTEGER NOT NULL,
    errors INTEGER NOT NULL,
    rate_limited INTEGER NOT NULL,
    PRIMARY KEY (key_id, hour)
);
CREATE INDEX key_usage_hours_by_time ON key_usage_hours(hour);
CREATE INDEX key_usage_hours_by_tenant ON key_usage_hours(tenant_id, hour);

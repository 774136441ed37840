
CREATE TABLE audit_events (
    tenant_id TEXT NOT NULL,
    at_us INTEGER NOT NULL,
    user_id TEXT,
    action TEXT NOT NULL,
    target TEXT NOT NULL,
    detail TEXT NOT NULL
);
CREATE INDEX audit_events_by_tenant ON audit_events(tenant_id, at_us);

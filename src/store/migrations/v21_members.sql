
CREATE TABLE members (
    tenant_id TEXT NOT NULL,
    user_id TEXT NOT NULL,
    role TEXT NOT NULL,
    created_at INTEGER NOT NULL,
    PRIMARY KEY (tenant_id, user_id)
);
CREATE INDEX members_by_user ON members(user_id);
INSERT INTO members (tenant_id, user_id, role, created_at)
    SELECT tenant_id, id, 'owner', created_at FROM users;
CREATE TABLE invites (
    id TEXT PRIMARY KEY,
    tenant_id TEXT NOT NULL,
    email TEXT NOT NULL,
    role TEXT NOT NULL,
    code_sha256 BLOB NOT NULL UNIQUE,
    invited_by TEXT NOT NULL,
    created_at INTEGER NOT NULL,
    expires_at INTEGER NOT NULL,
    accepted_by TEXT,
    accepted_at INTEGER,
    revoked_at INTEGER
);
CREATE INDEX invites_by_tenant ON invites(tenant_id, created_at);
ALTER TABLE sessions ADD COLUMN tenant_id TEXT;
